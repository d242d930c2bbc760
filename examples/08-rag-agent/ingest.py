"""Stores the product documentation in long-term memory (semantic and procedural).

    python ingest.py                 # the Markdown files in knowledge/
    python ingest.py my-docs/*.md    # or your own

Each file becomes a document: chunks under one external id (the file name), replaced
together when the file is ingested again. The documentation is public (every user of the
tenant finds it); so is the answering rule the planner will retrieve.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from soorma import PlatformContext

HERE = Path(__file__).resolve().parent
AGENT = "nimbus-support"
DEFAULT_FILES = sorted((HERE / "knowledge").glob("*.md"))

RULES = [
    (
        "Answer only from the retrieved knowledge and name the document each fact comes "
        "from. If the knowledge does not say, answer that you do not know.",
        "a customer asks a question about Nimbus Notes",
    ),
    (
        "For billing error codes, give the meaning of the code and what the customer "
        "should do next.",
        "a customer reports a billing or payment error code",
    ),
]


async def ingest(context: PlatformContext, files: list[Path]) -> int:
    """Store ``files`` and the rules; the number of chunks stored."""
    total = 0
    for path in files:
        chunks = await context.memory.knowledge.add_document(
            path.name,
            path.read_text(encoding="utf-8"),
            chunk_size=500,
            chunk_overlap=50,
            source=path.name,
            tags=["nimbus-docs"],
            public=True,
        )
        print(f"{path.name}: {len(chunks)} chunk(s)")
        total += len(chunks)
    procedures = context.memory.procedures
    known = {p.content for p in await procedures.list(agent_id=AGENT)}
    for content, situation in RULES:
        if content not in known:  # procedures have no external id: skip the ones stored
            await procedures.add(content, situation=situation, agent_id=AGENT, public=True)
    print(f"stored {total} chunk(s) from {len(files)} file(s) and {len(RULES)} rule(s)")
    return total


async def main(files: list[Path]) -> int:
    async with PlatformContext.from_env() as context:
        await ingest(context, files)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown/text files")
    args = parser.parse_args()
    raise SystemExit(asyncio.run(main(args.files or DEFAULT_FILES)))
