"""Suite-wide fixtures: real PostgreSQL and Redis when their URLs are set.

Without ``SOORMA_TEST_DATABASE_URL`` / ``SOORMA_TEST_REDIS_URL`` the Postgres and Redis
variants skip locally; in CI (``CI=true``) they fail instead, so CI never silently skips.
"""

from __future__ import annotations

import gc
import inspect
import os
import sys
import types
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from testsupport import migration_templates

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# New SQLite databases get their service's schema as its migrations made it the first
# time in this process, not by running them again (testsupport/migration_templates.py).
migration_templates.install()
RUN_ID = uuid.uuid4().hex[:10]

# Files whose services open many PostgreSQL connections at once (two memory replicas with
# 100 racing writes, the chaos stack). Under pytest-xdist (scripts/test.sh) their
# PostgreSQL tests take one lock shared by the run's workers, so two of them never run
# side by side and exhaust the server's max_connections (100).
POSTGRES_HEAVY = {
    "tests/chaos/test_chaos_short.py",
    "tests/memory_service/test_memory_fan_in.py",
    "tests/scaleout/test_scaleout_memory_replicas.py",
    "tests/worker/test_worker_fan_in.py",
}


# The longest files, started first under pytest-xdist (with --no-loadscope-reorder the
# workers take files in collection order): left to the end, the chaos run alone kept one
# worker busy for a minute and a half while the other had nothing left but to wait.
LONGEST_FIRST = ("tests/chaos/", "tests/crash/", "tests/tracker_ui/")


@pytest.hookimpl(tryfirst=True)  # marks the system tier before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    _mark_system_tier(items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Take what collection imported out of the collector's sight, and collect less often.

    After collection a worker holds over half a million objects (SDK, services, litellm,
    test modules) that live as long as it does, and every full collection walked them
    again. Frozen, and with the youngest generation collected every 20,000 allocations
    instead of 700, the memory-service files spent 1.5 s of their CPU in the collector
    instead of 3.6 s (gc callbacks, one process; docs/testing.md). Garbage still goes.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)


# The system tier: tests that serve an app under real uvicorn (a port, a socket, SSE) or
# start another process. They are marked here, by what the test and its fixtures call,
# so no module has to remember to: ``pytest -m "not system"`` runs the fast tier.
_SUBPROCESS_CALLS = frozenset(
    {"Popen", "check_call", "check_output", "create_subprocess_exec", "create_subprocess_shell"}
)
_SUBPROCESS_MODULES = frozenset({"subprocess", "multiprocessing"})
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def _system_starters() -> set[object]:
    import uvicorn

    from testsupport.server import LiveServer, serve

    return {LiveServer, serve, uvicorn, uvicorn.Server, uvicorn.run}


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _in_tests(obj: object) -> bool:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = getattr(module, "__file__", None) or ""
    return os.path.abspath(path).startswith(_TESTS_DIR)


def _starts_system(obj: object, starters: set[object], seen: dict[int, bool]) -> bool:
    """Whether calling ``obj`` (a test, a fixture, a helper of the test tree) serves an
    app under uvicorn or starts a process, directly or through helpers of the test tree."""
    obj = inspect.unwrap(obj)  # through @asynccontextmanager and the like
    key = id(obj)
    if key in seen:
        return seen[key]
    seen[key] = False  # a cycle adds nothing
    found = False
    if isinstance(obj, type):
        found = any(
            _starts_system(member, starters, seen)
            for member in vars(obj).values()
            if inspect.isfunction(member)
        )
    elif inspect.isfunction(obj):
        names: set[str] = set()
        for code in _code_objects(obj.__code__):
            names.update(code.co_names)
        scope = obj.__globals__
        for name in names:
            value = scope.get(name)
            if value is None:
                continue
            if inspect.ismodule(value):
                if value.__name__ in _SUBPROCESS_MODULES or value in starters:
                    found = True
                elif value.__name__ == "asyncio" and names & _SUBPROCESS_CALLS:
                    found = True
            elif any(value is starter for starter in starters):
                found = True
            elif (inspect.isfunction(value) or isinstance(value, type)) and _in_tests(value):
                found = _starts_system(value, starters, seen)
            if found:
                break
    seen[key] = found
    return found


def _mark_system_tier(items: list[pytest.Item]) -> None:
    starters = _system_starters()
    seen: dict[int, bool] = {}
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("system"):
            continue
        calls: list[object] = [getattr(item.obj, "__func__", item.obj)]
        for defs in item._fixtureinfo.name2fixturedefs.values():
            calls.extend(getattr(d.func, "__func__", d.func) for d in defs)
        if any(_starts_system(call, starters, seen) for call in calls):
            item.add_marker(pytest.mark.system)


@pytest.fixture(autouse=True)
def _one_postgres_heavy_test_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    heavy = request.node.nodeid.split("::")[0] in POSTGRES_HEAVY
    if run is None or not heavy or request.node.get_closest_marker("postgres") is None:
        yield
        return
    import fcntl
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"soorma-tests-{run}-postgres-heavy.lock")
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# The reason a PostgreSQL/Redis variant skips with when its server is not configured.
VARIANT_SKIP = " not set"
VARIANT_VARIABLES = ("SOORMA_TEST_DATABASE_URL", "SOORMA_TEST_REDIS_URL")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips, short: the variants skipped for an unset backend URL in one line, any
    other skip on its own line (pytest's ``-rs`` would list each variant)."""
    variants: dict[str, int] = {}
    others: dict[tuple[str, str], int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        if not isinstance(report.longrepr, tuple):
            continue
        path, lineno, reason = report.longrepr
        reason = reason.removeprefix("Skipped: ")
        variable = reason.removesuffix(VARIANT_SKIP)
        if reason.endswith(VARIANT_SKIP) and variable in VARIANT_VARIABLES:
            variants[variable] = variants.get(variable, 0) + 1
        else:
            key = (f"{path}:{lineno + 1}", reason)
            others[key] = others.get(key, 0) + 1
    if variants:
        counts = ", ".join(f"{count} need {name}" for name, count in sorted(variants.items()))
        terminalreporter.write_line(
            f"SKIPPED {sum(variants.values())} PostgreSQL/Redis variant(s) ({counts}); "
            "set these variables to run them"
        )
    for (where, reason), count in sorted(others.items()):
        terminalreporter.write_line(f"SKIPPED [{count}] {where}: {reason}")


def _require(var: str) -> str:
    value = os.environ.get(var)
    if value:
        return value
    if IN_CI:
        pytest.fail(f"{var} must be set in CI; the Postgres/Redis variants may not skip")
    pytest.skip(f"{var}{VARIANT_SKIP}")


@pytest.fixture(scope="session")
def redis_base_url() -> str:
    return _require("SOORMA_TEST_REDIS_URL")


@pytest.fixture
def redis_url(redis_base_url: str) -> str:
    """Redis URL for one test (use together with :func:`redis_prefix`)."""
    return redis_base_url


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix no other test or run shares; keys under it are deleted afterwards."""
    prefix = f"soorma-test-{RUN_ID}-{uuid.uuid4().hex[:8]}"
    yield prefix
    url = os.environ.get("SOORMA_TEST_REDIS_URL")
    if url:
        import redis

        client = redis.Redis.from_url(url)
        try:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    return _require("SOORMA_TEST_DATABASE_URL")


@pytest.fixture(scope="session")
def postgres_test_database(postgres_server_url: str) -> Iterator[str]:
    """This test process's own database on the PostgreSQL server (admin URL), dropped at
    the end; :func:`postgres_url` gives each test a schema of its own in it."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy.engine import make_url

    from testsupport.postgres import admin

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"soorma_t_{RUN_ID}_{worker}"
    # In a thread: a module-scoped async fixture may ask for this one from its loop.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, admin(postgres_server_url, f'CREATE DATABASE "{name}"')).result()
    try:
        yield make_url(postgres_server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        drop = admin(postgres_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        with ThreadPoolExecutor(1) as thread:
            thread.submit(asyncio.run, drop).result()


@pytest_asyncio.fixture
async def postgres_url(postgres_test_database: str) -> AsyncIterator[str]:
    """URL of a fresh, empty PostgreSQL schema: everything the test's connections see.

    Each test connects as a role of its own (a superuser, like the server's admin user)
    whose search path is only its own schema, in a database this test process shares
    with its other tests (``testsupport.postgres``). Afterwards the role's connections
    are ended and everything it owns is dropped with it.
    """
    from testsupport.postgres import create_schema, drop_schema

    role, url = await create_schema(postgres_test_database)
    yield url
    await drop_schema(postgres_test_database, role)


@pytest.fixture(scope="session")
def pgvector_server_url() -> Iterator[str]:
    """A PostgreSQL with pgvector for this test process, never skipped (see
    ``testsupport.pgvector``); ``{database}`` in the URL is left to fill."""
    from testsupport.pgvector import pgvector_server

    with pgvector_server() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    return f"sqlite+aiosqlite:///{tmp_path}/test.db"
