"""The test command is quiet where nothing happened: the PostgreSQL/Redis variants skipped
for an unset URL are one summary line, not a line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_skipped_variants_are_one_summary_line() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"CI", "SOORMA_TEST_REDIS_URL", "SOORMA_TEST_DATABASE_URL"}
        and not k.startswith("PYTEST_")
    }
    selection = ["tests/sdk/test_bus_live.py", "-k", "domain_errors or resume"]
    # The skip summary is tests/conftest.py's; the plugins this selection does not use
    # (the fuzz tests' hypothesis/schemathesis, anyio) only cost the child seconds to load.
    unused = ["no:xdist", "no:schemathesis", "no:hypothesispytest", "no:anyio"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *(arg for plugin in unused for arg in ("-p", plugin)),
            *selection,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith("SKIPPED [")], done.stdout
    summary = [line for line in lines if line.startswith("SKIPPED ")]
    assert len(summary) == 1, done.stdout
    assert "PostgreSQL/Redis variant(s) (" in summary[0]
    assert "need SOORMA_TEST_REDIS_URL); set these variables to run them" in summary[0]
