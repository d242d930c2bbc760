"""The scripted "model" of ``planner.py --offline``.

Offline, each decision still goes through litellm -- as ``mock_response``, the text a
model would have answered -- and through the planner's full validation against the
registry. Only the choice is scripted: fetch, then analyze, then report, then complete,
each step built from the results the plan holds so far.
"""

from __future__ import annotations

import json
from typing import Any


def _publish(event_type: str, data: dict[str, Any], why: str) -> dict[str, Any]:
    # response_event is left out on purpose: the planner fills in the one answer event
    # the registry lists for event_type (as it does for a real model's answer).
    return {
        "reasoning": why,
        "next_action": {
            "action": "publish",
            "event_type": event_type,
            "data": data,
            "reasoning": why,
        },
    }


def _complete(result: dict[str, Any], why: str) -> dict[str, Any]:
    return {
        "reasoning": why,
        "next_action": {"action": "complete", "result": result, "reasoning": why},
    }


def scripted_decision(plan: Any) -> dict[str, Any]:
    """The decision a model would take next for ``plan`` (a PlanContext)."""
    topic = (plan.goal_data or {}).get("topic", "")
    results = plan.results or {}
    failed = [
        step
        for step, answer in results.items()
        if isinstance(answer, dict) and answer.get("success") is False
    ]
    if failed:
        error = results[failed[0]].get("error")
        return _complete({"error": f"{failed[0]} failed: {error}"}, "a step failed")
    if "doc.fetch.requested" not in results:
        return _publish(
            "doc.fetch.requested",
            {"topic": topic, "max_sources": 3},
            "nothing is known yet: fetch sources first",
        )
    if "doc.analyze.requested" not in results:
        sources = results["doc.fetch.requested"]["result"]["sources"]
        return _publish(
            "doc.analyze.requested", {"sources": sources}, "sources fetched: analyze them"
        )
    if "doc.report.requested" not in results:
        analysis = results["doc.analyze.requested"]["result"]
        return _publish(
            "doc.report.requested",
            {"topic": topic, "analysis": analysis},
            "analysis ready: write the report",
        )
    report = results["doc.report.requested"]["result"]["report"]
    return _complete({"report": report}, "the report is written")


def mock_response(plan: Any) -> dict[str, str]:
    """``llm_options`` for :meth:`ChoreographyPlanner.step`: the scripted answer."""
    return {"mock_response": json.dumps(scripted_decision(plan))}
