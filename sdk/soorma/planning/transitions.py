"""The pure half of a plan's engine: which transition an event takes, and how it ends.

Nothing here does I/O: :class:`PlanMachine`'s step and end methods change the local
copy only, so they can be re-run on a fresh copy after a version conflict. Storing and
publishing are :class:`~soorma.planning.plan.PlanContext`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soorma.planning.conditions import evaluate_condition
from soorma.planning.lifecycle import Ending
from soorma.planning.stored import StoredPlan
from soorma_common.events import EventEnvelope
from soorma_common.memory import PlanStatus

# Terminal states with these names end the plan as failed rather than completed.
FAILED_STATE_NAMES = frozenset({"failed", "failure", "error", "aborted", "cancelled"})


class PlanMachine(StoredPlan):
    """A stored plan's transitions and endings, applied to the local copy."""

    # -- the state machine -----------------------------------------------------------

    def condition_names(self, event: EventEnvelope | None) -> dict[str, Any]:
        """The names a transition condition can use."""
        return {
            "data": event.data if event is not None else {},
            "event": event.model_dump(mode="json") if event is not None else {},
            "results": self.results,
            "goal_data": self.goal_data,
            "state": self.state,
        }

    def get_next_state(self, event: EventEnvelope) -> str | None:
        """The state ``event`` leads to from the current state, or ``None``.

        The first transition whose ``on_event`` is the event's type and whose
        ``condition`` (if any) holds wins.
        """
        config = self.state_machine.get(self.current_state)
        if config is None:
            return None
        names: dict[str, Any] | None = None
        for transition in config.transitions:
            if transition.on_event != event.type:
                continue
            if transition.condition:
                names = names or self.condition_names(event)
                if not evaluate_condition(transition.condition, names):
                    continue
            return transition.to_state
        return None

    def at_terminal_state(self) -> bool:
        """Whether the plan is at a terminal state of its machine (or has already ended)."""
        if self.is_finished():
            return True
        config = self.state_machine.get(self.current_state)
        return bool(config and config.is_terminal)

    def step_for(self, event: EventEnvelope) -> str | None:
        """The state whose action ``event`` answers (by correlation id), if pending."""
        return self._steps.pending.get(event.correlation_id or "")

    def is_own_request(self, event: EventEnvelope) -> bool:
        """Whether ``event`` is one of this plan's own action requests (not an answer)."""
        corr = event.correlation_id or ""
        return corr in self._steps.pending and event.id == corr

    def is_own_answer(self, event: EventEnvelope) -> bool:
        """Whether ``event`` is this plan's answer to its goal (not a transition)."""
        return bool(
            self.correlation_id
            and event.correlation_id == self.correlation_id
            and event.type == self.response_event
            and event.correlation_id != self.plan_id
        )

    def _apply(
        self, trigger: EventEnvelope | None, key: str | None = None
    ) -> tuple[bool, str | None, str | None]:
        """Advance the local copy for ``trigger``: (changed, from_state, entered_state).

        ``key`` names the step (the trigger's id, or the handled event's for a
        ``default_next`` step): a key already applied changes nothing.
        Pure (no I/O): it is re-run on a fresh copy after a version conflict.
        """
        changed = False
        if key is not None and key in self._steps.applied:
            return False, None, None  # already applied by an earlier delivery
        if trigger is not None:
            corr = trigger.correlation_id or ""
            step = self._steps.pending.get(corr)
            if step is not None:
                if step != self.current_state:
                    return False, None, None  # late answer to a step the plan has left
                self.results[step] = trigger.data
                del self._steps.pending[corr]
                changed = True
            elif corr in self.correlation_ids and corr != self.plan_id:
                return False, None, None  # duplicate answer to a finished step
            next_state = self.get_next_state(trigger)
        else:
            config = self.state_machine.get(self.current_state)
            next_state = config.default_next if config else None
            starting = self.status == PlanStatus.PENDING
            if config is not None and config.action is not None and starting:
                # An initial state with its own action: run it rather than move on.
                next_state = self.current_state
        if next_state is None or next_state not in self.state_machine:
            return changed, None, None
        previous = self.current_state
        self.current_state = next_state
        if self.status == PlanStatus.PENDING:
            self.status = PlanStatus.RUNNING
        target = self.state_machine[next_state]
        if target.action is not None:
            corr = self._steps.record_request(
                self.plan_id, key, f"default-{self.version}", next_state
            )
            if corr not in self.correlation_ids:
                self.correlation_ids.append(corr)
        if key is not None:
            self._steps.remember(key, next_state)
        return True, previous, next_state

    def _recorded_ending(self) -> Ending:
        """The end of a finished plan, rebuilt from what it stored."""
        if self.status == PlanStatus.COMPLETED:
            return Ending.completed(self.plan_id, self.results.get("final"))
        if self.status == PlanStatus.CANCELLED:
            book = self.bookkeeping
            return Ending.cancelled(
                self.plan_id, str(book.failure_reason or "cancelled"), book.cancelled_by
            )
        reason = str(self.bookkeeping.failure_reason or self.status)
        return Ending.failed(self.plan_id, reason, str(self.status))

    def _step_results(self) -> dict[str, Any]:
        """What the declarative driver answers a goal with: the step results."""
        return {k: v for k, v in self.results.items() if k != "final"}

    def _end(
        self,
        result: Mapping[str, Any] | None,
        *,
        failed_at: str | None = None,
        trigger: EventEnvelope | None = None,
    ) -> Ending:
        """End the local copy as :meth:`finalize` would; the events announcing it.

        A failed end without an explicit ``reason`` says where and why: the step the
        plan left (``failed_at``) and the answer that moved it (``trigger``).
        Pure (no I/O), like :meth:`_apply`: it is re-run on a fresh copy after a
        version conflict.
        """
        if self.current_state.lower() in FAILED_STATE_NAMES:
            reason = (result or {}).get("reason") if isinstance(result, Mapping) else None
            return self._fail_locally(str(reason or self._failure(failed_at, trigger)))
        final = dict(result) if result is not None else None
        self.status = PlanStatus.COMPLETED
        self.results["final"] = final
        return Ending.completed(self.plan_id, final)

    def _failure(self, failed_at: str | None, trigger: EventEnvelope | None) -> str:
        """``step 'searching' got web.search.failed: backend timed out``, or as much of
        it as is known."""
        if trigger is None:
            return f"plan reached state {self.current_state!r}"
        detail = next(
            (
                str(trigger.data[key])
                for key in ("error", "reason", "message")
                if isinstance(trigger.data.get(key), str) and trigger.data[key]
            ),
            None,
        )
        where = failed_at if failed_at and failed_at != self.current_state else None
        what = trigger.type + (f": {detail}" if detail else "")
        return f"step {where!r} got {what}" if where else what

    def _cancel_locally(self, reason: str, by: str | None) -> Ending:
        """End the local copy as cancelled (pure, like :meth:`_end`)."""
        self.status = PlanStatus.CANCELLED
        self.bookkeeping.failure_reason = reason
        self.bookkeeping.cancelled_by = by
        self.bookkeeping.pause_reason = None
        return Ending.cancelled(self.plan_id, reason, by)

    def _fail_locally(self, reason: str) -> Ending:
        self.status = PlanStatus.FAILED
        self.bookkeeping.failure_reason = reason
        return Ending.failed(self.plan_id, reason)
