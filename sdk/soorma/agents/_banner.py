"""What an agent says when it starts: who it is, what it listens to, where it connects.

Called once from :meth:`Agent.start`, before anything connects:

* one line naming the agent, its type, the topics and event types it listens to, its
  group, and the event, memory and registry services it talks to;
* when the event service does not answer, one clear line saying so and what to do
  (the agent keeps waiting for it: starting it later is fine);
* the HTTP client's own per-request lines (``httpx`` / ``httpcore`` at INFO: one per
  publish, ack and heartbeat) are left out, unless the application chose a level
  for those loggers itself.

Lines go to the ``soorma.agent`` logger when logging is configured, else to stderr, so
``python agent.py`` prints them either way.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soorma.agents.base import Agent

logger = logging.getLogger("soorma.agent")

# Loggers that write one line per HTTP request at INFO.
CHATTY_LOGGERS = ("httpx", "httpcore")
# Seconds the start-up check waits for the event service's /health.
PROBE_TIMEOUT = 1.0


def quiet_http_logs() -> None:
    """Raise ``httpx``/``httpcore`` to WARNING unless the application set their level."""
    for name in CHATTY_LOGGERS:
        chatty = logging.getLogger(name)
        if chatty.level == logging.NOTSET:
            chatty.setLevel(logging.WARNING)


def _say(level: int, message: str) -> None:
    if logging.getLogger().handlers or logging.getLogger("soorma").handlers:
        logger.log(level, message)
    else:  # logging not configured: INFO would be dropped
        print(message, file=sys.stderr, flush=True)


def _url(client: Any) -> str | None:
    return getattr(client, "base_url", None) if client is not None else None


def describe(agent: Agent) -> str:
    """One line: who the agent is, what it listens to, where it connects."""
    context = agent.context
    listens = ", ".join(
        f"{spec.topic}:{spec.event_type}"
        for spec in sorted(agent.handlers, key=lambda s: (s.topic, s.event_type))
    )
    where = [
        f"{name}={url}"
        for name, url in (
            ("events", _url(context.bus)),
            ("memory", _url(context.memory)),
            ("registry", _url(context.registry)),
        )
        if url
    ]
    return (
        f"agent {agent.name} ({agent.agent_type}) starting: listens to {listens}; "
        f"group {agent.group}; connects to {' '.join(where)}"
    )


async def event_service_answers(agent: Agent) -> bool:
    """Whether the agent's event service answers ``/health`` within a second."""
    bus = agent.context.bus
    url = _url(bus)
    http = getattr(bus, "http", None)
    if not url or http is None:
        return True
    try:
        response = await http.get(f"{url.rstrip('/')}/health", timeout=PROBE_TIMEOUT)
    except Exception:
        return False
    return bool(response.status_code < 500)


async def announce(agent: Agent) -> None:
    """Say who the agent is and where it connects; say clearly if nothing answers there."""
    quiet_http_logs()
    _say(logging.INFO, describe(agent))
    if not await event_service_answers(agent):
        _say(
            logging.WARNING,
            f"agent {agent.name}: no event service at {_url(agent.context.bus)}; is the "
            "platform running? Start it with `soorma dev` (or ./scripts/dev.sh), or set "
            "SOORMA_URL (the address `soorma dev` prints). Waiting for it...",
        )


__all__ = ["announce", "describe", "quiet_http_logs"]
