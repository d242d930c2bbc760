"""Three small analysis tools, each a Tool of its own, run together in one process.

    sentiment.analyze -> {"sentiment": {"label", "score"}}
    entity.extract    -> {"entities": [...]}
    topic.classify    -> {"topics": [...]}

They are deliberately simple (word lists): the example is about the fan-out, not NLP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal

from soorma import Tool

POSITIVE = {"good", "great", "love", "excellent", "happy", "fast", "reliable"}
NEGATIVE = {"bad", "slow", "hate", "broken", "sad", "late", "unreliable"}
TOPICS = {
    "travel": {"flight", "train", "hotel", "trip", "airport"},
    "technology": {"software", "laptop", "app", "cloud", "server"},
    "food": {"pizza", "coffee", "restaurant", "dinner", "lunch"},
}

sentiment = Tool(name="sentiment-tool", description="Positive/negative word balance.")
entities = Tool(name="entity-tool", description="Capitalised words as entities.")
topics = Tool(name="topic-tool", description="Topic keywords.")


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z']+", text)


@sentiment.on_invoke("sentiment.analyze")
async def analyze_sentiment(request, context):
    lowered = [w.lower() for w in words(request.data["text"])]
    score = sum(w in POSITIVE for w in lowered) - sum(w in NEGATIVE for w in lowered)
    label = "positive" if score > 0 else "negative" if score < 0 else "neutral"
    return {"sentiment": {"label": label, "score": score}}


@entities.on_invoke("entity.extract")
async def extract_entities(request, context):
    found = [w for i, w in enumerate(words(request.data["text"])) if i and w[0].isupper()]
    return {"entities": sorted(set(found))}


@topics.on_invoke("topic.classify")
async def classify_topics(request, context):
    lowered = {w.lower() for w in words(request.data["text"])}
    return {"topics": sorted(name for name, keys in TOPICS.items() if lowered & keys)}


async def main() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    tools = [sentiment, entities, topics]
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
