"""soorma.ai's public names are deliberate, and importing it never loads litellm."""

import subprocess
import sys

import soorma.ai


def test_ai_package_exports_are_pinned():
    assert sorted(soorma.ai.__all__) == [
        "ArtifactSink",
        "ChoreographyPlanner",
        "CircuitBreakerOpen",
        "DecisionInvalid",
        "EventToolkit",
        "LLMNotConfigured",
        "ModelOptions",
        "PlannerError",
        "Retrieval",
        "stream_text",
    ]
    for name in soorma.ai.__all__:
        assert getattr(soorma.ai, name) is not None, name


def test_planner_errors_are_one_hierarchy_catchable_as_planner_error():
    for name in ("CircuitBreakerOpen", "DecisionInvalid", "LLMNotConfigured"):
        assert issubclass(getattr(soorma.ai, name), soorma.ai.PlannerError), name


def test_importing_soorma_ai_does_not_import_litellm():
    # A fresh interpreter: litellm takes seconds to import, so only a decision may load it.
    code = (
        "import sys\n"
        "import soorma.ai\n"
        "from soorma.ai import ChoreographyPlanner\n"
        "ChoreographyPlanner(name='p', reasoning_model='gpt-4o-mini')\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
