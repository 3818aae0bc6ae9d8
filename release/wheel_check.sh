#!/usr/bin/env bash
# make wheel-check: build the release wheel (abi3, manylinux) and the sdist, install each
# into a fresh venv on other CPythons than CI's, and run release/smoke.py there.
#
#   WHEEL_CHECK_PYTHONS   pyenv versions to check (default "3.10 3.13"; empty: build only)
#   WHEEL_CHECK_DIR       where the venvs live (default target/wheel-check)
#   WHEEL_CHECK_REF       the commit to build (default HEAD): a release is built from a
#                         commit (`git archive`), never from a working tree being edited
#
# torch is large (~3 GB with its CUDA wheels), so each Python gets one venv holding torch
# and numpy, made once and kept (base-X.Y); the venvs that aotgrad is installed into are
# made afresh every run and see that torch through a .pth file, so pip finds aotgrad's
# dependencies met without installing them again. Where no torch of aotgrad's supported
# range exists for a Python (torch 2.15 has no CPython 3.10 wheels), the base gets the
# newest torch that does, aotgrad is installed with --no-deps, and the summary says so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
PYTHONS=${WHEEL_CHECK_PYTHONS-"3.10 3.13"}  # empty: build only (make wheel)
WORK=${WHEEL_CHECK_DIR:-$ROOT/target/wheel-check}
DIST=$ROOT/dist
TORCH_RANGE=$(sed -n 's/^ *"\(torch[^"]*\)",$/\1/p' pyproject.toml)
mkdir -p "$WORK" "$DIST"
summary=()

REF=${WHEEL_CHECK_REF:-HEAD}
SRC=$WORK/src
echo "== build: wheel (abi3, manylinux_2_17 via zig) and sdist of $REF ($(git rev-parse --short "$REF"))"
rm -rf "$SRC" && mkdir -p "$SRC" && git archive "$REF" | tar -x -C "$SRC"
rm -f "$DIST"/aotgrad-*
# Its own target dir: the release build (zig linker) must not race `make build`'s.
(cd "$SRC" && CARGO_TARGET_DIR=$ROOT/target/dist PATH=$ROOT/.venv/bin:$PATH \
    "$ROOT/.venv/bin/maturin" build --release --zig --compatibility manylinux2014 -o "$DIST" 2>&1 |
    grep -v '^ *Compiling ')
(cd "$SRC" && "$ROOT/.venv/bin/maturin" sdist -o "$DIST" 2>&1 | tail -1)
WHEEL=$(ls "$DIST"/aotgrad-*.whl)
SDIST=$(ls "$DIST"/aotgrad-*.tar.gz)
echo "== compliance: auditwheel show $(basename "$WHEEL")"
.venv/bin/auditwheel show "$WHEEL"
echo "== tags"
unzip -p "$WHEEL" '*.dist-info/WHEEL' | grep '^Tag:'

python_of() {  # the newest installed pyenv CPython X.Y
    local v
    v=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".* 2>/dev/null | sort -V | tail -1)
    [ -n "$v" ] || { echo "no pyenv CPython $1 under ${PYENV_ROOT:-$HOME/.pyenv}/versions" >&2; return 1; }
    echo "$v/bin/python"
}

base_venv() {  # $1 = X.Y; echoes the base venv's site-packages; torch made once
    local base=$WORK/base-$1
    if [ ! -f "$base/.torch-ok" ]; then
        rm -rf "$base"
        "$(python_of "$1")" -m venv "$base"
        "$base/bin/python" -m pip install -q --upgrade pip >&2
        echo "   base-$1: installing $TORCH_RANGE (downloads torch once)" >&2
        if "$base/bin/python" -m pip install -q "$TORCH_RANGE" "numpy>=1.26" >&2; then
            echo "supported" > "$base/.torch-ok"
        else
            echo "   base-$1: no $TORCH_RANGE for CPython $1; the newest torch for it instead" >&2
            "$base/bin/python" -m pip install -q torch "numpy>=1.26" >&2
            echo "outside" > "$base/.torch-ok"
        fi
    fi
    "$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

for v in $PYTHONS; do
    base_site=$(base_venv "$v")
    torch_v=$("$WORK/base-$v/bin/python" -c 'import torch; print(torch.__version__)')
    support=$(cat "$WORK/base-$v/.torch-ok")
    deps=()
    [ "$support" = supported ] || deps=(--no-deps)
    for kind in wheel sdist; do
        env=$WORK/$kind-$v
        echo "== CPython $v, $kind, torch $torch_v${deps:+ (outside $TORCH_RANGE, so --no-deps)}"
        rm -rf "$env"
        "$(python_of "$v")" -m venv "$env"
        "$env/bin/python" -m pip install -q --upgrade pip
        site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        echo "$base_site" > "$site/_wheel_check_torch.pth"
        if [ "$kind" = wheel ]; then
            "$env/bin/python" -m pip install -q "${deps[@]}" "$WHEEL"
        else  # built from source here: pip fetches maturin, cargo compiles
            t0=$SECONDS
            "$env/bin/python" -m pip install -q "${deps[@]}" --no-binary aotgrad "$SDIST"
            echo "   sdist built and installed in $((SECONDS - t0)) s"
        fi
        run=$(mktemp -d)
        (cd "$run" && "$env/bin/python" "$ROOT/release/smoke.py" "$run")
        rm -rf "$run"
        summary+=("CPython $v $kind (torch $torch_v${deps:+, --no-deps}): smoke test passed")
    done
done
echo "== wheel-check summary"
echo "   wheel: $(basename "$WHEEL")"
echo "   sdist: $(basename "$SDIST")"
printf '   %s\n' "${summary[@]}"
