"""The thread's autocast state, kept across a run that may raise inside an autocast block.

A Dynamo graph enters and leaves autocast with ``_enter_autocast`` / ``_exit_autocast``
nodes, not a ``with`` block: one that raises between them (traced on fake tensors, or
replayed eagerly where the trace raised) leaves the nesting count raised and the
device's enabled flag and dtype those of the block. The cast cache is then never
cleared on leaving the caller's next autocast region (eager reuses stale casts of its
weights there), and later code runs under the block's dtype. Eager's own ``with
torch.autocast(...)`` leaves nothing behind; ``autocast_state_kept()`` puts the state
back as it was when a run raised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["autocast_enabled_anywhere", "autocast_state_kept", "restore", "snapshot"]

#: Device types with an autocast dispatch key (``torch.is_autocast_enabled(device)``).
_DEVICES = ("cpu", "cuda", "xpu", "hpu", "mps", "xla", "ipu", "privateuseone", "mtia", "maia")


def _nesting() -> int:
    level = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return level - 1


def _snapshot() -> tuple[int, bool, list[tuple[str, bool, torch.dtype]]]:
    devices = []
    for d in _DEVICES:
        try:
            devices.append((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)))
        except RuntimeError:  # (a device type this build has no autocast key for)
            continue
    return _nesting(), torch.is_autocast_cache_enabled(), devices


def autocast_enabled_anywhere() -> bool:
    """Whether autocast is on for some device type."""
    return any(enabled for _, enabled, _ in _snapshot()[2])


def _restore(state: tuple[int, bool, list[tuple[str, bool, torch.dtype]]]) -> None:
    nesting, cache, devices = state
    for d, enabled, dtype in devices:
        torch.set_autocast_enabled(d, enabled)
        torch.set_autocast_dtype(d, dtype)
    torch.set_autocast_cache_enabled(cache)
    level = _nesting()
    while level > nesting:
        level = torch.autocast_decrement_nesting()
        if level == 0:  # (left the outermost region: eager clears the cache there)
            torch.clear_autocast_cache()
    while level < nesting:
        level = torch.autocast_increment_nesting()


@contextlib.contextmanager
def autocast_state_kept() -> Iterator[None]:
    """Run the block; where it raises, the autocast state is put back as before it."""
    state = _snapshot()
    try:
        yield
    except BaseException:
        _restore(state)
        raise


#: The state (nesting count, cache flag, per device its flag and dtype), and putting it
#: back: for a trace that must not leave a change the function made (``python_state``).
snapshot = _snapshot
restore = _restore
