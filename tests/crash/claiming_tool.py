"""A tool process whose body never finishes: it prints ``body-started <request id>``
and sleeps, holding its claim (renewed) until the test kills it with SIGKILL.

``CLAIM_LEASE`` sets the claim's lease in seconds; ``TOOL_GROUP`` its consumer group.
"""

from __future__ import annotations

import asyncio
import logging
import os

from soorma import AgentOptions, Tool

tool = Tool(
    name="claim-pricer",
    options=AgentOptions(group=os.environ.get("TOOL_GROUP", "claim-pricer-a")),
)
tool.answers.claim_lease = float(os.environ.get("CLAIM_LEASE", "2"))


@tool.on_invoke("claim.requested")
async def price(request, context):
    print(f"body-started {request.request_id}", flush=True)
    await asyncio.sleep(600)
    return {"price": "never"}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    tool.run()
