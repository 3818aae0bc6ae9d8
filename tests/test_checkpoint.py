"""Activation checkpointing under torch.compile(backend="aotgrad" / "aotgrad_eager").

Dynamo turns ``checkpoint(block, x, use_reentrant=False)`` into the
``tag_activation_checkpoint`` higher-order op; tracing it tags each forward node
with ``meta["recompute"]`` and ``meta["ac_graph_id"]``. These tests check the
whole chain: the node table's flags and region column, the Rust partitioners'
saved and recomputed values, the backward's order (each region recomputed just
before its gradient), and gradients against eager. Without Dynamo (``aot_module``)
each ``checkpoint`` call is made a tagged region the same way (``aotgrad.hops``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import operator
from collections.abc import Callable, Iterator

import pytest
import torch
import torch.fx as fx
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from aotgrad import aot_function, aot_module, nop, observe
from aotgrad.errors import EagerReplayWarning
from aotgrad.partition import PartitionResult, partition_joint
from aotgrad.program import CompiledArtifact
from aotgrad.split import split_joint
from aotgrad.table import Flag, to_table

D, BATCH, BLOCKS = 16, 64, 3
ACT = BATCH * D * 4  # bytes of one block's input / output

save_mm = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(D, 4 * D, bias=False)
        self.down = nn.Linear(4 * D, D, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)).sin())


class Net(nn.Module):
    """``BLOCKS`` residual blocks; ``mode``: "plain", "full" (checkpoint every block)
    or "sac" (checkpoint with a policy that saves matmuls)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            if self.mode == "plain":
                x = block(x)
            elif self.mode == "full":
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = checkpoint(block, x, use_reentrant=False, context_fn=save_mm)
        return (x * x).sum()


def _inputs(step: int) -> torch.Tensor:
    return torch.randn(BATCH, D, generator=torch.Generator().manual_seed(step))


def _eager_and_copy(mode: str) -> tuple[Net, Net]:
    torch.manual_seed(0)
    eager = Net(mode)
    return eager, copy.deepcopy(eager)


@contextlib.contextmanager
def _recording() -> Iterator[list[CompiledArtifact]]:
    """The artefacts compiled inside the block."""
    artifacts: list[CompiledArtifact] = []
    unregister = observe.on_compiled(artifacts.append)
    try:
        yield artifacts
    finally:
        unregister()


def _compile(mode: str, backend: str, steps: int = 1) -> CompiledArtifact:
    """Train-step ``Net(mode)`` compiled with ``backend`` against eager; the artefact."""
    torch._dynamo.reset()
    eager, model = _eager_and_copy(mode)
    with _recording() as artifacts:
        compiled = torch.compile(model, backend=backend, options={"strict": True, "cache": False})
        for step in range(steps):
            x = _inputs(step)
            for m in (compiled, eager):
                m.zero_grad()
                m(x).backward()
            for (name, a), b in zip(eager.named_parameters(), model.parameters()):
                torch.testing.assert_close(b.grad, a.grad, msg=name)
    assert len(artifacts) == 1
    return artifacts[0]


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompiledArtifact]:
    """The aotgrad_eager artefact of each mode (grads already checked against eager)."""
    return {mode: _compile(mode, "aotgrad_eager") for mode in ("plain", "full", "sac")}


def _partition(art: CompiledArtifact, kind: str = "min_cut") -> PartitionResult:
    assert art.joint is not None
    return partition_joint(art.joint, num_fwd_outputs=art.layout.num_fwd_outputs, kind=kind)


def _nbytes(node: fx.Node) -> int:
    val = node.meta["val"]
    return val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0


def _activation_bytes(res: PartitionResult) -> int:
    """Saved bytes less the saved primal inputs (parameters and inputs are held anyway)."""
    primals = sum(
        _nbytes(n) for n, r in zip(res.saved_nodes(), res.reasons()) if r == "primal input"
    )
    return res.saved_bytes - primals


def _regions(art: CompiledArtifact) -> list[int]:
    assert art.joint is not None
    return sorted({n.meta["ac_graph_id"] for n in art.joint.graph.nodes if "ac_graph_id" in n.meta})


def _target(node: fx.Node) -> object:
    return getattr(node.target, "overloadpacket", node.target)


# ------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("mode", ["full", "sac"])
@pytest.mark.parametrize("backend", ["aotgrad_eager", "aotgrad"])
def test_checkpointed_model_grads_equal_eager(backend: str, mode: str) -> None:
    art = _compile(mode, backend, steps=2)
    assert art.backward is not None
    assert len(_regions(art)) == BLOCKS


def test_dropout_in_checkpointed_region_is_saved_not_replayed() -> None:
    """A random op in a region is never recomputed (its mask would differ): grads
    equal eager's, which replays the region with the forward's RNG state."""
    torch._dynamo.reset()
    w = torch.randn(D, D, requires_grad=True)

    def fn(x: torch.Tensor) -> torch.Tensor:
        body: Callable[[torch.Tensor], torch.Tensor] = lambda a: (  # noqa: E731
            nn.functional.dropout((a @ w).sin(), 0.5, True) @ w.t()
        )
        return checkpoint(body, x, use_reentrant=False).sum()

    x = _inputs(0)
    compiled = torch.compile(fn, backend="aotgrad_eager", options={"strict": True, "cache": False})
    torch.manual_seed(3)
    compiled(x).backward()
    got, w.grad = w.grad, None
    torch.manual_seed(3)
    fn(x).backward()
    torch.testing.assert_close(got, w.grad)


def test_gpt_with_checkpointed_blocks_grads_equal_eager() -> None:
    """Layer norms (multi-output ops), attention and GELU inside the regions."""
    from aotgrad.tools.models import GPT, GPTConfig

    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = GPT(GPTConfig(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32))
    model = copy.deepcopy(eager)
    for m in (eager, model):
        for block in m.blocks:
            block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)
    compiled = torch.compile(
        model, backend="aotgrad_eager", options={"strict": True, "cache": False}
    )
    g = torch.Generator().manual_seed(1)
    x, y = (torch.randint(0, 32, (4, 16), generator=g) for _ in range(2))
    with _recording() as artifacts:
        compiled(x, y).backward()
    (art,) = artifacts
    assert len(_regions(art)) == 2
    eager(x, y).backward()
    for (name, a), b in zip(eager.named_parameters(), model.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("mode", ["plain", "full", "sac"])
def test_checkpoint_under_aot_module(mode: str) -> None:
    """Without Dynamo, each checkpoint call is still one tagged region: traced once
    (no second copy in the backward for CSE to merge back), recomputed there."""
    eager, model = _eager_and_copy(mode)
    x = _inputs(0)
    with _recording() as artifacts:
        aot_module(model, nop)(x).backward()
    eager(x).backward()
    for (name, a), b in zip(eager.named_parameters(), model.parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=name)
    (art,) = artifacts
    assert art.joint is not None
    relus = art.joint.graph.find_nodes(op="call_function", target=torch.ops.aten.relu.default)
    assert len(relus) == BLOCKS  # the regions were traced once
    assert len(_regions(art)) == (0 if mode == "plain" else BLOCKS)
    res = _partition(art)
    if mode == "plain":
        assert not [n for n in res.recomputed_nodes() if _target(n) is torch.ops.aten.sin]
    else:
        assert sum(_target(n) is torch.ops.aten.sin for n in res.recomputed_nodes()) == BLOCKS
    mms = {n for n in res.nodes if _target(n) is torch.ops.aten.mm and "recompute" in n.meta}
    assert bool(mms & set(res.saved_nodes())) == (mode == "sac")


def test_reentrant_checkpoint_without_dynamo_runs_eagerly() -> None:
    """Reentrant checkpoint refuses ``autograd.grad``, which tracing the backward uses:
    the calls run eagerly with a warning saying what to do (was refused; under
    torch.compile, Dynamo traces every checkpoint as non-reentrant)."""
    torch.manual_seed(0)
    w = torch.randn(D, 4 * D, requires_grad=True)

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return checkpoint(lambda a: (a @ w).sin(), x, use_reentrant=True).sum()

    x = _inputs(0).requires_grad_()
    fn(x, w).backward()
    want = [x.grad, w.grad]
    x.grad = w.grad = None
    with pytest.warns(EagerReplayWarning, match="use_reentrant=False"):
        out = aot_function(fn, nop)(x, w)
    out.backward()
    torch.testing.assert_close([x.grad, w.grad], want)


# ------------------------------------------------------------------------ node table


def test_table_flags_and_regions(compiled: dict[str, CompiledArtifact]) -> None:
    for mode in ("full", "sac"):
        art = compiled[mode]
        assert art.joint is not None
        table, nodes = to_table(art.joint, num_fwd_outputs=art.layout.num_fwd_outputs)
        regions = _regions(art)
        for row, node in enumerate(nodes):
            policy = node.meta.get("recompute")
            flags = int(table.flags[row])
            if policy is None:
                assert table.region[row] == -1, node.name
                assert not flags & (Flag.MUST_SAVE | Flag.MUST_RECOMPUTE), node.name
                continue
            assert table.region[row] == node.meta["ac_graph_id"] in regions
            save = policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE)
            assert bool(flags & Flag.MUST_SAVE) == save, node.name
            assert bool(flags & Flag.MUST_RECOMPUTE) == (not save), node.name
            # the policy saves exactly the matmuls
            is_mm = _target(node) is torch.ops.aten.mm
            assert save == (mode == "sac" and is_mm), node.name
        # one region per checkpointed block, each holding its block's matmuls
        mms = [n for n in nodes if _target(n) is torch.ops.aten.mm and "ac_graph_id" in n.meta]
        assert len(regions) == BLOCKS and len(mms) == 2 * BLOCKS
        for k, region in enumerate(regions):
            assert [n.meta["ac_graph_id"] for n in mms[2 * k : 2 * k + 2]] == [region] * 2


def test_table_region_of_a_tag_without_region_id() -> None:
    """A selective-checkpoint mode with no region id writes ``ac_graph_id = None``."""
    g = fx.Graph()
    x = g.placeholder("primals_1")
    x.meta["val"] = torch.empty(2)
    y = g.call_function(torch.ops.aten.sin.default, (x,))
    y.meta.update(val=torch.empty(2), ac_graph_id=None, recompute=CheckpointPolicy.MUST_SAVE)
    z = g.call_function(torch.ops.aten.cos.default, (y,))
    z.meta.update(val=torch.empty(2), ac_graph_id=7, recompute=CheckpointPolicy.PREFER_RECOMPUTE)
    g.output((z,))
    table, _ = to_table(g, num_fwd_outputs=1)
    assert table.region.tolist() == [-1, -1, 7]
    assert table.flags.tolist() == [0, int(Flag.MUST_SAVE), int(Flag.MUST_RECOMPUTE)]


# ------------------------------------------------------------------------ partition


@pytest.mark.parametrize("kind", ["min_cut", "default"])
def test_checkpointing_saves_fewer_activation_bytes(
    compiled: dict[str, CompiledArtifact], kind: str
) -> None:
    plain = _activation_bytes(_partition(compiled["plain"], kind))
    full = _activation_bytes(_partition(compiled["full"], kind))
    assert full < plain
    # Only the boundaries between blocks are kept, as in eager checkpointing (which
    # saves each block's input; the first is the graph input). The default partition
    # runs the backward's untagged ops that read no tangent (the weights' transposes,
    # cos of the recomputed relu) in the backward, as torch's does.
    assert full == (BLOCKS - 1) * ACT
    sac = _activation_bytes(_partition(compiled["sac"], kind))
    assert full < sac <= plain


@pytest.mark.parametrize("kind", ["min_cut", "default"])
def test_region_intermediates_are_recomputed_not_saved(
    compiled: dict[str, CompiledArtifact], kind: str
) -> None:
    art = compiled["full"]
    res = _partition(art, kind)
    saved = dict(zip(res.saved_nodes(), res.reasons()))
    recomputed = set(res.recomputed_nodes())
    # saved: inputs, each region's output read by the next region (a must-save
    # boundary), and with the default partition untagged values the backward reads
    boundaries = [n for n, r in saved.items() if r == "must-save tag"]
    assert len(boundaries) == BLOCKS - 1
    assert all(_target(n) is torch.ops.aten.add for n in boundaries)
    assert not [n.name for n in saved if "recompute" in n.meta and n not in boundaries]
    # each block's relu, sin and the matmul feeding relu are recomputed
    for op in (torch.ops.aten.relu, torch.ops.aten.sin):
        assert sum(_target(n) is op and "recompute" in n.meta for n in recomputed) == BLOCKS
    up = [n for n in res.nodes if _target(n) is torch.ops.aten.mm and "recompute" in n.meta]
    up = [n for n in up if any(_target(u) is torch.ops.aten.relu for u in n.users)]
    assert len(up) == BLOCKS and set(up) <= recomputed
    # and the backward graph the backend built holds those ops
    assert art.backward is not None
    bw_ops = [_target(n) for n in art.backward.graph.nodes if n.op == "call_function"]
    assert bw_ops.count(torch.ops.aten.sin) == BLOCKS  # recomputed (cos is the derivative)
    assert bw_ops.count(torch.ops.aten.relu) == BLOCKS


def test_selective_policy_saves_matmuls(compiled: dict[str, CompiledArtifact]) -> None:
    res = _partition(compiled["sac"])
    saved = dict(zip(res.saved_nodes(), res.reasons()))
    recomputed = set(res.recomputed_nodes())
    region_mms = [n for n in res.nodes if _target(n) is torch.ops.aten.mm and "recompute" in n.meta]
    assert not [n.name for n in region_mms if n in recomputed]
    # the first matmul of each block feeds relu, which the backward needs: saved as tagged
    up = [n for n in region_mms if any(_target(u) is torch.ops.aten.relu for u in n.users)]
    assert len(up) == BLOCKS
    assert all(saved.get(n) == "must-save tag" for n in up), [n.name for n in up]
    # relu and sin are still recomputed
    for op in (torch.ops.aten.relu, torch.ops.aten.sin):
        assert sum(_target(n) is op for n in recomputed) == BLOCKS
    # without the policy the same matmuls are recomputed
    full = _partition(compiled["full"])
    names = {n.name for n in full.recomputed_nodes()}
    assert {n.name for n in up} <= names


# ------------------------------------------------------------------------ backward order


def _region_of(node: fx.Node) -> int | None:
    """The checkpoint region a backward node recomputes (None for other nodes)."""
    if node.op != "call_function" or "recompute" not in node.meta:
        return None
    return node.meta["ac_graph_id"]


def _peak_intermediate_bytes(gm: fx.GraphModule) -> int:
    """Peak bytes of the backward's intermediates if each is freed after its last read
    (placeholders and outputs excluded: they are live throughout either way)."""
    nodes = list(gm.graph.nodes)
    outputs = set(gm.graph.output_node().all_input_nodes)
    last = {a: i for i, n in enumerate(nodes) for a in n.all_input_nodes}
    live = peak = 0
    alive: dict[fx.Node, int] = {}
    for i, n in enumerate(nodes):
        if n.op == "call_function" and n not in outputs and n.target is not operator.getitem:
            alive[n] = _nbytes(n)
            live += alive[n]
            peak = max(peak, live)
        for a in n.all_input_nodes:
            if last[a] == i and a in alive:
                live -= alive.pop(a)
    return peak


def test_backward_recomputes_each_region_just_before_its_gradient(
    compiled: dict[str, CompiledArtifact],
) -> None:
    art = compiled["full"]
    assert art.backward is not None and art.joint is not None
    nodes = list(art.backward.graph.nodes)
    first_grad = min(
        i
        for i, n in enumerate(nodes)
        if any(a.op == "placeholder" and "tangent" in a.name for a in n.all_input_nodes)
    )
    spans: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        r = _region_of(n)
        if r is not None:
            spans.setdefault(r, []).append(i)
    regions = sorted(spans)
    assert len(regions) == BLOCKS
    # the last block is recomputed first, and each block only after the previous
    # block's recomputation is done; every block but the last after a gradient op
    for later, earlier in zip(regions[::-1], regions[::-1][1:]):
        assert max(spans[later]) < min(spans[earlier])
    assert all(min(spans[r]) > first_grad for r in regions[:-1])
    # in joint order (all regions at the top) the backward's peak would be higher
    res = _partition(art)
    _, unordered = split_joint(
        art.joint, res.nodes, res.placement, res.saved, art.layout.num_fwd_outputs, rep=res.rep
    )
    ordered_peak = _peak_intermediate_bytes(art.backward)
    assert ordered_peak < _peak_intermediate_bytes(unordered)
    assert ordered_peak <= _peak_intermediate_bytes(compiled["plain"].backward)  # type: ignore[arg-type]


def test_plain_backward_keeps_joint_order(compiled: dict[str, CompiledArtifact]) -> None:
    """No checkpoint tags, no reordering: the backward is the split's, node for node."""
    art = compiled["plain"]
    assert art.backward is not None and art.joint is not None
    res = _partition(art)
    _, bw = split_joint(
        art.joint, res.nodes, res.placement, res.saved, art.layout.num_fwd_outputs, rep=res.rep
    )
    assert [n.name for n in art.backward.graph.nodes] == [n.name for n in bw.graph.nodes]


def _sin_in_place(a, w):
    b = a * 2
    b.sin_()
    return b * a


def _relu_in_place_then_matmul(a, w):
    return torch.relu_(a @ w) @ w


def _chained_writes(a, w):
    b = a @ w
    b.sin_().mul_(2)
    return b * a


def _read_before_and_after_the_write(a, w):
    b = a * w
    c = b.exp()
    b.sin_()
    return c + b


def _write_through_a_view(a, w):
    b = a @ w
    b[0].zero_()
    b[:, 1].mul_(3)
    return b.cos() * a


def _write_with_another_tensor(a, w):
    b = a.exp()
    b.add_(w * a)
    return b.tanh()


def _index_put(a, w):
    b = a * w
    b[torch.tensor([0, 2])] = a[:2] * 5
    return b.sin()


def _written_between_reads(a, w):
    b = a @ w
    b.sin_()
    d = b * a
    b.mul_(2)
    return d + b.exp()


def _view_written_after_its_base(a, w):
    b = a * w
    v = b.t()
    b.tanh_()
    v[1].mul_(3)
    return v.sin() + b


INPLACE_BLOCKS = [
    _sin_in_place,
    _relu_in_place_then_matmul,
    _chained_writes,
    _read_before_and_after_the_write,
    _write_through_a_view,
    _write_with_another_tensor,
    _index_put,
    _written_between_reads,
    _view_written_after_its_base,
]


@pytest.mark.parametrize("compiler", ["min_cut", "default", "aotgrad_eager", "aotgrad"])
@pytest.mark.parametrize("block", INPLACE_BLOCKS)
def test_checkpointed_region_that_writes_in_place_has_eager_grads(
    block: Callable, compiler: str
) -> None:
    """A checkpointed region that writes in place what it computed (``b = a * 2;
    b.sin_()``; ``nn.ReLU(inplace=True)``): traced, the recompute-tagging mode's cache
    raised "Tensor cached during selective activation checkpoint has been mutated" (blind
    d16; torch's aot_eager runs it). Its recompute now reads each value as the forward
    made it and applies the writes (``hops._SnapshotCaching``): eager's gradients."""
    from aotgrad.partition import default_partition, min_cut_rematerialization_partition

    def fn(a, w):
        return checkpoint(block, a, w, use_reentrant=False)

    if compiler in ("min_cut", "default"):
        part = min_cut_rematerialization_partition if compiler == "min_cut" else default_partition
        compiled = aot_function(fn, nop, partition_fn=part)
    else:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=compiler)
    for run in range(2):
        grads = []
        for f in (fn, compiled):
            torch.manual_seed(run)
            a = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
            w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
            out = f(a, w)
            (out * torch.arange(16.0, dtype=torch.float64).view(4, 4)).sum().backward()
            grads.append((out.detach(), a.grad, w.grad))
        for got, want in zip(grads[1], grads[0]):
            torch.testing.assert_close(got, want)
