"""Asks the support planner a question and prints the answer and its sources.

    python client.py "How long does a refund take?"

The last line names the plan: its audit (``GET /v1/memory/plan-context/{plan_id}``) shows
the prompt with the retrieved memory and the ids retrieved.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from soorma import PlatformContext

DEFAULT_QUESTION = "How long does a refund take to reach my card?"


async def main(question: str, wait_seconds: float) -> int:
    async with PlatformContext.from_env() as context:
        answer = await context.bus.call(
            "support.question.asked",
            {"question": question},
            response_event="support.question.answered",
            timeout=wait_seconds,
        )
    data = answer.data
    result = data.get("result") or {}
    if data.get("status") != "completed" or "answer" not in result:
        print(f"no answer: {data.get('error') or result}", file=sys.stderr)
        print(f"plan {data.get('plan_id')}: {data.get('status')}")
        return 1
    print(result["answer"])
    print(f"sources: {', '.join(result.get('sources') or []) or '-'}")
    print(f"plan {data['plan_id']}: completed")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="*", help=f"default: {DEFAULT_QUESTION}")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(" ".join(args.question) or DEFAULT_QUESTION, args.timeout)))
