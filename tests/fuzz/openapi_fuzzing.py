"""Schemathesis against a running service: every operation, positive and negative cases.

The schema is the one the service itself publishes (``/openapi.json``), so a failing
``status_code_conformance`` or ``response_schema_conformance`` means the documentation
and the behaviour disagree.
"""

from __future__ import annotations

import json
from typing import Any

import requests
import schemathesis
from fuzz_support import HYPOTHESIS_SETTINGS
from hypothesis import Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)


@schemathesis.check
def soorma_error_shape(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx/5xx answer is ``{"error": {"code", "message", "details"}}``."""
    if response.status_code < 400:
        return None
    body = response.json()
    if not (isinstance(body, dict) and set(body) == {"error"}):
        raise AssertionError(f"error body is not {{'error': ...}}: {response.text[:300]}")
    error = body["error"]
    if not (isinstance(error, dict) and set(error) == {"code", "message", "details"}):
        raise AssertionError(f"error lacks code/message/details: {response.text[:300]}")
    if not (
        isinstance(error["code"], str)
        and error["code"]
        and isinstance(error["message"], str)
        and error["message"]
    ):
        raise AssertionError(f"error code/message must be non-empty strings: {error!r}")
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    soorma_error_shape,
]


def load_schema(base_url: str) -> Any:
    raw = requests.get(f"{base_url}/openapi.json", timeout=10).json()
    return schemathesis.openapi.from_dict(raw)


def fuzz_operations(
    base_url: str,
    *,
    max_examples: int,
    skip: frozenset[str] = frozenset(),
    headers: dict[str, str] | None = None,
    checks: list[Any] | None = None,
) -> list[str]:
    """Run every operation (positive and negative data); return one report per failure.

    ``skip`` holds labels like ``"GET /v1/events/stream"`` (streams never end, so a
    generated request would hang until its timeout). ``checks`` replaces :data:`CHECKS`.
    """
    raw = requests.get(f"{base_url}/openapi.json", timeout=10).text
    schema = schemathesis.openapi.from_dict(json.loads(raw))
    failures: list[str] = []
    with requests.Session() as session:
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.label in skip:
                continue
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                key = (raw, json.dumps(headers, sort_keys=True), operation.label, mode.value)
                try:
                    cases = _cases(key, operation, mode, headers, max_examples)
                    for case in cases:
                        response = case.call(base_url=base_url, session=session, timeout=10)
                        case.validate_response(response, checks=checks or CHECKS)
                except Unsatisfiable:
                    continue  # nothing to negate (no parameters, or any string is valid)
                except (Exception, BaseExceptionGroup) as exc:  # report all operations
                    failures.append(f"{operation.label} [{mode.value}]: {exc}")
    return failures


# The cases drawn for an operation, by (schema, headers, operation, mode). Drawing costs
# far more than sending (about half of a service's fuzz time), and the generation is
# derandomized: a service fuzzed on two backends publishes one schema and would draw the
# same cases twice. Sent in order, the first failure reported, as Hypothesis ran them
# (no shrinking, so a failing run stays as bounded as a passing one).
_drawn: dict[tuple[str, str, str, str], list[Any] | Unsatisfiable] = {}


def _cases(
    key: tuple[str, str, str, str],
    operation: Any,
    mode: GenerationMode,
    headers: dict[str, str] | None,
    examples: int,
) -> list[Any]:
    if key not in _drawn:
        drawn: list[Any] = []

        @settings(
            max_examples=examples, phases=[Phase.explicit, Phase.generate], **HYPOTHESIS_SETTINGS
        )
        @given(case=operation.as_strategy(generation_mode=mode, headers=headers))
        def draw(case: Any) -> None:
            drawn.append(case)

        try:
            draw()
            _drawn[key] = drawn
        except Unsatisfiable as exc:
            _drawn[key] = exc
    found = _drawn[key]
    if isinstance(found, Unsatisfiable):
        raise found
    return found
