"""Stage 1 — trace: a function and example inputs → the joint forward+backward FX graph.

The function runs on fake tensors, functionalized, under ``make_fx``; then
``torch.autograd.grad`` with tangent placeholders records the backward into the
same graph. Placeholders carry their role in ``node.meta["aotgrad_role"]``
(``"primal"`` / ``"tangent"``), so later stages never match on names. Names
still follow torch's ``primals_N`` / ``tangents_N`` so that Inductor and
torch's own tooling read our graphs.

A first, cheap pass (``collect_metadata``) runs the function once on fakes to
learn which outputs need tangents, and collects the alias facts (which inputs it
writes, which outputs view inputs or intermediates) that ``aotgrad.alias``
classifies; the second pass (``trace_joint`` / ``trace_inference``) records the
graph accordingly.

One module per step: ``fakes`` (the fake mode), ``functional`` (running the function
functionalized), ``metadata`` (the first pass), ``joint`` and ``inference`` (the second),
``decompositions`` (ops functionalization emits that torch's kernels refuse), ``cleanup``
(finishing a graph), ``failures`` (torch's errors, worded), ``graphs`` (what the stage
hands on), ``callers_settings`` (the caller's saved-tensor hooks and anomaly mode, set
aside while tracing), ``custom_function_saves`` (what a custom Function Dynamo captured
saved, seen by the joint trace's saved-tensor hooks).
"""

from .callers_settings import callers_settings_set_aside
from .fakes import fakify, make_fake_mode
from .graphs import InferenceGraph, JointGraph, OutputInfo, TraceMetadata
from .inference import trace_inference
from .joint import trace_joint
from .metadata import collect_metadata

__all__ = [
    "InferenceGraph",
    "JointGraph",
    "OutputInfo",
    "TraceMetadata",
    "callers_settings_set_aside",
    "collect_metadata",
    "fakify",
    "make_fake_mode",
    "trace_inference",
    "trace_joint",
]
