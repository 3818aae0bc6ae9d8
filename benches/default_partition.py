"""The default (save-everything) partition: aotgrad's against torch's, same joint graph.

Each workload is traced once with aotgrad's tracer (which tags the nodes the forward
traced, as torch's does); ``aotgrad.partition.default_partition`` and
``torch._functorch.partitioners.default_partition`` then split copies of that joint.
Printed per workload: the saved values of each (tensors, activation bytes: the forward
outputs beyond ``num_fwd_outputs``, and the storage they hold less the inputs'), the
ratio aotgrad / torch, and whether both saved the same nodes (aotgrad without CSE,
which torch's default partition does not run: with it, aotgrad saves repeated values once).

    .venv/bin/python benches/default_partition.py [--json out.json]

Goal: ratio 1.00 and the same nodes everywhere (item 4 of issue 20).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aotgrad.tools import bench
from aotgrad.tools.report.collect import copy_graph_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    environment,
    format_table,
    saved_activation_bytes,
    saved_activations,
    saved_storage_bytes,
    write_json,
)


class _ReluSin(nn.Module):
    """The checkpoint test's block: x + down(sin(relu(up(x))))."""

    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)).sin())


def workloads() -> list[bench.Workload]:
    torch.manual_seed(0)
    blocks = nn.Sequential(*(_ReluSin() for _ in range(4)))
    return [
        bench.Workload("relu-sin x4", blocks, [torch.randn(32, 64)]),
        bench.mlp(),
        bench.convnet(),
        bench.transformer(4),
        bench.transformer(16),
    ]


def measure(w: bench.Workload) -> dict[str, Any]:
    from torch._functorch.partitioners import default_partition as torch_default

    import aotgrad

    joint = bench.trace_with_aotgrad(w)
    out: dict[str, Any] = {}
    no_cse = functools.partial(aotgrad.partition.default_partition, cse=False)
    fns = (("aotgrad", aotgrad.partition.default_partition), ("torch", torch_default))
    for name, fn in (*fns, ("aotgrad_no_cse", no_cse)):
        gm = copy_graph_module(joint.gm)
        fw, _ = fn(gm, None, num_fwd_outputs=joint.num_fwd_outputs)
        saved = saved_activations(fw, joint.num_fwd_outputs)
        out[name] = {
            "saved_names": sorted(n.name for n in saved),
            "saved_tensors": sum(isinstance(n.meta.get("val"), torch.Tensor) for n in saved),
            "saved_bytes": saved_activation_bytes(fw, joint.num_fwd_outputs),
            "activation_storage": saved_storage_bytes(fw, joint.num_fwd_outputs)["activations"],
        }
    a, t = out["aotgrad"], out["torch"]
    out["ratio_bytes"] = a["saved_bytes"] / max(1, t["saved_bytes"])
    out["ratio_storage"] = a["activation_storage"] / max(1, t["activation_storage"])
    # torch's default partition merges no common subexpressions; aotgrad's does (a causal
    # mask built once per block is saved once): the same nodes without CSE
    out["same_nodes"] = out["aotgrad_no_cse"]["saved_names"] == t["saved_names"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    results = {w.name: measure(w) for w in workloads()}
    rows = [
        [
            name,
            r["aotgrad"]["saved_tensors"],
            r["torch"]["saved_tensors"],
            r["aotgrad"]["saved_bytes"],
            r["torch"]["saved_bytes"],
            f"{r['ratio_bytes']:.2f}",
            f"{r['ratio_storage']:.2f}",
            "yes" if r["same_nodes"] else "NO",
        ]
        for name, r in results.items()
    ]
    print(
        format_table(
            [
                "workload",
                "aotgrad saved",
                "torch saved",
                "aotgrad bytes",
                "torch bytes",
                "ratio bytes",
                "ratio storage",
                "same nodes (no CSE)",
            ],
            rows,
        )
    )
    write_json(args.json, {"environment": environment(), "results": results})
    return 0 if all(r["same_nodes"] and r["ratio_bytes"] <= 1.0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
