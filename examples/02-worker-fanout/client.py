"""Asks the analyzer about a text and prints the aggregate as JSON.

python client.py "I love the new laptop from Acme, but the flight to Berlin was late."
"""

from __future__ import annotations

import json
import sys

from soorma import PlatformContext, run_client

DEFAULT_TEXT = "I love the new laptop from Acme, but the flight to Berlin was late."


async def main(text: str) -> int:
    async with PlatformContext.from_env() as context:
        answer = await context.bus.call(
            "analyze.requested", {"text": text}, response_event="analyze.completed", timeout=30
        )
    if not answer.data.get("success"):
        print(f"analysis failed: {answer.data.get('error')}", file=sys.stderr)
        return 1
    print(json.dumps(answer.data["result"], sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_client(main(" ".join(sys.argv[1:]) or DEFAULT_TEXT)))
