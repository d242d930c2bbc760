"""The research planner: an LLM decides which tool runs next until the report is written.

    RESEARCH_MODEL=offline soorma run planner.py      # scripted answers, no key, no network
    RESEARCH_MODEL=gpt-4o-mini soorma run planner.py  # a real model (OPENAI_API_KEY set)
    python planner.py --offline                       # the same, on its own
    python planner.py --model gpt-4o-mini             # (flags win over RESEARCH_MODEL)

``RESEARCH_MODEL`` is a litellm model id or ``offline`` (default: ``gpt-4o-mini``);
``RESEARCH_API_BASE`` points litellm at a proxy, Azure or a local server.

No state machine is written here: the order is a business rule in the model's
instructions. For every decision the ChoreographyPlanner reads the live capabilities from
the registry (fetch, analyze, report and their payload schemas), asks the model for the
next action, validates it, and publishes the chosen event; each tool's answer comes back
as a transition of the plan and triggers the next decision.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from offline import mock_response

from soorma.ai import ChoreographyPlanner, LLMNotConfigured

logger = logging.getLogger("doc-research-planner")

MODEL_VARIABLE = "RESEARCH_MODEL"
API_BASE_VARIABLE = "RESEARCH_API_BASE"
DEFAULT_MODEL = "gpt-4o-mini"
OFFLINE = "offline"  # RESEARCH_MODEL=offline: scripted answers (offline.py)

INSTRUCTIONS = """\
You research a topic and deliver a written report.
Use the tools in this order: fetch sources about the goal's topic, analyze the fetched
sources (pass them unchanged), then ask for the report with the topic and the analysis.
When the report is in the results, complete with {"report": <the report text>}.
If a step failed, complete with {"error": <what failed>}.
"""


def build_planner(model: str, *, offline: bool, api_base: str | None = None) -> ChoreographyPlanner:
    planner = ChoreographyPlanner(
        name="doc-research-planner",
        reasoning_model=model,
        api_base=api_base,
        system_instructions=INSTRUCTIONS,
        temperature=0.0,
        max_actions=8,  # fetch, analyze, report, complete -- and room for a retry or two
    )

    def llm_options(plan):
        return mock_response(plan) if offline else None

    def log(plan, decision):
        if decision is not None:  # None: the plan failed, and step() logged why
            action = decision.next_action
            what = getattr(action, "event_type", None) or getattr(action, "goal_event", "")
            logger.info(
                "plan %s: %s -- %s",
                plan.plan_id,
                f"{action.action.value} {what}".strip(),
                decision.reasoning,
            )

    @planner.on_goal("doc.research.requested", description="Research a topic, answer a report.")
    async def on_goal(goal, context):
        plan = await planner.open_plan(goal, context)
        decision = await planner.step(
            plan, context, trigger=f"new goal: {goal.data}", llm_options=llm_options(plan)
        )
        log(plan, decision)

    @planner.on_transition()
    async def on_transition(transition, context):
        # Called after the planner recorded the answer in transition.plan.results.
        event = transition.event
        plan = transition.plan
        decision = await planner.step(
            plan, context, trigger=f"{event.type} arrived", llm_options=llm_options(plan)
        )
        log(plan, decision)

    if not offline:

        @planner.on_startup
        async def check_key():
            # Under `soorma run` a missing key stops the agents at start, naming the
            # variable to set, rather than failing the first plan.
            try:
                planner.check_llm_configured()
            except LLMNotConfigured as exc:
                raise LLMNotConfigured(f"{exc.message}; or set {MODEL_VARIABLE}=offline") from None

    # The planner loads litellm (a few seconds) when it starts, and says so.
    return planner


def choose(model: str, api_base: str | None = None) -> ChoreographyPlanner:
    """The planner for ``model``: a litellm model id, or ``offline`` (scripted)."""
    offline = model == OFFLINE
    if offline:
        # litellm otherwise downloads its model price list when imported.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return build_planner(DEFAULT_MODEL if offline else model, offline=offline, api_base=api_base)


# What `soorma run planner.py` starts (it imports this file: main() does not run).
planner = choose(
    os.environ.get(MODEL_VARIABLE) or DEFAULT_MODEL, os.environ.get(API_BASE_VARIABLE) or None
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        help="litellm model id (gpt-4o-mini, anthropic/claude-..., ollama/...); "
        f"default: ${MODEL_VARIABLE}, else {DEFAULT_MODEL}",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="scripted model answers (litellm mock_response); no key, no network",
    )
    parser.add_argument("--api-base", help="custom endpoint (a proxy, Azure, a local server)")
    args = parser.parse_args(argv)
    model = OFFLINE if args.offline else args.model or os.environ.get(MODEL_VARIABLE)
    chosen = choose(
        model or DEFAULT_MODEL, args.api_base or os.environ.get(API_BASE_VARIABLE) or None
    )
    if model != OFFLINE:
        try:
            chosen.check_llm_configured()
        except LLMNotConfigured as exc:
            print(f"error: {exc.message}; or run `python planner.py --offline`", file=sys.stderr)
            return 2
    chosen.run()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    raise SystemExit(main())
