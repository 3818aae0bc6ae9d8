"""Run a compilation on a Python frame stack with room to spare.

CPython (3.11 on) keeps the frames of Python calls in per-thread *chunks* of
16 KiB, each ``mmap``-ed when a call does not fit in the current one and
``munmap``-ed again as soon as the call that opened it returns. Code that calls
in and out at a depth straddling a chunk boundary therefore maps, faults in and
unmaps a fresh chunk on every call. Inductor's code generation is such code: it
interprets every kernel's loop body through ``torch.fx.Interpreter``, hundreds
of thousands of short calls at one depth. Whether that depth straddles a
boundary depends on how deep the compiler was entered, which is chance; on the
GPT of ``benches/backend_vs_inductor.py`` it cost up to 190,000 page faults
and 2 s of a 5 s code generation (measured with ``perf record -e
page-faults``: all in ``_PyThreadState_BumpFramePointerSlow``).

``with_frame_room(fn)`` runs ``fn`` inside one frame whose value stack is made
512 KiB larger than its code needs: the interpreter opens a 1 MiB chunk for
that frame, and every frame below it, to about two thousand calls deep, fits
in the unused half, which stays mapped until ``fn`` returns. The slots are
never written (a frame initialises only its locals), so only the pages the
nested calls touch are ever faulted in, once each.

Before 3.11 there are no chunks: every frame is a heap object of its own, sized
by its code's stack size, so a roomy frame would only cost a 512 KiB allocation
per call. There ``with_frame_room`` calls ``fn`` as it is. From 3.11 to 3.13 the
chunks and the frame size (``co_framesize``, from ``co_stacksize``) work as
above; ``make wheel-check`` measures it on each Python it checks.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: Extra value-stack slots (8 bytes each) of the frame that runs ``fn``.
ROOM_SLOTS = 64 * 1024


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


def _roomy(function: Callable[..., Any], slots: int) -> Callable[..., Any]:
    """``function`` with ``slots`` more value-stack slots in its code object (safe: a code
    object's stack size is an upper bound the interpreter reserves, never a requirement)."""
    code = function.__code__
    with contextlib.suppress(AttributeError, TypeError, ValueError):  # not CPython: as is
        function.__code__ = code.replace(co_stacksize=code.co_stacksize + slots)
    return function


#: Whether this interpreter keeps frames in chunks (CPython 3.11 on): else a no-op.
APPLIES = sys.implementation.name == "cpython" and sys.version_info >= (3, 11)

_run_roomy = _roomy(_call, ROOM_SLOTS) if APPLIES else _call


def with_frame_room(fn: F) -> F:
    """Decorate ``fn`` so that each call runs with room on the frame stack (module doc)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _run_roomy(fn, args, kwargs)

    return wrapper  # type: ignore[return-value]
