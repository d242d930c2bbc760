"""The examples in docs/testing.md are tests: each runs here exactly as printed there.

Each ``<!-- snippet: NAME -->`` block is executed as a module; its one ``test_*`` function
is checked to be under 20 lines (what the docs promise) and awaited.
"""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
SNIPPET = re.compile(r"<!-- snippet: (\w+) -->\n```python\n(.*?)```", re.DOTALL)
EXPECTED = ["tool", "worker", "planner", "choreography", "clock"]


def snippets() -> dict[str, tuple[int, str]]:
    text = DOC.read_text()
    return {
        m.group(1): (text[: m.start(2)].count("\n") + 1, m.group(2)) for m in SNIPPET.finditer(text)
    }


def test_the_docs_show_a_tool_a_worker_planners_and_a_clock():
    assert list(snippets()) == EXPECTED


@pytest.mark.asyncio
@pytest.mark.parametrize("name", EXPECTED)
async def test_docs_snippet_runs_as_printed(name: str):
    first_line, source = snippets()[name]
    # Line numbers in tracebacks point into docs/testing.md.
    code = compile("\n" * (first_line - 1) + source, str(DOC), "exec")
    tests = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.AsyncFunctionDef) and node.name.startswith("test_")
    ]
    assert len(tests) == 1, f"snippet {name!r} must hold exactly one test"
    (test,) = tests
    length = test.end_lineno - test.lineno + 1 + len(test.decorator_list)
    assert length < 20, f"the {name} test is {length} lines; the docs promise under 20"
    module = types.ModuleType(f"docs_testing_{name}")
    exec(code, module.__dict__)
    await getattr(module, test.name)()
