"""``python -m aotgrad`` / ``aotgrad``: the command-line tools.

aotgrad demo     train a small GPT with torch.compile(backend="aotgrad") and eagerly
aotgrad report   an HTML page of a partition: what is saved, what recomputed, and why
aotgrad bench    aotgrad against torch's AOT Autograd on the same joint graphs
aotgrad calibrate  measure this machine's recompute costs for the memory-budget partitioner
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="aotgrad", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"aotgrad {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    from . import bench, calibrate, demo
    from .report import cli as report_cli

    commands = {
        "demo": (demo, "train a small GPT with aotgrad and eagerly, side by side"),
        "report": (report_cli, "write the HTML partition report"),
        "bench": (bench, "aotgrad vs torch: partition time, saved bytes, tracing, overhead"),
        "calibrate": (calibrate, "measure this machine's recompute costs (memory budget)"),
    }
    for name, (module, help_text) in commands.items():
        module.add_arguments(
            sub.add_parser(
                name,
                help=help_text,
                description=module.__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
        )
    args = parser.parse_args(argv)
    return commands[args.command][0].run(args)


if __name__ == "__main__":
    sys.exit(main())
