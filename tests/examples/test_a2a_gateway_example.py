"""examples/07-a2a-gateway runs as documented: worker and a2a-sdk client as real processes."""

from __future__ import annotations

import ast
import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from gateway_a2a import create_app as create_gateway_app
from gateway_a2a.settings import Settings as GatewaySettings
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from testsupport.forkserver import PRELOAD_AI
from testsupport.server import free_port, serve
from testsupport.services import event_settings, memory_settings, registry_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "07-a2a-gateway"


@pytest_asyncio.fixture
async def services(tmp_path: Any) -> AsyncIterator[dict[str, str]]:
    """Events, registry, memory and the gateway (dev mode, as `soorma dev` runs them)."""
    async with AsyncExitStack() as stack:
        events = await stack.enter_async_context(serve(create_event_app(event_settings())))
        registry = await stack.enter_async_context(
            serve(
                create_registry_app(
                    registry_settings(f"sqlite+aiosqlite:///{tmp_path}/registry.db", tmp_path)
                )
            )
        )
        memory = await stack.enter_async_context(
            serve(
                create_memory_app(
                    memory_settings(f"sqlite+aiosqlite:///{tmp_path}/memory.db", tmp_path)
                )
            )
        )
        port = free_port()
        gateway = await stack.enter_async_context(
            serve(
                create_gateway_app(
                    GatewaySettings(
                        event_service_url=events.url,
                        registry_url=registry.url,
                        data_dir=tmp_path,
                        gateway_url=f"http://127.0.0.1:{port}",
                        gateway_card_ttl_seconds=0,
                    )
                ),
                port,
            )
        )
        yield subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url,
            SOORMA_REGISTRY_URL=registry.url,
            SOORMA_MEMORY_URL=memory.url,
            SOORMA_GATEWAY_URL=gateway.url,
        )


NOTE = "A human approved 250.00 for team dinner."


def streamed_note(lines: list[str]) -> tuple[str, list[str]]:
    """The note's chunks as the client printed them: the whole text, and each chunk."""
    chunks = [line for line in lines if line.startswith("note: ")]
    texts = [
        ast.literal_eval(line[len("note: ") :].removesuffix(" [last chunk]")) for line in chunks
    ]
    return "".join(texts), chunks


async def test_client_streams_a_task_with_progress_and_one_human_answer_on_both_bindings(
    services: dict[str, str],
):
    # One worker for both bindings, forked with litellm imported (seconds of CPU).
    worker = await Proc.start(
        sys.executable, str(EXAMPLE / "worker.py"), env=services, preload=PRELOAD_AI
    )
    try:
        await worker.wait_for("agent expense-approver ready")
        for binding in ("JSONRPC", "HTTP+JSON"):
            await _one_task(services, worker, binding)
        # A payload the skill's schema refuses: one line naming the gateway, no traceback.
        refused = await Proc.start(
            sys.executable, str(EXAMPLE / "client.py"), "-5", "x", env=services
        )
        assert await refused.wait() == 1, refused.output
        assert len(refused.lines) == 2, refused.output  # the skills line, then the error
        assert refused.lines[1].startswith("error: the gateway at ")
        assert "refused the task" in refused.lines[1]
        assert await worker.stop(signal.SIGINT) == 0, worker.output
    finally:
        await worker.kill()


async def _one_task(services: dict[str, str], worker: Proc, binding: str) -> None:
    client = await Proc.start(
        sys.executable,
        str(EXAMPLE / "client.py"),
        "250",
        "team dinner",
        "--answer",
        "yes",
        "--binding",
        binding,
        env=services,
    )
    assert await client.wait() == 0, f"{binding}:\n{client.output}\n{worker.output}"
    lines = client.lines
    assert lines[0] == "gateway skills: expense-review", binding
    assert "status: TASK_STATE_WORKING checking the expense policy" in lines, binding
    assert "status: TASK_STATE_INPUT_REQUIRED Approve 250.00 for team dinner?" in lines, binding
    assert lines.index("answering: yes") > lines.index(
        "status: TASK_STATE_INPUT_REQUIRED Approve 250.00 for team dinner?"
    ), binding
    # The model's note, streamed while it is written: several chunks, the last marked.
    writing = lines.index("status: TASK_STATE_WORKING writing the note")
    note, chunks = streamed_note(lines)
    assert note == NOTE, binding
    assert len(chunks) >= 3, binding
    assert [c.endswith(" [last chunk]") for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert writing < lines.index(chunks[0]), binding
    assert lines.index(chunks[-1]) < lines.index(
        "status: TASK_STATE_COMPLETED approved by a human"
    ), binding
    assert json.loads(lines[-1]) == {
        "amount": 250.0,
        "approved": True,
        "by": "human",
        "answer": "yes",
        "note": NOTE,
    }, binding
