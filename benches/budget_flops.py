"""Memory budget at torch's levels: backward FLOPs and step time, aotgrad against torch.

On the joint graph of a transformer stack (``--blocks``, default 16), for each budget
``b`` in 1.0 ... 0.1:

1. torch: ``torch._functorch.config.activation_memory_budget = b``, then torch's
   ``min_cut_rematerialization_partition`` on a copy of the joint. Its forward runs on
   real inputs: the *level* is the bytes its saved tensors really hold (each storage
   once, the inputs' storages excluded).
2. aotgrad: ``memory_budget_joint`` asked for that level (``budget = level / min-cut's
   activation bytes``), split, run the same way; its held bytes must not exceed the
   level ("met").
3. both backward graphs run on the same saved values and tangents under
   ``torch.utils.flop_counter.FlopCounterMode``: matmul-class FLOPs (mm, bmm, addmm,
   convolution, attention); and timed, interleaved, ``--repeats`` times (median).

    .venv/bin/python benches/budget_flops.py [--blocks 16] [--json out.json]

Two aotgrad partitions per level: the calibrated cost table (the default: bytes moved
and FLOPs, ``aotgrad calibrate``) and the FLOP-only model (:data:`FLOP_MODEL`, the
measure torch's knapsack optimizes). Each side's partition is also priced by the
calibrated table (``table cost torch/aotgrad``: above 1, torch's costs more).

Goal (issue 20, item 3): at every level aotgrad's backward FLOPs <= torch's and the
level met.
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
from torch.utils.flop_counter import FlopCounterMode

from aotgrad.frame_stack import with_frame_room
from aotgrad.tools import bench
from aotgrad.tools.report.collect import copy_graph_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import environment, format_table, write_json

BUDGETS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)
MB = 1024 * 1024


def _real(val: Any, g: torch.Generator) -> Any:
    if isinstance(val, torch.Tensor):
        return (
            torch.randn(val.shape, dtype=val.dtype, generator=g)
            if val.is_floating_point()
            else torch.zeros(val.shape, dtype=val.dtype)
        )
    return val


class Run:
    """A forward/backward pair run on the workload's real inputs."""

    def __init__(
        self, fw: fx.GraphModule, bw: fx.GraphModule, w: bench.Workload, joint: Any
    ) -> None:
        self.fw, self.bw = fw, bw
        nfo = joint.num_fwd_outputs
        inputs = [t.detach() for t in w.flat_inputs()]
        with torch.no_grad():
            outs = fw(*inputs)
        out_nodes = list(fw.graph.output_node().args[0])
        saved = dict(zip((n.name for n in out_nodes[nfo:]), outs[nfo:], strict=True))
        g = torch.Generator().manual_seed(7)
        tangents = [
            _real(t.meta["val"], g)
            for t in joint.gm.graph.find_nodes(op="placeholder")
            if t.meta.get("aotgrad_role") == "tangent"
        ]
        env = {**saved, **{f"tangents_{i + 1}": t for i, t in enumerate(tangents)}}
        self.bw_args = [env[p.name] for p in bw.graph.find_nodes(op="placeholder")]
        mine = {t.untyped_storage().data_ptr() for t in inputs}
        storages: dict[int, int] = {}
        for v in saved.values():
            if isinstance(v, torch.Tensor):
                st = v.untyped_storage()
                if st.data_ptr() not in mine:
                    storages[st.data_ptr()] = st.nbytes()
        self.held = sum(storages.values())

    def backward(self) -> Any:
        with torch.no_grad():
            return self.bw(*self.bw_args)

    def timed_backward(self) -> float:
        """Seconds of one backward, run with room on the frame stack: the graph's ~1,400
        op calls otherwise map a fresh 16 KiB frame chunk each where their depth
        straddles a chunk boundary (``aotgrad/frame_stack.py``), which made either side
        up to 3x slower by chance of its frame size."""
        gc.collect()
        t0 = time.perf_counter()
        self.backward()
        return time.perf_counter() - t0

    def flops(self) -> int:
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            self.bw.forward(*self.bw_args)  # not __call__: the mode's module hooks need grads
        return fc.get_total_flops()


def torch_partition(joint: Any, budget: float) -> tuple[fx.GraphModule, fx.GraphModule]:
    import torch._functorch.config as fconfig
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    gm = copy_graph_module(joint.gm)
    with fconfig.patch(activation_memory_budget=budget):
        return min_cut_rematerialization_partition(
            gm, joint.joint_inputs, num_fwd_outputs=joint.num_fwd_outputs
        )


def aotgrad_partition(joint: Any, level: int, **options: Any) -> tuple[Any, Any, Any]:
    from aotgrad.partition import frontier, memory_budget_joint

    nfo = joint.num_fwd_outputs
    (ref,) = frontier(joint.gm, num_fwd_outputs=nfo, budgets=[1.0], **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res, point = memory_budget_joint(
            joint.gm,
            num_fwd_outputs=nfo,
            budget=level / ref.min_cut_bytes,
            allow_exceed=True,
            **options,
        )
    fw, bw = res.split(joint.gm, nfo)
    return fw, bw, point


#: The cost model that prices FLOPs alone (a byte moved is worth 1e-3 FLOPs):
#: torch's ``activation_memory_budget_runtime_estimator = "flops"``.
FLOP_MODEL = {"flops_per_byte": 1e-3}


def table_cost(fw: fx.GraphModule, bw: fx.GraphModule, joint: Any, costs: Any) -> float:
    """The cost table's price of the forward calls ``bw`` recomputes (see
    ``memory_budget.recompute_cost``): one scoring for both sides' partitions."""
    from memory_budget import recompute_cost

    names = {n.name: i for i, n in enumerate(joint.gm.graph.nodes)}
    return recompute_cost(fw, bw, costs, names)


def level_row(b: float, joint: Any, w: Any, costs: Any, repeats: int) -> dict:
    """torch at budget ``b``; aotgrad at its level with the calibrated cost table and
    with the FLOP-only model; FLOPs, bytes, table costs and backward times."""
    tfw, tbw = torch_partition(joint, b)
    theirs = Run(tfw, tbw, w, joint)
    level = theirs.held
    fw, bw, point = aotgrad_partition(joint, level)
    ours = Run(fw, bw, w, joint)
    flop_model = Run(*aotgrad_partition(joint, level, **FLOP_MODEL)[:2], w, joint)
    times: dict[str, list[float]] = {"aotgrad": [], "torch": []}
    for _ in range(repeats):  # interleaved: load from elsewhere hits both alike
        for name, r in (("aotgrad", ours), ("torch", theirs)):
            times[name].append(with_frame_room(r.timed_backward)())
    row = {
        "budget": b,
        "level_bytes": level,
        "aotgrad_bytes": ours.held,
        "flop_model_bytes": flop_model.held,
        "met": ours.held <= level and flop_model.held <= level,
        "aotgrad_flops": ours.flops(),
        "flop_model_flops": flop_model.flops(),
        "torch_flops": theirs.flops(),
        "aotgrad_table_cost": table_cost(fw, bw, joint, costs),
        "torch_table_cost": table_cost(tfw, tbw, joint, costs),
        "aotgrad_bw_s": statistics.median(times["aotgrad"]),
        "torch_bw_s": statistics.median(times["torch"]),
        "aotgrad_budget": point.budget,
    }
    row["flops_ratio"] = row["aotgrad_flops"] / max(1, row["torch_flops"])
    row["flop_model_ratio"] = row["flop_model_flops"] / max(1, row["torch_flops"])
    row["time_ratio"] = row["aotgrad_bw_s"] / row["torch_bw_s"]
    return row


def _ratio(a: float, b: float) -> str:
    if b == 0:
        return "1.000" if a == 0 else "inf (aotgrad 0)"
    return f"{a / b:.3f}"


def print_table(rows: list[dict]) -> None:
    first = rows[0]["level_bytes"] or 1
    head = ["torch budget", "level", "torch MB", "aotgrad MB", "met", "torch GFLOP"]
    head += ["aotgrad GFLOP", "ratio", "FLOP-model ratio", "table cost torch/aotgrad"]
    head += ["torch bw ms", "aotgrad bw ms", "time ratio"]
    body = [
        [
            f"{r['budget']:.1f}",
            f"{r['level_bytes'] / first:.2f}",
            f"{r['level_bytes'] / MB:.3f}",
            f"{r['aotgrad_bytes'] / MB:.3f}",
            "yes" if r["met"] else "NO",
            f"{r['torch_flops'] / 1e9:.4f}",
            f"{r['aotgrad_flops'] / 1e9:.4f}",
            f"{r['flops_ratio']:.3f}",
            f"{r['flop_model_ratio']:.3f}",
            _ratio(r["torch_table_cost"], r["aotgrad_table_cost"]),
            f"{r['torch_bw_s'] * 1e3:.2f}",
            f"{r['aotgrad_bw_s'] * 1e3:.2f}",
            f"{r['time_ratio']:.2f}",
        ]
        for r in rows
    ]
    print(format_table(head, body))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--blocks", type=int, default=16)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--repeats", type=int, default=15, help="backward timings per side")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    torch.manual_seed(0)
    w = bench.transformer(args.blocks, width=args.width, batch=args.batch, seq=args.seq)
    joint = bench.trace_with_aotgrad(w)
    from aotgrad.partition import recompute_costs

    costs = recompute_costs(joint.gm, num_fwd_outputs=joint.num_fwd_outputs)
    rows = []
    for b in BUDGETS:
        row = level_row(b, joint, w, costs, args.repeats)
        rows.append(row)
        print(
            f"budget {b:.1f}: level {row['level_bytes'] / MB:.3f} MB, aotgrad "
            f"{row['aotgrad_bytes'] / MB:.3f} MB, flops x{row['flops_ratio']:.3f} "
            f"(FLOP model x{row['flop_model_ratio']:.3f}), bw time x{row['time_ratio']:.2f}",
            flush=True,
        )
    print_table(rows)
    worse = [r for r in rows if r["flop_model_flops"] > r["torch_flops"] or not r["met"]]
    costlier = [r for r in rows if r["aotgrad_table_cost"] > r["torch_table_cost"] * (1 + 1e-9)]
    print(
        f"levels where aotgrad (FLOP model) spends more backward FLOPs or misses the level: "
        f"{len(worse)}; where the calibrated table prices aotgrad's partition above "
        f"torch's: {len(costlier)}"
    )
    write_json(args.json, {"environment": environment(), "blocks": args.blocks, "rows": rows})
    return 1 if worse or costlier else 0


if __name__ == "__main__":
    sys.exit(main())
