"""Expense planner: one plan per ``expense.submitted`` goal, following ``approval.py``."""

from __future__ import annotations

import logging

from approval import APPROVAL

from soorma import Planner

planner = Planner(
    name="expense-planner",
    description="Approves expenses: a person decides, or the request is escalated.",
    plan_definition=APPROVAL,
)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    planner.run()
