"""The GPT of ``aotgrad demo`` and ``aotgrad bench``, shipped with the tools; the
benchmark scripts and tests use it too. The model zoo is a test fixture (``tests/zoo.py``)."""

from .gpt import GPT, GPTConfig, transformer_stack

__all__ = ["GPT", "GPTConfig", "transformer_stack"]
