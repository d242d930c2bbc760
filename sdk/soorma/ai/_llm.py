"""The one place the SDK talks to litellm.

litellm takes seconds to import, so it is imported on first use only (when a
ChoreographyPlanner first reasons), never when ``soorma`` is imported.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from soorma import _tracing
from soorma.ai._errors import LLMNotConfigured
from soorma.settings import provider_key

logger = logging.getLogger("soorma.ai")

# Provider prefixes -> the environment variable that holds their key. Checked before a
# call so a missing key is reported as "set OPENAI_API_KEY", not as a provider 401.
_PROVIDER_KEYS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("openai/", "gpt-", "o1", "o3", "o4", "chatgpt-", "text-embedding"), "OPENAI_API_KEY"),
    (("anthropic/", "claude"), "ANTHROPIC_API_KEY"),
    (("azure/", "azure_ai/"), "AZURE_API_KEY"),
    (("gemini/",), "GEMINI_API_KEY"),
    (("groq/",), "GROQ_API_KEY"),
    (("mistral/",), "MISTRAL_API_KEY"),
    (("deepseek/",), "DEEPSEEK_API_KEY"),
    (("openrouter/",), "OPENROUTER_API_KEY"),
    (("together_ai/",), "TOGETHERAI_API_KEY"),
    (("cohere/", "command-r"), "COHERE_API_KEY"),
    (("xai/",), "XAI_API_KEY"),
)
# Local runtimes need no key.
_KEYLESS_PREFIXES = ("ollama/", "ollama_chat/", "lm_studio/", "hosted_vllm/", "llamafile/")

_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm on first use.

    Raises:
        LLMNotConfigured: litellm is not installed.
    """
    global _litellm
    if _litellm is None:
        # Seconds of silence otherwise, the first time a planner thinks.
        logger.info("loading the model library (litellm); this takes a few seconds")
        started = time.monotonic()
        try:
            import litellm
        except ImportError as exc:  # pragma: no cover - litellm is installed in dev/CI
            raise LLMNotConfigured(
                "ChoreographyPlanner needs litellm: install it with "
                "`pip install 'soorma[ai]'` (or `pip install litellm`)"
            ) from exc
        _prepare(litellm)
        _litellm = litellm
        logger.info("model library loaded in %.1f s", time.monotonic() - started)
    return _litellm


# Imported by litellm's first call, not by ``import litellm``: they build pydantic
# adapters of ReadOnly TypedDicts when imported.
_LAZY_MODULES = (
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.github_copilot.per_user_auth",
)


def _prepare(litellm: Any) -> None:
    """Build, once and now, the response types litellm would otherwise build on first use.

    litellm defers its pydantic models; the first streamed answer builds ``Delta`` and
    ``Message``, and pydantic then warns (UserWarning) that their TypedDict fields use
    ``ReadOnly``. litellm silences that with a process-wide filter added when it is
    imported, but a host that resets the warning filters afterwards (pytest does after
    every test; ``-W error`` makes the warning an exception) would see it raised in the
    middle of a call, possibly in an executor thread. So the build happens here, under a
    filter for exactly that message, with no ``await`` in between.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier", category=UserWarning)
        for name in _LAZY_MODULES:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        module = getattr(getattr(litellm, "types", None), "utils", None)
        owner = getattr(module, "__name__", None)
        for value in list(vars(module).values()) if owner else []:
            rebuild = getattr(value, "model_rebuild", None)
            if (
                isinstance(value, type)
                and rebuild is not None
                and value.__module__ == owner
                and not getattr(value, "__pydantic_complete__", True)
            ):
                with contextlib.suppress(Exception):
                    rebuild(raise_errors=False)


def key_env_var(model: str) -> str | None:
    """The environment variable holding the provider key for ``model`` (None: keyless/unknown)."""
    name = model.lower()
    if name.startswith(_KEYLESS_PREFIXES):
        return None
    for prefixes, env_var in _PROVIDER_KEYS:
        if name.startswith(prefixes):
            return env_var
    return None


def check_credentials(
    model: str,
    *,
    api_key: str | None,
    options: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> None:
    """Fail early, naming the variable to set, when ``model`` has no key.

    A mocked call (``mock_response``), an explicit ``api_key`` and models served by a
    registered litellm custom provider need no key.

    Raises:
        LLMNotConfigured: the provider's key variable is unset.
    """
    if api_key or "mock_response" in options:
        return
    provider = model.split("/", 1)[0] if "/" in model else ""
    if provider and provider in _custom_providers():
        return
    env_var = key_env_var(model)
    if env_var and not provider_key(env_var, environ):
        raise LLMNotConfigured(
            f"no API key for model {model!r}: set the {env_var} environment variable "
            f"(or pass api_key=... to ChoreographyPlanner); use an 'ollama/...' model for a "
            "local LLM that needs no key",
            details={"model": model, "env_var": env_var},
        )


def _custom_providers() -> set[str]:
    if _litellm is None:
        return set()
    return {
        str(entry.get("provider"))
        for entry in (getattr(_litellm, "custom_provider_map", None) or [])
        if isinstance(entry, dict)
    }


@dataclass(slots=True)
class Completion:
    """One model answer with what the audit trail needs."""

    model: str
    content: str
    latency_ms: float
    tokens: dict[str, int] = field(default_factory=dict)


async def complete(
    *,
    model: str,
    messages: Sequence[Mapping[str, str]],
    response_format: Mapping[str, Any] | None,
    api_key: str | None,
    api_base: str | None,
    temperature: float,
    options: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
) -> Completion:
    """Call ``litellm.acompletion`` and return the text of the first choice.

    ``headers`` are sent with the HTTP request (litellm's ``extra_headers``), on top of
    any ``extra_headers`` in ``options``; the planner's idempotency key travels this way.

    Raises:
        LLMNotConfigured: litellm missing or the provider key unset.
        PlannerError: the provider call failed (network, auth, rate limit).
    """
    litellm = load_litellm()
    check_credentials(model, api_key=api_key, options=options)
    kwargs: dict[str, Any] = dict(options)
    if api_key:
        kwargs["api_key"] = api_key
    if api_base:
        kwargs["api_base"] = api_base
    if response_format is not None:
        kwargs["response_format"] = dict(response_format)
    if headers:
        kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **headers}
    with _tracing.llm_span(model, messages, temperature) as span:
        started = time.perf_counter()
        response = await litellm.acompletion(
            model=model, messages=[dict(m) for m in messages], temperature=temperature, **kwargs
        )
        latency_ms = (time.perf_counter() - started) * 1000.0
        content = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        tokens: dict[str, int] = {}
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = getattr(usage, name, None) if usage is not None else None
            if isinstance(value, int):
                tokens[name] = value
        answer = Completion(model=model, content=content, latency_ms=latency_ms, tokens=tokens)
        _tracing.llm_answer(span, answer, getattr(response, "model", None))
    return answer


__all__ = ["Completion", "check_credentials", "complete", "key_env_var", "load_litellm"]
