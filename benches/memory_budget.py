"""aotgrad's memory-budget partitioner against torch's ``activation_memory_budget``.

For transformer stacks (``--blocks``, default 4,16,64) and budgets 0.9..0.1:

- aotgrad: ``aotgrad.partition.frontier`` (one Rust pass over every budget) and the
  time of one ``memory_budget_joint`` solve per budget; whether each budget is met
  (activation bytes = saved bytes less saved primal inputs, against min-cut's).
- torch: ``torch._functorch.config.activation_memory_budget = b`` then
  ``torch._functorch.partitioners.min_cut_rematerialization_partition`` on a copy
  of the same joint graph; its activation bytes, and whether it meets the same
  target (``b`` x min-cut's activation bytes, the reference aotgrad's budget uses).
- activation bytes on both sides by one rule (:class:`Storage`, the solver's own):
  the storage the saved tensors hold, each storage once (a saved view holds its
  base), less primal inputs' storage (a saved weight or ``t(weight)`` adds nothing).
- one cost model for both: each side's forward and backward modules are scored the
  same way (:func:`recompute_cost`): the joint graph's forward CALL nodes that both
  modules compute (matched by node name), priced by aotgrad's cost table (bytes
  moved, plus FLOPs from shapes for matmuls/attention). A node only the backward
  computes is not recomputation on either side.
- a real training step (``aotgrad.tools.models.GPT``, CPU, ``aot_module`` with the nop
  compiler and ``memory_budget_partition``) per budget: heap bytes held after the
  forward (glibc ``mallinfo2``, as ``backend_vs_inductor.py``), which should not
  rise as the budget falls, and gradients equal to eager's.

Prints tables; ``--json FILE`` writes everything.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import itertools
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from aotgrad.tools import bench
from aotgrad.tools.report.collect import copy_graph_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_vs_inductor import heap_in_use
from common import format_table, import_aotgrad, value_nbytes, write_json

MB = 1024 * 1024
BUDGETS = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


def recompute_cost(
    fw: fx.GraphModule, bw: fx.GraphModule, costs: np.ndarray, names: dict[str, int]
) -> float:
    """The cost-table price of the joint graph's forward CALL nodes that both ``fw``
    and ``bw`` compute: the same scoring for aotgrad's and torch's partitions."""

    def calls(gm: fx.GraphModule) -> set[str]:
        return {n.name for n in gm.graph.nodes if n.op == "call_function" and n.name in names}

    both = calls(fw) & calls(bw)
    return float(costs[[names[n] for n in sorted(both)]].sum())


#: Ops whose result shares its first argument's storage: the view op table of
#: ``rust/core/src/partition/op_tables.rs`` and ``_unsafe_view`` (with the table's
#: VIEW flag, the rule of ``budget_solve.rs``'s ``storage_roots``).
STORAGE_SHARING = {
    "aten.alias", "aten.as_strided", "aten.expand", "aten.permute", "aten.select",
    "aten.slice", "aten.split", "aten.squeeze", "aten.t", "aten.unsqueeze", "aten.view",
    "prims.broadcast_in_dim", "aten._unsafe_view",
}  # fmt: skip


class Storage:
    """Activation bytes the way aotgrad's budget counts them (``activation_bytes``):
    each saved tensor holds the storage of its view root, each storage counted once,
    primal inputs' storage not counted. One scorer for both sides."""

    def __init__(self, table: Any, nodes: list[fx.Node], rep: np.ndarray) -> None:
        from aotgrad.table import Flag

        self.table, self.rep = table, rep
        self.row = {n.name: i for i, n in enumerate(nodes)}
        names = table.op_names
        packet = [names[table.op[i]].rsplit(".", 1)[0] for i in range(len(table))]
        call = table.kind == 2
        shares = call & (
            ((table.flags & Flag.VIEW) != 0) | np.array([p in STORAGE_SHARING for p in packet])
        )
        symint = (table.flags & Flag.SYMINT) != 0
        self.root = np.arange(len(table))
        for i in range(len(table)):
            a = table.args(i)
            if not a:
                continue
            base = int(rep[a[0]])
            view = shares[i] or (call[i] and packet[i] == "_operator.getitem" and shares[base])
            if view and not symint[i] and not symint[base]:
                self.root[i] = self.root[base]
        self.primal = table.kind == 0

    def held(self, rows: list[int]) -> int:
        roots = {int(self.root[int(self.rep[r])]) for r in rows}
        return int(sum(int(self.table.nbytes[r]) for r in roots if not self.primal[r]))

    def of_forward(self, fw: fx.GraphModule, num_fwd_outputs: int) -> tuple[int, int]:
        """(activation bytes, bytes of saved values not in the joint graph: counted whole)."""
        rows, extra = [], 0
        for o in list(fw.graph.output_node().args[0])[num_fwd_outputs:]:
            if not isinstance(o, fx.Node) or not isinstance(o.meta.get("val"), torch.Tensor):
                continue
            if o.name in self.row:
                rows.append(self.row[o.name])
            elif o.op != "placeholder":
                extra += value_nbytes(o.meta.get("val"))
        return self.held(rows) + extra, extra


def torch_budget(
    joint: Any, budget: float, costs: np.ndarray, names: dict[str, int], storage: Storage
) -> dict:
    """torch's partition under ``activation_memory_budget = budget``: its time,
    activation bytes (:class:`Storage`) and recompute cost (:func:`recompute_cost`)."""
    import torch._functorch.config as fconfig
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    gm = copy_graph_module(joint.gm)
    gc.collect()
    with fconfig.patch(activation_memory_budget=budget):
        t0 = time.perf_counter()
        fw, bw = min_cut_rematerialization_partition(
            gm, joint.joint_inputs, num_fwd_outputs=joint.num_fwd_outputs
        )
        dt = time.perf_counter() - t0
    act, unmatched = storage.of_forward(fw, joint.num_fwd_outputs)
    return {
        "s": dt,
        "activation_bytes": act,
        "unmatched_bytes": unmatched,
        "recompute_cost": recompute_cost(fw, bw, costs, names),
    }


def bench_size(aotgrad: Any, blocks: int, args: argparse.Namespace) -> dict:
    from aotgrad.partition import frontier, memory_budget_joint, recompute_costs
    from aotgrad.roles import is_tangent
    from aotgrad.table import to_table

    joint = bench.trace_with_aotgrad(
        bench.transformer(blocks, width=args.width, batch=args.batch, seq=args.seq)
    )
    nfo = joint.num_fwd_outputs
    gm = joint.gm
    table, nodes = to_table(gm, num_fwd_outputs=nfo)
    names = {}
    costs = recompute_costs(gm, num_fwd_outputs=nfo)
    # Forward CALL rows by name (the names torch's backward keeps for recomputed
    # nodes); tangent-derived nodes are backward work, not recomputation.
    td: set[fx.Node] = set()
    for i, n in enumerate(nodes):
        if n.op == "placeholder":
            if is_tangent(n):
                td.add(n)
        elif any(a in td for a in n.all_input_nodes):
            td.add(n)
        elif n.op == "call_function":
            names[n.name] = i
    t0 = time.perf_counter()
    pts = frontier(gm, num_fwd_outputs=nfo, budgets=BUDGETS)
    frontier_s = time.perf_counter() - t0
    rows = []
    for p in pts:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result, _ = memory_budget_joint(
                gm, num_fwd_outputs=nfo, budget=p.budget, allow_exceed=True
            )
        single_s = time.perf_counter() - t0
        fw, bw = result.split(gm, nfo)
        scored = recompute_cost(fw, bw, costs, names)
        storage = Storage(table, nodes, result.rep)
        # The Python scorer agrees with the solver's own figure.
        assert storage.held(result.saved.tolist()) == p.activation_bytes, (
            storage.held(result.saved.tolist()),
            p.activation_bytes,
        )
        tr = torch_budget(joint, p.budget, costs, names, storage) if not args.no_torch else None
        if tr is not None:
            tr["met"] = tr["activation_bytes"] <= p.target_bytes
        rows.append(
            {
                "budget": p.budget,
                "min_cut_bytes": p.min_cut_bytes,
                "min_bytes": p.min_bytes,
                "target_bytes": p.target_bytes,
                "activation_bytes": p.activation_bytes,
                "met": p.met,
                "achievable": p.min_bytes <= p.target_bytes,
                # scored as torch's is (recompute_cost); the solver's own figure
                # is on the CSE'd graph (a merged duplicate is priced once)
                "recompute_cost": scored,
                "solver_recompute_cost": p.recompute_cost,
                "solve_s": single_s,
                "torch": tr,
            }
        )
    return {"blocks": blocks, "nodes": len(nodes), "frontier_s": frontier_s, "rows": rows}


def saved_storage_bytes(
    compiled: Any, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[int, torch.Tensor]:
    """What autograd holds for the backward of one forward, exactly: the storages
    of the saved tensors, each once, less those of the parameters and inputs."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        storages[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = compiled(x, y)
    mine = {t.untyped_storage().data_ptr() for t in [x, y, *model.parameters()]}
    return sum(nb for ptr, nb in storages.items() if ptr not in mine), loss


def training_step(aotgrad: Any, budgets: list[float], args: argparse.Namespace) -> list[dict]:
    """Held heap bytes after the forward of one GPT training step, per budget."""
    from aotgrad.partition import memory_budget_partition
    from aotgrad.tools.models import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(
        vocab_size=96, block_size=args.gpt_seq, n_layer=args.gpt_layers, n_embd=args.gpt_width
    )
    eager = GPT(cfg)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 96, (args.gpt_batch, args.gpt_seq), generator=g)
    y = torch.randint(0, 96, (args.gpt_batch, args.gpt_seq), generator=g)
    eager.zero_grad(set_to_none=True)
    eager(x, y).backward()
    ref = {n: p.grad.clone() for n, p in eager.named_parameters()}
    out = []
    for b in budgets:
        model = copy.deepcopy(eager)
        model.zero_grad(set_to_none=True)
        pf = functools.partial(memory_budget_partition, budget=b, allow_exceed=True)
        compiled = aotgrad.aot_module(model, aotgrad.nop, partition_fn=pf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(x, y).backward()  # compile (trace + partition), untimed
        model.zero_grad(set_to_none=True)
        held = []
        for _ in range(3):
            gc.collect()
            before = heap_in_use()
            loss = compiled(x, y)
            held.append(heap_in_use() - before)
            model.zero_grad(set_to_none=True)
            loss.backward()
        saved, loss = saved_storage_bytes(compiled, model, x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        err = max((p.grad - ref[n]).abs().max().item() for n, p in model.named_parameters())
        out.append(
            {"budget": b, "held_bytes": min(held), "saved_bytes": saved, "max_grad_err": err}
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--blocks", default="4,16,64", help="comma-separated block counts")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--no-torch", action="store_true", help="skip torch's memory budget")
    p.add_argument("--gpt-layers", type=int, default=2)
    p.add_argument("--gpt-width", type=int, default=128)
    p.add_argument("--gpt-seq", type=int, default=64)
    p.add_argument("--gpt-batch", type=int, default=16)
    p.add_argument("--json", default=None, help="write a JSON report here")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    aotgrad, err = import_aotgrad()
    if aotgrad is None:
        print("aotgrad does not import:\n" + (err or ""))
        return 2

    sizes = [bench_size(aotgrad, int(b), args) for b in args.blocks.split(",") if b]
    headers = [
        "blocks",
        "budget",
        "min/min-cut",
        "aotgrad act MB",
        "met",
        "aotgrad cost",
        "aotgrad ms",
        "torch act MB",
        "torch met",
        "torch cost",
        "torch ms",
    ]
    table = []
    for s in sizes:
        for r in s["rows"]:
            tr = r["torch"]
            table.append(
                [
                    s["blocks"],
                    f"{r['budget']:.1f}",
                    f"{r['min_bytes'] / max(r['min_cut_bytes'], 1):.2f}",
                    f"{r['activation_bytes'] / MB:.3f}",
                    "yes" if r["met"] else ("unmeetable" if not r["achievable"] else "NO"),
                    f"{r['recompute_cost'] / MB:.2f}",
                    f"{r['solve_s'] * 1e3:.1f}",
                    f"{tr['activation_bytes'] / MB:.3f}" if tr else "-",
                    ("yes" if tr["met"] else "no") if tr else "-",
                    f"{tr['recompute_cost'] / MB:.2f}" if tr else "-",
                    f"{tr['s'] * 1e3:.1f}" if tr else "-",
                ]
            )
    print(
        "memory budget (activation bytes = saved less primal inputs; cost in MB moved, "
        "both sides by aotgrad's cost table; torch met = within the same target)"
    )
    print(format_table(headers, table))
    for s in sizes:
        print(
            f"frontier, {s['blocks']} blocks ({s['nodes']} nodes), all budgets in one call: "
            f"{s['frontier_s'] * 1e3:.1f} ms"
        )
    missed = [r for s in sizes for r in s["rows"] if r["achievable"] and not r["met"]]
    unmet = [r for s in sizes for r in s["rows"] if not r["met"]]
    # Unmeetable for aotgrad is acceptable only where torch can't meet it either.
    torch_only = [r for r in unmet if r["torch"] and r["torch"]["met"]]
    costlier = [
        r
        for s in sizes
        for r in s["rows"]
        if r["torch"]
        and r["torch"]["met"]
        and r["recompute_cost"] > r["torch"]["recompute_cost"] * (1 + 1e-9)
    ]
    print(
        f"budgets aotgrad misses: {len(unmet)} ({len(missed)} achievable, "
        f"{len(torch_only)} that torch meets); budgets torch meets where aotgrad "
        f"recomputes more: {len(costlier)}"
    )

    step_budgets = [1.0, *BUDGETS]
    steps = training_step(aotgrad, step_budgets, args)
    print(
        "\nGPT training step (CPU), per budget: heap held after the forward (glibc, "
        "allocator noise included) and the storage autograd holds for the backward"
    )
    print(
        format_table(
            ["budget", "held MB", "saved MB", "max |grad - eager|"],
            [
                [
                    f"{r['budget']:.1f}",
                    f"{r['held_bytes'] / MB:.3f}",
                    f"{r['saved_bytes'] / MB:.3f}",
                    f"{r['max_grad_err']:.1e}",
                ]
                for r in steps
            ],
        )
    )
    held = [r["held_bytes"] for r in steps]
    slack = 64 * 1024  # allocator noise
    monotone = all(b <= a + slack for a, b in itertools.pairwise(held)) and all(
        b["saved_bytes"] <= a["saved_bytes"] for a, b in itertools.pairwise(steps)
    )
    grads_ok = all(r["max_grad_err"] < 1e-4 for r in steps)
    print(
        f"held and saved bytes non-increasing as the budget falls: {monotone}; grads equal eager's: {grads_ok}"
    )
    if args.json:
        write_json(args.json, {"sizes": sizes, "training_step": steps})
    ok = not missed and not torch_only and not costlier and monotone and grads_ok
    return 0 if ok else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
