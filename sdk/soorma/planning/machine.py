"""A plan's state machine as data: reading it and checking it before a plan starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soorma.planning.conditions import ConditionError, validate_condition
from soorma_common.state import StateConfig


def as_state_machine(
    machine: Mapping[str, StateConfig | Mapping[str, Any]],
) -> dict[str, StateConfig]:
    """``machine`` with every state as a :class:`StateConfig` (mappings are validated)."""
    out: dict[str, StateConfig] = {}
    for name, config in machine.items():
        cfg = config if isinstance(config, StateConfig) else StateConfig.model_validate(config)
        out[name] = cfg
    return out


def validate_state_machine(machine: Mapping[str, StateConfig], initial_state: str) -> None:
    """Check that every referenced state exists and conditions parse.

    Raises:
        ValueError: naming the state and the missing target or bad condition.
    """
    if initial_state not in machine:
        raise ValueError(
            f"state machine has no initial state {initial_state!r}; states: {sorted(machine)}"
        )
    for name, cfg in machine.items():
        targets = [t.to_state for t in cfg.transitions]
        if cfg.default_next:
            targets.append(cfg.default_next)
        for target in targets:
            if target not in machine:
                raise ValueError(
                    f"state {name!r} leads to unknown state {target!r}; states: {sorted(machine)}"
                )
        for t in cfg.transitions:
            if t.condition:
                try:
                    validate_condition(t.condition, set(CONDITION_NAMES))
                except ConditionError as exc:
                    raise ValueError(
                        f"state {name!r}, transition on {t.on_event!r}: {exc}"
                    ) from exc


CONDITION_NAMES = ("data", "event", "results", "goal_data", "state")


__all__ = ["CONDITION_NAMES", "as_state_machine", "validate_state_machine"]
