"""Answers recorded by request id, so a repeated request is answered, not run again.

A Tool (and a Worker finishing a task) records the answer envelope it sends in the
memory service (``/v1/memory/answers``) *before* publishing it, keyed by agent name and
request id. When the same request arrives again within the retention window (the bus
redelivered it, or a planner re-sent it after a crash) the recorded envelope is
published again, under its original event id, and the handler does not run.

Before the handler runs, the delivery claims the request (keyed like its answer) in
the memory service, so two deliveries in flight at once do not both run it: the second
waits for the first one's answer (see :mod:`soorma.agents._claims`).

A memory-service outage does not make a request run twice. An agent that records
answers (``answer_retention`` > 0 and a memory client, i.e. ``SOORMA_MEMORY_URL``) counts
the memory service as part of its platform from the start, and :class:`AnswerLog` is
strict:

- :meth:`AnswerLog.begin` (the claim and the look-up) raises ``ServiceUnavailable``
  while the memory service cannot be reached: the request must not run now (it may have
  been answered, or be running elsewhere); the agent runs it again once the service is
  back (``call_while_unavailable``, then a nack).
- :meth:`AnswerLog.record` (and :meth:`AnswerLog.hold` for a Worker's delegation) holds
  what must be recorded in the process and retries for up to ``record_wait`` seconds;
  nothing is published (nor acked) before it is recorded. After ``record_wait`` the
  ``ServiceUnavailable`` is raised: the request is given back and may run again.

An agent meant to run without a memory service says so: ``answer_retention=0`` (it
keeps no answers, claims nothing, and needs no memory service). An unreachable memory
service is never taken for an absent one: a kill of the memory service at the moment
an agent starts would otherwise let requests run twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from soorma._concurrency import retry_while_unavailable
from soorma.agents._claims import DEFAULT_CLAIM_LEASE, HeldClaim, claim_or_wait
from soorma_common.errors import ServiceUnavailable
from soorma_common.events import EventEnvelope

if TYPE_CHECKING:
    from soorma.agents.base import Agent
    from soorma.context import PlatformContext
    from soorma.memory import MemoryClient

logger = logging.getLogger("soorma.agent")

# Default window: answers are kept a day (``Tool(answer_retention=...)``).
DEFAULT_ANSWER_RETENTION = 86_400.0
# Seconds a finished request's answer waits for the memory service to record it.
DEFAULT_RECORD_WAIT = 300.0
# The memory service keeps an answer at most this long.
MAX_RETENTION = 30 * 86_400.0
# First and longest pause between attempts to record while the service is down.
_FIRST_DELAY, _MAX_DELAY = 0.25, 4.0
_NAMESPACE = uuid.UUID("2c9d0a8e-7b41-4f0e-8c55-6a1e3d9b2f70")

T = TypeVar("T")


def answer_event_id(agent: str, request_id: str) -> str:
    """The id of ``agent``'s answer to ``request_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"{agent}/{request_id}"))


async def hold_until_written(
    write: Callable[[], Awaitable[T]], *, wait: float, what: str, who: str = "agent"
) -> T:
    """``write()``'s result; while it raises ``ServiceUnavailable``, try again (backoff)
    for up to ``wait`` seconds, then raise it.

    The caller holds what it is writing meanwhile (not published, its request not
    acked): a crash now runs the request again, which is safe as nothing was sent.
    """

    def say(exc: ServiceUnavailable, _pause: float, waited: float) -> None:
        if waited == 0:
            logger.warning(
                "%s: cannot record %s (%s); holding it until the memory service "
                "is back (up to %.0f s)",
                who,
                what,
                exc,
                wait,
            )

    return await retry_while_unavailable(
        write, wait=wait, first_pause=_FIRST_DELAY, max_pause=_MAX_DELAY, on_retry=say
    )


class AnswerLog:
    """Recorded answers of one agent, and whether the memory service is part of its
    platform (then an outage is waited out; see the module doc).

    Args:
        agent: The agent's name (answers are kept per agent and request id).
        retention: Seconds an answer is kept; ``0`` turns recording off.
        record_wait: Seconds a record waits for an unreachable memory service.
        kind: How logs name the agent (``"tool"``, ``"worker"``).
    """

    def __init__(
        self,
        agent: str,
        retention: float = DEFAULT_ANSWER_RETENTION,
        *,
        record_wait: float = DEFAULT_RECORD_WAIT,
        kind: str = "agent",
    ) -> None:
        if retention < 0:
            raise ValueError("answer_retention must be 0 (off) or a number of seconds")
        if record_wait < 0:
            raise ValueError("record_wait must be a number of seconds (0 or more)")
        self.agent = agent
        self.retention = retention
        self.record_wait = record_wait
        self.kind = kind
        # Seconds a claim on a running request holds unless renewed (renewed every
        # third of it): how long a request waits after its holder was killed.
        self.claim_lease = DEFAULT_CLAIM_LEASE
        # Claims this process holds, by key: recording an answer ends its claim.
        self._held: dict[str, HeldClaim] = {}

    @property
    def who(self) -> str:
        """The agent as logs name it, e.g. ``tool calculator``."""
        return f"{self.kind} {self.agent}"

    def key(self, request_id: str) -> str:
        """The memory service's key of the answer to ``request_id``."""
        return f"{self.agent}:{request_id}"

    def records(self, context: PlatformContext) -> bool:
        """Whether answers are recorded (retention on, and a memory client)."""
        return self.retention > 0 and context.memory is not None

    def _memory(self, context: PlatformContext) -> MemoryClient:
        memory = context.memory
        assert memory is not None
        return memory

    async def look_for_memory(self, context: PlatformContext) -> None:
        """At start: say so when the memory service does not answer (requests wait)."""
        if not self.records(context):
            return
        try:
            await (
                self._memory(context)
                .without_retries()
                .recorded_answer(self.key("start-up look-up"))
            )
        except Exception as exc:
            logger.warning(
                "%s: the memory service does not answer (%s); requests wait for it "
                "(answer_retention=0 runs without one)",
                self.who,
                exc,
            )

    async def begin(
        self, context: PlatformContext, request_id: str
    ) -> EventEnvelope | HeldClaim | None:
        """Before ``request_id`` runs: its recorded answer (send it, do not run), or the
        claim to run it under (renewed until :meth:`HeldClaim.stop`/``release``);
        ``None`` when answers are not recorded. Waits while another delivery runs it.

        Raises:
            ServiceUnavailable: the memory service cannot be reached: the request must
                not run now; the agent runs it again later.
        """
        if not self.records(context):
            return None
        memory = self._memory(context)
        try:
            got = await claim_or_wait(
                memory, self.key(request_id), lease=self.claim_lease, who=self.who
            )
        except ServiceUnavailable:
            raise
        except Exception as exc:  # e.g. a memory service without claims: look up only
            logger.warning("%s: cannot claim %s (%s)", self.who, request_id, exc)
            return await self.recorded(context, request_id)
        if isinstance(got, HeldClaim):
            self._held[got.key] = got
            got.on_done = self._let_go
            return got
        return _envelope(got.answer)

    async def sent_again(
        self,
        context: PlatformContext,
        request_id: str,
        turn: EventEnvelope | HeldClaim | None,
    ) -> bool:
        """When :meth:`begin` found ``request_id`` answered before: publish that answer
        again (its original event id, so consumers drop a copy) and say so."""
        if not isinstance(turn, EventEnvelope):
            return False
        logger.info("%s: %s was answered before; sending that answer", self.who, request_id)
        await context.bus.publish_event(turn)
        return True

    async def recorded(self, context: PlatformContext, request_id: str) -> EventEnvelope | None:
        """The recorded answer to ``request_id``, if any.

        Raises:
            ServiceUnavailable: the memory service cannot be reached: the request must
                not run now (it may have been answered); the agent runs it again later.
        """
        if not self.records(context):
            return None
        try:
            found = await self._memory(context).recorded_answer(self.key(request_id))
        except ServiceUnavailable:
            raise
        except Exception as exc:  # e.g. a memory service without recorded answers
            logger.warning(
                "%s: could not read recorded answers (%s); handling %s without",
                self.who,
                exc,
                request_id,
            )
            return None
        return _envelope(found)

    async def record(
        self, context: PlatformContext, request_id: str, answer: EventEnvelope
    ) -> EventEnvelope:
        """Record ``answer`` before it is sent; the one to send (if another delivery
        recorded one first, that one). An outage is waited out for ``record_wait``.

        Raises:
            ServiceUnavailable: still unreachable after ``record_wait`` seconds (the
                answer is not sent; the request is given back and may run again).
        """
        if not self.records(context):
            return answer
        retention = min(max(self.retention, 1.0), MAX_RETENTION)
        body = {"event": answer.model_dump(mode="json")}

        async def write() -> dict[str, Any] | None:
            memory = self._memory(context)
            try:
                return await memory.record_answer(
                    self.key(request_id), body, retention_seconds=retention
                )
            except ServiceUnavailable:
                raise  # held and retried
            except Exception as exc:
                logger.warning(
                    "%s: could not record the answer to %s (%s); sending it unrecorded",
                    self.who,
                    request_id,
                    exc,
                )
                return None

        kept = await hold_until_written(
            write, wait=self.record_wait, what=f"the answer to {request_id}", who=self.who
        )
        if kept is None:
            return answer
        held = self._held.get(self.key(request_id))
        if held is not None:
            held.answered()  # the memory service ended the claim with the answer
        return _envelope(kept) or answer

    def _let_go(self, claim: HeldClaim) -> None:
        if self._held.get(claim.key) is claim:
            del self._held[claim.key]

    async def hold(self, what: str, write: Callable[[], Awaitable[T]]) -> T:
        """``write()`` (a record that must precede a send, e.g. a Worker's delegation),
        waited out for ``record_wait`` seconds while the memory service
        is down."""
        return await hold_until_written(write, wait=self.record_wait, what=what, who=self.who)


def keep_answers(agent: Agent, retention: float, record_wait: float) -> AnswerLog:
    """The answer log of ``agent`` (a Tool or a Worker); it looks for the memory service
    when the agent starts."""
    answers = AnswerLog(agent.name, retention, record_wait=record_wait, kind=agent.agent_type)

    async def look_for_memory() -> None:
        await answers.look_for_memory(agent.context)

    agent.on_startup(look_for_memory)
    return answers


class RecordWait:
    """The ``record_wait`` option of an agent that keeps an :class:`AnswerLog`."""

    answers: AnswerLog

    @property
    def record_wait(self) -> float:
        """Seconds an answer (or a Worker's delegation) waits for an unreachable memory
        service to record it."""
        return self.answers.record_wait

    @record_wait.setter
    def record_wait(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("record_wait must be a number of seconds (0 or more)")
        self.answers.record_wait = seconds


def _envelope(stored: dict[str, Any] | None) -> EventEnvelope | None:
    raw = (stored or {}).get("event")
    return EventEnvelope.model_validate(raw) if isinstance(raw, dict) else None


__all__ = [
    "DEFAULT_ANSWER_RETENTION",
    "DEFAULT_RECORD_WAIT",
    "AnswerLog",
    "RecordWait",
    "answer_event_id",
    "hold_until_written",
    "keep_answers",
]
