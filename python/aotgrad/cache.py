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
  ``graph_records``, so they come back exactly, and a description of every
  node's fake value, rebuilt without running an op); an entry that fails any
  check — truncated, tampered, another key, another format — is discarded with a
  warning and rebuilt, never trusted.
* Beside an entry, once compiled (``<key>.compiled``): what reloads each graph's
  compiled code (Inductor's FX-graph key, ``inductor.saved_compilation``). With one for
  every graph, a warm start restores the fake values only when asked
  (``PartitionedProgram.ensure_values``).
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
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import torch
import torch.fx as fx

from . import graph_records, guards
from .hook_calls import calls_hooks
from .program import AotOptions, CompiledArtifact, PartitionedProgram

#: 2: graphs stored node by node (graph_records), no longer re-traced;
#: 3: each node's fake value described (``describe_values``), rebuilt without running ops;
#: 5: the layout carries which tangents reach a stale saved tensor, and detached outputs;
#: 6: and the outputs retained and computed from, whose whole gradient the backward returns;
#: 7: and the written inputs that retain grad among those, and the hooked views;
#: 12: a duplicated output is no new leaf of its own, hooks on returned leaves taken off.
FORMAT = 15
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


def _leaf(x: torch.Tensor) -> bool | str | None:
    """Whether ``x`` is a leaf, where it requires grad (the trace depends on it: a
    leaf's autocast casts are cached, a non-leaf input may be written; ``"retains"``: one
    that retains grad: the backward computes its .grad where the function writes it,
    ``input_hooks.retained_written_inputs``)."""
    if not x.requires_grad:
        return None
    return "retains" if not x.is_leaf and x.retains_grad else x.is_leaf


def _describe_input(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return (
            f"T({x.dtype},{x.device.type},{tuple(str(s) for s in x.shape)},"
            f"{tuple(str(s) for s in x.stride())},{x.requires_grad},{_leaf(x)},"
            f"{isinstance(x, torch.nn.Parameter)})"
        )
    if isinstance(x, torch.SymInt):
        return f"S({x.node.expr})"
    return f"V({type(x).__name__},{x!r})"


def _describe_aliasing(inputs: Sequence[Any]) -> str:
    """Which tensor inputs share a storage, which are views of one base, and how autograd
    made each view (its creation meta): the trace depends on them (synthetic bases,
    eager's view checks) where the inputs' own descriptions are alike."""
    storages: dict[int, int] = {}
    bases: dict[int, int] = {}
    parts = []
    for x in inputs:
        if not isinstance(x, torch.Tensor):
            continue
        try:
            s = storages.setdefault(x.untyped_storage()._cdata, len(storages))
        except (RuntimeError, NotImplementedError):  # a wrapper subclass: no storage
            parts.append("-")
            continue
        if x._is_view():
            b = bases.setdefault(id(x._base), len(bases))
            meta = torch._C._autograd._get_creation_meta(x).name
            parts.append(f"{s}:{b}:{meta}:{x.storage_offset()}")
        else:
            parts.append(f"{s}:{x.storage_offset()}")
    return f"A({','.join(parts)})"


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
            repr(sorted((options.static_dims or {}).items())),
        ]
    )


def _constants_digest(gm: fx.GraphModule, lifted: Collection[str] = ()) -> str:
    h = hashlib.sha256()
    # Parameters and buffers are lifted to graph inputs (``lifted``: their names): their
    # metadata is in the key with the other inputs', their values are not constants.
    for node in gm.graph.find_nodes(op="get_attr"):
        if node.target in lifted:
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
    gm: fx.GraphModule,
    inputs: Sequence[Any],
    options: AotOptions,
    *,
    training: bool,
    lifted: Collection[str] = (),
) -> str:
    """The cache key of compiling ``gm`` for ``inputs`` with ``options``; ``lifted``: the
    names of ``gm``'s parameters and buffers that are lifted to graph inputs."""
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
        _constants_digest(gm, frozenset(lifted)),
        *map(_describe_input, inputs),
        _describe_aliasing(inputs),
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


@dataclass(frozen=True)
class Slot:
    """Both caches under one key: what ``program.compile_flat`` consults (the
    ``program.ProgramCache`` protocol), so that the orchestrator drives the sequence
    and this module only stores."""

    key: str

    def artifact(self) -> CompiledArtifact | None:
        return memory_get(self.key)

    def put(self, artifact: CompiledArtifact) -> None:
        memory_put(self.key, artifact)
        if disk_enabled() and artifact.compiled and artifact.compiled_fresh:
            store_compiled(self.key, artifact.compiled)

    def load(self, fake_args: Sequence[Any], fake_mode: Any) -> PartitionedProgram | None:
        return load(self.key, fake_args, fake_mode) if disk_enabled() else None

    def store(self, program: PartitionedProgram) -> None:
        if disk_enabled():
            store(self.key, program)


# ---------------------------------------------------------------------------- on disk


def cache_dir() -> Path:
    return Path(os.environ.get("AOTGRAD_CACHE_DIR") or Path.home() / ".cache" / "aotgrad")


def disk_enabled() -> bool:
    return os.environ.get("AOTGRAD_CACHE", "1") not in ("0", "false", "off")


def entry_path(key: str, root: Path | None = None) -> Path:
    return (root or cache_dir()) / key[:2] / f"{key}.bin"


def store(key: str, program: PartitionedProgram, root: Path | None = None) -> Path | None:
    """Write ``program``'s graphs and layout under ``key`` (atomically). Returns the path,
    or None (with a warning) when the graphs can't be serialised; None (without one) for
    a layout holding the hooks the function registered (the traced call's objects) or
    graphs that call them (``hook_calls``: another process's keys name other hooks)."""
    layout = program.layout
    hooks = layout.input_hooks, layout.early_input_hooks, layout.post_write_hooks
    hooks += (layout.hooks_before_call,)
    if any(hooks) or layout.output_hooks or layout.hooked_views:
        return None
    if calls_hooks(program.forward) or calls_hooks(program.backward):
        return None
    payload_obj = {
        "training": program.training,
        "forward": program.forward,
        "backward": program.backward,
        "layout": program.layout,
        "values": describe_values(program),
        "guards": program.guards,
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


def compiled_path(key: str, root: Path | None = None) -> Path:
    return entry_path(key, root).with_suffix(".compiled")


def store_compiled(key: str, compiled: dict[str, Any], root: Path | None = None) -> None:
    """Beside the entry of ``key``: what reloads its graphs' compiled code in another
    process (``compile.compile_or_reload``), written once they are compiled. Only with
    an entry (a program not cached on disk has nothing to reload from)."""
    path = compiled_path(key, root)
    if not entry_path(key, root).exists():
        return
    try:
        data = pickle.dumps({"format": FORMAT, "key": key, "compiled": compiled})
    except Exception:  # a compiler's record that does not pickle: nothing kept
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _read_compiled(key: str, root: Path | None) -> dict[str, Any]:
    """The records ``store_compiled`` kept for ``key``; nothing (compile again) when there
    are none or they do not check out."""
    path = compiled_path(key, root)
    try:
        body = pickle.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except Exception:
        path.unlink(missing_ok=True)
        return {}
    ok = isinstance(body, dict) and body.get("format") == FORMAT and body.get("key") == key
    compiled = body.get("compiled") if ok else None
    return compiled if isinstance(compiled, dict) else {}


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
    program.compiled = _read_compiled(key, root)
    program.guards = body.get("guards")
    values = body.get("values")
    if values is not None and set(program.compiled) >= _graph_names(program):
        # reloadable as compiled: values only when something asks (``ensure_values``)
        program.pending_values = functools.partial(
            restore_fake_values, program, fake_args, fake_mode, values
        )
        return program
    try:
        restore_fake_values(program, fake_args, fake_mode, values)
    except Exception as e:  # an entry whose graphs do not run on these inputs is stale
        warnings.warn(
            f"aotgrad: discarding cache entry {path.name}: its graphs do not run on this "
            f"call's inputs ({type(e).__name__}: {str(e)[:200]})",
            stacklevel=2,
        )
        path.unlink(missing_ok=True)
        return None
    return program


def _graph_names(program: PartitionedProgram) -> set[str]:
    return {"forward", "backward"} if program.training else {"forward"}


def restore_fake_values(
    program: PartitionedProgram,
    fake_args: Sequence[Any],
    mode: Any,
    values: list[list[Any]] | None = None,
) -> None:
    """Give a deserialised program's nodes their ``meta["val"]`` back (compilers read them).
    With ``values`` (static shapes) each one is rebuilt from its description, in time linear
    in the nodes; otherwise (symbolic sizes, or ``values`` that don't fit ``fake_args``) the
    fake inputs are propagated through the forward and the backward, whose inputs are the
    forward's saved outputs and tangents shaped like the differentiable outputs."""
    if values is not None and _rebuild_values(program, fake_args, mode, values):
        return
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


# ------------------------------------------------------------------------ fake values
#
# Restoring fake values by propagation runs every op of both graphs through the fake
# mode: most of a warm start. Where every value is static, the entry instead describes
# each node's value — a tensor by its sizes, strides, storage offset, dtype, device and
# which storage it shares (the aliasing Inductor's passes read, and its FX-graph cache
# key's storage bytes) — as traced, and the values are rebuilt directly. (torch's AOT
# Autograd cache needs no values at all: it keeps Inductor's FX-graph keys and loads the
# compiled code by key.) Symbolic sizes would need their expressions re-bound to this
# process's shape environment: those programs keep propagation.


class _NotDescribed(Exception):
    """A value ``describe_values`` leaves to propagation (symbolic, a subclass, ...)."""


_PLAIN = (bool, int, float, type(None))


def describe_values(program: PartitionedProgram) -> list[Any] | None:
    """``[storage bytes, forward specs, backward specs]``: one spec per node of each graph
    (None when it has no value), storages numbered across both graphs; None when some
    value is not static (then the values are propagated when loaded)."""
    from torch.multiprocessing.reductions import StorageWeakRef

    storages: dict[Any, int] = {}
    nbytes: list[int] = []

    def spec(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            if not isinstance(v, torch._subclasses.FakeTensor) or v.layout != torch.strided:
                raise _NotDescribed
            if v.requires_grad or v.is_conj() or v.is_neg() or v.is_quantized:
                raise _NotDescribed
            shape, stride, offset = tuple(v.shape), v.stride(), v.storage_offset()
            storage = v.untyped_storage()
            size = storage.nbytes()
            if not all(type(i) is int for i in (*shape, *stride, offset, size)):
                raise _NotDescribed
            index = storages.setdefault(StorageWeakRef(storage), len(nbytes))
            if index == len(nbytes):
                nbytes.append(size)
            return ("t", shape, stride, offset, v.dtype, v.device, index)
        if isinstance(v, (list, tuple)):
            return ("l" if isinstance(v, list) else "u", [spec(x) for x in v])
        if type(v) in _PLAIN:
            return ("v", v)
        raise _NotDescribed

    def specs(gm: fx.GraphModule | None) -> list[Any] | None:
        if gm is None:
            return None
        return [spec(n.meta["val"]) if "val" in n.meta else None for n in gm.graph.nodes]

    try:
        forward, backward = specs(program.forward), specs(program.backward)
    except _NotDescribed:
        return None
    return [nbytes, forward, backward]


def _rebuild_values(
    program: PartitionedProgram, fake_args: Sequence[Any], mode: Any, values: list[Any]
) -> bool:
    """Set every node's value from ``values`` (``describe_values``); the forward's
    placeholders take ``fake_args`` (detached, as tracing records an input). False, with
    nothing set, when the description doesn't fit (another node count, inputs unlike the
    recorded ones, a storage viewed with another dtype)."""
    nbytes, forward_specs, backward_specs = values
    graphs = [(program.forward, forward_specs)]
    if program.backward is not None:
        graphs.append((program.backward, backward_specs))
    if any(specs is None or len(specs) != len(gm.graph.nodes) for gm, specs in graphs):
        return False
    placeholders = program.forward.graph.find_nodes(op="placeholder")
    if len(placeholders) != len(fake_args):
        return False
    values_of = _Values(mode, nbytes)
    inputs = [a.detach() if isinstance(a, torch.Tensor) else a for a in fake_args]
    if not all(values_of.take_input(a, s) for a, s in zip(inputs, forward_specs)):
        return False
    new: list[tuple[fx.Node, Any]] = list(zip(placeholders, inputs))
    for gm, specs in graphs:
        for node, s in zip(gm.graph.nodes, specs):
            if s is None or (gm is program.forward and node.op == "placeholder"):
                continue
            value = values_of.build(s)
            if value is _MISFIT:
                return False
            new.append((node, value))
    for node, value in new:
        node.meta["val"] = value
    return True


_MISFIT = object()


class _Values:
    """Fake values rebuilt from specs, each storage made once and shared by every value on
    it. A new storage is a meta tensor wrapped as a FakeTensor directly (what the fake
    mode's converter does: no op dispatched); a view of an input goes through the mode."""

    def __init__(self, mode: Any, nbytes: list[int]) -> None:
        self.mode = mode
        self.nbytes = nbytes
        #: storage number -> (a tensor on it: a meta tensor, or a fake input; fake device)
        self.roots: dict[int, tuple[torch.Tensor, torch.device]] = {}

    def take_input(self, arg: Any, s: Any) -> bool:
        """Whether a call's (detached) fake input is the value recorded for its
        placeholder — a tensor of the same metadata and storage sharing, or the same plain
        value; registers its storage."""
        if s is None or s[0] != "t":
            return s is not None and not isinstance(arg, torch.Tensor) and s == ("v", arg)
        _, shape, stride, offset, dtype, device, index = s
        if not isinstance(arg, torch.Tensor) or (tuple(arg.shape), arg.stride()) != (
            shape,
            stride,
        ):
            return False
        if (arg.storage_offset(), arg.dtype, arg.device) != (offset, dtype, device):
            return False
        storage = arg.untyped_storage()
        if storage.nbytes() != self.nbytes[index]:
            return False
        root, _ = self.roots.setdefault(index, (arg, device))
        return root.untyped_storage()._cdata == storage._cdata

    def build(self, s: Any) -> Any:
        kind = s[0]
        if kind == "v":
            return s[1]
        if kind in ("l", "u"):
            items = [self.build(x) for x in s[1]]
            if any(x is _MISFIT for x in items):
                return _MISFIT
            return items if kind == "l" else tuple(items)
        return self._tensor(*s[1:])

    def _tensor(
        self,
        shape: tuple[int, ...],
        stride: tuple[int, ...],
        offset: int,
        dtype: torch.dtype,
        device: torch.device,
        index: int,
    ) -> Any:
        from torch._subclasses.fake_tensor import FakeTensor

        if index not in self.roots:
            size = self.nbytes[index]
            meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
            if offset == 0 and meta.untyped_storage().nbytes() == size:
                self.roots[index] = (meta, device)
                return FakeTensor(self.mode, meta, device)
            if size % dtype.itemsize:
                return _MISFIT
            flat = torch.empty_strided((size // dtype.itemsize,), (1,), dtype=dtype, device="meta")
            self.roots[index] = (flat, device)
        root, root_device = self.roots[index]
        if root.dtype != dtype or root_device != device:
            return _MISFIT
        if isinstance(root, FakeTensor):
            with self.mode:
                return root.as_strided(shape, stride, offset)
        return FakeTensor(self.mode, root.as_strided(shape, stride, offset), device)
