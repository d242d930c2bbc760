"""Whether a service's backends answer: for ``/health`` and ``/ready``, and a watch that
logs a backend lost once, and its return once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

logger = logging.getLogger("servicekit.readiness")

ReadyCheck = Callable[[], Awaitable[Any]]
# A check that has not answered this soon counts as failed (a backend that hangs).
CHECK_TIMEOUT_SECONDS = 5.0


async def run_checks(checks: Mapping[str, ReadyCheck]) -> dict[str, str]:
    """Each check's result: ``"ok"`` or ``"error: ..."`` (run together, each bounded)."""

    async def one(check: ReadyCheck) -> str:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                await check()
        except TimeoutError:
            return f"error: no answer within {CHECK_TIMEOUT_SECONDS:g} s"
        except Exception as exc:
            return f"error: {exc or type(exc).__name__}"
        return "ok"

    results = await asyncio.gather(*(one(check) for check in checks.values()))
    return dict(zip(checks, results, strict=True))


def transitions(before: Mapping[str, str], after: Mapping[str, str]) -> list[tuple[int, str]]:
    """The log records a change of results calls for: a backend lost, or back."""
    records: list[tuple[int, str]] = []
    for name, result in after.items():
        was_ok = before.get(name, "ok") == "ok"
        if was_ok and result != "ok":
            records.append((logging.WARNING, f"backend {name} does not answer: {result[7:]}"))
        elif not was_ok and result == "ok":
            records.append((logging.INFO, f"backend {name} answers again"))
    return records


async def watch_backends(
    service: str, checks: Mapping[str, ReadyCheck], *, interval: float
) -> None:
    """Run ``checks`` every ``interval`` seconds until cancelled, logging changes only."""
    last: dict[str, str] = {}
    while True:
        # First after one interval: start-up (migrations, a busy machine) is not a loss.
        await asyncio.sleep(interval)
        results = await run_checks(checks)
        for level, message in transitions(last, results):
            logger.log(level, "%s: %s", service, message)
        last = results


__all__ = ["CHECK_TIMEOUT_SECONDS", "ReadyCheck", "run_checks", "transitions", "watch_backends"]
