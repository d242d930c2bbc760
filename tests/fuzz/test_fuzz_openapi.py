"""Schemathesis over each service's own OpenAPI: no 5xx, declared codes, schemas, error shape."""

from __future__ import annotations

import requests
from fuzz_support import ThreadedServer
from openapi_fuzzing import fuzz_operations, load_schema

# Bounded and derandomized: reproducible in CI, a few seconds per service and backend
# (generating a case costs far more than the request; all five services, on both
# backends each, stay well under a minute).
EXAMPLES = 5
PLATFORM_PATHS = frozenset({"/health", "/ready"})


def test_memory_service_answers_every_generated_request_as_documented(
    memory_server: ThreadedServer,
) -> None:
    failures = fuzz_operations(memory_server.url, max_examples=EXAMPLES)
    assert not failures, "\n\n".join(failures)


def test_registry_service_answers_every_generated_request_as_documented(
    registry_server: ThreadedServer,
) -> None:
    failures = fuzz_operations(registry_server.url, max_examples=EXAMPLES)
    assert not failures, "\n\n".join(failures)


def test_event_service_answers_every_generated_request_as_documented(
    event_server: ThreadedServer,
) -> None:
    # The SSE stream never ends (tested by hand in test_fuzz_event_hostile).
    failures = fuzz_operations(
        event_server.url, max_examples=EXAMPLES, skip=frozenset({"GET /v1/events/stream"}),
    )
    assert not failures, "\n\n".join(failures)


def test_event_service_documents_the_publish_errors_it_returns(
    event_server: ThreadedServer,
) -> None:
    spec = requests.get(f"{event_server.url}/openapi.json", timeout=10).json()
    for path in ("/v1/events/publish", "/v1/events/publish-batch"):
        responses = spec["paths"][path]["post"]["responses"]
        assert {"413", "422"} <= set(responses), (path, sorted(responses))
    topic = spec["components"]["schemas"]["EventEnvelope"]["properties"]["topic"]
    assert "pattern" in topic, topic


def test_tracker_service_answers_every_generated_request_as_documented(
    tracker_server: ThreadedServer,
) -> None:
    failures = fuzz_operations(tracker_server.url, max_examples=EXAMPLES)
    assert not failures, "\n\n".join(failures)


def test_gateway_answers_every_generated_platform_request_as_documented(
    gateway_server: ThreadedServer,
) -> None:
    # The A2A protocol routes (everything but the platform's /health and /ready) answer
    # in A2A's own error format (a2a-sdk), which their OpenAPI does not declare yet, and
    # need a registry and an event service behind them: left out here (a known gap).
    schema = load_schema(gateway_server.url)
    a2a = frozenset(
        result.ok().label for result in schema.get_all_operations()
        if result.ok().path not in PLATFORM_PATHS
    )
    failures = fuzz_operations(gateway_server.url, max_examples=EXAMPLES, skip=a2a)
    assert not failures, "\n\n".join(failures)
