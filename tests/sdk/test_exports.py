"""The SDK's public names are deliberate: adding or removing one shows up here."""

import soorma
import soorma.agents


def test_top_level_exports_are_pinned():
    assert sorted(soorma.__all__) == [
        "Agent",
        "BusClient",
        "DelegationSpec",
        "Event",
        "EventToolkit",
        "GoalContext",
        "Identity",
        "InvocationContext",
        "MemoryClient",
        "PlanContext",
        "Planner",
        "PlatformContext",
        "PlatformSettings",
        "RegistryClient",
        "ResultContext",
        "Subscription",
        "TaskContext",
        "Tool",
        "TransitionContext",
        "Worker",
        "__version__",
        "current_event",
    ]
    for name in soorma.__all__:
        assert hasattr(soorma, name), name


def test_agents_package_exports_are_pinned():
    assert sorted(soorma.agents.__all__) == [
        "Agent",
        "DelegationSpec",
        "GoalContext",
        "InvocationContext",
        "Planner",
        "ResultContext",
        "TaskContext",
        "Tool",
        "TransitionContext",
        "Worker",
    ]


def test_sdk_does_not_import_server_libraries():
    import subprocess
    import sys

    code = (
        "import sys, soorma, soorma.cli\n"
        "bad = [m for m in ('fastapi', 'sqlmodel', 'sqlalchemy', 'redis', 'uvicorn') "
        "if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# Renamed in this release: old name -> new name. Each old name warns and still works
# until the next release; remove a row together with its alias.
DEPRECATED_ALIASES = {
    ("soorma.plan_context", "PlanContext", "is_complete"): "at_terminal_state",
    ("soorma.plan_context", "PlanContext", "context"): "platform",
    ("soorma.task", "TaskContext", "is_complete"): "all_sub_tasks_answered",
    ("soorma.task", "TaskContext", "finished"): "is_finished",
    ("soorma.task", "TaskContext", "context"): "platform",
    ("soorma.agents.planner", "GoalContext", "create_plan"): "open_plan",
    ("soorma.ai.choreography", "ChoreographyPlanner", "create_plan"): "open_plan",
    ("soorma.memory", "MemoryClient", "create_plan"): "create_plan_record",
    ("soorma.memory", "MemoryClient", "delete"): "delete_item",
}


def test_deprecated_aliases_are_pinned_and_point_at_their_new_names():
    import importlib

    for (module, cls_name, old), new in DEPRECATED_ALIASES.items():
        cls = getattr(importlib.import_module(module), cls_name)
        assert hasattr(cls, new), f"{cls_name}.{new}"
        alias = cls.__dict__.get(old) or getattr(cls, old)
        assert f"{new}" in (alias.__doc__ or ""), f"{cls_name}.{old} is not an alias of {new}"


def test_a_deprecated_name_warns_and_answers_as_the_new_one():
    import pytest

    from soorma.task import TaskContext

    task = TaskContext(
        task_id="t-1",
        event_type="x",
        plan_id=None,
        data={},
        correlation_id=None,
        response_event=None,
    )
    with pytest.warns(DeprecationWarning, match="all_sub_tasks_answered"):
        assert task.is_complete() is task.all_sub_tasks_answered()
    with pytest.warns(DeprecationWarning, match="is_finished"):
        assert task.finished is task.is_finished() is False
