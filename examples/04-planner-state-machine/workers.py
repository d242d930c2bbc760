"""Small agents that answer the research planner's requests.

They answer according to the query, so every branch of the machine is reachable:

* ``flaky``   - the first search fails, the broad retry works;
* ``broken``  - every search fails (the plan ends in ``failed``);
* ``obscure`` - no results until the user (a stand-in agent here) adds details;
* anything else - found at once.

    python workers.py                    # all three agents
    python workers.py searcher user      # only some of them
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from soorma import Agent, PlatformContext, run_once
from soorma_common.events import HUMAN_INPUT

searcher = Agent(name="web-searcher", description="Searches the web (simulated).")
analyzer = Agent(name="content-analyzer", description="Summarises pages (simulated).")
user = Agent(name="user-stand-in", description="Answers clarification questions.")

# Answer ids derive from the request: a repeated answer is recognisably the same event.
ANSWERS = uuid.UUID("5f0b6a52-3c1e-4d8e-9a57-2b7c9e4f1d03")
Answer = dict[str, Any]  # {"type": event type of the outcome, "data": payload}


def answering(agent: Agent, event_type: str, work: Callable[[Any], Awaitable[Answer]]) -> None:
    """Serve ``event_type`` with ``work``, run once per request (docs/reliability.md).

    The bus delivers at least once, so a request can come again (the agent died before
    its ack, a planner re-sent it). The outcome is recorded in the memory service under
    the request id before it is sent (``run_once``), and sent under an id derived from
    the request: a repeated request re-sends the recorded outcome, ``work`` does not run
    again - also across a memory-service outage (it waits).
    """

    @agent.on_event(topic="action-requests", event_type=event_type)
    async def handle(event: Any, context: PlatformContext) -> None:
        answer = await run_once(context, f"{agent.name}:{event.id}", lambda: work(event))
        await context.bus.respond(
            answer["type"],
            answer["data"],
            correlation_id=event.correlation_id,
            topic=event.response_topic,
            event_id=str(uuid.uuid5(ANSWERS, f"{agent.name}/{event.id}")),
        )


async def search(event: Any) -> Answer:
    """The outcome decides the answer's event type."""
    query, broad = event.data.get("query"), bool(event.data.get("broad"))
    if query == "broken" or (query == "flaky" and not broad):
        return {"type": "web.search.failed", "data": {"error": "search backend timed out"}}
    if query == "obscure" and not event.data.get("details"):
        return {"type": "web.search.no_results", "data": {"count": 0}}
    pages = [f"https://example.org/{query}/{i}" for i in range(3)]
    return {"type": "web.search.completed", "data": {"pages": pages, "broad": broad}}


async def analyze(event: Any) -> Answer:
    pages = event.data.get("pages") or event.data.get("retry_pages") or []
    summary = f"{len(pages)} pages about {event.data.get('topic')}"
    return {"type": "content.analyze.completed", "data": {"summary": summary}}


async def clarify(event: Any) -> Answer:
    return {"type": "user.clarification.provided", "data": {"details": "the 1970s work"}}


WORK = {
    "searcher": (searcher, "web.search.requested", search),
    "analyzer": (analyzer, "content.analyze.requested", analyze),
    "user": (user, HUMAN_INPUT, clarify),
}
for _agent, _event_type, _work in WORK.values():
    answering(_agent, _event_type, _work)

AGENTS = {"searcher": searcher, "analyzer": analyzer, "user": user}


async def main(names: list[str]) -> None:
    agents = [AGENTS[name] for name in names or AGENTS]
    await asyncio.gather(*(agent.start() for agent in agents))
    print("workers ready:", ", ".join(a.name for a in agents), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.gather(*(agent.stop() for agent in agents))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    try:
        asyncio.run(main(sys.argv[1:]))
    except KeyboardInterrupt:
        pass
