"""Compile the modules the platform and its tests load, by importing them once.

``scripts/setup.sh`` runs this after an install instead of compiling all of
site-packages: litellm, openai, pip, mypy and numpy ship ~12,000 modules, of which the
platform and the suite import about 3,800, and compiling everything cost ~52 s of CPU
(33 s on two cores) against ~20 s for what is imported. Run with
``PYTHONDONTWRITEBYTECODE`` unset, so the imports leave their bytecode behind. A module
missed here is compiled on its first import and cached then (``scripts/test.sh`` lets
the tests write bytecode); nothing depends on this list being complete.

Usage: ``python scripts/warm_bytecode.py GROUP`` with GROUP ``ai`` (litellm, the largest
single import, on its own so that setup.sh can run the two groups side by side) or
``platform`` (the SDK, the services and the test tools).
"""

from __future__ import annotations

import importlib
import os
import sys

GROUPS = {
    "ai": ("litellm",),
    "platform": (
        "soorma",
        "soorma.cli",
        "soorma.ai",
        "soorma.testing",
        "uvicorn",
        "uvicorn.loops.uvloop",
        "uvicorn.protocols.http.httptools_impl",
        "event_service.app",
        "memory_service.app",
        "registry_service.app",
        "tracker_service.app",
        "gateway_a2a.app",
        "sqlalchemy.dialects.postgresql.asyncpg",
        "sqlalchemy.dialects.sqlite.aiosqlite",
        "alembic.command",
        "redis.asyncio",
        "pytest",
        "xdist",
        "hypothesis",
        "schemathesis",
        "selenium.webdriver",
    ),
}


def main(group: str) -> int:
    if group not in GROUPS:
        print(f"warm_bytecode: unknown group {group!r} (one of {', '.join(GROUPS)})")
        return 2
    # litellm fetches its model cost map from the network at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in GROUPS[group]:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an optional package left out: compiled when first used
            print(f"warm_bytecode: {name} not imported ({type(exc).__name__}: {exc})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
