#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install every
# package of the monorepo in editable mode. Fast and quiet when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="${SOORMA_VENV:-$ROOT/.venv}"

pick_python() {
    for candidate in python3.11 python3.12 python3.13 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
            echo "$candidate"; return 0
        fi
    done
    echo "error: Python 3.11 or newer is required" >&2; return 1
}

PACKAGES=(common sdk services/servicekit services/event-service services/memory-service
          services/registry-service services/tracker-service services/gateway-a2a)

stamp_input() {
    echo "bytecode warmed by import at install"
    cat requirements-dev.txt
    for p in "${PACKAGES[@]}"; do cat "$p/pyproject.toml"; done
}

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    PYTHON=$(pick_python)
    # No pip in the venv (uv installs; `.venv/bin/uv pip` is there for you): its
    # ensurepip took 3.6 s, and pip installing uv into it 8 s; the interpreter's own pip
    # puts uv in the venv in 4 s. Without a pip of its own, the venv brings one.
    if "$PYTHON" -m pip --version >/dev/null 2>&1; then
        "$PYTHON" -m venv --without-pip "$VENV"
    else
        "$PYTHON" -m venv "$VENV"
    fi
fi

want=$(stamp_input | sha256sum | cut -d' ' -f1)
have=$(cat "$VENV/.soorma-stamp" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
    echo "setup: installing packages into $VENV"
    if [ ! -x "$VENV/bin/uv" ]; then
        if [ -x "$VENV/bin/pip" ]; then
            "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check uv
        else
            "${PYTHON:-$(pick_python)}" -m pip install --quiet --disable-pip-version-check \
                --root-user-action=ignore --prefix "$VENV" uv
        fi
    fi
    args=()
    for p in "${PACKAGES[@]}"; do args+=(-e "./$p"); done
    args+=(-e "./sdk[ai]")
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" \
        "${args[@]}" -r requirements-dev.txt
    # Bytecode for what is imported: every process of the suite and of `soorma dev`
    # imports litellm, FastAPI and pydantic, and where PYTHONDONTWRITEBYTECODE is set (as
    # on CI) nothing would ever be cached (13 s for litellm at each import). Compiling all
    # of site-packages cost ~52 s of CPU; importing what is used, ~20 s, in two processes
    # side by side (scripts/warm_bytecode.py).
    env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" scripts/warm_bytecode.py ai &
    ai=$!
    env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" scripts/warm_bytecode.py platform
    wait "$ai"
    echo "$want" > "$VENV/.soorma-stamp"
fi
# The monorepo's own packages are editable installs: compile them too (quick when current).
"$VENV/bin/python" -m compileall -q -j 0 common sdk services >/dev/null
