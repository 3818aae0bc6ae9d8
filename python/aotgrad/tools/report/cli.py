"""``aotgrad report``: render a saved report, or trace a shipped model and report its partition.

aotgrad report --from-json out/report.json [-o out/report.html]
aotgrad report --model transformer --layers 4 [-o out/report.html] [--partitioner default]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MODELS = ("transformer", "mlp", "conv")


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from-json", metavar="FILE", help="render a report's JSON file")
    src.add_argument(
        "--model", choices=MODELS, help="trace a shipped model and report it (default: transformer)"
    )
    p.add_argument("--layers", type=int, default=4, help="blocks of --model transformer")
    p.add_argument("--partitioner", choices=("min_cut", "default"), default="min_cut")
    p.add_argument("--no-torch", action="store_true", help="leave torch's min-cut out")
    p.add_argument(
        "-o",
        "--output",
        metavar="HTML",
        help="the page to write (default: the "
        "JSON's path with .html, or out/report.html); the JSON is written beside it",
    )


def _traced(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .. import bench
    from .collect import collect

    model = args.model or "transformer"
    w = {
        "transformer": lambda: bench.transformer(args.layers),
        "mlp": bench.mlp,
        "conv": bench.convnet,
    }[model]()
    joint = bench.trace_with_aotgrad(w)
    return collect(
        joint.gm,
        num_fwd_outputs=joint.num_fwd_outputs,
        title=w.name,
        kind=args.partitioner,
        compare_torch=not args.no_torch,
    )


def run(args: argparse.Namespace) -> int:
    from .model import Document
    from .record import new_document, write_report

    if args.from_json:
        try:
            doc = Document.load(args.from_json)
        except (OSError, ValueError) as e:
            print(f"aotgrad report: {args.from_json}: {e}", file=sys.stderr)
            return 2
        out = Path(args.output or Path(args.from_json).with_suffix(".html"))
        if out.suffix == ".json":
            print("aotgrad report: --output must not be the .json file", file=sys.stderr)
            return 2
    else:
        doc = new_document([_traced(args)])
        out = Path(args.output or "out/report.html")
    html_file, json_file = write_report(doc, out)
    print(f"report: {html_file} (data: {json_file})")
    return 0
