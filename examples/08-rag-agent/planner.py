"""The support planner: answers questions about Nimbus Notes from long-term memory.

    SUPPORT_MODEL=offline soorma run planner.py      # scripted answers, no key, no network
    SUPPORT_MODEL=gpt-4o-mini soorma run planner.py  # a real model (OPENAI_API_KEY set)
    python planner.py --offline                      # the same, on its own
    python planner.py --model gpt-4o-mini            # (flags win over SUPPORT_MODEL)

``SUPPORT_MODEL`` is a litellm model id or ``offline`` (default: ``gpt-4o-mini``);
``SUPPORT_API_BASE`` a custom endpoint (a proxy, Azure, a local server).

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
MODEL_VARIABLE = "SUPPORT_MODEL"
API_BASE_VARIABLE = "SUPPORT_API_BASE"
DEFAULT_MODEL = "gpt-4o-mini"
OFFLINE = "offline"  # SUPPORT_MODEL=offline: scripted answers (offline_answers.py)
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

    if not offline:

        @planner.on_startup
        async def check_key():
            # Under `soorma run` a missing key stops the agent at start, naming the
            # variable to set, rather than failing the first question.
            try:
                planner.check_llm_configured()
            except LLMNotConfigured as exc:
                raise LLMNotConfigured(f"{exc.message}; or set {MODEL_VARIABLE}=offline") from None

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
        help=f"litellm model id; default: ${MODEL_VARIABLE}, else {DEFAULT_MODEL}",
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
