"""A message that names no skill: the default when configured, else the skill whose words
best match it (among those that take it), else an error naming the skills."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from gateway_a2a.routing import rank
from gateway_a2a.skills import Skill
from soorma.client import verified_tls
from testsupport.a2a import BINDINGS, a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")


def skill(id_: str, description: str, schema: dict[str, Any] | None = None) -> Skill:
    return Skill(
        id=id_,
        description=description,
        agent=f"{id_}-agent",
        event=f"{id_}.requested",
        topic="action-requests",
        schema=schema,
    )


SKILLS = [
    skill("translate", "Translate text between languages", {"examples": ["to French: hello"]}),
    skill("summarize", "Summarize a long document into key points"),
    skill("weather", "Current weather forecast for a city"),
]


async def test_lexical_rank_prefers_distinctive_words_and_examples():
    assert rank(SKILLS, "Please summarize this document")[0].skill.id == "summarize"
    assert rank(SKILLS, "what is the forecast in Paris?")[0].skill.id == "weather"
    assert rank(SKILLS, "say hello in French")[0].skill.id == "translate"  # its example
    assert rank(SKILLS, "translating documents")[0].skill.id == "translate"  # stems
    assert rank(SKILLS, "zebra quantum") == []


@pytest.mark.parametrize("binding", BINDINGS)
async def test_skill_less_messages_go_to_the_best_matching_skill(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        # Text only: the reviewer's schema does not take text, the echo skill matches.
        echoed = final_task(await collect(client, send_request(user_message(text="echo me"))))
        # Data whose fields are the reviewer's.
        reviewed = final_task(
            await collect(client, send_request(user_message(data={"doc": "d1", "mode": "ok"})))
        )
        with pytest.raises(InvalidParamsError, match=r"\['echo', 'review'\]"):
            await collect(client, send_request(user_message(text="zebra quantum")))
    assert echoed.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(echoed.artifacts[0].parts[0].data)["echo"] == "echo me"
    assert reviewed.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(reviewed.artifacts[0].parts[0].data)["verdict"] == "approved"


async def test_raw_http_error_names_the_skills_and_the_card_documents_the_convention(
    platform: Platform,
):
    body = {"message": {"messageId": "m-r", "role": "ROLE_USER", "parts": [{"text": "zzz"}]}}
    v1 = {**HEADERS_A, "A2A-Version": "1.0"}
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        rest = await http.post("/message:send", json=body, headers=v1)
        rpc = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": body},
            headers=v1,
        )
        card = (await http.get("/.well-known/agent-card.json")).json()
    assert rest.status_code == 400 and "message.metadata.skill" in rest.json()["error"]["message"]
    assert rpc.json()["error"]["code"] == -32602
    assert "['echo', 'review']" in rpc.json()["error"]["message"]
    assert "message.metadata.skill" in card["description"]
    routing = next(
        e for e in card["capabilities"]["extensions"] if e["uri"].endswith("skill-routing:v1")
    )
    assert routing["params"]["metadataKey"] == "skill"
    # The platform's memory service embeds: by meaning first, then by words.
    assert routing["params"]["fallback"] == "semantic-match,lexical-match"


async def test_the_default_skill_wins_when_configured(platform: Platform):
    gateway = await platform.start_gateway(
        gateway_replica_id="replica-default-skill", gateway_default_skill="echo"
    )
    try:
        async with a2a_client(gateway.url, streaming=False, headers=HEADERS_A) as client:
            task = final_task(await collect(client, send_request(user_message(text="doc mode"))))
        async with httpx.AsyncClient(verify=verified_tls(), base_url=gateway.url) as http:
            card = (await http.get("/.well-known/agent-card.json")).json()
    finally:
        await gateway.stop()
    assert MessageToDict(task.artifacts[0].parts[0].data)["echo"] == "doc mode"
    assert "default skill 'echo'" in card["description"]
