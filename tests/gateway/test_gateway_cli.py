"""``soorma a2a card`` / ``soorma a2a send`` against a running gateway (real processes)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import pytest

from soorma import PlatformSettings, _cli_a2a
from testsupport import forkserver
from testsupport.gateway_platform import KEY_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def soorma(*args: str, **extra_env: str) -> tuple[int, str, str]:
    env = {**os.environ, "SOORMA_GATEWAY_API_KEY": KEY_A, **extra_env}
    done = await asyncio.to_thread(
        forkserver.run,
        [sys.executable, "-c", "from soorma.cli import main; main()", *args],
        env=env,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


async def test_card(platform: Platform):
    code, out, err = await soorma("a2a", "card", platform.url)
    assert code == 0, err
    assert "echo - echo skill (needs: text)" in out
    assert "review - review skill (needs: doc, mode)" in out
    assert f"HTTP+JSON 1.0: {platform.url}" in out


async def test_card_finds_the_gateway_from_the_environment(platform: Platform):
    code, out, err = await soorma("a2a", "card", SOORMA_GATEWAY_URL=platform.url)
    assert code == 0, err
    assert "echo - echo skill (needs: text)" in out


async def test_send_exit_codes(platform: Platform, capsys: pytest.CaptureFixture[str]):
    """The same command in-process (the parser and the coroutine the CLI runs)."""
    parser = argparse.ArgumentParser()
    _cli_a2a.add_parser(parser.add_subparsers(dest="command"))

    async def send(*argv: str) -> int:
        args = parser.parse_args(["a2a", "send", "--api-key", KEY_A, *argv])
        return await _cli_a2a._send(args, PlatformSettings())

    assert (
        await send(
            "--binding",
            "HTTP+JSON",
            "--no-stream",
            platform.url,
            "review",
            json.dumps({"doc": "x", "mode": "hitl"}),
        )
        == 3
    )
    waiting = capsys.readouterr()
    assert "TASK_STATE_INPUT_REQUIRED Approve the document?" in waiting.out
    # How to answer: the same command on the same task.
    task_id = waiting.out.split("task ", 1)[1].split(":", 1)[0]
    assert f"soorma a2a send {platform.url} review '<answer>' --task {task_id}" in waiting.err
    assert await send(platform.url, "echo", '{"text": 1}') == 1
    assert "InvalidParamsError" in capsys.readouterr().err
    assert await send(platform.url, "echo", "plain words") == 0
    assert '"plain words"' in capsys.readouterr().out
    assert await send(platform.url, "echo", json.dumps({"text": "ab", "times": 2})) == 0
    out = capsys.readouterr().out
    assert "TASK_STATE_COMPLETED" in out and '"abab"' in out
