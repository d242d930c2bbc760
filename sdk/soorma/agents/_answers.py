"""Answers recorded by request id, so a repeated request is answered, not run again.

A Tool (and a Worker finishing a task) records the answer envelope it sends in the
memory service (``/v1/memory/answers``) *before* publishing it, keyed by agent name and
request id. When the same request arrives again within the retention window (the bus
redelivered it, or a planner re-sent it after a crash) the recorded envelope is
published again, under its original event id, and the handler does not run.

Before the handler runs, the delivery claims the request (keyed like its answer) in
the memory service, so two deliveries in flight at once do not both run it: the second
waits for the first one's answer. :meth:`AnswerLog.begin` gives the delivery its
:class:`~soorma.agents._claims.Once` turn, which does the claiming, waiting, recording,
re-sending and releasing.

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
service is never taken for an absent one, and a memory service that answers a claim or a
record with an error fails the delivery (it runs again later) rather than running the
request unclaimed or sending its answer unrecorded.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from soorma.agents._claims import DEFAULT_CLAIM_LEASE, Once, hold_until_written
from soorma_common.events import EventEnvelope

if TYPE_CHECKING:
    from soorma.agents.base import Agent
    from soorma.context import PlatformContext

logger = logging.getLogger("soorma.agent")

# Default window: answers are kept a day (``Tool(answer_retention=...)``).
DEFAULT_ANSWER_RETENTION = 86_400.0
# Seconds a finished request's answer waits for the memory service to record it.
DEFAULT_RECORD_WAIT = 300.0
_NAMESPACE = uuid.UUID("2c9d0a8e-7b41-4f0e-8c55-6a1e3d9b2f70")

T = TypeVar("T")


def answer_event_id(agent: str, request_id: str) -> str:
    """The id of ``agent``'s answer to ``request_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"{agent}/{request_id}"))


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
        # Turns this process holds a claim for, by key: recording an answer ends it.
        self._held: dict[str, Once] = {}

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

    async def look_for_memory(self, context: PlatformContext) -> None:
        """At start: say so when the memory service does not answer (requests wait)."""
        if not self.records(context) or context.memory is None:
            return
        try:
            await context.memory.without_retries().recorded_answer(self.key("start-up look-up"))
        except Exception as exc:
            logger.warning(
                "%s: the memory service does not answer (%s); requests wait for it "
                "(answer_retention=0 runs without one)",
                self.who,
                exc,
            )

    def _turn(self, context: PlatformContext, request_id: str) -> Once:
        """A turn at ``request_id`` that holds no claim (e.g. a task finished from an
        answer's delivery): it only records."""
        return Once(
            context.memory if self.records(context) else None,
            self.key(request_id),
            retention=self.retention,
            record_wait=self.record_wait,
            who=self.who,
        )

    async def begin(self, context: PlatformContext, request_id: str) -> Once:
        """This delivery's turn at ``request_id``: its recorded answer (send it, do not
        run), or the claim to run it under. Waits while another delivery runs it.

        Raises:
            ServiceUnavailable: the memory service cannot be reached: the request must
                not run now; the agent runs it again later.
        """
        turn = await Once.begin(
            context.memory if self.records(context) else None,
            self.key(request_id),
            retention=self.retention,
            record_wait=self.record_wait,
            who=self.who,
            lease=self.claim_lease,
            clock=context.clock,
        )
        if turn.recorded is None and turn.memory is not None:
            # Recording the answer, from wherever the task is finished, ends this claim.
            self._held[turn.key] = turn
            turn.on_release(self._let_go)
        return turn

    async def record(
        self, context: PlatformContext, request_id: str, answer: EventEnvelope
    ) -> EventEnvelope:
        """Record ``answer`` before it is sent; the one to send (if another delivery
        recorded one first, that one). An outage is waited out for ``record_wait``.

        Raises:
            ServiceUnavailable: still unreachable after ``record_wait`` seconds (the
                answer is not sent; the request is given back and may run again).
        """
        turn = self._held.get(self.key(request_id)) or self._turn(context, request_id)
        kept = await turn.record({"event": answer.model_dump(mode="json")})
        raw = kept.get("event")
        return EventEnvelope.model_validate(raw) if isinstance(raw, dict) else answer

    def _let_go(self, turn: Once) -> None:
        if self._held.get(turn.key) is turn:
            del self._held[turn.key]

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


__all__ = [
    "DEFAULT_ANSWER_RETENTION",
    "DEFAULT_RECORD_WAIT",
    "AnswerLog",
    "RecordWait",
    "answer_event_id",
    "keep_answers",
]
