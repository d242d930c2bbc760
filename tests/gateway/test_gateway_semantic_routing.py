"""A message that names no skill goes to the skill it is about, by meaning: the memory
service's embeddings (WordLlama, offline) of the message and of each skill. Without
them (no memory service, or one that does not answer) the words decide, as before."""

from __future__ import annotations

from contextlib import AsyncExitStack

import httpx
import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from gateway_a2a.routing import rank
from gateway_a2a.semantic import SemanticRanker
from gateway_a2a.skills import Skill
from memory_service import create_app as create_memory_app
from soorma import Tool
from soorma.client import verified_tls
from testsupport.a2a import (
    BINDINGS,
    a2a_client,
    capability,
    collect,
    final_task,
    send_request,
    user_message,
)
from testsupport.gateway_platform import HEADERS_A, Platform
from testsupport.server import closed_port, serve
from testsupport.services import memory_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

FORECAST_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
# Shares no word with any skill: only its meaning leads to the forecast.
RAINY = "will it rain in Paris tomorrow, do I need an umbrella?"
SKILLS = "['echo', 'forecast', 'review']"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def forecaster(platform: Platform) -> Tool:
    tool = Tool(
        name="forecaster",
        description="Weather service.",
        context=await platform.context(),
        capabilities=[
            capability("forecast", "weather.forecast.requested", FORECAST_SCHEMA).model_copy(
                update={"description": "Current weather forecast for a city"}
            )
        ],
    )

    @tool.on_invoke("weather.forecast.requested")
    async def forecast(request, ctx):
        return {"forecast": "light rain", "asked": request.data["text"]}

    await tool.start()
    yield tool
    await tool.stop()


def ask(text: str):
    return send_request(user_message(text=text))


async def test_the_words_alone_do_not_lead_to_the_forecast():
    forecast = Skill(
        id="forecast",
        description="Current weather forecast for a city",
        agent="forecaster",
        event="weather.forecast.requested",
        topic="action-requests",
        schema=FORECAST_SCHEMA,
    )
    assert rank([forecast], RAINY) == []


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_skill_less_message_goes_to_the_skill_it_means(
    platform: Platform, forecaster: Tool, binding: str
):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        rainy = final_task(await collect(client, ask(RAINY)))
        echoed = final_task(await collect(client, ask("echo me")))
        with pytest.raises(InvalidParamsError, match=SKILLS.replace("[", r"\[")):
            await collect(client, ask("zebra quantum"))
    assert rainy.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(rainy.artifacts[0].parts[0].data) == {
        "forecast": "light rain",
        "asked": RAINY,
    }
    assert MessageToDict(echoed.artifacts[0].parts[0].data)["echo"] == "echo me"


async def test_raw_http_on_both_bindings(platform: Platform, forecaster: Tool):
    body = {"message": {"messageId": "m-rain", "role": "ROLE_USER", "parts": [{"text": RAINY}]}}
    v1 = {**HEADERS_A, "A2A-Version": "1.0"}
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url, timeout=30) as http:
        rest = await http.post("/message:send", json=body, headers=v1)
        rpc = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": body},
            headers=v1,
        )
    assert rest.status_code == 200, rest.text
    assert rest.json()["task"]["artifacts"][0]["parts"][0]["data"]["forecast"] == "light rain"
    assert rpc.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("memory", ["unset", "down"])
async def test_without_embeddings_the_words_decide(
    platform: Platform, forecaster: Tool, memory: str
):
    memory_url = None if memory == "unset" else f"http://127.0.0.1:{closed_port()}"
    gateway = await platform.start_gateway(
        memory_url=memory_url, gateway_replica_id=f"replica-words-{memory}"
    )
    try:
        async with a2a_client(gateway.url, "JSONRPC", streaming=False, headers=HEADERS_A) as c:
            echoed = final_task(await collect(c, ask("echo me")))
            with pytest.raises(InvalidParamsError, match=SKILLS.replace("[", r"\[")):
                await collect(c, ask(RAINY))
    finally:
        await gateway.stop()
    assert MessageToDict(echoed.artifacts[0].parts[0].data)["echo"] == "echo me"


async def test_skill_vectors_are_cached_and_renewed_when_the_model_changes(tmp_path):
    """Each skill is embedded once per model; another model starts the cache over."""
    skills = [
        Skill("forecast", "Current weather forecast for a city", "f", "f.requested", "t", None),
        Skill("translate", "Translate text between languages", "t", "t.requested", "t", None),
    ]
    async with AsyncExitStack() as stack:
        servers = {}
        for dims in (32, 64):
            (tmp_path / str(dims)).mkdir()
            url = f"sqlite+aiosqlite:///{tmp_path}/{dims}/memory.db"
            settings = memory_settings(
                url, tmp_path / str(dims), embedding_model=f"deterministic/{dims}"
            )
            servers[dims] = await stack.enter_async_context(serve(create_memory_app(settings)))
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                verify=verified_tls(),
            )
        )
        ranker = SemanticRanker(servers[32].url, http)
        first = await ranker.rank("tenant-a", skills, "weather forecast please")
        cached = dict(ranker._vectors)
        again = await ranker.rank("tenant-a", skills, "translate this")
        assert ranker.model == "deterministic/32" and ranker._vectors == cached
        ranker.memory_url = servers[64].url
        renewed = await ranker.rank("tenant-a", skills, "weather forecast please")
    assert [s.skill.id for s in first] == [s.skill.id for s in renewed] == ["forecast", "translate"]
    assert again[0].skill.id == "translate"
    assert ranker.model == "deterministic/64"
    assert sorted(len(v) for v in ranker._vectors.values()) == [64, 64]
