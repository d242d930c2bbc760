"""Push URLs: every IPv6 form that carries an IPv4 address is judged by that address,
with ``*`` in the allow-list too; a refusal names the rule and the setting."""

from __future__ import annotations

import asyncio
import ipaddress

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskPushNotificationConfig, TaskState
from a2a.utils.errors import InvalidParamsError
from test_gateway_push import Receiver

from gateway_a2a.push import policy_for
from gateway_a2a.pushpolicy import PushPolicy, address_problem, embedded_ipv4
from gateway_a2a.settings import Settings as GatewaySettings
from soorma.client import verified_tls
from testsupport.a2a import BINDINGS, a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform
from testsupport.server import serve

pytestmark = pytest.mark.asyncio(loop_scope="module")

# Each carries a loopback, private, link-local or metadata IPv4 address.
FORBIDDEN = [
    ("2002:a9fe:a9fe::", "6to4", "169.254.169.254"),
    ("2002:7f00:1::", "6to4", "127.0.0.1"),
    ("2002:c0a8:101::1", "6to4", "192.168.1.1"),
    # Teredo stores the client address inverted: ~127.0.0.1 = 80ff:fffe.
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo", "127.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "Teredo", "169.254.169.254"),
    ("64:ff9b::7f00:1", "NAT64", "127.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "NAT64", "169.254.169.254"),
    ("::ffff:127.0.0.1", "IPv4-mapped", "127.0.0.1"),
    ("::ffff:a9fe:a9fe", "IPv4-mapped", "169.254.169.254"),
    ("::ffff:0:a00:1", "IPv4-translated", "10.0.0.1"),
    ("::127.0.0.1", "IPv4-compatible", "127.0.0.1"),
    ("::a9fe:a9fe", "IPv4-compatible", "169.254.169.254"),
]
PUBLIC = ["2002:808:808::1", "64:ff9b::808:808", "8.8.8.8", "2606:4700:4700::1111"]


@pytest.mark.parametrize(("address", "form", "ipv4"), FORBIDDEN)
async def test_every_ipv4_embedding_form_is_unpacked_and_refused(
    address: str, form: str, ipv4: str
):
    addr = ipaddress.ip_address(address)
    assert embedded_ipv4(addr) == (form, ipaddress.IPv4Address(ipv4))
    problem = address_problem(addr)
    assert problem is not None and ipv4 in problem and form in problem
    reason = await PushPolicy(["*"]).refusal(f"http://[{address}]/latest/meta-data/")
    assert reason is not None and "SOORMA_GATEWAY_PUSH_ALLOW" in reason


async def test_local_use_nat64_and_public_forms():
    anywhere = PushPolicy(["*"])
    assert await anywhere.refusal("http://[64:ff9b:1::a00:1]/x") is not None
    assert await anywhere.refusal("http://[64:ff9b:1:7f00:1::]/x") is not None
    for address in PUBLIC:
        host = f"[{address}]" if ":" in address else address
        assert await anywhere.refusal(f"http://{host}/hook") is None, address


@pytest.mark.parametrize("binding", BINDINGS)
async def test_gateway_with_star_refuses_embedded_private_addresses(
    platform: Platform, binding: str
):
    gateway = await platform.start_gateway(
        gateway_replica_id=f"replica-push-{binding.replace('+', '-')}", gateway_push_allow=["*"]
    )
    try:
        async with a2a_client(gateway.url, binding, streaming=False, headers=HEADERS_A) as client:
            task = final_task(
                await collect(
                    client,
                    send_request(user_message(data={"doc": "pp", "mode": "hitl"}, skill="review")),
                )
            )
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            for address, _, ipv4 in FORBIDDEN[:7]:
                with pytest.raises(InvalidParamsError, match=ipv4):
                    await client.create_task_push_notification_config(
                        TaskPushNotificationConfig(
                            task_id=task.id, url=f"http://[{address}]/latest/meta-data/"
                        )
                    )
        async with httpx.AsyncClient(verify=verified_tls(), base_url=gateway.url) as http:
            response = await http.post(
                f"/tasks/{task.id}/pushNotificationConfigs",
                json={"taskId": task.id, "url": "http://[2002:7f00:1::]/hook"},
                headers={**HEADERS_A, "A2A-Version": "1.0"},
            )
            assert response.status_code == 400
            assert "SOORMA_GATEWAY_PUSH_ALLOW" in response.json()["error"]["message"]
            rpc = await http.post(
                "/",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "CreateTaskPushNotificationConfig",
                    "params": {"taskId": task.id, "url": "http://[::ffff:a9fe:a9fe]/"},
                },
                headers={**HEADERS_A, "A2A-Version": "1.0"},
            )
            error = rpc.json()["error"]
            assert error["code"] == -32602
            assert "169.254.169.254" in error["message"]
    finally:
        await gateway.stop()


async def test_default_allow_list_by_auth_mode():
    dev = policy_for(GatewaySettings(auth_mode="dev"))
    assert await dev.refusal("http://127.0.0.1:9/hook") is None
    assert await dev.refusal("http://[::1]:9/hook") is None
    assert await dev.refusal("https://8.8.8.8/hook") is None
    private = await dev.refusal("http://10.0.0.5/hook")
    assert private is not None
    assert "private" in private and "SOORMA_GATEWAY_PUSH_ALLOW" in private
    assert "the default in dev mode" in private
    production = policy_for(GatewaySettings(auth_mode="jwt", jwt_secret="x" * 32))
    loopback = await production.refusal("http://127.0.0.1:9/hook")
    assert loopback is not None
    assert "loopback" in loopback and "SOORMA_GATEWAY_PUSH_ALLOW" in loopback
    assert "the default in jwt mode" in loopback
    assert await production.refusal("https://8.8.8.8/hook") is None
    listed = policy_for(GatewaySettings(auth_mode="jwt", gateway_push_allow="127.0.0.1"))
    assert await listed.refusal("http://127.0.0.1:9/hook") is None


@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_works_out_of_the_box_in_dev_mode(platform: Platform, binding: str):
    tag = binding.replace("+", "-")
    gateway = await platform.start_gateway(
        gateway_replica_id=f"replica-push-default-{tag}", gateway_push_allow=None
    )
    receiver = Receiver()
    try:
        async with (
            serve(receiver.app) as hook,
            a2a_client(gateway.url, binding, streaming=False, headers=HEADERS_A) as client,
        ):
            request = send_request(
                user_message(data={"doc": f"pd-{tag}", "mode": "slow"}, skill="review"),
                blocking=False,
            )
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(url=f"{hook.url}/hook", token="t")
            )
            task = final_task(await collect(client, request))
            with pytest.raises(InvalidParamsError, match="SOORMA_GATEWAY_PUSH_ALLOW"):
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, url="http://192.168.1.20/hook")
                )
            platform.control.release(f"pd-{tag}")
            await asyncio.wait_for(receiver.completed.wait(), 10)
        assert "TASK_STATE_COMPLETED" in receiver.states()
    finally:
        await gateway.stop()
