"""The support planner: answers questions about Nimbus Notes from long-term memory.

    python planner.py --model gpt-4o-mini      # a real model (OPENAI_API_KEY must be set)
    python planner.py --offline                # scripted answers through litellm, no network

Before it decides, the ChoreographyPlanner retrieves (``retrieval=Retrieval(...)``) the
knowledge, procedures and past episodes relevant to the question and puts them into the
prompt in one labelled, size-bounded section; the ids of what it retrieved are kept in
the plan's audit. Each question and answer is logged as an episode, so the next question
of the same user is answered knowing the earlier ones.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from offline_answers import mock_response

from soorma.ai import ChoreographyPlanner, LLMNotConfigured, Retrieval
from soorma_common.decisions import CompleteAction

logger = logging.getLogger("nimbus-support")

NAME = "nimbus-support"
QUESTION_EVENT = "support.question.asked"

INSTRUCTIONS = """\
You answer customers' questions about the Nimbus Notes app.
Complete at once with {"answer": <your answer>, "sources": [<document names used>]}.
Use only the retrieved memory; follow its procedures.
"""

RETRIEVAL = Retrieval(knowledge=4, procedures=2, episodes=4, max_chars=3000)


def build_planner(model: str, *, offline: bool, api_base: str | None = None) -> ChoreographyPlanner:
    planner = ChoreographyPlanner(
        name=NAME,
        reasoning_model=model,
        api_base=api_base,
        system_instructions=INSTRUCTIONS,
        temperature=0.0,
        max_actions=2,
        retrieval=RETRIEVAL,
    )

    @planner.on_goal(QUESTION_EVENT, description="Answer a question about Nimbus Notes.")
    async def on_goal(goal, context):
        question = str(goal.data.get("question", "")).strip()
        plan = await planner.open_plan(goal, context)
        options = await mock_response(context, question) if offline else None
        decision = await planner.step(
            plan, context, trigger=f"customer question: {question}", llm_options=options
        )
        # Logged after the decision, so this question is not retrieved as its own past.
        episodes = context.memory.episodes
        await episodes.log(NAME, "user", question, plan_id=plan.plan_id)
        if decision is not None and isinstance(decision.next_action, CompleteAction):
            answer = str(decision.next_action.result.get("answer", ""))
            if answer:
                await episodes.log(NAME, "assistant", answer, plan_id=plan.plan_id)
            logger.info("plan %s: answered: %s", plan.plan_id, answer)

    @planner.on_startup
    async def load_llm_library():
        # litellm takes seconds to import: pay that before the first question.
        import litellm  # noqa: F401

    return planner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-4o-mini", help="litellm model id")
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
