"""The tools around the library: the command line (``aotgrad demo|report|bench|calibrate``),
the demo and its GPT, the benchmark harness and the partition report.

The library never imports this package: ``import aotgrad`` and ``torch.compile(...,
backend="aotgrad")`` load none of it (``tests/test_import_surface.py``). It is loaded by
the command line (``python -m aotgrad``, the ``aotgrad`` script) and, for the report
only, when ``AOTGRAD_REPORT`` names a page.
"""
