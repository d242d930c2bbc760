"""Tracing is switched by each process's settings: what its settings hold, not the
environment read again, decides. Each case runs in a fresh process (the first
``configure`` of a process decides) with no ``OTEL_*`` variable set at all."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from testsupport import forkserver


def run(script: str) -> subprocess.CompletedProcess[str]:
    # Forked from a server that has imported the SDK but configured nothing: the first
    # configure is the child's, as in a new interpreter.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("SOORMA_OTEL_RECORD_PROMPTS", None)
    return forkserver.run([sys.executable, "-c", textwrap.dedent(script)], env=env, timeout=60)


def test_an_sdk_context_traces_as_its_settings_say() -> None:
    done = run(
        """
        import asyncio
        from opentelemetry import trace
        from soorma import PlatformContext, PlatformSettings
        from soorma_common import tracing as otel

        async def main():
            settings = PlatformSettings(
                tracing=otel.TracingSettings(exporters=("console",), service_name="from-settings")
            )
            async with PlatformContext.from_env(settings=settings):
                assert otel.ENABLED
            otel.tracer().start_span("hello").end()
            trace.get_tracer_provider().force_flush()

        asyncio.run(main())
        """
    )
    assert done.returncode == 0, done.stderr
    assert '"name": "hello"' in done.stdout
    assert '"service.name": "from-settings"' in done.stdout


def test_a_service_traces_as_its_settings_say() -> None:
    done = run(
        """
        from registry_service import Settings, create_app
        from soorma_common import tracing as otel

        assert not otel.ENABLED
        create_app(Settings(otel_traces_exporter="console", otel_record_prompts="true"))
        assert otel.ENABLED and otel.RECORD_PROMPTS
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_a_service_without_tracing_settings_stays_untraced() -> None:
    done = run(
        """
        from registry_service import Settings, create_app
        from soorma_common import tracing as otel

        create_app(Settings(otel_traces_exporter="none", otel_service_name="x"))
        assert not otel.ENABLED
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_the_gateway_turns_a2a_sdk_spans_off_only_when_its_tracing_is_off() -> None:
    script = """
        import os
        import gateway_a2a
        print(os.environ.get("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED"))
        """
    untraced = run(script)
    assert untraced.returncode == 0, untraced.stderr
    assert untraced.stdout.strip().splitlines()[-1] == "false"
    traced = run(
        "import os\nos.environ['OTEL_TRACES_EXPORTER'] = 'console'\n" + textwrap.dedent(script)
    )
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout.strip().splitlines()[-1] == "None"
