"""Pin the public names of soorma_common so changes to the contract are deliberate."""

from __future__ import annotations

import importlib

import soorma_common

CONTRACT_MODULES = (
    "a2a",
    "bus",
    "decisions",
    "errors",
    "events",
    "knowledge",
    "memory",
    "registry",
    "state",
)

EXPECTED = {
    # events
    "EventEnvelope",
    "ACTION_REQUESTS",
    "ACTION_RESULTS",
    "BUSINESS_FACTS",
    "SYSTEM_EVENTS",
    "NOTIFICATION_EVENTS",
    "PLAN_EVENTS",
    "TASK_EVENTS",
    "BILLING_EVENTS",
    "STANDARD_TOPICS",
    "DLQ_SUFFIX",
    "TOPIC_PATTERN",
    "dead_letter_topic",
    "is_valid_topic",
    "new_event_id",
    "utc_now",
    "check_traceparent",
    "trace_id_of",
    # platform event types
    "PLAN_STARTED",
    "PLAN_STATE_CHANGED",
    "PLAN_PAUSED",
    "PLAN_RESUMED",
    "PLAN_COMPLETED",
    "PLAN_FAILED",
    "PLAN_CANCELLED",
    "PLAN_CANCEL_REQUESTED",
    "PLAN_WAITING_FOR_INPUT",
    "PLAN_WAIT_TIMEOUT",
    "PLAN_LIFECYCLE_EVENTS",
    "TASK_PROGRESS",
    "TASK_TIMEOUT",
    "HUMAN_INPUT",
    "TASK_ARTIFACT",
    "TASK_CANCEL_REQUESTED",
    "TASK_CANCELLED",
    "NOT_ANSWERS",
    # bus
    "PublishRequest",
    "PublishResponse",
    "PublishBatchRequest",
    "PublishBatchResponse",
    "AckRequest",
    "NackRequest",
    "AckResponse",
    "ExtendRequest",
    "ExtendResponse",
    "DeadLetter",
    "DeadLetterList",
    "ReplayRequest",
    "ReplayResponse",
    "ConsumerGroupStatus",
    "ConsumerGroupList",
    # state machine
    "StateAction",
    "StateTransition",
    "StateWait",
    "StateConfig",
    "PlanDefinition",
    "PlanRegistrationRequest",
    "PlanInstanceRequest",
    # decisions
    "PlanAction",
    "PublishAction",
    "CompleteAction",
    "WaitAction",
    "DelegateAction",
    "PlannerAction",
    "PlannerDecision",
    # registry
    "EventDefinition",
    "AgentCapability",
    "AgentDefinition",
    "DiscoveredAgent",
    "DEFAULT_AGENT_TTL_SECONDS",
    # memory
    "AnswerClaim",
    "TaskContextRecord",
    "SubTaskRecord",
    "SubTaskStatus",
    "SubTaskResultRequest",
    "PlanContextRecord",
    "PlanCreate",
    "PlanUpdate",
    "PlanStatus",
    "PlanSummary",
    "SessionCreate",
    "SessionSummary",
    "WorkingMemoryWrite",
    "WorkingMemoryItem",
    "FINISHED_PLAN_STATUSES",
    # long-term memory (knowledge)
    "MAX_BATCH_ITEMS",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_RECENT_LIMIT",
    "MAX_SEARCH_LIMIT",
    "RRF_K",
    "EmbeddingInfo",
    "EpisodeCreate",
    "EpisodeHit",
    "EpisodeRecord",
    "EpisodeRole",
    "EpisodeSearch",
    "EpisodeSearchResult",
    "ForgetResult",
    "MemoryKind",
    "ProcedureCreate",
    "ProcedureHit",
    "ProcedureQuery",
    "ProcedureQueryResult",
    "ProcedureRecord",
    "ReembedStatus",
    "SearchMode",
    "SemanticDocumentCreate",
    "SemanticHit",
    "SemanticMemoryBatch",
    "SemanticMemoryCreate",
    "SemanticMemoryRecord",
    "SemanticSearch",
    "SemanticSearchResult",
    "chunk_text",
    "content_hash",
    "deterministic_embedding",
    # a2a (legacy seed shapes)
    "A2AAgentCard",
    "A2AAuthType",
    "A2AAuthentication",
    "A2AMessage",
    "A2APart",
    "A2ASkill",
    "A2ATask",
    "A2ATaskResponse",
    "A2ATaskStatus",
    # errors
    "SoormaError",
    "ValidationFailed",
    "ConfigurationError",
    "NotFound",
    "Conflict",
    "VersionConflict",
    "PayloadTooLarge",
    "Unauthenticated",
    "PermissionDenied",
    "ServiceUnavailable",
    "InvalidTopic",
    "EventNotFound",
    "TaskNotFound",
    "PlanNotFound",
    "SessionNotFound",
    "MemoryKeyNotFound",
    "MemoryNotFound",
    "EmbeddingUnavailable",
    "EmbeddingMismatch",
    "VectorSearchUnavailable",
    "AgentNotFound",
    "EventDefinitionNotFound",
    "SchemaInvalid",
    "PayloadInvalid",
    "HandlerFailed",
    "describe_exception",
    "error_class_for",
    "error_from_payload",
}


def _exports() -> dict[str, list[str]]:
    """Each contract module's exported names."""
    found: dict[str, list[str]] = {}
    for module in CONTRACT_MODULES:
        found[module] = list(importlib.import_module(f"soorma_common.{module}").__all__)
    return found


def test_exported_names_are_pinned() -> None:
    names = [name for names in _exports().values() for name in names]
    assert set(names) == EXPECTED


def test_each_name_has_one_home_and_the_package_reexports_nothing() -> None:
    names = [name for names in _exports().values() for name in names]
    assert len(names) == len(set(names)), "a name is exported by two modules"
    assert soorma_common.__all__ == ["__version__"]


def test_every_exported_name_resolves() -> None:
    for module, names in _exports().items():
        loaded = importlib.import_module(f"soorma_common.{module}")
        for name in names:
            assert getattr(loaded, name) is not None, f"{module}.{name}"
