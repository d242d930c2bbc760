"""soorma.testing's public names are deliberate, and importing it starts nothing."""

import subprocess
import sys

import soorma.testing


def test_testing_package_exports_are_pinned():
    assert sorted(soorma.testing.__all__) == [
        "DeterministicEmbedder",
        "EventRecorder",
        "LLMCall",
        "PendingAnswer",
        "PlatformHarness",
        "RunningAgents",
        "ScriptExhausted",
        "ScriptedLLM",
    ]
    for name in soorma.testing.__all__:
        assert getattr(soorma.testing, name) is not None, name


def test_importing_soorma_testing_imports_no_service_and_no_llm_library():
    # The services are test-time dependencies, loaded when a harness starts; litellm only
    # when a scripted model is made.
    code = (
        "import sys, soorma.testing\n"
        "bad = [m for m in ('event_service', 'memory_service', 'registry_service', "
        "'fastapi', 'sqlalchemy', 'litellm') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
