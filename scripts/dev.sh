#!/usr/bin/env bash
# One command for the whole platform: sets up .venv if needed, then runs all five
# services with embedded backends (`soorma dev`). Ctrl-C stops them all.
# Logs are one readable line each; pass --log-format json for JSON lines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/soorma dev "$@"
