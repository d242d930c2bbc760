"""Pure planning helpers: safe condition evaluation and payload interpolation."""

from soorma.planning.conditions import ConditionError, evaluate_condition
from soorma.planning.interpolate import interpolate, resolve_path

__all__ = ["ConditionError", "evaluate_condition", "interpolate", "resolve_path"]
