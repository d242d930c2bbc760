from __future__ import annotations

from soorma.planning.interpolate import interpolate

SOURCES = {
    "goal_data": {"topic": "AI trends", "n": 3},
    "results": {"searching": {"items": ["a", "b"], "summary": {"k": 1}}},
}


def test_whole_placeholder_keeps_the_value_type() -> None:
    out = interpolate(
        {"query": "{goal_data.topic}", "items": "{results.searching.items}", "n": "{goal_data.n}"},
        SOURCES,
    )
    assert out == {"query": "AI trends", "items": ["a", "b"], "n": 3}


def test_placeholders_inside_text_render_as_strings_and_nest() -> None:
    out = interpolate(
        {
            "q": "about {goal_data.topic} ({goal_data.n})",
            "list": ["{results.searching.items.1}"],
            "deep": {"s": "{results.searching.summary}"},
            "flag": True,
        },
        SOURCES,
    )
    assert out == {"q": "about AI trends (3)", "list": ["b"], "deep": {"s": {"k": 1}}, "flag": True}


def test_missing_paths_and_escaped_braces() -> None:
    assert interpolate("{goal_data.nope}", SOURCES) is None
    assert interpolate("x={goal_data.nope}", SOURCES) == "x="
    assert interpolate("{{literal}}", SOURCES) == "{literal}"
