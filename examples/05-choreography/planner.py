"""The research planner: an LLM decides which tool runs next until the report is written.

    python planner.py --model gpt-4o-mini      # a real model (OPENAI_API_KEY must be set)
    python planner.py --offline                # scripted answers through litellm, no network

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

    @planner.on_startup
    async def load_llm_library():
        # litellm takes seconds to import: pay that before the first goal, not during it.
        import litellm  # noqa: F401

    return planner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="gpt-4o-mini",
        help="litellm model id (gpt-4o-mini, anthropic/claude-..., ollama/...)",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="scripted model answers (litellm mock_response); no key, no network",
    )
    parser.add_argument("--api-base", help="custom endpoint (a proxy, Azure, a local server)")
    args = parser.parse_args(argv)
    if args.offline:
        # litellm otherwise downloads its model price list when imported.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    planner = build_planner(args.model, offline=args.offline, api_base=args.api_base)
    if not args.offline:
        try:
            planner.check_llm_configured()
        except LLMNotConfigured as exc:
            print(f"error: {exc.message}; or run `python planner.py --offline`", file=sys.stderr)
            return 2
    planner.run()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    raise SystemExit(main())
