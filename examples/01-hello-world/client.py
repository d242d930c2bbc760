"""Hello-world client: asks the tool for a greeting and prints it.

python client.py Ada        ->  Hello, Ada!
"""

from __future__ import annotations

import sys

from soorma import PlatformContext, run_client


async def main(name: str) -> int:
    async with PlatformContext.from_env() as context:
        # call() subscribes to the answer first, publishes the request on
        # action-requests, and returns the answer with the same correlation id.
        answer = await context.bus.call(
            "greet.requested",
            {"name": name},
            response_event="greet.completed",
            timeout=15,
        )
    if not answer.data.get("success"):
        print(f"the tool failed: {answer.data.get('error')}", file=sys.stderr)
        return 1
    print(answer.data["result"]["greeting"])
    return 0


if __name__ == "__main__":
    raise SystemExit(run_client(main(" ".join(sys.argv[1:]) or "world")))
