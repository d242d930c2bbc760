"""Research planner: runs the state machine in ``research.py`` for every research goal.

No handlers needed: ``plan_definition`` makes the planner create a plan per goal, publish
each state's action, record each answer under ``results[<state>]``, follow the
transitions and answer the goal when a terminal state is reached. Plans live in the
memory service, so a restarted planner continues where the last one stopped.
"""

from __future__ import annotations

import logging

from research import RESEARCH

from soorma import Planner

planner = Planner(
    name="research-planner",
    description="Researches a topic: search, (retry | ask the user), analyze.",
    plan_definition=RESEARCH,
)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    planner.run()
