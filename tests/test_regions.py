"""Regional compilation: blocks marked with ``torch.compiler.nested_compile_region``
reach the joint graph as ``invoke_subgraph`` calls of one shared forward and one shared
joint subgraph. ``aotgrad.partition.regions`` partitions that joint once, with the
caller's partitioner, and every call's backward node reads what its forward node saved
(it recomputed the whole block before). Losses and gradients equal eager's."""

from __future__ import annotations

import copy
import operator
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad import observe
from aotgrad.partition import default_partition, min_cut_rematerialization_partition
from aotgrad.tools.models.gpt import GPT, Block, GPTConfig

_INVOKE = torch.ops.higher_order.invoke_subgraph


class _MarkedBlock(Block):
    forward = torch.compiler.nested_compile_region(Block.forward)


def _model(n_layer: int = 3) -> GPT:
    torch.manual_seed(0)
    m = GPT(GPTConfig(n_layer=n_layer, n_embd=32, n_head=2, block_size=8))
    for block in m.blocks:
        block.__class__ = _MarkedBlock
    return m


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 96, (2, 8), generator=g), torch.randint(0, 96, (2, 8), generator=g)


def _train(backend: Any, n_layer: int = 3) -> tuple[list[Any], GPT, GPT]:
    """One compiled training step beside eager's; the artefacts aotgrad compiled."""
    m = _model(n_layer)
    ref = copy.deepcopy(m)
    artifacts: list[Any] = []
    unregister = observe.on_compiled(artifacts.append)
    torch._dynamo.reset()
    try:
        options = {"options": {"cache": False}} if isinstance(backend, str) else {}
        loss = torch.compile(m, backend=backend, **options)(*_batch())
        loss.backward()
    finally:
        unregister()
    want = ref(*_batch())
    want.backward()
    torch.testing.assert_close(loss, want)
    for (name, p), q in zip(m.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    return artifacts, m, ref


def _calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _INVOKE]


def _torch_min_cut(*args: Any, **kwargs: Any) -> Any:
    from torch._functorch.partitioners import min_cut_rematerialization_partition as torch_mc

    return torch_mc(*args, **kwargs)


@pytest.mark.parametrize("partition", ["min_cut", "default", "torch_min_cut"])
def test_region_is_partitioned_once_and_its_backward_reads_what_the_forward_saved(
    partition: str,
) -> None:
    """(Also with torch's own min-cut as the partitioner: the region's joint carries
    torch's placeholder names, by which torch's partitioners tell tangents.)"""
    fn = {
        "min_cut": min_cut_rematerialization_partition,
        "default": default_partition,
        "torch_min_cut": _torch_min_cut,
    }[partition]

    def backend(gm: Any, example_inputs: Any) -> Any:
        return aotgrad.aot_module_simplified(gm, example_inputs, aotgrad.nop, partition_fn=fn)

    artifacts, _, _ = _train(backend)
    (art,) = artifacts
    fw_calls, bw_calls = _calls(art.forward), _calls(art.backward)
    assert len(fw_calls) == len(bw_calls) == 3
    assert {n.args[1] for n in fw_calls} == {"aotgrad_region_fw_0"}
    assert {n.args[1] for n in bw_calls} == {"aotgrad_region_bw_0"}
    # each backward call takes its own forward call's saved values, not the primals: the
    # region's backward recomputes no linear layer (``addmm``: the forward's only)
    fw_region = getattr(art.forward, fw_calls[0].args[0].target)
    bw_region = getattr(art.backward, bw_calls[0].args[0].target)
    n_saved = len(fw_region.graph.output_node().args[0]) - 1
    assert n_saved > 0
    assert all(len(n.args) - 2 == n_saved + 1 for n in bw_calls)  # saved, then the tangent

    def addmms(gm: torch.fx.GraphModule) -> int:
        return sum(n.target is torch.ops.aten.addmm.default for n in gm.graph.nodes)

    assert addmms(fw_region) == 4 and addmms(bw_region) == 0


def test_regions_train_like_eager_under_aotgrad_eager() -> None:
    artifacts, _, _ = _train("aotgrad_eager", n_layer=4)
    assert artifacts and all(len(_calls(a.forward)) == 4 for a in artifacts)


@pytest.mark.slow
def test_regions_train_like_eager_under_inductor() -> None:
    artifacts, _, _ = _train("aotgrad", n_layer=2)
    assert artifacts


def test_a_region_recomputed_in_a_checkpoint_still_matches_eager() -> None:
    """A checkpointed block that is also a region: recomputed by the checkpoint, its
    region still stitched; gradients equal eager's."""

    class _Checkpointed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = _model(2)

        def forward(self, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            return torch.utils.checkpoint.checkpoint(self.inner, idx, tgt, use_reentrant=False)

    m = _Checkpointed()
    ref = copy.deepcopy(m)
    torch._dynamo.reset()
    loss = torch.compile(m, backend="aotgrad_eager", options={"cache": False})(*_batch())
    loss.backward()
    want = ref(*_batch())
    want.backward()
    torch.testing.assert_close(loss, want)
    for p, q in zip(m.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)


def test_stitch_leaves_a_graph_without_regions_alone() -> None:
    from aotgrad.partition import regions

    gm = torch.fx.symbolic_trace(lambda x: operator.add(x, 1))
    before = gm.code
    assert regions.stitch(gm, default_partition) == 0
    assert gm.code == before
