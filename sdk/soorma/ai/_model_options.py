"""The ``litellm.acompletion`` options a :class:`~soorma.ai.ChoreographyPlanner` passes on.

:class:`ModelOptions` lists them; :func:`check_model_options` refuses any other name at
once, naming it (and the closest accepted one), instead of sending it to the provider,
where a misspelt ``max_token`` would be ignored or fail each decision as a provider error.
Options a planner sets itself (``model``, ``messages``, ``temperature``...) are refused
with the argument to use instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict


class ModelOptions(TypedDict, total=False):
    """Options for each model call (``ChoreographyPlanner(max_tokens=...)``, or one call's
    ``llm_options``); their meaning is litellm's (https://docs.litellm.ai/docs/completion/input).

    A provider parameter not listed here goes in ``extra_body``; per-model settings
    (``api_version``, a region...) can also sit in a ``fallback_models`` entry.
    """

    max_tokens: int
    max_completion_tokens: int
    top_p: float
    stop: str | list[str]
    seed: int
    presence_penalty: float
    frequency_penalty: float
    logit_bias: dict[str, float]
    reasoning_effort: str
    thinking: dict[str, Any]
    user: str
    timeout: float
    num_retries: int
    extra_headers: dict[str, str]
    extra_body: dict[str, Any]
    metadata: dict[str, Any]
    drop_params: bool
    api_version: str
    custom_llm_provider: str
    aws_region_name: str
    vertex_project: str
    vertex_location: str
    caching: bool
    # litellm answers this text without calling a provider (tests, examples).
    mock_response: Any


MODEL_OPTIONS: frozenset[str] = frozenset(ModelOptions.__annotations__)

# Set by the planner on every call: each has its own argument, or none at all.
_PLANNER_SETS = {
    "model": "reasoning_model=",
    "messages": None,
    "temperature": "temperature=",
    "api_key": "api_key=",
    "api_base": "api_base=",
    "base_url": "api_base=",
    "response_format": None,
    "stream": None,
}


def check_model_options(
    options: Mapping[str, Any], where: str, arguments: Iterable[str] = ()
) -> dict[str, Any]:
    """``options`` as a dict if every name is a :class:`ModelOptions` key; else TypeError.

    Args:
        options: The model options given.
        where: Where they were given, for the message (``"ChoreographyPlanner()"``).
        arguments: Other names accepted where they were given (a constructor's own
            arguments), offered too when a name is misspelt.

    Raises:
        TypeError: naming the first unknown option, the closest accepted name, or the
            planner argument that sets it.
    """
    for name in options:
        if name in MODEL_OPTIONS:
            continue
        if name in _PLANNER_SETS:
            use = _PLANNER_SETS[name]
            hint = f"; use ChoreographyPlanner({use}...)" if use else ""
            raise TypeError(f"{where}: model option {name!r} is set by the planner itself{hint}")
        known = sorted(MODEL_OPTIONS | set(arguments))
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        what = "argument or model option" if arguments else "model option"
        raise TypeError(
            f"{where}: unknown {what} {name!r}{hint} (model options: "
            f"{', '.join(sorted(MODEL_OPTIONS))}; a provider parameter goes in extra_body)"
        )
    return dict(options)


__all__ = ["MODEL_OPTIONS", "ModelOptions", "check_model_options"]
