"""The expense-approval state machine.

    start -> reviewing --(approved by a person)-------------> approved
                       --(rejected by a person)-------------> rejected
                       --(nobody answered: hitl_timeout)----> escalated

The ``approver`` worker asks a person with ``timeout_seconds=2``. When nobody answers in
time, the tracker publishes ``task.timeout``; the worker then fails the task with
``hitl_timeout``, which answers the planner's request as a failure: the plan takes its
timeout branch.
"""

from __future__ import annotations

from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition

GOAL_EVENT = "expense.submitted"
RESPONSE_EVENT = "expense.decided"
ASK_SECONDS = 2

STATES = {
    "start": StateConfig(
        state_name="start", description="Expense received", default_next="reviewing"
    ),
    "reviewing": StateConfig(
        state_name="reviewing",
        description="A person approves or rejects (2 s to answer)",
        action=StateAction(
            event_type="expense.review.requested",
            response_event="expense.review.completed",
            data={"amount": "{goal_data.amount}", "item": "{goal_data.item}"},
        ),
        transitions=[
            StateTransition(
                on_event="expense.review.completed",
                to_state="escalated",
                condition='data.status == "failed"',
            ),
            StateTransition(
                on_event="expense.review.completed",
                to_state="approved",
                condition="data.result.approved == True",
            ),
            StateTransition(on_event="expense.review.completed", to_state="rejected"),
        ],
    ),
    "approved": StateConfig(state_name="approved", description="Approved", is_terminal=True),
    "rejected": StateConfig(state_name="rejected", description="Rejected", is_terminal=True),
    "escalated": StateConfig(
        state_name="escalated",
        description="Nobody answered in time: sent to a manager",
        is_terminal=True,
    ),
}

APPROVAL = PlanDefinition(plan_type=GOAL_EVENT, description="Approve an expense", states=STATES)
