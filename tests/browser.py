"""Headless Chromium for the report tests: find (or install) it, dump a page's DOM, screenshot it,
and decode the PNG (a small decoder over zlib; 8-bit RGB/RGBA, non-interlaced, as Chromium writes).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np

INSTALL = "apt-get update -q && apt-get install -y -q chromium"
_BINARIES = ("chromium", "chromium-browser", "google-chrome")


def find_or_install() -> tuple[str | None, str]:
    """(path to chromium, why not)."""
    for name in _BINARIES:
        if path := shutil.which(name):
            return path, ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "chromium is not installed and apt-get can't install it here (not root)"
    proc = subprocess.run(INSTALL, shell=True, capture_output=True, text=True, timeout=900)
    for name in _BINARIES:
        if path := shutil.which(name):
            return path, ""
    return None, f"`{INSTALL}` failed: {(proc.stderr or proc.stdout)[-400:]}"


def _run(chromium: str, args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def dump_dom(chromium: str, page: Path) -> str:
    proc = _run(chromium, ["--dump-dom", page.resolve().as_uri()])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def screenshot(chromium: str, page: Path, out: Path, size: tuple[int, int]) -> Path:
    proc = _run(
        chromium,
        [f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()],
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    return out


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> np.ndarray:
    """Undo PNG's per-row filters (0 none, 1 sub, 2 up, 3 average, 4 Paeth)."""
    stride = width * bpp
    out = bytearray(stride * height)
    prev = bytearray(stride)
    for y in range(height):
        base = y * (stride + 1)
        kind, line = raw[base], bytearray(raw[base + 1 : base + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray(
                (np.frombuffer(line, np.uint8) + np.frombuffer(prev, np.uint8))
                .astype(np.uint8)
                .tobytes()
            )
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                if i < bpp:
                    line[i] = (line[i] + prev[i]) & 0xFF
                else:
                    pred = _paeth(line[i - bpp], prev[i], prev[i - bpp])
                    line[i] = (line[i] + pred) & 0xFF
        out[y * stride : (y + 1) * stride] = line
        prev = line
    return np.frombuffer(bytes(out), dtype=np.uint8).reshape(height, width, bpp)


def read_png(path: Path) -> np.ndarray:
    """Pixels as an (height, width, channels) uint8 array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    assert header is not None, "no IHDR chunk"
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    return _unfilter(zlib.decompress(idat), width, height, 3 if color == 2 else 4)


def distinct_colours(pixels: np.ndarray) -> int:
    rgb = pixels[..., :3].reshape(-1, 3).astype(np.uint32)
    return len(np.unique((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]))
