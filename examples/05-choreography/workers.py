"""The three tools the planner chooses from: fetch, analyze, report.

    doc.fetch.requested   {"topic", "max_sources"?}  -> {"topic", "sources": [{"title", "text"}]}
    doc.analyze.requested {"sources": [...]}         -> {"source_count", "word_count",
                                                     "key_terms", "highlights"}
    doc.report.requested  {"topic", "analysis"}      -> {"report": "<text>"}

Each tool registers a capability: the event it consumes with its payload JSON Schema, and
the event it answers with. That registration is everything the planner knows about them:
it reads the capabilities from the registry before each decision and checks every payload
the model proposes against these schemas.

The "fetching" reads a small built-in library, so the example runs without network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
from collections import Counter

from soorma import Tool
from soorma_common.registry import AgentCapability, EventDefinition

SOURCE_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "text": {"type": "string", "minLength": 1},
    },
    "required": ["title", "text"],
}
FETCH_SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "minLength": 1, "description": "what to research"},
        "max_sources": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["topic"],
}
ANALYZE_SCHEMA = {
    "type": "object",
    "properties": {
        "sources": {
            "type": "array",
            "minItems": 1,
            "items": SOURCE_SCHEMA,
            "description": "the sources returned by doc.fetch.requested",
        },
    },
    "required": ["sources"],
}
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "minLength": 1},
        "analysis": {
            "type": "object",
            "description": "the result of doc.analyze.requested",
            "properties": {
                "key_terms": {"type": "array", "items": {"type": "string"}},
                "highlights": {"type": "array", "items": {"type": "string"}},
                "source_count": {"type": "integer"},
                "word_count": {"type": "integer"},
            },
            "required": ["key_terms", "highlights"],
        },
    },
    "required": ["topic", "analysis"],
}

LIBRARY = [
    (
        "Event-driven architecture in practice",
        "Services publish events instead of calling each other. Consumers react to events "
        "at their own pace, so a slow consumer never blocks a producer.",
    ),
    (
        "Choreography versus orchestration",
        "In choreography no central conductor exists: each agent reacts to events and "
        "publishes new events. Orchestration keeps one controller that calls every step.",
    ),
    (
        "Durable plans",
        "A plan that stores its state after every step survives restarts. Any replica can "
        "continue the plan when the next event arrives.",
    ),
    (
        "Consumer groups",
        "Replicas of one agent share a consumer group, so each event is handled once. "
        "Unacknowledged events are redelivered after a timeout.",
    ),
    (
        "LLM planners",
        "An LLM planner chooses the next event from the registered capabilities. Its "
        "decisions are validated against the registered schemas before anything happens.",
    ),
]
STOPWORDS = {
    "a",
    "after",
    "an",
    "and",
    "any",
    "anything",
    "are",
    "at",
    "be",
    "before",
    "can",
    "each",
    "every",
    "from",
    "happens",
    "in",
    "instead",
    "is",
    "its",
    "never",
    "no",
    "not",
    "of",
    "on",
    "one",
    "other",
    "own",
    "so",
    "that",
    "the",
    "their",
    "to",
    "versus",
    "when",
    "which",
    "with",
}


def words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]+", text)]


def capability(task: str, consumes: str, schema: dict, answers: str, what: str) -> AgentCapability:
    return AgentCapability(
        task_name=task,
        description=what,
        consumed_event=EventDefinition(
            event_name=consumes, description=what, payload_schema=schema
        ),
        produced_events=[EventDefinition(event_name=answers, topic="action-results")],
    )


fetcher = Tool(
    name="doc-fetcher",
    description="Finds sources about a topic.",
    capabilities=[
        capability(
            "fetch",
            "doc.fetch.requested",
            FETCH_SCHEMA,
            "doc.fetch.completed",
            "Fetch up to max_sources sources (title, text) about a topic.",
        )
    ],
)
analyzer = Tool(
    name="doc-analyzer",
    description="Extracts key terms and highlights from sources.",
    capabilities=[
        capability(
            "analyze",
            "doc.analyze.requested",
            ANALYZE_SCHEMA,
            "doc.analyze.completed",
            "Analyze fetched sources: key terms, highlights, counts.",
        )
    ],
)
reporter = Tool(
    name="doc-reporter",
    description="Writes the final report.",
    capabilities=[
        capability(
            "report",
            "doc.report.requested",
            REPORT_SCHEMA,
            "doc.report.completed",
            "Write the final report of a topic from its analysis.",
        )
    ],
)


@fetcher.on_invoke("doc.fetch.requested")
async def fetch(request, context):
    topic = request.data["topic"]
    wanted = set(words(topic))
    # Rank the library by overlap with the topic; ties keep library order.
    ranked = sorted(LIBRARY, key=lambda doc: -len(wanted & set(words(doc[0] + " " + doc[1]))))
    limit = request.data.get("max_sources", 3)
    return {
        "topic": topic,
        "sources": [{"title": title, "text": text} for title, text in ranked[:limit]],
    }


@analyzer.on_invoke("doc.analyze.requested")
async def analyze(request, context):
    sources = request.data["sources"]
    counts = Counter(w for source in sources for w in words(source["text"]) if w not in STOPWORDS)
    return {
        "source_count": len(sources),
        "word_count": sum(len(words(source["text"])) for source in sources),
        # Most frequent first, alphabetical among equals: the same input, the same terms.
        "key_terms": [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
        "highlights": [source["text"].split(". ")[0].rstrip(".") + "." for source in sources],
    }


@reporter.on_invoke("doc.report.requested")
async def report(request, context):
    analysis = request.data["analysis"]
    lines = [f"Report: {request.data['topic']}", ""]
    if "source_count" in analysis:
        lines.append(
            f"Based on {analysis['source_count']} sources "
            f"({analysis.get('word_count', '?')} words)."
        )
    lines.append("Key terms: " + ", ".join(analysis["key_terms"]))
    lines += ["", "Highlights:"] + [f"- {h}" for h in analysis["highlights"]]
    return {"report": "\n".join(lines)}


async def main() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tools = [fetcher, analyzer, reporter]
    for tool in tools:
        await tool.start()
    try:
        await stop.wait()
    finally:
        for tool in tools:
            await tool.stop()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
