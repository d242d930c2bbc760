"""Research client: sends a research goal and prints the plan's outcome.

python client.py owls       ->  completed: 3 pages about owls
python client.py broken     ->  failed: plan reached state 'failed'   (exit 1)
"""

from __future__ import annotations

import sys

from soorma import PlatformContext, run_client


async def main(topic: str) -> int:
    async with PlatformContext.from_env() as context:
        answer = await context.bus.call(
            "research.goal", {"topic": topic}, response_event="research.done", timeout=60
        )
    if answer.data.get("status") != "completed":
        print(f"failed: {answer.data.get('error')}")
        return 1
    print(f"completed: {answer.data['result']['analyzing']['summary']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_client(main(" ".join(sys.argv[1:]) or "owls")))
