#!/usr/bin/env bash
# One command for the whole test suite: sets up .venv if needed, then runs pytest.
# Postgres/Redis variants run when SOORMA_TEST_DATABASE_URL / SOORMA_TEST_REDIS_URL are set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
# The suite mostly waits (on services, subprocesses, leases), so two pytest-xdist workers
# cut its wall time sharply even on two cores. Each test already has its own Redis key
# prefix, PostgreSQL database and free ports; a file stays on one worker (--dist loadfile)
# so module-scoped stacks and the browser start once; the few files that open many
# PostgreSQL connections take turns (tests/conftest.py). SOORMA_TEST_WORKERS=0: one process.
workers="${SOORMA_TEST_WORKERS:-2}"
if [ "$workers" != "0" ]; then
    set -- -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
fi
exec .venv/bin/python -m pytest "$@"
