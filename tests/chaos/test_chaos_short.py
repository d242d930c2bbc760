"""The short chaos run in CI: bench/chaos.py with 100 plans and ~1 minute of SIGKILLs.

Real processes only: a private Redis (AOF on), the event, memory and registry services
(PostgreSQL), two replicas of examples/04's planner and workers and of examples/05's
ChoreographyPlanner and tools, and the scripted model server. A no-fault pass of the
same 100 plans is the expectation; the chaos pass kills a random process every 4-7 s
and restarts it. Asserted: every goal answered exactly once, nothing stuck, nothing
dead-lettered, and tool and model calls per plan as without faults except through the
windows docs/reliability.md documents (the issue's target is "equal"; see that page's
"Chaos run" section for what still repeats).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLANS = 100

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.redis]


@pytest.mark.timeout(600)
def test_short_chaos_run_meets_every_target(postgres_server_url: str) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server must be installed: the chaos run starts its own with AOF")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "chaos.py"),
            "--plans",
            str(PLANS),
            "--duration",
            "60",
            "--kill-every",
            "4,7",
            "--grace",
            "90",
            "--settle",
            "3",
            "--seed",
            "7",
            "--free-ports",
            "--database-url",
            postgres_server_url,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CHAOS_SUMMARY ")]
    assert lines, f"no summary ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    summary = json.loads(lines[-1].removeprefix("CHAOS_SUMMARY "))
    report = proc.stdout[-4000:]
    assert summary["kills"] >= 5, report
    assert summary["goals_answered"] == PLANS, report
    assert summary["duplicate_answers"] == 0, report
    assert summary["plans_stuck"] == 0, report
    assert summary["dlq_events"] == 0, report
    # Calls: never fewer than without faults. More only through the windows
    # docs/reliability.md lists as "may still run twice" - a model call whose step was
    # not recorded yet (a planner or the memory service killed), a tool or worker body
    # whose answer could not be recorded or acked (a tool/worker replica, the memory or
    # the event service killed). The full run prints how many plans that touched.
    kills = summary["kills_by_process"]

    def killed(*names: str) -> bool:
        return any(k.startswith(names) for k in kills)

    assert summary["llm_calls_per_plan"] >= summary["llm_calls_per_plan_no_fault"], report
    assert summary["tool_calls_per_plan"] >= summary["tool_calls_per_plan_no_fault"], report
    if summary["llm_calls_per_plan"] > summary["llm_calls_per_plan_no_fault"]:
        assert killed("ch-planner", "memory", "event"), report
    if summary["tool_calls_per_plan"] > summary["tool_calls_per_plan_no_fault"]:
        assert killed("ch-tools", "sm-workers", "memory", "event"), report
    assert summary["plans_with_other_calls"] <= summary["kills"], report
