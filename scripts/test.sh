#!/usr/bin/env bash
# One command for the whole test suite: sets up .venv if needed, then runs pytest.
# Postgres/Redis variants run when SOORMA_TEST_DATABASE_URL / SOORMA_TEST_REDIS_URL are set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/python -m pytest "$@"
