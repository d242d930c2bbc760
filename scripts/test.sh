#!/usr/bin/env bash
# One command for the whole test suite: sets up .venv if needed, then runs pytest.
# Postgres/Redis variants run when SOORMA_TEST_DATABASE_URL / SOORMA_TEST_REDIS_URL are set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
# Cache what every test process would otherwise redo: pytest's assertion-rewritten
# modules (the test files and the pytest plugins it rewrites, schemathesis and hypothesis
# among them: ~7.5 s of CPU per process) and the test helpers' bytecode. Where
# PYTHONDONTWRITEBYTECODE is set (as on CI) nothing is written, and the controller, each
# worker and each pytest a test starts would rewrite all of it again.
unset PYTHONDONTWRITEBYTECODE
# Four pytest-xdist workers on two cores: the suite is mostly CPU-bound (process
# starts, imports), but a worker also waits on services, subprocesses and leases; with
# three the cores were still idle 18-19% of a run, with four 9-13%, and a whole .ci/run
# on fresh clones took 253-266 s against 269-284 s (back to back, docs/testing.md).
# Each test already has its own Redis key prefix, PostgreSQL database and ports (a block
# per worker); a file stays on one worker (--dist loadfile) so module-scoped stacks and
# the browser start once; the few files that open many PostgreSQL connections take
# turns (tests/conftest.py). SOORMA_TEST_WORKERS=0: one process.
workers="${SOORMA_TEST_WORKERS:-4}"
if [ "$workers" != "0" ]; then
    set -- -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
fi
exec .venv/bin/python -m pytest "$@"
