"""Chaos run (issue 9 item 3): plans under SIGKILL, with every effect counted.

Usage: .venv/bin/python bench/chaos.py [--plans 1000] [--duration 300] [--seed 1]
                                        [--no-faults] [--kill-every 2,5]

Runs, all as real processes on loopback: a private Redis with AOF on (``--redis-port``,
default 9790), the event service (Redis Streams), the memory service and the registry
(PostgreSQL, fresh databases), a scripted OpenAI-compatible model server (in this
process), and two replicas of every agent, each with its own stable
``SOORMA_CONSUMER_ID``:

* examples/04's research state machine: its planner and its answering agents
  (searcher, analyzer, user stand-in) - ``bench/chaos/agent.py sm-planner|sm-workers``;
* examples/05's ChoreographyPlanner (model ``openai/chaos-scripted`` at the scripted
  server's ``api_base``) and its three tools - ``ch-planner|ch-tools``.

Half the plans are of each kind (the state-machine ones spread over its branches:
found, flaky, obscure, broken). First a **no-fault pass** sends the same plans (same
kinds and branches) and records, per plan, how many times each worker/tool body ran and
how many model calls it took. Then the **chaos pass** sends the plans paced over
``--duration`` seconds while every 2-5 s (``--kill-every``) one random process - event,
memory or registry service, a planner replica, a worker or tool replica - is SIGKILLed
and restarted at once (same port, same consumer id). After ``--duration`` the kills stop
and plans get ``--grace`` seconds to finish.

Printed: goals answered, duplicate answers (goals answered by more than one distinct
event), tool and LLM calls per plan against the no-fault pass (and the plans whose
counts differ), repeated executions of one request, plans stuck, events in any DLQ,
the slowest plan; and a last line ``CHAOS_SUMMARY {json}`` for tests.

LLM calls are *billed* calls: the scripted server honours ``Idempotency-Key`` like a
gateway that bills a repeated key once, and answers a repeated key from the stored
response (``llm_calls_per_plan``, ``llm_calls_per_plan_no_fault``). Every HTTP request
that reached it, repeated keys included, is reported apart (``llm_requests_per_plan``,
``llm_requests_per_plan_no_fault``, ``plans_with_repeated_llm_requests``). ``--seed`` fixes
the plans and the kill schedule (which process, after how long); when a kill lands
relative to the plans' progress still depends on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from harness import create_database, drop_database, free_port

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "bench" / "chaos" / "agent.py"
sys.path.insert(0, str(ROOT / "bench" / "chaos"))
sys.path.insert(0, str(ROOT / "tests"))

from llm_server import ScriptedModel  # noqa: E402

from testsupport import forkserver  # noqa: E402

SM_BRANCHES = ("owls", "flaky", "obscure", "broken")
# Calls a no-fault plan makes, by branch: search (+retry) and analyze, the user stand-in.
AGENT_KINDS = ("sm-planner", "sm-workers", "ch-planner", "ch-tools")
TOPICS = (
    "action-requests",
    "action-results",
    "system-events",
    "plan-events",
    "task-events",
    "notification-events",
    "business-facts",
)
REGISTERED = {
    "research-planner",
    "web-searcher",
    "content-analyzer",
    "user-stand-in",
    "doc-research-planner",
    "doc-fetcher",
    "doc-analyzer",
    "doc-reporter",
}
GOALS = {
    "sm": ("research.goal", "research.done"),
    "ch": ("doc.research.requested", "doc.research.completed"),
}


class Proc:
    """A process the run can SIGKILL and start again with the same command and env."""

    def __init__(
        self,
        name: str,
        cmd: list[str],
        env: dict[str, str],
        logs: Path,
        ready_url: str | None = None,
        fork: bool = False,
    ) -> None:
        self.name, self.cmd, self.env, self.ready_url = name, cmd, env, ready_url
        # Forked from a server that has imported the libraries (--fork): the same
        # processes, without seconds of imports at every start.
        self.fork = fork
        self.log = logs / f"{name}.log"
        self.proc: subprocess.Popen[str] | forkserver.ForkedPopen | None = None
        self.ready = threading.Event()
        # Set when the current process ended before it was ready (a port taken, say).
        self.exited = threading.Event()
        # A watcher of a killed process must not mark its successor as exited.
        self._current = threading.Lock()
        self.starts = 0

    def start(self) -> None:
        with self._current:
            self._start()

    def _start(self) -> None:
        self.ready.clear()
        self.exited.clear()
        self.starts += 1
        log = self.log.open("a")
        log.write(f"--- start {self.starts} at {time.strftime('%H:%M:%S')}\n")
        log.flush()
        env = {**os.environ, **self.env}
        if self.fork and forkserver.supported(self.cmd, env):
            self.proc = forkserver.ForkedPopen(
                self.cmd,
                env=env,
                cwd=str(ROOT),
                stdout=log.fileno() if self.ready_url else None,
                stderr=log.fileno(),
                preload=forkserver.PRELOAD_AI,
            )
        else:
            self.proc = subprocess.Popen(
                self.cmd,
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE if not self.ready_url else log,
                stderr=log,
                text=True,
            )
        threading.Thread(target=self._watch, args=(self.proc, log), daemon=True).start()

    def _watch(self, proc: subprocess.Popen[str] | forkserver.ForkedPopen, log: Any) -> None:
        # The process has its own copy of the log's descriptor: this one is the watcher's.
        with log:
            self._follow(proc, log)

    def _follow(self, proc: subprocess.Popen[str] | forkserver.ForkedPopen, log: Any) -> None:
        if self.ready_url:
            while proc.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(self.ready_url, timeout=2).status_code == 200:
                        self.ready.set()
                        return
                time.sleep(0.1)
        else:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip() == "ready":
                    self.ready.set()
                log.write(line)
        with self._current:
            if proc is self.proc and not self.ready.is_set():
                self.exited.set()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    async def wait_ready(self, within: float = 120) -> None:
        """Wait until the process is ready; fail at once if it exits first. The error
        carries the end of its log (the run deletes its logs unless ``--keep-logs``)."""

        def wait() -> str | None:
            deadline = time.monotonic() + within
            while not self.ready.wait(0.1):
                if self.exited.is_set():
                    return "exited before it was ready"
                if time.monotonic() >= deadline:
                    return f"did not become ready in {within:.0f} s"
            return None

        failure = await asyncio.get_running_loop().run_in_executor(None, wait)
        if failure is not None:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{self.name} {failure}; the end of {self.log}:\n{tail}")


@dataclass
class Goal:
    index: int
    phase: str
    kind: str  # "sm" | "ch"
    topic: str
    branch: str
    event_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    sent_at: float = 0.0
    answers: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return bool(self.answers)

    @property
    def latency(self) -> float:
        return min(t for t, _ in self.answers.values()) - self.sent_at

    @property
    def plan_id(self) -> str | None:
        for _, data in self.answers.values():
            return str(data.get("plan_id"))
        return None


def make_goals(phase: str, plans: int, seed: int) -> list[Goal]:
    """The same kinds and branches for a given seed; topics carry the phase."""
    rng = random.Random(seed)
    goals = []
    for i in range(plans):
        if i % 2 == 0:
            branch = rng.choice(SM_BRANCHES)
            topic = f"{phase}{i}-owls" if branch == "owls" else branch
            goals.append(Goal(i, phase, "sm", topic, branch))
        else:
            goals.append(Goal(i, phase, "ch", f"{phase}{i} event-driven choreography", "ch"))
    return goals


class Stack:
    """Redis (AOF), PostgreSQL databases, the three services, the model and the agents."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="soorma-chaos-"))
        self.logs = self.tmp / "logs"
        self.logs.mkdir()
        ports = (
            [free_port() for _ in range(4)]
            if args.free_ports
            else [args.port_base + i for i in range(4)]
        )
        self.redis_port = free_port() if args.free_ports else args.redis_port
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.key = f"chaos:{uuid.uuid4().hex[:8]}"
        self.urls = {
            name: f"http://127.0.0.1:{port}"
            for name, port in zip(("event", "memory", "registry"), ports[:3], strict=True)
        }
        self.model = ScriptedModel(ports[3], log=self.logs / "llm-calls.tsv")
        self.redis: subprocess.Popen[bytes] | None = None
        self.db_urls: list[str] = []
        self.services: dict[str, Proc] = {}
        self.agents: dict[str, Proc] = {}

    async def start(self) -> None:
        self.redis = subprocess.Popen(  # noqa: ASYNC220 - started once, returns at once
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--dir",
                str(self.tmp),
                "--save",
                "",
            ],
            stdout=(self.logs / "redis.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        self.model.start()
        memory_db, registry_db = (
            await create_database(self.args.database_url, "soorma_chaos"),
            await create_database(self.args.database_url, "soorma_chaos"),
        )
        self.db_urls = [memory_db, registry_db]
        for _ in range(100):
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.redis_port), 0.2),
            ):
                break
            await asyncio.sleep(0.1)
        specs = {
            "event": (
                "event_service.app:create_app",
                {
                    "SOORMA_EVENT_BACKEND": "redis",
                    "SOORMA_REDIS_URL": self.redis_url,
                    "SOORMA_REDIS_PREFIX": "chaos",
                },
            ),
            "memory": (
                "memory_service.app:create_app",
                {"SOORMA_MEMORY_DATABASE_URL": memory_db, "SOORMA_DATA_DIR": str(self.tmp)},
            ),
            "registry": (
                "registry_service.app:create_app",
                {"SOORMA_REGISTRY_DATABASE_URL": registry_db, "SOORMA_DATA_DIR": str(self.tmp)},
            ),
        }
        for name, (factory, env) in specs.items():
            port = self.urls[name].rsplit(":", 1)[1]
            cmd = [
                sys.executable,
                "-m",
                "uvicorn",
                "--factory",
                factory,
                "--host",
                "127.0.0.1",
                "--port",
                port,
                "--log-level",
                "warning",
                "--no-access-log",
            ]
            self.services[name] = Proc(
                name,
                cmd,
                env,
                self.logs,
                ready_url=f"{self.urls[name]}/ready",
                fork=self.args.fork,
            )
            self.services[name].start()
        await asyncio.gather(*(s.wait_ready() for s in self.services.values()))
        agent_env = {
            "SOORMA_EVENT_SERVICE_URL": self.urls["event"],
            "SOORMA_MEMORY_URL": self.urls["memory"],
            "SOORMA_REGISTRY_URL": self.urls["registry"],
            "CHAOS_REDIS_URL": self.redis_url,
            "CHAOS_KEY": self.key,
            "CHAOS_LLM_BASE": self.model.api_base,
            "OPENAI_API_KEY": "chaos-scripted",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        # Tools first: a ChoreographyPlanner only offers events some live agent consumes.
        for kind in ("ch-tools", "sm-workers", "sm-planner", "ch-planner"):
            for replica in (1, 2):
                name = f"{kind}-{replica}"
                env = {**agent_env, "SOORMA_CONSUMER_ID": f"chaos-{name}"}
                self.agents[name] = Proc(
                    name, [sys.executable, str(AGENT), kind], env, self.logs, fork=self.args.fork
                )
                self.agents[name].start()
        await asyncio.gather(*(a.wait_ready(180) for a in self.agents.values()))
        await self.wait_registered()

    async def wait_registered(self, within: float = 120) -> None:
        """Until the registry lists every agent (a planner offers only live consumers)."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(base_url=self.urls["registry"], timeout=10) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    listed = {a["name"] for a in (await client.get("/v1/agents")).json()}
                    if REGISTERED <= listed:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError("agents missing from the registry")
                await asyncio.sleep(0.5)

    @property
    def targets(self) -> dict[str, Proc]:
        return {**self.services, **self.agents}

    async def stop(self) -> None:
        for proc in self.targets.values():
            proc.stop()
        self.model.stop()
        if self.redis is not None:
            self.redis.terminate()
            self.redis.wait(10)
        for db in self.db_urls:
            with contextlib.suppress(Exception):
                await drop_database(self.args.database_url, db)
        if not self.args.keep_logs:
            shutil.rmtree(self.tmp, ignore_errors=True)


class Driver:
    """Sends goals, collects answers (a durable group in this process), kills processes."""

    def __init__(self, stack: Stack, args: argparse.Namespace) -> None:
        self.stack, self.args = stack, args
        self.goals: dict[str, Goal] = {}  # by goal event id (= its correlation id)
        self.kills: list[tuple[float, str]] = []
        self.killed_pids: set[int] = set()
        self.context: Any = None
        self.collector: Any = None

    async def start(self) -> None:
        from soorma import Agent, AgentOptions, PlatformContext, PlatformSettings

        settings = PlatformSettings(
            event_service_url=self.stack.urls["event"],
            memory_url=self.stack.urls["memory"],
            registry_url=self.stack.urls["registry"],
        )
        self.context = PlatformContext.from_env(settings=settings)
        collector = Agent(
            name="chaos-collector",
            context=self.context,
            options=AgentOptions(consumer_id="chaos-collector-1", max_concurrency=64),
        )

        @collector.on_event(topic="action-results", event_type="research.done")
        @collector.on_event(topic="action-results", event_type="doc.research.completed")
        async def answer(event: Any, context: Any) -> None:
            goal = self.goals.get(event.correlation_id or "")
            if goal is not None and event.id not in goal.answers:
                goal.answers[event.id] = (time.monotonic(), dict(event.data or {}))

        self.collector = collector
        await collector.start()

    async def stop(self) -> None:
        if self.collector is not None:
            await self.collector.stop()

    async def send(self, goal: Goal) -> None:
        event_type, response = GOALS[goal.kind]
        self.goals[goal.event_id] = goal
        goal.sent_at = time.monotonic()
        deadline = time.monotonic() + 120
        while True:  # the event service may be down right now: retry with the same id
            try:
                await self.context.bus.request(
                    event_type, {"topic": goal.topic}, response, event_id=goal.event_id
                )
                return
            except Exception:  # any failure: try again until the deadline
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def run_phase(
        self, goals: list[Goal], *, pace: float, patience: float, faults: bool
    ) -> None:
        killer = asyncio.create_task(self.kill_loop(pace * len(goals))) if faults else None
        inflight = asyncio.Semaphore(self.args.inflight)

        async def one(goal: Goal) -> None:
            async with inflight:
                await self.send(goal)
                # Polled: answers land in a dict from the collector's handler.
                while not goal.answered and time.monotonic() - goal.sent_at < patience:  # noqa: ASYNC110
                    await asyncio.sleep(0.2)

        start = time.monotonic()
        tasks = []
        for i, goal in enumerate(goals):
            await asyncio.sleep(max(0.0, start + i * pace - time.monotonic()))
            tasks.append(asyncio.create_task(one(goal)))
        if killer is not None:
            await killer
        await asyncio.gather(*tasks)
        await asyncio.sleep(self.args.settle)  # late duplicates would arrive now

    async def kill_loop(self, duration: float) -> None:
        rng = random.Random(self.args.seed * 7919 + 1)
        low, high = self.args.kill_every
        end = time.monotonic() + duration
        names = sorted(self.stack.targets)
        while True:
            delay, name = rng.uniform(low, high), rng.choice(names)
            if time.monotonic() + delay > end:
                return
            await asyncio.sleep(delay)
            proc = self.stack.targets[name]
            if proc.proc is not None:
                self.killed_pids.add(proc.proc.pid)
            # A process still starting from its last kill is killed again: that is a crash too.
            await asyncio.get_running_loop().run_in_executor(None, proc.kill)
            self.kills.append((time.monotonic(), name))
            print(f"  kill {len(self.kills):3d}: {name}", flush=True)
            proc.start()


async def dlq_count(url: str) -> dict[str, int]:
    counts = {}
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for topic in TOPICS:
            response = await client.get("/v1/events/dlq", params={"topic": topic, "limit": 1000})
            response.raise_for_status()
            dead = response.json()["events"]
            counts[topic] = len(dead)
            for letter in dead[:10]:  # why each died: the run's logs have the rest
                event = letter["event"]
                print(
                    f"  dead letter on {topic}: {event['type']} {event['id']} "
                    f"(group {letter.get('group')}, {letter['deliveries']} deliveries, "
                    f"dead at {letter['dead_at']}): {letter['reason']}"
                )
    return counts


async def plan_counts(stack: Stack, killed_pids: set[int]) -> dict[str, Counter[str]]:
    import redis.asyncio as aioredis

    client = aioredis.from_url(stack.redis_url, decode_responses=True)
    try:
        by_plan: dict[str, Counter[str]] = defaultdict(Counter)
        for fld, value in (await client.hgetall(f"{stack.key}:plan")).items():
            plan_id, _, agent = fld.rpartition("|")
            by_plan[plan_id][f"runs:{agent}"] += int(value)
        # Distinct requests per plan: what a body that keys its effect by the request id
        # (docs/reliability.md) does, however often it ran.
        for fld, plan_id in (await client.hgetall(f"{stack.key}:req")).items():
            by_plan[plan_id][f"requests:{fld.split('|', 1)[0]}"] += 1
        repeats, cut = Counter(), Counter()
        for fld, value in (await client.hgetall(f"{stack.key}:exec")).items():
            if int(value) > 1:
                agent = fld.split("|", 1)[0]
                # Which processes ran it: a run whose process was SIGKILLed before
                # recording its answer is cut short, not repeated (see below).
                pids = [int(p) for p in await client.lrange(f"{stack.key}:pids:{fld}", 0, -1)]
                if all(pid in killed_pids for pid in pids[:-1]):
                    cut[agent] += int(value) - 1
                else:
                    repeats[agent] += int(value) - 1
        by_plan["__repeats__"] = repeats
        by_plan["__cut__"] = cut
        return by_plan
    finally:
        await client.aclose()


async def print_consumers(stack: Stack) -> None:
    """``XINFO GROUPS`` / ``XINFO CONSUMERS`` of every topic: who holds what, idle since
    when (a second session with one consumer id shows as deliveries nobody handles)."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(stack.redis_url, decode_responses=True)
    try:
        async for key in client.scan_iter(match="chaos:*:t:*", count=1000):
            if await client.type(key) != "stream":
                continue
            for group in await client.xinfo_groups(key):
                rows = await client.xinfo_consumers(key, group["name"])
                held = [(c["name"], c["pending"], c["idle"]) for c in rows if c["pending"]]
                if held:
                    print(f"  {key} group {group['name']}: pending by consumer {held}")
    finally:
        await client.aclose()
    print(f"  group sessions (opened/closed/superseded) are in {stack.logs}/event.log")


def calls(goal: Goal, by_plan: dict[str, Counter[str]], model: ScriptedModel) -> tuple[int, int]:
    """Tool/worker calls (distinct requests run) and billed model calls of one plan."""
    counts = by_plan.get(goal.plan_id or "", Counter())
    tools = sum(v for k, v in counts.items() if k.startswith("requests:"))
    return tools, model.calls.get(goal.topic, 0) if goal.kind == "ch" else 0


def tool_runs(goal: Goal, by_plan: dict[str, Counter[str]]) -> int:
    """Every run of a tool/worker body for one plan (runs cut short by a kill included)."""
    counts = by_plan.get(goal.plan_id or "", Counter())
    return sum(v for k, v in counts.items() if k.startswith("runs:"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def model_requests(goal: Goal, model: ScriptedModel) -> int:
    """HTTP requests the model server got for one plan (repeated idempotency keys too)."""
    return model.requests.get(goal.topic, 0) if goal.kind == "ch" else 0


def report(
    driver: Driver,
    stack: Stack,
    baseline: list[Goal],
    chaos: list[Goal] | None,
    by_plan: dict[str, Counter[str]],
    dlq: dict[str, int],
) -> dict[str, Any]:
    run = chaos if chaos is not None else baseline
    answered = [g for g in run if g.answered]
    base_calls = [calls(g, by_plan, stack.model) for g in baseline]
    run_calls = [calls(g, by_plan, stack.model) for g in run]
    base_requests = [model_requests(g, stack.model) for g in baseline]
    run_requests = [model_requests(g, stack.model) for g in run]
    differ = [
        {
            "plan": g.index,
            "kind": g.kind,
            "branch": g.branch,
            "plan_id": g.plan_id,
            "no_fault": list(b),
            "chaos": list(c),
        }
        for g, b, c in zip(run, base_calls, run_calls, strict=True)
        if b != c
    ]
    slowest = max(answered, key=lambda g: g.latency, default=None)
    n = max(len(run), 1)
    summary = {
        "plans": len(run),
        "faults": chaos is not None,
        "goals_answered": len(answered),
        "duplicate_answers": sum(len(g.answers) - 1 for g in answered),
        "tool_calls_per_plan": round(sum(c[0] for c in run_calls) / n, 3),
        "tool_calls_per_plan_no_fault": round(sum(c[0] for c in base_calls) / n, 3),
        "llm_calls_per_plan": round(sum(c[1] for c in run_calls) / n, 3),
        "llm_calls_per_plan_no_fault": round(sum(c[1] for c in base_calls) / n, 3),
        # Raw HTTP requests to the model, a repeated Idempotency-Key included (billed once
        # by a provider or gateway that honours the key, twice by one that ignores it).
        "llm_requests_per_plan": round(sum(run_requests) / n, 3),
        "llm_requests_per_plan_no_fault": round(sum(base_requests) / n, 3),
        "plans_with_repeated_llm_requests": sum(
            1 for r, c in zip(run_requests, run_calls, strict=True) if r > c[1]
        ),
        "plans_with_other_calls": len(differ),
        "other_calls_examples": differ[:10],
        # Runs of one request again after a process other than a SIGKILLed one ran it
        # (an outage, a redelivery, a re-sent request): the target is none.
        "repeated_executions": dict(by_plan.get("__repeats__", {})),
        # Runs again because the process running it was SIGKILLed before it could
        # record the answer (the body's own crash window, docs/reliability.md).
        "rerun_after_own_kill": dict(by_plan.get("__cut__", {})),
        # Every run of a body: the calls above plus the runs repeated in either way.
        "tool_runs_per_plan": round(sum(tool_runs(g, by_plan) for g in run) / n, 3),
        "tool_runs_per_plan_no_fault": round(sum(tool_runs(g, by_plan) for g in baseline) / n, 3),
        "plans_stuck": len(run) - len(answered),
        "stuck_examples": [
            {"plan": g.index, "kind": g.kind, "branch": g.branch, "goal_event_id": g.event_id}
            for g in run
            if not g.answered
        ][:10],
        "dlq_events": sum(dlq.values()),
        "dlq_by_topic": {k: v for k, v in dlq.items() if v},
        "slowest_plan": None
        if slowest is None
        else {
            "plan": slowest.index,
            "kind": slowest.kind,
            "branch": slowest.branch,
            "plan_id": slowest.plan_id,
            "seconds": round(slowest.latency, 2),
        },
        "plan_seconds_p50": round(percentile([g.latency for g in answered], 0.5), 2),
        "plan_seconds_p99": round(percentile([g.latency for g in answered], 0.99), 2),
        "kills": len(driver.kills),
        "kills_by_process": dict(Counter(name for _, name in driver.kills)),
        "llm_server_errors": stack.model.errors,
        "llm_calls_per_ch_plan": dict(
            Counter(c[1] for g, c in zip(run, run_calls, strict=True) if g.kind == "ch")
        ),
        "tool_calls_per_branch": {
            branch: dict(
                Counter(c[0] for g, c in zip(run, run_calls, strict=True) if g.branch == branch)
            )
            for branch in (*SM_BRANCHES, "ch")
        },
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    return summary


def print_summary(s: dict[str, Any]) -> None:
    mode = "chaos" if s["faults"] else "no-fault"
    print(
        f"\n== {mode} run: {s['plans']} plans, {s['kills']} kills "
        f"{s['kills_by_process']} (load average {s['load_average_1m']})"
    )
    print(f"goals answered:        {s['goals_answered']} / {s['plans']}")
    print(f"duplicate answers:     {s['duplicate_answers']}")
    print(
        f"tool calls per plan:   {s['tool_calls_per_plan']} "
        f"(no-fault run: {s['tool_calls_per_plan_no_fault']}; distinct requests run)"
    )
    print(
        f"LLM calls per plan:    {s['llm_calls_per_plan']} "
        f"(no-fault run: {s['llm_calls_per_plan_no_fault']}; billed: a repeated "
        "Idempotency-Key counts once)"
    )
    print(
        f"LLM requests per plan: {s['llm_requests_per_plan']} "
        f"(no-fault run: {s['llm_requests_per_plan_no_fault']}; every HTTP request; "
        f"plans with a repeated key: {s['plans_with_repeated_llm_requests']})"
    )
    print(f"plans with other call counts than no-fault: {s['plans_with_other_calls']}")
    for example in s["other_calls_examples"]:
        print(f"    {example}")
    print(f"repeated executions of one request: {s['repeated_executions'] or 0}")
    print(
        f"re-run after its own process was killed mid-request: "
        f"{s['rerun_after_own_kill'] or 0} (runs of tool bodies per plan: "
        f"{s['tool_runs_per_plan']}, no-fault run: {s['tool_runs_per_plan_no_fault']})"
    )
    print(f"plans stuck:           {s['plans_stuck']}")
    print(f"events in any DLQ:     {s['dlq_events']} {s['dlq_by_topic'] or ''}")
    slow = s["slowest_plan"]
    if slow:
        print(
            f"slowest plan:          {slow['seconds']} s (#{slow['plan']} {slow['kind']} "
            f"{slow['branch']}, plan {slow['plan_id']}); p50 {s['plan_seconds_p50']} s, "
            f"p99 {s['plan_seconds_p99']} s"
        )


async def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = Stack(args)
    driver = Driver(stack, args)
    started = time.monotonic()
    try:
        await stack.start()
        await driver.start()
        print(f"stack ready in {time.monotonic() - started:.1f} s (logs: {stack.logs})", flush=True)
        baseline = make_goals("n", args.plans, args.seed)
        t0 = time.monotonic()
        await driver.run_phase(baseline, pace=0.0, patience=args.grace, faults=False)
        print(
            f"no-fault pass: {sum(g.answered for g in baseline)}/{len(baseline)} answered "
            f"in {time.monotonic() - t0:.1f} s",
            flush=True,
        )
        chaos = None
        if not args.no_faults:
            chaos = make_goals("c", args.plans, args.seed)
            t0 = time.monotonic()
            await driver.run_phase(
                chaos,
                pace=args.duration / max(args.plans, 1),
                patience=args.duration + args.grace,
                faults=True,
            )
            print(
                f"chaos pass: {sum(g.answered for g in chaos)}/{len(chaos)} answered in "
                f"{time.monotonic() - t0:.1f} s",
                flush=True,
            )
            # Every killed process must be up again before the DLQ and counters are read.
            await asyncio.gather(*(p.wait_ready() for p in stack.targets.values()))
        by_plan = await plan_counts(stack, driver.killed_pids)
        dlq = await dlq_count(stack.urls["event"])
        summary = report(driver, stack, baseline, chaos, by_plan, dlq)
        summary["wall_s"] = round(time.monotonic() - started, 1)
        summary["seed"] = args.seed
        print_summary(summary)
        if summary["plans_stuck"] or summary["dlq_events"]:
            await print_consumers(stack)
        print("CHAOS_SUMMARY " + json.dumps(summary), flush=True)
        return summary
    finally:
        with contextlib.suppress(Exception):
            await driver.stop()
        if driver.context is not None:
            with contextlib.suppress(Exception):
                await driver.context.close()
        await stack.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plans", type=int, default=1000)
    parser.add_argument(
        "--duration",
        type=float,
        default=300.0,
        help="seconds of faults; the chaos pass's goals are paced over them",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=120.0,
        help="seconds a plan may still take once the faults stopped",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-faults", action="store_true", help="only the no-fault pass")
    parser.add_argument(
        "--kill-every",
        type=lambda s: tuple(float(x) for x in s.split(",")),
        default=(2.0, 5.0),
        help="seconds between kills: low,high",
    )
    parser.add_argument("--inflight", type=int, default=64, help="most goals open at once")
    parser.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds to wait after the last answer for late duplicates",
    )
    parser.add_argument(
        "--port-base",
        type=int,
        default=9781,
        help="event, memory, registry, model on this port and the next three",
    )
    parser.add_argument("--redis-port", type=int, default=9790)
    parser.add_argument("--free-ports", action="store_true", help="pick free ports (tests)")
    parser.add_argument(
        "--fork",
        action="store_true",
        help="fork the services and agents from a process that has imported their "
        "libraries (tests: the same processes, started without seconds of imports)",
    )
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "SOORMA_TEST_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
        ),
    )
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # asyncio.run cancels main(): its finally stops every process


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    summary = asyncio.run(main(parse_args()))
    ok = (
        summary["goals_answered"] == summary["plans"]
        and summary["duplicate_answers"] == 0
        and summary["plans_with_other_calls"] == 0
        and summary["plans_stuck"] == 0
        and summary["dlq_events"] == 0
    )
    raise SystemExit(0 if ok else 1)
