"""Pin the public names of soorma_common so changes to the contract are deliberate."""

from __future__ import annotations

import soorma_common

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
    # state machine
    "StateAction",
    "StateTransition",
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
    "AgentNotFound",
    "EventDefinitionNotFound",
    "SchemaInvalid",
    "PayloadInvalid",
    "error_class_for",
    "error_from_payload",
}


def test_exported_names_are_pinned() -> None:
    assert set(soorma_common.__all__) == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in soorma_common.__all__:
        assert getattr(soorma_common, name) is not None
