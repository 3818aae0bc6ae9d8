"""``python -m aotgrad`` / ``aotgrad``: the command-line tools."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aotgrad", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    from . import demo

    demo.add_arguments(sub.add_parser("demo", help="train a small GPT with aotgrad and eagerly"))
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo.run(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
