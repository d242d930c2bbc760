"""The short chaos run in CI: bench/chaos.py with 100 plans and ~30 s of SIGKILLs.

Real processes only: a private Redis (AOF on), the event, memory and registry services
(PostgreSQL), two replicas of examples/04's planner and workers and of examples/05's
ChoreographyPlanner and tools, and the scripted model server. A no-fault pass of the
same 100 plans is the expectation; the chaos pass kills a random process every 2-4 s
and restarts it (about ten kills, as many as the earlier 60 s at 4-7 s: seed 7 picks the
same processes in the same order, only closer together). Asserted: every goal answered
exactly once, nothing stuck, nothing dead-lettered, no request executed twice, tool
calls per plan EQUAL to the no-fault pass once the runs cut short by a SIGKILL of their
own process are set apart (they never finished; the bench tells them by process id),
and billed model calls EQUAL to the no-fault pass: a memory outage after the model
answered does not ask again (the decision waits in the planner process), and a
ChoreographyPlanner replica killed with its model call in flight asks again with the
same Idempotency-Key, which the scripted model, like a gateway that honours the key,
bills once (docs/reliability.md, "Chaos run").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from soorma import AgentOptions

# The chaos planners run with the default options.
PLANNER_CONCURRENCY = AgentOptions().max_concurrency

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
            "30",
            "--kill-every",
            "2,4",
            "--grace",
            "90",
            "--settle",
            "3",
            "--seed",
            "7",
            "--free-ports",
            "--fork",
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
    # Tools and workers: exactly the no-fault requests, none run again after another
    # process ran it. The one run that may repeat is a body whose own process was
    # SIGKILLed while it ran (before its answer was recorded): the bench counts those
    # apart, by pid, and a body keying its effect by the request id does it once.
    assert summary["repeated_executions"] == {}, report
    assert summary["tool_calls_per_plan"] == summary["tool_calls_per_plan_no_fault"], report
    cut = sum(summary["rerun_after_own_kill"].values())
    assert summary["tool_runs_per_plan"] * PLANS == pytest.approx(
        summary["tool_calls_per_plan"] * PLANS + cut
    ), report
    # Billed model calls: exactly the no-fault ones. A planner replica killed with model
    # calls in flight re-sends them (at most its max_concurrency per kill) under the same
    # Idempotency-Key: more raw requests, no more billed calls.
    assert summary["llm_calls_per_plan"] == summary["llm_calls_per_plan_no_fault"], report
    assert summary["llm_requests_per_plan"] >= summary["llm_calls_per_plan"], report
    kills = summary["kills_by_process"]
    planner_kills = sum(n for name, n in kills.items() if name.startswith("ch-planner"))
    assert summary["plans_with_repeated_llm_requests"] <= planner_kills * PLANNER_CONCURRENCY, (
        report
    )
    assert summary["plans_with_other_calls"] == 0, report
