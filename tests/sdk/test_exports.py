"""The SDK's public names are deliberate: adding or removing one shows up here."""

import soorma
import soorma.agents


def test_top_level_exports_are_pinned():
    assert sorted(soorma.__all__) == [
        "Agent",
        "AgentNotFound",
        "AgentOptions",
        "BusClient",
        "ConfigurationError",
        "Conflict",
        "DelegationSpec",
        "EmbeddingMismatch",
        "EmbeddingUnavailable",
        "Event",
        "EventDefinitionNotFound",
        "EventNotFound",
        "EventToolkit",
        "GoalContext",
        "HandlerFailed",
        "InvalidTopic",
        "InvocationContext",
        "MemoryClient",
        "MemoryKeyNotFound",
        "MemoryNotFound",
        "NotFound",
        "PayloadInvalid",
        "PayloadTooLarge",
        "PermissionDenied",
        "PlanContext",
        "PlanNotFound",
        "Planner",
        "PlatformContext",
        "PlatformSettings",
        "RegistryClient",
        "ResultContext",
        "SchemaInvalid",
        "ServiceUnavailable",
        "SessionNotFound",
        "SoormaError",
        "Subscription",
        "TaskContext",
        "TaskNotFound",
        "Tool",
        "TransitionContext",
        "Unauthenticated",
        "ValidationFailed",
        "VectorSearchUnavailable",
        "VersionConflict",
        "Worker",
        "__version__",
        "current_event",
        "run_client",
        "run_once",
    ]
    for name in soorma.__all__:
        assert hasattr(soorma, name), name


def test_the_platform_errors_are_the_sdks_errors():
    from soorma_common import errors

    for name in errors.__all__:
        if name[0].isupper():
            assert getattr(soorma, name) is getattr(errors, name), name


def test_each_agent_name_has_one_import_path():
    assert soorma.agents.__all__ == []
    for name in ("Agent", "Tool", "Worker", "Planner", "TaskContext", "PlanContext"):
        assert not hasattr(soorma.agents, name), name


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
