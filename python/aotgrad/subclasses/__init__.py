"""Tensor subclasses at the boundary of the trace.

A traceable wrapper subclass (``TwoTensor``, ``DTensor``, any tensor with
``__tensor_flatten__`` / ``__tensor_unflatten__``) is a property of the values that
enter and leave a compiled function, not of its graph. A call whose arguments hold
one is turned into a call of a *plain* function over the subclasses' inner tensors
(flattened recursively, to any depth), compiled by an ordinary ``AotFunction`` (the
"child", one per input layout): the joint graph, the node table, the Rust core and
both partitioners only ever see plain tensors.

::

    user args (subclasses) --flatten--> leaves --child AotFunction--> plain outs --rebuild--> outputs
                                          |                              ^
    traced plain function:   leaves --unflatten--> subclasses --fn--> subclass outs --flatten--+

What each subclass hook means here:

====================================== ==================================================
hook                                   used for
====================================== ==================================================
``t.__tensor_flatten__()``             ``(inner attribute names, ctx)``: the inputs' and
                                       outputs' layouts (``Layout``), recursively
``cls.__tensor_unflatten__(inner,      rebuilding a subclass from its inner tensors: the
ctx, outer_size, outer_stride)``       inputs inside the traced function (over fake /
                                       functional inner tensors), the outputs at runtime
                                       with the layout recorded while tracing, the inputs'
                                       gradients in the backward
``t.__coerce_tangent_metadata__()``    applied to a runtime gradient of a subclass output
                                       before it is flattened into the child's tangents
====================================== ==================================================

Autograd crosses the boundary through two small ``autograd.Function`` s: ``_Flatten``
(a subclass to its leaves; backward rebuilds the subclass gradient) and ``_Unflatten``
(leaves to a subclass; backward flattens the subclass gradient). The child's guard
key covers the leaves (dtype, sizes, strides, requires_grad, aliasing, written or
not); the layout key (``Layout.key``: each subclass's type, flatten ctx, outer size
and stride, nested) selects the child. Writes to a subclass input are writes to its
inner tensors, which the child replays on the caller's inner tensors.

A jagged ``NestedTensor``'s ragged size is a nested int (``j1``) tied to its offsets
tensor. While tracing, the fake offsets carry the caller's nested int (a constant, so
size arithmetic on it needs no proxy); the layout key keeps only its coefficient (the
offsets' shape and the metadata tensors are leaves the child guards); and integer
leaves (offsets) are passed around the autograd boundary untouched, so an output or
gradient rebuilt on the caller's offsets has the caller's nested int, as in eager.

Stages: ``layout`` (how a value flattens), ``boundary`` (autograd across the trace's
edge), ``child`` (the compiled plain function per layout, and the call).

Subclasses aotgrad refuses (``UnsupportedError`` naming the type, raised before any
tracing so nothing can abort the process): tensor subclasses with a
``__torch_dispatch__`` but no flatten protocol.
"""

from typing import Any

from ..errors import AotgradError
from .child import call
from .layout import Layout, any_subclass, is_subclass, layout_of, leaves


class SubclassOutputs(AotgradError):
    """Raised by a trace over plain arguments whose function returns a tensor subclass
    made inside (``TwoTensor(x, x * 2)``): the call is made again through ``call``, which
    flattens it (traced as is, the output held the trace's own tensors)."""

    def __init__(self, k: int, o: Any) -> None:
        super().__init__(f"output {k} is a {type(o).__qualname__}")


__all__ = [
    "Layout",
    "SubclassOutputs",
    "any_subclass",
    "call",
    "is_subclass",
    "layout_of",
    "leaves",
]
