"""No function or method in the package is over 60 lines (issue #19).

Counted as the ``def`` statement's span, ``end_lineno - lineno + 1``, docstring
included (decorators not). Longer functions are split into named steps, helpers with
a docstring each, so that each reads on one screen; clippy holds the Rust side to
the same limit (``too-many-lines-threshold`` in clippy.toml).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "aotgrad"
MAX_LINES = 60


def long_functions(root: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    """``file:function (N lines)`` for each function over ``limit`` lines under ``root``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > limit:
                    rel = path.relative_to(root.parent).as_posix()
                    out.append(f"{rel}:{node.name} ({lines} lines)")
    return out


def test_the_walk_sees_the_package():
    files = list(PACKAGE.rglob("*.py"))
    assert len(files) > 10, f"found only {len(files)} .py files under {PACKAGE}"
    assert (PACKAGE / "tools" / "report" / "svg.py") in files  # subpackages included


def test_the_walk_reports_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(
        f"class C:\n    def ok(self):\n        pass\n\n\ndef f():\n{body}\n"
    )
    assert long_functions(tmp_path) == [f"{tmp_path.name}/m.py:f ({MAX_LINES + 1} lines)"]


def test_no_function_is_over_60_lines():
    offenders = long_functions()
    assert not offenders, (
        f"{len(offenders)} function(s) over {MAX_LINES} lines; split each into named steps:\n  "
        + "\n  ".join(offenders)
    )
