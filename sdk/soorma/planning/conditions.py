"""A small, safe evaluator for state-transition conditions.

Conditions use a Python-like expression syntax, parsed with :mod:`ast` and walked over a
whitelist of node types — nothing is ever passed to ``eval``. Supported:

* literals: numbers, strings, ``True``/``False``/``None``, lists and tuples of literals;
* names bound by the caller (e.g. ``data``, ``event``, ``results``, ``goal_data``, ``state``);
* field access ``data.count`` / ``data["count"]`` / ``items[0]`` (missing fields are ``None``);
* comparisons ``== != < <= > >= in not in is is not`` (chains allowed);
* ``and`` / ``or`` / ``not``, unary ``-``, and ``+ - * / %`` on numbers;
* the functions ``len()``, ``lower()``, ``upper()`` and ``exists()``.

Examples: ``data.count > 0 and data.status == "ok"``, ``"error" not in data.tags``,
``len(results.searching.items) >= 3``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

MAX_EXPRESSION_LENGTH = 2000


class ConditionError(ValueError):
    """A condition is malformed or uses something the evaluator does not allow."""


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: b is not None and a in b,
    ast.NotIn: lambda a, b: b is None or a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}


def _len(value: Any) -> int:
    return 0 if value is None else len(value)


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _exists(value: Any) -> bool:
    return value is not None


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "len": _len,
    "lower": _lower,
    "upper": _upper,
    "exists": _exists,
}


def _field(container: Any, key: Any) -> Any:
    if container is None:
        return None
    if isinstance(container, Mapping):
        return container.get(key)
    if isinstance(container, (list, tuple)) and isinstance(key, int):
        return container[key] if -len(container) <= key < len(container) else None
    if isinstance(key, str) and not key.startswith("_"):
        # Plain objects (e.g. pydantic models) expose public attributes only.
        return getattr(container, key, None)
    return None


@lru_cache(maxsize=512)
def _parse(expression: str) -> ast.Expression:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ConditionError(f"condition longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        return ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"invalid condition {expression!r}: {exc.msg}") from exc


def _eval(node: ast.AST, names: Mapping[str, Any]) -> Any:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            if name in ("true", "false", "null"):
                return {"true": True, "false": False, "null": None}[name]
            if name not in names:
                raise ConditionError(
                    f"unknown name {name!r} in condition; available: {', '.join(sorted(names))}"
                )
            return names[name]
        case ast.Attribute(value=inner, attr=attr):
            if attr.startswith("_"):
                raise ConditionError(f"private field {attr!r} is not allowed in conditions")
            return _field(_eval(inner, names), attr)
        case ast.Subscript(value=inner, slice=key_node):
            return _field(_eval(inner, names), _eval(key_node, names))
        case ast.BoolOp(op=ast.And(), values=values):
            result: Any = True
            for value_node in values:
                result = _eval(value_node, names)
                if not result:
                    return result
            return result
        case ast.BoolOp(op=ast.Or(), values=values):
            result = False
            for value_node in values:
                result = _eval(value_node, names)
                if result:
                    return result
            return result
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _eval(operand, names)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand, names)
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            current = _eval(left, names)
            for op, right_node in zip(ops, comparators, strict=True):
                right = _eval(right_node, names)
                try:
                    if not _COMPARE[type(op)](current, right):
                        return False
                except TypeError:
                    return False  # e.g. None > 3: a missing field never satisfies an order
                current = right
            return True
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            lhs, rhs = _eval(left, names), _eval(right, names)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lhs, rhs)):
                # Arithmetic on numbers only: "'a' * 10**9" must not allocate a gigabyte.
                raise ConditionError(f"arithmetic needs numbers: {ast.unparse(node)!r}")
            try:
                return _BINARY[type(op)](lhs, rhs)
            except (TypeError, ZeroDivisionError) as exc:
                raise ConditionError(f"cannot compute {ast.unparse(node)!r}: {exc}") from exc
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_eval(e, names) for e in elts]
        case ast.Call(func=ast.Name(id=fname), args=[arg], keywords=[]) if fname in _FUNCTIONS:
            return _FUNCTIONS[fname](_eval(arg, names))
    raise ConditionError(
        f"{type(node).__name__} is not allowed in conditions: {ast.unparse(node)!r}"
    )


def evaluate_condition(expression: str, names: Mapping[str, Any]) -> bool:
    """Evaluate ``expression`` against ``names`` and return its truth value.

    Raises:
        ConditionError: the expression is malformed or uses a disallowed construct.
    """
    return bool(_eval(_parse(expression.strip()).body, names))


def validate_condition(expression: str, allowed_names: set[str]) -> None:
    """Check a condition statically (syntax, allowed nodes and names) without data."""
    tree = _parse(expression.strip())
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in allowed_names | set(_FUNCTIONS) | {
            "true", "false", "null"
        }:
            raise ConditionError(
                f"unknown name {node.id!r} in condition {expression!r}; "
                f"available: {', '.join(sorted(allowed_names))}"
            )
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ConditionError(f"private field {node.attr!r} is not allowed in conditions")
        if isinstance(node, (ast.Lambda, ast.comprehension, ast.NamedExpr, ast.Starred,
                             ast.Await, ast.Yield, ast.YieldFrom, ast.IfExp, ast.Dict,
                             ast.Set, ast.JoinedStr, ast.Slice)):
            raise ConditionError(f"{type(node).__name__} is not allowed in conditions")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
        ):
            raise ConditionError(f"only {', '.join(_FUNCTIONS)} may be called in conditions")
