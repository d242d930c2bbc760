"""The research state machine from the Planner design.

start -> searching -> analyzing -> done
            |  web.search.failed      -> retry_search -> analyzing | failed
            |  web.search.no_results  -> ask_user -> (user.clarification.provided)
                                                   -> searching
"""

from __future__ import annotations

from soorma_common.events import HUMAN_INPUT
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition

GOAL_EVENT = "research.goal"
RESPONSE_EVENT = "research.done"

STATES = {
    "start": StateConfig(state_name="start", description="Initial state", default_next="searching"),
    "searching": StateConfig(
        state_name="searching",
        description="Searching for information",
        action=StateAction(
            event_type="web.search.requested",
            response_event="web.search.completed",
            # After a clarification, the user's details go along with the topic.
            data={"query": "{goal_data.topic}", "details": "{results.ask_user.details}"},
        ),
        transitions=[
            StateTransition(on_event="web.search.completed", to_state="analyzing"),
            StateTransition(on_event="web.search.failed", to_state="retry_search"),
            StateTransition(on_event="web.search.no_results", to_state="ask_user"),
        ],
    ),
    "retry_search": StateConfig(
        state_name="retry_search",
        description="Retry with a broader query",
        action=StateAction(
            event_type="web.search.requested",
            response_event="web.search.completed",
            data={"query": "{goal_data.topic}", "broad": True},
        ),
        transitions=[
            StateTransition(on_event="web.search.completed", to_state="analyzing"),
            StateTransition(on_event="web.search.failed", to_state="failed"),
        ],
    ),
    "ask_user": StateConfig(
        state_name="ask_user",
        description="Ask the user for clarification",
        action=StateAction(
            event_type=HUMAN_INPUT,
            response_event="user.clarification.provided",
            data={"question": "No results for '{goal_data.topic}'. Can you add details?"},
        ),
        transitions=[
            StateTransition(on_event="user.clarification.provided", to_state="searching"),
        ],
    ),
    "analyzing": StateConfig(
        state_name="analyzing",
        description="Analyzing search results",
        action=StateAction(
            event_type="content.analyze.requested",
            response_event="content.analyze.completed",
            data={
                "topic": "{goal_data.topic}",
                "pages": "{results.searching.pages}",
                "retry_pages": "{results.retry_search.pages}",
            },
        ),
        transitions=[
            StateTransition(on_event="content.analyze.completed", to_state="done"),
        ],
    ),
    "done": StateConfig(state_name="done", description="Plan completed", is_terminal=True),
    "failed": StateConfig(state_name="failed", description="Plan failed", is_terminal=True),
}

RESEARCH = PlanDefinition(
    plan_type=GOAL_EVENT, description="Research a topic on the web", states=STATES
)
