"""aotgrad: an independent AOT Autograd for PyTorch.

Traces the joint forward+backward graph of a function ahead of time, partitions
it in Rust (max-flow min-cut: what to save, what to recompute), compiles both
halves (Inductor, or any functorch-style compiler) and wraps them in an
``autograd.Function``. ``torch.compile(model, backend="aotgrad")`` uses it.
"""

from __future__ import annotations

import os as _os

from . import errors, partition
from ._rust import __version__  # one version, the Rust workspace's (Cargo.toml)
from .api import AotFunction, AotModule, aot_function, aot_module
from .compile import make_boxed_func, nop
from .dynamo import aot_module_simplified

# AOTGRAD_REPORT=path.html: write a partition report after every compilation. The report
# is a tool (aotgrad.tools.report): imported only when the variable names a page.
if _os.environ.get("AOTGRAD_REPORT", "").strip():
    from .tools.report import enable_from_env as _enable_report

    _enable_report()

__all__ = [
    "AotFunction",
    "AotModule",
    "__version__",
    "aot_function",
    "aot_module",
    "aot_module_simplified",
    "errors",
    "make_boxed_func",
    "nop",
    "partition",
]
