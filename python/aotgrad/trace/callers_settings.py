"""The caller's autograd settings the trace must not run under, set aside while tracing.

- Saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``): a non-reentrant
  ``checkpoint`` counts the tensors its region saves, and the first call compiles inside
  that region; the trace's own saves (on fake tensors) made the forward's count differ
  from the recomputation's, and the backward raised ``CheckpointError`` where eager runs.
  Other hooks (``save_on_cpu``) would move fake tensors. A caller that disabled the hooks
  (``disable_saved_tensors_hooks``) would make the joint trace's own refuse to install.
- Anomaly mode (``detect_anomaly``): its checks read values (a data-dependent branch on
  fake tensors) and its forward traces record stacks; the compiled backward still runs
  under it, where autograd checks its outputs as eager's.
- The caller's own dispatch modes (``FlopCounterMode``, a logging mode): they saw the
  trace's ops on fake tensors too (a first call under ``FlopCounterMode`` counted 672
  FLOPs where eager counts 288); they see the compiled graph's ops when it runs. Left in
  place where torch's own tracing modes are on the stack (a trace inside a trace).

``callers_settings_set_aside()`` removes them for the trace and puts them back after,
whatever the trace raised; the autocast state too, which a Dynamo graph raising inside
one of its autocast blocks left changed (``autocast_state``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode, _push_mode

from ..autocast_state import autocast_state_kept

__all__ = ["callers_settings_set_aside"]

_autograd = torch._C._autograd


def _callers_modes() -> list:
    """The caller's dispatch modes, popped (innermost first); none where one of torch's
    tracing modes (fake, functional, proxy) is among them."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._subclasses.functional_tensor import FunctionalTensorMode
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode

    stack = _get_current_dispatch_mode_stack()
    tracing = (FakeTensorMode, FunctionalTensorMode, ProxyTorchDispatchMode)
    if any(isinstance(m, tracing) for m in stack):
        return []
    return [_pop_mode() for _ in stack]


@contextlib.contextmanager
def callers_settings_set_aside() -> Iterator[None]:
    modes = _callers_modes()
    hooks = []
    while (top := _autograd._top_saved_tensors_default_hooks(True)) is not None:
        hooks.append(top)
        _autograd._pop_saved_tensors_default_hooks()
    disabled = not _autograd._saved_tensors_hooks_is_enabled()
    message = _autograd._saved_tensors_hooks_get_disabled_error_message() if disabled else None
    if disabled:
        _autograd._saved_tensors_hooks_enable()
    anomaly, check_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    torch.set_anomaly_enabled(False)
    try:
        with autocast_state_kept():
            yield
    finally:
        torch.set_anomaly_enabled(anomaly, check_nan)
        for pack, unpack in reversed(hooks):
            _autograd._push_saved_tensors_default_hooks(pack, unpack)
        if disabled:  # (after the hooks: a disabled stack takes none)
            _autograd._saved_tensors_hooks_disable(message or "", False)
        for mode in reversed(modes):
            _push_mode(mode)
