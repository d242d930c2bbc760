"""stream_text: an LLM's answer, streamed to whoever waits for the task as it is written.

The model is called with ``stream=True``; its text goes out as chunks of one artifact
(``task.artifact`` events with ``append`` / ``last_chunk``), which the A2A gateway turns
into ``TaskArtifactUpdateEvent`` s for a streaming client. The whole text is returned, for
the agent to complete its task (or plan) with.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from soorma import _tracing
from soorma.ai import _llm
from soorma.ai._errors import PlannerError
from soorma.ai._llm import Completion, check_credentials, load_litellm
from soorma_common.events import SYSTEM_EVENTS, TASK_ARTIFACT, TASK_PROGRESS

if TYPE_CHECKING:
    from soorma.context import PlatformContext


@runtime_checkable
class ArtifactSink(Protocol):
    """What :func:`stream_text` writes to (a :class:`~soorma.TaskContext` is one)."""

    async def send_artifact(
        self,
        *parts: Any,
        artifact_id: str = "output",
        name: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
    ) -> str: ...


class _CallerSink:
    """Artifacts for the caller of a plan or goal (no TaskContext): the same events a
    TaskContext sends, on the answer's topic with the caller's correlation id."""

    def __init__(self, target: Any, context: PlatformContext | None) -> None:
        platform = context or getattr(target, "platform", None)
        correlation = getattr(target, "correlation_id", None)
        if platform is None or not correlation:
            raise TypeError(
                "stream_text writes to a TaskContext, or to a plan or goal with a "
                "correlation_id (pass context=... for a goal)"
            )
        self.bus = platform.bus
        self.correlation_id = str(correlation)
        self.topic = str(getattr(target, "response_topic", None) or SYSTEM_EVENTS)
        self.event_type = str(
            getattr(target, "goal_event", None) or getattr(target, "event_type", None) or ""
        )
        self.plan_id = getattr(target, "plan_id", None)
        self.session_id = getattr(target, "session_id", None)
        self.identity: dict[str, Any] = {}
        if not self.bus.identity.token and getattr(target, "tenant_id", None):
            # Outside a handler in dev mode the bus acts as the caller's tenant.
            from soorma._propagation import current_event

            if current_event() is None:
                self.identity = {"tenant_id": target.tenant_id, "user_id": target.user_id}

    async def _publish(self, topic: str, event_type: str, data: dict[str, Any]) -> str:
        return await self.bus.publish(
            topic,
            event_type,
            {"task_id": self.correlation_id, "event_type": self.event_type, **data},
            correlation_id=self.correlation_id,
            plan_id=self.plan_id,
            session_id=self.session_id,
            **self.identity,
        )

    async def send_artifact(
        self,
        *parts: Any,
        artifact_id: str = "output",
        name: str | None = None,
        append: bool = False,
        last_chunk: bool = False,
    ) -> str:
        data: dict[str, Any] = {
            "artifact_id": artifact_id,
            "parts": list(parts),
            "append": append,
            "last_chunk": last_chunk,
        }
        if name is not None:
            data["name"] = name
        return await self._publish(self.topic, TASK_ARTIFACT, data)

    async def report_progress(self, progress: float, message: str | None = None) -> str:
        return await self._publish(
            SYSTEM_EVENTS, TASK_PROGRESS, {"progress": progress, "message": message}
        )


async def stream_text(
    to: Any,
    messages: str | Sequence[Mapping[str, str]],
    *,
    model: str,
    context: PlatformContext | None = None,
    artifact_id: str = "output",
    name: str | None = None,
    status: str | None = None,
    min_chars: int = 24,
    api_key: str | None = None,
    api_base: str | None = None,
    temperature: float = 0.2,
    **options: Any,
) -> str:
    """Call the model with ``stream=True`` and stream its text to the task's caller.

    Each piece of text becomes a chunk of the artifact ``artifact_id``: the first with
    ``append=False``, the next ones appended, the last with ``last_chunk=True`` (the
    A2A gateway streams them as artifact updates; a client that reads the task later
    finds the artifact with every chunk's part, in order). Deltas are gathered until
    ``min_chars`` characters, so a model that streams a token at a time does not cost an
    event per token.

    Args:
        to: Where the text goes: a :class:`~soorma.TaskContext` (a Worker's task), a
            plan (a Planner's or ChoreographyPlanner's ``PlanContext``), a goal
            (``GoalContext``, with ``context``), or anything with ``send_artifact``.
        messages: The chat messages, or one user prompt.
        model: A litellm model id (``"openai/gpt-4o-mini"``, ``"ollama/llama3"``...).
        context: The platform context (needed for a goal, which has none of its own).
        artifact_id: The streamed artifact's id.
        name: The streamed artifact's name.
        status: A status note sent (as ``working``) before the first chunk, e.g.
            ``"writing the summary"``.
        min_chars: Gather at least this many characters per chunk (the last may be
            shorter).
        api_key: The provider key (default: the provider's environment variable).
        api_base: The provider's base URL (a local server, a proxy).
        temperature: Sampling temperature.
        **options: Further ``litellm.acompletion`` arguments (``max_tokens``,
            ``mock_response`` in tests...).

    Returns:
        The whole text.

    Raises:
        LLMNotConfigured: litellm missing or the provider key unset.
        PlannerError: the provider call failed (the chunks sent so far stay sent).
    """
    sink: Any = to if isinstance(to, ArtifactSink) else _CallerSink(to, context)
    chat = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    # The first call imports litellm (seconds): off the event loop, as the planner does.
    litellm = _llm._litellm or await asyncio.to_thread(load_litellm)
    check_credentials(model, api_key=api_key, options=options)
    kwargs: dict[str, Any] = dict(options)
    if api_key:
        kwargs["api_key"] = api_key
    if api_base:
        kwargs["api_base"] = api_base
    if status:
        report = getattr(sink, "report_progress", None)
        if report is not None:
            await report(0.0, status)
    pieces: list[str] = []
    pending = ""
    sent = 0

    async def send(text: str, *, last: bool) -> None:
        nonlocal sent
        await sink.send_artifact(
            text, artifact_id=artifact_id, name=name, append=sent > 0, last_chunk=last
        )
        sent += 1

    with _tracing.llm_span(model, chat, temperature) as span:
        started = time.perf_counter()
        response_model: str | None = None
        try:
            stream = await litellm.acompletion(
                model=model,
                messages=[dict(m) for m in chat],
                temperature=temperature,
                stream=True,
                **kwargs,
            )
            async for chunk in stream:
                response_model = response_model or getattr(chunk, "model", None)
                choices = getattr(chunk, "choices", None) or []
                delta = getattr(choices[0], "delta", None) if choices else None
                text = getattr(delta, "content", None) if delta is not None else None
                if not text:
                    continue
                pieces.append(text)
                # The previous piece goes out once more text follows it: whichever
                # chunk turns out to be the last carries last_chunk.
                if len(pending) >= min_chars:
                    await send(pending, last=False)
                    pending = ""
                pending += text
        except Exception as exc:
            if isinstance(exc, PlannerError):
                raise
            raise PlannerError(
                f"the model call failed ({model}): {exc}", details={"model": model}
            ) from exc
        await send(pending, last=True)
        answer = Completion(
            model=model,
            content="".join(pieces),
            latency_ms=(time.perf_counter() - started) * 1000.0,
        )
        _tracing.llm_answer(span, answer, response_model)
    return answer.content


__all__ = ["ArtifactSink", "stream_text"]
