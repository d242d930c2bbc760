"""The transition-condition evaluator: expressive enough to route, unable to escape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soorma.planning.conditions import ConditionError, evaluate_condition, validate_condition

NAMES = {
    "data": {"count": 3, "status": "ok", "tags": ["a", "b"], "nested": {"x": 1}},
    "results": {"searching": {"items": [1, 2, 3]}},
    "goal_data": {"topic": "AI"},
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("data.count > 0", True),
        ("data.count > 0 and data.status == 'ok'", True),
        ("data.count > 5 or data.status == 'bad'", False),
        ("not data.missing", True),
        ("data.missing > 3", False),
        ("'a' in data.tags", True),
        ("'z' not in data.tags", True),
        ("'z' in data.missing", False),
        ("data['nested']['x'] == 1", True),
        ("data.tags[1] == 'b'", True),
        ("data.tags[9] is None", True),
        ("len(results.searching.items) >= 3", True),
        ("lower(goal_data.topic) == 'ai'", True),
        ("exists(data.status) and not exists(data.nope)", True),
        ("1 < data.count < 5", True),
        ("data.count * 2 == 6", True),
        ("data.status == null", False),
        ("true", True),
        ("data.status * 1000000000", False),  # arithmetic on a string: None, nothing allocated
        ("data.count / 0 == null", True),
        ("len(data.count) == null", True),
    ],
)
def test_conditions_route_on_event_data_and_results(expression: str, expected: bool) -> None:
    assert evaluate_condition(expression, NAMES) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "data.__class__",
        "data.count.__class__.__mro__",
        "open('/etc/passwd')",
        "[x for x in data.tags]",
        "(lambda: 1)()",
        "data.count if True else 0",
        "f'{data}'",
        "unknown_name == 1",
        "data.count >",
        "x := 1",
    ],
)
def test_dangerous_or_malformed_conditions_are_rejected(expression: str) -> None:
    with pytest.raises(ConditionError):
        evaluate_condition(expression, NAMES)
        validate_condition(expression, set(NAMES))
        raise AssertionError("not reached")


def test_validate_condition_names_the_unknown_name() -> None:
    with pytest.raises(ConditionError, match="unknown name 'dta'"):
        validate_condition("dta.count > 1", {"data"})
    validate_condition("data.count > 1 and len(results.x) == 2", {"data", "results"})


@given(st.text(max_size=60))
def test_arbitrary_text_never_escapes_the_evaluator(text: str) -> None:
    try:
        evaluate_condition(text, NAMES)
    except ConditionError:
        pass


# --- validation and evaluation share one whitelist --------------------------------------

CONDITION_NAMES = {"data", "event", "results", "goal_data", "state"}


@pytest.mark.parametrize(
    "expression",
    [
        "data.x ** 2 > 1",
        "data.x // 2 == 1",
        "len(data.a, data.b) > 0",
        "len() == 0",
        "len(x=data.a) == 0",
        "len > 0",
        "data.x | 1",
        "~data.x",
        "+data.x > 0",
        "data.x @ data.y",
        "data.x << 2 > 1",
        "1j > 0",
        "b'x' == data.x",
        "... == data.x",
        "data.items[1:2] == data.x",
        "data.x if data.y else data.z",
        "{1: 2} == data.x",
        "{1, 2} == data.x",
        "data.lower()",
        "(lambda: 1)() == 1",
        "-" * 200 + "1 == 1",
    ],
)
def test_validation_refuses_what_the_evaluator_cannot_evaluate(expression: str) -> None:
    with pytest.raises(ConditionError):
        validate_condition(expression, CONDITION_NAMES)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**6), max_value=10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "x", "items"]), inner, max_size=3)
    ),
    max_leaves=8,
)

_atom = st.one_of(
    st.sampled_from(sorted(CONDITION_NAMES)),
    st.sampled_from(["true", "false", "null", "None", "True", "len", "nope"]),
    st.integers(min_value=-3, max_value=10**20).map(repr),
    st.floats(allow_nan=False).map(repr),
    st.text(alphabet="abx", max_size=3).map(repr),
    st.sampled_from(["1j", "b'x'", "...", "1e400"]),
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binop = st.sampled_from(["+", "-", "*", "/", "%", "**", "//", "|", "&", "^", "<<", "@"])
    cmp = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is", "is not"])
    return st.one_of(
        st.tuples(inner, st.sampled_from(["a", "b", "x", "items", "_p", "__class__"])).map(
            lambda t: f"({t[0]}).{t[1]}"
        ),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})[{t[1]}]"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})[{t[1]}:]"),
        st.tuples(inner, binop, inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, cmp, inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(
            lambda t: f"({t[0]}) {t[1]} ({t[2]})"
        ),
        st.tuples(st.sampled_from(["not ", "-", "+", "~"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(
            st.sampled_from(["len", "lower", "upper", "exists", "abs", "nope"]),
            st.lists(inner, max_size=2),
        ).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]}) if ({t[1]}) else ({t[2]})"),
    )


_expression = st.recursive(_atom, _extend, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(
    expression=_expression,
    data=st.fixed_dictionaries({name: _json for name in sorted(CONDITION_NAMES)}),
)
def test_every_condition_that_validates_evaluates_on_any_data(
    expression: str, data: dict[str, object]
) -> None:
    try:
        validate_condition(expression, CONDITION_NAMES)
    except ConditionError:
        return
    # No ConditionError - and no other exception - whatever the data holds.
    assert evaluate_condition(expression, data) in (True, False)
