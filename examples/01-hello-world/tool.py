"""Hello-world tool: answers ``greet.requested`` with a greeting.

Run the platform (``soorma dev``), then this file, then ``client.py``.
"""

from __future__ import annotations

import logging

from soorma import Tool

tool = Tool(
    name="hello-world",
    description="Greets whoever asks.",
    version="1.0.0",
)


@tool.on_invoke("greet.requested")
async def greet(request, context):
    """Build the greeting; the SDK sends it back as the caller's ``response_event``."""
    name = str(request.data.get("name") or "world").strip()
    if len(name) > 100:
        raise ValueError("name is too long (100 characters at most)")
    return {"greeting": f"Hello, {name}!"}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # The tool's own HTTP calls are noise at INFO.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    tool.run()
