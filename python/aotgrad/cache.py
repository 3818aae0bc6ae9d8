"""Caches of compiled graphs: in-process, and on disk across processes.

The key hashes what determines a compilation: the input graph (Dynamo's
GraphModule, as code, plus the values of its constants), the metadata of every
graph input (dtype, device, sizes and strides — symbolic ones by name —,
requires_grad), grad mode, the options (compilers, partitioner,
decompositions), and the versions of Python, torch and aotgrad (aotgrad's by a
fingerprint of its installed code, so an edited checkout never reads entries
written by older code).

* In-process: key → compiled artefact; a hit skips everything.
* On disk (``$AOTGRAD_CACHE_DIR``, default ``~/.cache/aotgrad``): key → the
  partitioned program (forward/backward graphs and their layout), written before
  compilation. A hit in a new process skips tracing and partitioning; Inductor's
  own FX-graph cache then skips code generation. An entry is a header (format,
  key, SHA-256 of the payload) and the payload (graphs stored node by node by
  ``graph_records``, so they come back exactly); an entry that fails any
  check — truncated, tampered, another key, another format — is discarded with a
  warning and rebuilt, never trusted.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import torch
import torch.fx as fx

from . import graph_records, guards
from .program import AotOptions, CompiledArtifact, PartitionedProgram

FORMAT = 2  # 2: graphs stored node by node (graph_records), no longer re-traced
MAGIC = b"AOTGRAD-CACHE\n"
MEMORY_ENTRIES = 256

_memory: OrderedDict[str, CompiledArtifact] = OrderedDict()


# ------------------------------------------------------------------------------ key


@functools.cache
def code_fingerprint() -> str:
    """A fingerprint of aotgrad's installed code: the contents of its Python files and of
    the Rust extension (computed once per process)."""
    root = Path(__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".so", ".pyd") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _describe_input(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return (
            f"T({x.dtype},{x.device.type},{tuple(str(s) for s in x.shape)},"
            f"{tuple(str(s) for s in x.stride())},{x.requires_grad},"
            f"{isinstance(x, torch.nn.Parameter)})"
        )
    if isinstance(x, torch.SymInt):
        return f"S({x.node.expr})"
    return f"V({type(x).__name__},{x!r})"


def _describe_callable(f: Any) -> str:
    f = getattr(f, "__wrapped__", f)
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', type(f).__name__)}"


def _describe_options(options: AotOptions) -> str:
    decomps = options.decompositions or {}
    decomp_names = hashlib.sha256(",".join(sorted(map(str, decomps))).encode()).hexdigest()
    return "|".join(
        [
            _describe_callable(options.fw_compiler),
            _describe_callable(options.bw_compiler),
            _describe_callable(options.inference_compiler),
            _describe_callable(options.partition_fn),
            decomp_names,
            str(options.keep_inference_input_mutations),
            str(options.dynamic),
        ]
    )


def _constants_digest(gm: fx.GraphModule) -> str:
    h = hashlib.sha256()
    from .api import lifted_state

    # Parameters and buffers are lifted to graph inputs: their metadata is in the key with
    # the other inputs', their values are not constants.
    state = lifted_state(gm)
    for node in gm.graph.find_nodes(op="get_attr"):
        if node.target in state:
            h.update(f"{node.target}:input".encode())
            continue
        value = gm
        for part in str(node.target).split("."):
            value = getattr(value, part, None)
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous().reshape(-1)  # a 0-dim one can't be viewed
            h.update(f"{node.target}:{_describe_input(value)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(value, fx.GraphModule):  # a higher-order op's body: its code too
            h.update(f"{node.target}:{value.code}:{_constants_digest(value)}".encode())
            context_fn = value.meta.get("_checkpoint_context_fn")
            if context_fn is not None:
                h.update(_describe_context_fn(context_fn).encode())
        else:
            h.update(f"{node.target}:{type(value).__name__}".encode())
    return h.hexdigest()


def _describe_context_fn(fn: Any) -> str:
    """A selective-checkpoint ``context_fn``: its name, bytecode, constants and closure
    values (a closure value whose repr holds an address misses the disk cache: safe)."""
    fn = getattr(fn, "func", fn)  # functools.partial
    code = getattr(fn, "__code__", None)
    parts = [_describe_callable(fn)]
    if code is not None:
        parts += [code.co_code.hex(), repr(code.co_consts), repr(code.co_names)]
    parts += [repr(cell.cell_contents) for cell in getattr(fn, "__closure__", None) or ()]
    return "|".join(parts)


def key_for(
    gm: fx.GraphModule, inputs: Sequence[Any], options: AotOptions, *, training: bool
) -> str:
    """The cache key of compiling ``gm`` for ``inputs`` with ``options``."""
    h = hashlib.sha256()
    for part in (
        f"format={FORMAT}",
        f"python={sys.version_info[:3]}",
        f"torch={torch.__version__}",
        f"aotgrad={code_fingerprint()}",
        f"training={training}",
        f"modes={guards.call_modes()}",
        _describe_options(options),
        gm.code,
        _constants_digest(gm),
        *map(_describe_input, inputs),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


# ------------------------------------------------------------------------ in-process


def memory_get(key: str) -> CompiledArtifact | None:
    hit = _memory.get(key)
    if hit is not None:
        _memory.move_to_end(key)
    return hit


def memory_put(key: str, artifact: CompiledArtifact) -> None:
    _memory[key] = artifact
    while len(_memory) > MEMORY_ENTRIES:
        _memory.popitem(last=False)


def memory_clear() -> None:
    _memory.clear()


# ---------------------------------------------------------------------------- on disk


def cache_dir() -> Path:
    return Path(os.environ.get("AOTGRAD_CACHE_DIR") or Path.home() / ".cache" / "aotgrad")


def disk_enabled() -> bool:
    return os.environ.get("AOTGRAD_CACHE", "1") not in ("0", "false", "off")


def entry_path(key: str, root: Path | None = None) -> Path:
    return (root or cache_dir()) / key[:2] / f"{key}.bin"


def store(key: str, program: PartitionedProgram, root: Path | None = None) -> Path | None:
    """Write ``program``'s graphs and layout under ``key`` (atomically). Returns the path,
    or None (with a warning) when the graphs can't be serialised."""
    payload_obj = {
        "training": program.training,
        "forward": program.forward,
        "backward": program.backward,
        "layout": program.layout,
    }
    try:
        payload = graph_records.dumps(payload_obj)
    except Exception as e:  # a graph with an unpicklable constant: just don't cache it
        warnings.warn(f"aotgrad: not caching this graph on disk: {e}", stacklevel=2)
        return None
    header = pickle.dumps(
        {"format": FORMAT, "key": key, "sha256": hashlib.sha256(payload).hexdigest()}
    )
    path = entry_path(key, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(MAGIC)
        f.write(len(header).to_bytes(8, "little"))
        f.write(header)
        f.write(payload)
    os.replace(tmp, path)
    return path


class CorruptEntry(Exception):
    """An on-disk entry that fails a check (never raised to users: the entry is rebuilt)."""


def _read_entry(path: Path, key: str) -> dict[str, Any]:
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise CorruptEntry("bad magic")
    pos = len(MAGIC)
    n = int.from_bytes(data[pos : pos + 8], "little")
    pos += 8
    if n <= 0 or pos + n > len(data):
        raise CorruptEntry("bad header length")
    try:
        header = pickle.loads(data[pos : pos + n])
    except Exception as e:
        raise CorruptEntry(f"unreadable header: {e}") from None
    payload = data[pos + n :]
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CorruptEntry("another format")
    if header.get("key") != key:
        raise CorruptEntry("another key")
    if header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise CorruptEntry("checksum mismatch")
    try:
        body = graph_records.loads(payload)
    except Exception as e:
        raise CorruptEntry(f"unreadable payload: {e}") from None
    if not isinstance(body, dict) or not isinstance(body.get("forward"), fx.GraphModule):
        raise CorruptEntry("unexpected payload")
    return body


def load(
    key: str, fake_args: Sequence[Any], fake_mode: Any, root: Path | None = None
) -> PartitionedProgram | None:
    """The program stored under ``key``, with fake values restored on its graphs; None on a
    miss or on a bad entry (which is deleted so that it gets rebuilt)."""
    path = entry_path(key, root)
    if not path.exists():
        return None
    try:
        body = _read_entry(path, key)
    except (OSError, CorruptEntry) as e:
        warnings.warn(f"aotgrad: discarding cache entry {path.name}: {e}", stacklevel=2)
        path.unlink(missing_ok=True)
        return None
    program = PartitionedProgram(
        body["training"], body["forward"], body["backward"], body["layout"], None, {}
    )
    try:
        restore_fake_values(program, fake_args, fake_mode)
    except Exception as e:  # an entry whose graphs do not run on these inputs is stale
        warnings.warn(
            f"aotgrad: discarding cache entry {path.name}: its graphs do not run on this "
            f"call's inputs ({type(e).__name__}: {str(e)[:200]})",
            stacklevel=2,
        )
        path.unlink(missing_ok=True)
        return None
    return program


def restore_fake_values(program: PartitionedProgram, fake_args: Sequence[Any], mode: Any) -> None:
    """Give a deserialised program's nodes their ``meta["val"]`` back (compilers read them):
    propagate the fake inputs through the forward; the backward's inputs are the forward's
    saved outputs and tangents shaped like the differentiable outputs."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    # Tensor constants of the graphs (get_attr) come back as real tensors: let the fake
    # mode convert them, as Inductor's own fake propagation does. The Python dispatcher,
    # as when tracing: some ops' symbolic-shape rules live there (regression: a dynamic
    # upsample's _unsafe_index failed on symbolic sizes in the second process).
    with mock.patch.object(mode, "allow_non_fake_inputs", True), enable_python_dispatcher():
        _propagate(program, fake_args, mode, FakeTensorProp)


def _propagate(program: PartitionedProgram, fake_args: Sequence[Any], mode: Any, prop: Any) -> None:
    prop(program.forward, mode=mode).propagate_dont_convert_inputs(*fake_args)
    if program.backward is None:
        return
    outs = [
        n.meta.get("val") if isinstance(n, fx.Node) else n
        for n in program.forward.graph.output_node().args[0]  # type: ignore[union-attr]
    ]
    layout = program.layout
    saved = outs[layout.num_fwd_outputs :]
    with mode:
        tangents = [
            torch.empty(outs[i].shape, dtype=outs[i].dtype, device=outs[i].device)
            for i in layout.tangent_outputs
        ]
    prop(program.backward, mode=mode).propagate_dont_convert_inputs(*saved, *tangents)
