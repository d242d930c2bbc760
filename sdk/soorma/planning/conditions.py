"""A small, safe evaluator for state-transition conditions.

Conditions use a Python-like expression syntax, parsed with :mod:`ast` and walked over a
whitelist of node types — nothing is ever passed to ``eval``. Supported:

* literals: numbers, strings, ``True``/``False``/``None``, lists and tuples of literals;
* names bound by the caller (e.g. ``data``, ``event``, ``results``, ``goal_data``, ``state``);
* field access ``data.count`` / ``data["count"]`` / ``items[0]`` (missing fields are ``None``);
* comparisons ``== != < <= > >= in not in is is not`` (chains allowed);
* ``and`` / ``or`` / ``not``, unary ``-``, and ``+ - * / %`` on numbers;
* the functions ``len()``, ``lower()``, ``upper()`` and ``exists()``, each with one argument.

One whitelist serves both :func:`validate_condition` and :func:`evaluate_condition`: an
expression is checked once (and cached) before it is evaluated, so anything that validates
also evaluates, on any data. Evaluation never fails on the data: a missing field, arithmetic
on something that is not a number, a division by zero or ``len()`` of something without a
length is ``None`` (and ``None`` satisfies no order comparison).

Examples: ``data.count > 0 and data.status == "ok"``, ``"error" not in data.tags``,
``len(results.searching.items) >= 3``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import Any

MAX_EXPRESSION_LENGTH = 2000
MAX_DEPTH = 100
"""How deeply a condition's expression may nest (keeps evaluation far from the stack limit)."""


class ConditionError(ValueError):
    """A condition is malformed or uses something the evaluator does not allow."""


# --- the whitelist ----------------------------------------------------------------------

_LITERAL_NAMES: dict[str, Any] = {"true": True, "false": False, "null": None}

_CONSTANT_TYPES = (bool, int, float, str, type(None))

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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _negate(value: Any) -> Any:
    return -value if _is_number(value) else None


_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: _negate,
}


def _len(value: Any) -> int | None:
    if value is None:
        return 0
    try:
        return len(value)
    except TypeError:
        return None  # a number or bool has no length


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
"""Functions a condition may call, each with exactly one positional argument."""


def _refuse(node: ast.AST, why: str = "") -> ConditionError:
    what = type(node).__name__
    return ConditionError(f"{what} is not allowed in conditions{why}: {ast.unparse(node)!r}")


def _check(node: ast.AST, free: set[str], depth: int = 0) -> None:
    """Raise ``ConditionError`` unless ``node`` is made only of whitelisted parts.

    Collects the names the expression reads into ``free``.
    """
    if depth > MAX_DEPTH:
        raise ConditionError(f"condition nested deeper than {MAX_DEPTH} levels")
    depth += 1
    match node:
        case ast.Constant(value=value):
            if not isinstance(value, _CONSTANT_TYPES):
                raise _refuse(node, f" (a {type(value).__name__} constant)")
        case ast.Name(id=name):
            if name in _FUNCTIONS:
                raise ConditionError(f"{name!r} is a function: call it, as in {name}(data.x)")
            if name not in _LITERAL_NAMES:
                free.add(name)
        case ast.Attribute(value=inner, attr=attr):
            if attr.startswith("_"):
                raise ConditionError(f"private field {attr!r} is not allowed in conditions")
            _check(inner, free, depth)
        case ast.Subscript(value=inner, slice=key):
            _check(inner, free, depth)
            _check(key, free, depth)
        case ast.BoolOp(values=values):
            for value_node in values:
                _check(value_node, free, depth)
        case ast.UnaryOp(op=op, operand=operand):
            if type(op) not in _UNARY:
                raise _refuse(node, f" (operator {type(op).__name__})")
            _check(operand, free, depth)
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            _check(left, free, depth)
            for cmp, right in zip(ops, comparators, strict=True):
                if type(cmp) not in _COMPARE:  # pragma: no cover - all comparisons are listed
                    raise _refuse(node, f" (comparison {type(cmp).__name__})")
                _check(right, free, depth)
        case ast.BinOp(left=left, op=op, right=right):
            if type(op) not in _BINARY:
                raise _refuse(node, f" (operator {type(op).__name__}; allowed: + - * / %)")
            _check(left, free, depth)
            _check(right, free, depth)
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            for element in elts:
                _check(element, free, depth)
        case ast.Call(func=ast.Name(id=fname), args=args, keywords=keywords) if fname in _FUNCTIONS:
            if len(args) != 1 or keywords or isinstance(args[0], ast.Starred):
                raise ConditionError(f"{fname}() takes exactly one argument: {ast.unparse(node)!r}")
            _check(args[0], free, depth)
        case ast.Call():
            raise ConditionError(
                f"only {', '.join(_FUNCTIONS)} may be called in conditions: {ast.unparse(node)!r}"
            )
        case _:
            raise _refuse(node)


@lru_cache(maxsize=512)
def _compile(expression: str) -> tuple[ast.expr, frozenset[str]]:
    """Parse and check ``expression``; its body and the names it reads."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ConditionError(f"condition longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"invalid condition {expression!r}: {exc.msg}") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ConditionError(f"invalid condition {expression[:80]!r}: {exc}") from exc
    free: set[str] = set()
    _check(tree.body, free)
    return tree.body, frozenset(free)


# --- evaluation (only of checked expressions) -------------------------------------------


def _field(container: Any, key: Any) -> Any:
    if container is None:
        return None
    if isinstance(container, Mapping):
        try:
            return container.get(key)
        except TypeError:
            return None  # an unhashable key (a list) names no field
    if isinstance(container, (list, tuple)) and isinstance(key, int):
        return container[key] if -len(container) <= key < len(container) else None
    if isinstance(key, str) and not key.startswith("_"):
        # Plain objects (e.g. pydantic models) expose public attributes only.
        return getattr(container, key, None)
    return None


def _eval(node: ast.AST, names: Mapping[str, Any]) -> Any:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            if name in _LITERAL_NAMES:
                return _LITERAL_NAMES[name]
            return names[name]
        case ast.Attribute(value=inner, attr=attr):
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
        case ast.UnaryOp(op=op, operand=operand):
            return _UNARY[type(op)](_eval(operand, names))
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            current = _eval(left, names)
            for cmp, right_node in zip(ops, comparators, strict=True):
                right = _eval(right_node, names)
                try:
                    if not _COMPARE[type(cmp)](current, right):
                        return False
                except TypeError:
                    return False  # e.g. None > 3: a missing field never satisfies an order
                current = right
            return True
        case ast.BinOp(left=left, op=op, right=right):
            lhs, rhs = _eval(left, names), _eval(right, names)
            if not (_is_number(lhs) and _is_number(rhs)):
                # Arithmetic on numbers only: "'a' * 10**9" must not allocate a gigabyte.
                return None
            try:
                return _BINARY[type(op)](lhs, rhs)
            except ArithmeticError:
                return None  # division by zero, a float overflow
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_eval(e, names) for e in elts]
        case ast.Call(func=ast.Name(id=fname), args=[arg]):
            return _FUNCTIONS[fname](_eval(arg, names))
    raise _refuse(node)  # pragma: no cover - _check admits only the cases above


def evaluate_condition(expression: str, names: Mapping[str, Any]) -> bool:
    """Evaluate ``expression`` against ``names`` and return its truth value.

    Raises:
        ConditionError: the expression is malformed, uses a construct the whitelist does
            not allow, or reads a name missing from ``names`` (exactly what
            :func:`validate_condition` refuses; never because of the data).
    """
    body, free = _compile(expression.strip())
    missing = free.difference(names)
    if missing:
        raise ConditionError(
            f"unknown name {min(missing)!r} in condition; available: {', '.join(sorted(names))}"
        )
    return bool(_eval(body, names))


def validate_condition(expression: str, allowed_names: Collection[str]) -> None:
    """Check a condition statically (syntax, whitelisted parts, names) without data.

    A condition that passes evaluates without ``ConditionError`` on any data bound to
    ``allowed_names``.

    Raises:
        ConditionError: naming what is not allowed.
    """
    _, free = _compile(expression.strip())
    unknown = free.difference(allowed_names)
    if unknown:
        raise ConditionError(
            f"unknown name {min(unknown)!r} in condition {expression!r}; "
            f"available: {', '.join(sorted(allowed_names))}"
        )
