"""CPU per publish through the event service's ASGI stack, beside a baseline source tree.

Usage: .venv/bin/python bench/stack.py [--baseline-src DIR] [--requests 20000] [--rounds 3]

Calls the event-service app (in-memory log, lifespan run) directly as an ASGI app, with
no server and no sockets, so what is measured is the CPU the app's own layers spend per
``POST /v1/events/publish`` (middleware stack, fast path, validation, append): process
CPU time, not wall time, so other work on the machine moves it far less than B1/B2.
With ``--baseline-src`` (a checkout, e.g. ``git worktree add /tmp/base main``) the same
measurement runs alternately on that tree's event-service and servicekit and on this
one, in the same run. A ``GET /metrics`` scrape is timed too when the app serves one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_BODY = json.dumps(
    {"event": {"topic": "business-facts", "type": "order.placed", "data": {"n": 1, "s": "x"}}}
).encode()


async def _measure(requests: int) -> dict[str, float]:
    from asgi_lifespan import LifespanManager

    from event_service import create_app
    from event_service.settings import Settings

    app = create_app(Settings(event_backend="memory", log_level="WARNING", stream_max_length=1000))
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": _BODY, "more_body": False}

    def scope(method: str, path: str, body: bool) -> dict[str, Any]:
        headers = [(b"host", b"bench"), (b"content-type", b"application/json")]
        if body:
            headers.append((b"content-length", str(len(_BODY)).encode()))
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }

    async with LifespanManager(app) as manager:
        call = manager.app
        for _ in range(500):  # warm up
            await call(scope("POST", "/v1/events/publish", True), receive, send)
        assert sent[0]["status"] == 200, sent
        started = time.process_time()
        for _ in range(requests):
            sent.clear()
            await call(scope("POST", "/v1/events/publish", True), receive, send)
        publish_us = (time.process_time() - started) / requests * 1e6
        sent.clear()
        await call(scope("GET", "/metrics", False), receive, send)
        scrape_us = float("nan")
        if sent and sent[0]["status"] == 200:
            started = time.process_time()
            for _ in range(50):
                await call(scope("GET", "/metrics", False), receive, send)
            scrape_us = (time.process_time() - started) / 50 * 1e6
    return {"publish_us": publish_us, "scrape_us": scrape_us}


def _run_child(src: Path | None, requests: int, env_extra: dict[str, str]) -> dict[str, float]:
    env = {**os.environ, **env_extra}
    if src is not None:
        services = src / "services"
        env["PYTHONPATH"] = f"{services / 'event-service'}:{services / 'servicekit'}"
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--requests", str(requests)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--metrics-off",
        action="store_true",
        help="also measure this tree with SOORMA_METRICS_ENABLED=false",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.requests))))
        return
    trees: list[tuple[str, Path | None, dict[str, str]]] = [("this tree", None, {})]
    if args.metrics_off:
        trees.append(("no metrics", None, {"SOORMA_METRICS_ENABLED": "false"}))
    if args.baseline_src:
        trees.insert(0, ("baseline", args.baseline_src, {}))
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in trees}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for name, src, env in trees:
            results[name].append(_run_child(src, args.requests, env))
    load_after = os.getloadavg()
    print(
        f"load average {load_before[0]:.2f} -> {load_after[0]:.2f}; "
        f"{args.requests} publishes per round, {args.rounds} rounds, CPU µs per request"
    )
    for name, rows in results.items():
        publish = [r["publish_us"] for r in rows]
        scrape = [r["scrape_us"] for r in rows]
        print(
            f"{name:10} publish: min {min(publish):6.1f}  median {statistics.median(publish):6.1f}"
            f"  (rounds: {', '.join(f'{p:.1f}' for p in publish)})"
            f"   /metrics scrape: median {statistics.median(scrape):8.1f}"
        )


if __name__ == "__main__":
    main()
