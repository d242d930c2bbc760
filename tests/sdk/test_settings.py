"""The SDK reads its environment in one module (soorma.settings), into one frozen value."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from soorma import ConfigurationError, PlatformContext, PlatformSettings
from soorma.consumer_identity import ConsumerIdentity
from soorma.settings import no_color, provider_key
from soorma_common.tracing import TracingSettings

SDK = Path(__file__).resolve().parents[2] / "sdk" / "soorma"
# Writing the environment is allowed where processes or agents are started with it.
WRITES = {"setdefault"}


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that read the process environment (writes are not reads)."""
    reads: list[int] = []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            reads += [
                node.lineno for a in node.names if a.name in {"environ", "getenv", "environb"}
            ]
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
            continue
        if node.value.id != "os" or node.attr not in {"environ", "getenv", "environb"}:
            continue
        parent = parents.get(node)
        if node.attr == "environ" and isinstance(parent, ast.Subscript):
            if isinstance(parent.ctx, ast.Store):
                continue  # os.environ[name] = value
        if node.attr == "environ" and isinstance(parent, ast.Attribute):
            if parent.attr in WRITES:
                continue  # os.environ.setdefault(name, value)
        reads.append(node.lineno)
    return sorted(reads)


def test_only_the_settings_module_reads_the_environment() -> None:
    readers = {}
    for path in sorted(SDK.rglob("*.py")):
        if path.name == "settings.py" and path.parent == SDK:
            continue
        lines = _environment_reads(ast.parse(path.read_text(), str(path)))
        if lines:
            readers[str(path.relative_to(SDK))] = lines
    assert readers == {}, "read the environment through soorma.settings instead"


def test_the_check_finds_reads_and_lets_writes_pass() -> None:
    source = """
import os
from os import getenv
a = os.environ.get("X")
b = os.environ["X"]
c = os.getenv("X")
os.environ["Y"] = "1"
os.environ.setdefault("Z", "1")
"""
    assert _environment_reads(ast.parse(source)) == [3, 4, 5, 6]


def test_every_sdk_variable_is_read_into_one_frozen_value() -> None:
    settings = PlatformSettings.from_env(
        {
            "SOORMA_URL": "http://platform:9000/",
            "SOORMA_MEMORY_URL": "http://memory:8083",
            "SOORMA_API_TOKEN": "token-1",
            "SOORMA_TENANT_ID": "acme",
            "SOORMA_USER_ID": "ada",
            "SOORMA_SERVICE_ROLE": "service",
            "SOORMA_GATEWAY_API_KEY": "key-1",
            "SOORMA_CONSUMER_ID": " pod-7 ",
            "SOORMA_REPLICA": "3",
            "SOORMA_STATE_DIR": "/var/lib/soorma",
            "SOORMA_HTTP_TRANSPORT": "HTTPX",
            "SOORMA_PUBLISH_COALESCE": "false",
            "SOORMA_ACK_BATCHING": "0",
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_SERVICE_NAME": "orders",
            "SOORMA_OTEL_RECORD_PROMPTS": "true",
        }
    )
    assert settings == PlatformSettings(
        platform_url="http://platform:9000",
        event_service_url="http://platform:9000/events",
        memory_url="http://memory:8083",
        registry_url="http://platform:9000/registry",
        tracker_url="http://platform:9000/tracker",
        gateway_url="http://platform:9000/gateway",
        api_token="token-1",
        tenant_id="acme",
        user_id="ada",
        service_role="service",
        gateway_api_key="key-1",
        consumer_id="pod-7",
        replica="3",
        state_dir=Path("/var/lib/soorma"),
        http_transport="httpx",
        publish_coalesce=False,
        ack_batching=False,
        tracing=TracingSettings(
            exporters=("console",), protocol="grpc", service_name="orders", record_prompts=True
        ),
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.api_token = "other"  # type: ignore[misc]
    assert "token-1" not in repr(settings) and "key-1" not in repr(settings)


def test_empty_variables_count_as_unset_and_the_state_dir_follows_xdg() -> None:
    settings = PlatformSettings.from_env({"SOORMA_API_TOKEN": "", "XDG_CACHE_HOME": "/cache"})
    assert settings.api_token is None and settings.platform_url is None
    assert settings.state_dir == Path("/cache/soorma")
    assert PlatformSettings.from_env({}).replica_state_dir == Path.home() / ".cache" / "soorma"


def test_a_bad_transport_fails_when_the_settings_are_read() -> None:
    with pytest.raises(ConfigurationError, match="SOORMA_HTTP_TRANSPORT='curl'"):
        PlatformSettings.from_env({"SOORMA_HTTP_TRANSPORT": "curl"})
    with pytest.raises(ValueError, match="http_transport"):
        PlatformSettings(http_transport="curl")  # type: ignore[arg-type]


def test_the_accelerator_switches_are_on_unless_turned_off() -> None:
    assert PlatformSettings.from_env({}).publish_coalesce is True
    assert PlatformSettings.from_env({"SOORMA_ACK_BATCHING": "yes"}).ack_batching is True
    assert PlatformSettings.from_env({"SOORMA_ACK_BATCHING": "OFF"}).ack_batching is False
    with pytest.raises(ConfigurationError, match="SOORMA_PUBLISH_COALESCE='maybe'"):
        PlatformSettings.from_env({"SOORMA_PUBLISH_COALESCE": "maybe"})


def test_tracing_is_off_unless_the_otel_variables_ask() -> None:
    assert PlatformSettings.from_env({}).tracing == TracingSettings()
    assert PlatformSettings().tracing.exporters == ()
    endpoint = PlatformSettings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert endpoint.tracing.exporters == ("otlp",)
    disabled = PlatformSettings.from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    )
    assert disabled.tracing.disabled and disabled.tracing.exporters == ()


@pytest.mark.asyncio
async def test_an_agent_reads_its_settings_once_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, event_service
) -> None:
    from soorma import Agent

    monkeypatch.setenv("SOORMA_EVENT_SERVICE_URL", event_service.url)
    monkeypatch.setenv("SOORMA_REGISTRY_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("SOORMA_CONSUMER_ID", "read-once-7")
    monkeypatch.setenv("SOORMA_ACK_BATCHING", "false")
    monkeypatch.setenv("SOORMA_STATE_DIR", str(tmp_path))
    reads: list[PlatformSettings] = []
    real = PlatformSettings.from_env.__func__  # type: ignore[attr-defined]

    def counted(cls, environ=None):
        reads.append(real(cls, environ))
        return reads[-1]

    monkeypatch.setattr(PlatformSettings, "from_env", classmethod(counted))
    agent = Agent(name="reads-once")

    @agent.on_event(topic="business-facts", event_type="x.happened")
    async def handle(event, context):
        return None

    await agent.start()
    try:
        assert len(reads) == 1
        # The context, the consumer id and the ack path all come from that one reading.
        assert agent.context.settings is reads[0]
        assert agent.consumer_id == "read-once-7"
        assert type(agent._acks).__name__ == "DirectAcks"
    finally:
        await agent.stop()


@pytest.mark.asyncio
async def test_a_context_built_from_settings_reads_no_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each of these would fail if the context (or its HTTP client) read the environment.
    monkeypatch.setenv("SOORMA_HTTP_TRANSPORT", "curl")
    monkeypatch.setenv("SOORMA_EVENT_SERVICE_URL", "localhost:8082")
    settings = PlatformSettings(event_service_url="http://127.0.0.1:1")
    async with PlatformContext.from_env(settings=settings) as context:
        assert context.settings is settings
        assert context.bus.base_url == "http://127.0.0.1:1"


@pytest.mark.asyncio
async def test_settings_are_read_when_the_context_is_built_not_at_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOORMA_TENANT_ID", "read-late")
    async with PlatformContext.from_env() as context:
        assert context.settings.tenant_id == "read-late"
        assert context.bus.identity.tenant_id == "read-late"


def test_a_replica_takes_its_id_from_the_settings_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SOORMA_CONSUMER_ID", "from-the-environment")
    given = PlatformSettings(consumer_id="pod-3")
    assert ConsumerIdentity("g", settings=given).consumer_id == "pod-3"
    slots = ConsumerIdentity("g", settings=PlatformSettings(state_dir=tmp_path))
    try:
        assert slots.source == "slot"
        assert list((tmp_path / "consumers").glob("g.*.lock"))
    finally:
        slots.release()


def test_provider_keys_and_no_color_are_read_at_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXAMPLE_PROVIDER_API_KEY", raising=False)
    assert provider_key("EXAMPLE_PROVIDER_API_KEY") is None
    monkeypatch.setenv("EXAMPLE_PROVIDER_API_KEY", "sk-1")
    assert provider_key("EXAMPLE_PROVIDER_API_KEY") == "sk-1"
    assert no_color({"NO_COLOR": "1"}) and not no_color({})
