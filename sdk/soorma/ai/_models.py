"""Per-model settings of a ChoreographyPlanner: model id, endpoint and key variable.

A fallback model may live somewhere else than the main one (a local model with a hosted
fallback), so each model carries its own ``api_base`` and key. A model is given as

- a litellm model id (``"gpt-4o"``): it uses the planner's ``api_base`` / ``api_key``;
- a dict ``{"model", "api_base", "api_key_env", ...}``; or
- an entry of a litellm Router ``model_list``:
  ``{"model_name": ..., "litellm_params": {"model", "api_base", "api_key", ...}}``,
  where ``"api_key": "os.environ/VAR"`` names the variable holding the key.

Other keys are passed to ``litellm.acompletion`` for that model only. A dict model has
only its own settings: nothing is inherited from the planner's ``api_base``/``api_key``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from soorma.settings import provider_key

_ENV_PREFIX = "os.environ/"
ModelEntry = str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How to call one model.

    Attributes:
        model: litellm model id.
        api_base: Endpoint (``None``: the provider's default).
        api_key: The key itself (prefer ``api_key_env``).
        api_key_env: Environment variable holding the key, read at each call.
        options: Further ``litellm.acompletion`` options for this model.
    """

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str | None:
        """The key to send: ``api_key``, else the variable ``api_key_env`` names."""
        if self.api_key:
            return self.api_key
        return provider_key(self.api_key_env) if self.api_key_env else None

    def check_configured(self, options: Mapping[str, Any]) -> None:
        """Raise :class:`LLMNotConfigured` (naming the variable) when no key is set.

        Args:
            options: The planner's ``litellm.acompletion`` options (``mock_response``
                needs no key).
        """
        from soorma.ai._errors import LLMNotConfigured
        from soorma.ai._llm import check_credentials

        if self.api_key_env and not self.key():
            raise LLMNotConfigured(
                f"no API key for model {self.model!r}: set the {self.api_key_env} "
                "environment variable",
                details={"model": self.model, "env_var": self.api_key_env},
            )
        check_credentials(self.model, api_key=self.key(), options={**options, **self.options})


def model_settings(
    entry: ModelEntry, *, api_base: str | None = None, api_key: str | None = None
) -> ModelSettings:
    """Read one model entry (see the module doc).

    Args:
        entry: A model id, or a dict as described above.
        api_base: The planner's endpoint, used by a plain model id.
        api_key: The planner's key, used by a plain model id.

    Raises:
        ValueError: the entry names no model, or has a value of the wrong type.
    """
    if isinstance(entry, str):
        if not entry:
            raise ValueError("a model id must be a non-empty string, e.g. 'gpt-4o'")
        return ModelSettings(model=entry, api_base=api_base, api_key=api_key)
    if not isinstance(entry, Mapping):
        raise ValueError(f"a model is a litellm model id or a dict, got {type(entry).__name__}")
    params = dict(entry.get("litellm_params") or entry)
    params.pop("model_name", None)
    model = params.pop("model", None)
    if not isinstance(model, str) or not model:
        raise ValueError(f"model settings need 'model' (a litellm model id), got {dict(entry)!r}")
    base = params.pop("api_base", None)
    key = params.pop("api_key", None)
    key_env = params.pop("api_key_env", None)
    if isinstance(key, str) and key.startswith(_ENV_PREFIX):
        key_env, key = key[len(_ENV_PREFIX) :], None
    for name, value in (("api_base", base), ("api_key", key), ("api_key_env", key_env)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"model {model!r}: {name} must be a string")
    return ModelSettings(
        model=model, api_base=base, api_key=key, api_key_env=key_env, options=params
    )


__all__ = ["ModelEntry", "ModelSettings", "model_settings"]
