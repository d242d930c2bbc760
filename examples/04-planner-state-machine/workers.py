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

from soorma import Agent, PlatformContext

searcher = Agent(name="web-searcher", description="Searches the web (simulated).")
analyzer = Agent(name="content-analyzer", description="Summarises pages (simulated).")
user = Agent(name="user-stand-in", description="Answers clarification questions.")


async def reply(event, context: PlatformContext, event_type: str, data: dict) -> None:
    """Answer a request with the event type that describes the outcome."""
    await context.bus.respond(
        event_type, data, correlation_id=event.correlation_id, topic=event.response_topic
    )


@searcher.on_event(topic="action-requests", event_type="web.search.requested")
async def search(event, context):
    query, broad = event.data.get("query"), bool(event.data.get("broad"))
    if query == "broken" or (query == "flaky" and not broad):
        await reply(event, context, "web.search.failed", {"error": "search backend timed out"})
    elif query == "obscure" and not event.data.get("details"):
        await reply(event, context, "web.search.no_results", {"count": 0})
    else:
        pages = [f"https://example.org/{query}/{i}" for i in range(3)]
        await reply(event, context, "web.search.completed", {"pages": pages, "broad": broad})


@analyzer.on_event(topic="action-requests", event_type="content.analyze.requested")
async def analyze(event, context):
    pages = event.data.get("pages") or event.data.get("retry_pages") or []
    summary = f"{len(pages)} pages about {event.data.get('topic')}"
    await reply(event, context, "content.analyze.completed", {"summary": summary})


@user.on_event(topic="action-requests", event_type="notification.human_input")
async def clarify(event, context):
    await reply(event, context, "user.clarification.provided", {"details": "the 1970s work"})


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
