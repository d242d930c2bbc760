"""``soorma memory add|search|forget|reembed|info`` as users run it, against the real
memory service (deterministic embedder) under uvicorn.

Two tests start real ``soorma`` processes, so the installed entry point, its exit code
and its output through a pipe stay covered end to end: add-then-search (a command that
succeeds) and the unreachable service (one that fails). The others run
``soorma.cli.main`` in this process (``run_cli``: same arguments, environment, merged
output and exit code): each is a one-shot request whose point is what it prints, and
each process costs ~0.65 s of CPU to start and import (over 20 s for this file's ~35).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sdk_helpers import CliRun, Proc, run_cli, subprocess_env

from memory_service import create_app as create_memory_app
from testsupport.server import LiveServer, closed_port, serve
from testsupport.services import memory_settings

pytestmark = pytest.mark.asyncio

SOORMA = str(Path(sys.executable).with_name("soorma"))


@pytest_asyncio.fixture
async def memory_service(sqlite_url: str, tmp_path: Any) -> AsyncIterator[LiveServer]:
    settings = memory_settings(sqlite_url, tmp_path, embedding_model="deterministic/256")
    async with serve(create_memory_app(settings)) as server:
        yield server


def memory_env(server_url: str, user: str, **env: str) -> dict[str, str]:
    return subprocess_env(
        SOORMA_MEMORY_URL=server_url, SOORMA_TENANT_ID="cli", SOORMA_USER_ID=user, **env
    )


async def soorma(server_url: str, *args: str, user: str = "ada", **env: str) -> CliRun:
    """``soorma memory ARGS`` run in this process."""
    return await run_cli("memory", *args, env=memory_env(server_url, user, **env))


async def soorma_process(server_url: str, *args: str, user: str = "ada", **env: str) -> Proc:
    """``soorma memory ARGS`` as a real process."""
    proc = await Proc.start(SOORMA, "memory", *args, env=memory_env(server_url, user, **env))
    await proc.wait(within=60)
    return proc


async def test_add_then_search_prints_ranked_readable_lines(memory_service: LiveServer):
    url = memory_service.url
    added = await soorma_process(
        url,
        "add",
        "Refunds reach the card within 5 business days.",
        "--tag",
        "billing",
        "--source",
        "faq.md",
        "--external-id",
        "refunds",
    )
    assert added.proc.returncode == 0, added.output
    assert added.lines[-1].startswith("stored ") and "(refunds), private to ada" in added.output
    await soorma_process(url, "add", "The office is closed on Sundays.")

    found = await soorma_process(
        url, "search", "when", "do", "refunds", "reach", "cards", "--limit", "5"
    )

    assert found.proc.returncode == 0, found.output
    first = found.lines[0]
    assert first.startswith(" 1. ") and "[refunds source=faq.md tags=billing]" in first
    assert "Refunds reach the card within 5 business days." in first
    assert "hybrid ranking, model deterministic" in found.lines[-1]

    as_json = await soorma_process(url, "search", "refunds", "--vector", "--json")
    data = json.loads(as_json.output)
    assert data["mode"] == "vector" and data["hits"][0]["record"]["external_id"] == "refunds"
    own = await soorma_process(url, "search", "refunds", user="bob")
    assert len(own.lines) == 1 and own.lines[0].startswith("no matches (hybrid, model determ")


async def test_add_file_stores_a_chunked_document(memory_service: LiveServer, tmp_path: Path):
    doc = tmp_path / "guide.md"
    doc.write_text(" ".join(f"Section {i} explains shipping rule {i}." for i in range(60)))
    added = await soorma(memory_service.url, "add", "--file", str(doc), "--chunk-size", "300")
    assert added.proc.returncode == 0, added.output
    count = int(added.lines[-1].removeprefix("stored guide.md as ").split()[0])
    assert count > 3
    found = await soorma(memory_service.url, "search", "shipping rule 42", "--json")
    hit = json.loads(found.output)["hits"][0]["record"]
    assert hit["parent_external_id"] == "guide.md" and "rule 42" in hit["content"]


async def test_bad_input_is_one_line_not_a_traceback(memory_service: LiveServer):
    url = memory_service.url
    cases = [
        (("search", "q", "--limit", "99"), "limit"),
        (("add", "x", "--metadata", "[1]"), "--metadata must be a JSON object"),
        (("add",), "give the text to store, or --file PATH"),
        (("forget", "ada"), "run again with --yes"),
        (("search", "q", "--where", "novalue"), "--where takes KEY=VALUE"),
    ]
    for args, message in cases:
        proc = await soorma(url, *args)
        assert proc.proc.returncode != 0, (args, proc.output)
        assert "Traceback" not in proc.output, proc.output
        assert len(proc.lines) == 1 and proc.lines[0].startswith("soorma: "), proc.output
        assert message in proc.output, (args, proc.output)


async def test_unreachable_service_is_one_line():
    proc = await soorma_process(f"http://127.0.0.1:{closed_port()}", "search", "anything")
    assert proc.proc.returncode == 1
    assert "Traceback" not in proc.output
    assert proc.lines[-1].startswith("soorma: cannot reach http://127.0.0.1:")


async def test_forget_deletes_the_users_memory_and_reports_counts(memory_service: LiveServer):
    url = memory_service.url
    await soorma(url, "add", "Ada prefers email.")
    await soorma(url, "add", "Ada's team is Platform.")
    await soorma(url, "add", "Bob prefers phone.", user="bob")

    forgot = await soorma(url, "forget", "ada", "--yes", SOORMA_SERVICE_ROLE="service")

    assert forgot.proc.returncode == 0, forgot.output
    assert forgot.lines == ["forgot user ada: 2 knowledge record(s), 0 episode(s), 0 procedure(s)"]
    gone = await soorma(url, "search", "prefers team", "--json")
    assert json.loads(gone.output)["hits"] == []
    kept = await soorma(url, "search", "prefers", "--json", user="bob")
    assert len(json.loads(kept.output)["hits"]) == 1


async def test_info_and_reembed_report_the_model(memory_service: LiveServer):
    url = memory_service.url
    await soorma(url, "add", "something to re-embed")
    info = await soorma(url, "info")
    assert info.proc.returncode == 0, info.output
    assert info.lines[0].startswith("embedding model deterministic")
    refused = await soorma(url, "reembed")
    assert refused.proc.returncode == 1 and refused.lines[0].startswith("soorma: ")
    assert "service" in refused.output
    reembed = await soorma(url, "reembed", "--wait", SOORMA_SERVICE_ROLE="service")
    assert reembed.proc.returncode == 0, reembed.output
    assert re.fullmatch(r"re-embed to deterministic\S*: (done|idle) \(\d+/\d+\)", reembed.lines[-1])
    status = await soorma(url, "reembed", "--status", "--json")
    assert json.loads(status.lines[-1])["model"].startswith("deterministic")


async def test_add_with_a_situation_stores_a_procedure(memory_service: LiveServer):
    added = await soorma(
        memory_service.url,
        "add",
        "Quote the order id in refund answers.",
        "--situation",
        "a customer asks about a refund",
        "--agent",
        "support-bot",
        "--json",
    )
    assert added.proc.returncode == 0, added.output
    record = json.loads(added.output)
    assert (record["kind"], record["agent_id"], record["user_id"]) == ("rule", "support-bot", "ada")
    assert record["situation"] == "a customer asks about a refund"
    plain = await soorma(
        memory_service.url, "add", "Be brief.", "--situation", "any answer", "--kind", "prompt"
    )
    assert plain.lines[-1].startswith("stored prompt ") and plain.lines[-1].endswith(
        ", private to ada"
    )


async def test_episodes_log_recent_and_search(memory_service: LiveServer):
    url = memory_service.url
    for role, text in (
        ("user", "My parcel to Leeds is late."),
        ("assistant", "I reopened the delivery ticket for Leeds."),
        ("user", "Please refund the shipping fee."),
    ):
        logged = await soorma(
            url, "episodes", "log", "support-bot", text, "--role", role, "--session", "s1"
        )
        assert logged.proc.returncode == 0, logged.output
        assert logged.lines[-1].startswith("logged ") and f"({role}, agent support-bot)" in (
            logged.output
        )
    await soorma(url, "episodes", "log", "other-bot", "Unrelated chat about Leeds.")

    recent = await soorma(url, "episodes", "recent", "support-bot", "--limit", "2")
    assert recent.proc.returncode == 0, recent.output
    # Oldest first, the latest two only, each with its role and session.
    assert len(recent.lines) == 2
    assert "assistant" in recent.lines[0] and "reopened the delivery ticket" in recent.lines[0]
    assert "user" in recent.lines[1] and "refund the shipping fee" in recent.lines[1]
    assert all("session=s1" in line for line in recent.lines)

    found = await soorma(
        url, "episodes", "search", "support-bot", "parcel", "to", "Leeds", "--since", "1h"
    )
    assert found.proc.returncode == 0, found.output
    assert found.lines[0].startswith(" 1. ") and "My parcel to Leeds is late." in found.lines[0]
    assert found.lines[-1] == "3 hit(s)"
    assert not any("Unrelated" in line for line in found.lines)

    as_json = await soorma(url, "episodes", "recent", "support-bot", "--json")
    assert [r["role"] for r in json.loads(as_json.output)] == ["user", "assistant", "user"]
    # Private to the user: bob has none with this agent.
    bob = await soorma(url, "episodes", "recent", "support-bot", user="bob")
    assert bob.lines == ["no episodes with agent support-bot"]
    # Nothing before an hour ago; a bad --since is one line, not a traceback.
    old = await soorma(url, "episodes", "search", "support-bot", "Leeds", "--until", "1h")
    assert old.lines == ["no matching episodes with agent support-bot"]
    bad = await soorma(url, "episodes", "search", "support-bot", "Leeds", "--since", "lately")
    assert bad.proc.returncode == 1
    assert bad.lines == [
        "soorma: --since 'lately' is neither an ISO 8601 time nor an age like 30m, 12h, 7d"
    ]
