"""Release facts: one version (the Rust workspace's) everywhere it is reported, and the
abi3 extension (one wheel for CPython 3.10 to 3.13)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import aotgrad
from aotgrad import _rust

ROOT = Path(__file__).resolve().parent.parent


def workspace_version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    match = re.search(r'^version\s*=\s*"([^"]+)"', section, re.MULTILINE)
    assert match, "no version in [workspace.package]"
    return match.group(1)


def test_version_is_the_workspace_version_everywhere():
    version = workspace_version()
    assert aotgrad.__version__ == _rust.__version__ == version
    out = subprocess.run(
        [sys.executable, "-m", "aotgrad", "--version"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "python"), "PATH": ""},
    )
    assert out.stdout.strip() == f"aotgrad {version}"


def test_changelog_has_the_current_version():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[?{re.escape(workspace_version())}\]?", changelog, re.MULTILINE)


def test_extension_is_built_against_the_stable_abi():
    # `_rust.abi3.so`: the one file every CPython from 3.10 on loads.
    assert Path(_rust.__file__).name.endswith(".abi3.so"), _rust.__file__
