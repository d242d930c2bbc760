"""The tracker's connected-agents page (``/ui/agents``) in a real headless Chromium,
against real services, with agents connected through the SDK: one in-process and one in
its own process, SIGKILLed to show what a crashed agent looks like.

``SOORMA_UI_SCREENSHOTS=docs/img`` saves the screenshot linked from docs/tracker-ui.md.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_browser import IN_CI, console_errors, start_chromium, wait_for
from ui_stack import Stack

from soorma import Agent, AgentOptions, PlatformContext
from soorma_common.registry import AgentCapability, EventDefinition

TENANT = "acme-agents"
SCREENSHOTS = os.environ.get("SOORMA_UI_SCREENSHOTS")
ROOT = Path(__file__).resolve().parents[2]

# An agent in its own process (what `python agent.py` runs), with a short registry TTL.
CRASHING_AGENT = textwrap.dedent(
    """
    from soorma import Agent, AgentOptions
    from soorma_common.registry import AgentCapability, EventDefinition

    agent = Agent(
        name="mailer",
        options=AgentOptions(registry_ttl=2),
        capabilities=[
            AgentCapability(
                task_name="send mail",
                consumed_event=EventDefinition(
                    event_name="mail.requested", topic="notification-events"
                ),
            )
        ],
    )

    @agent.on_event(topic="notification-events", event_type="mail.requested")
    async def send(event, context):
        pass

    agent.run()
    """
)


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    browser = start_chromium()
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, driver: Any) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("agents-stack"))
    if IN_CI:
        assert stack.backend == "redis+postgres", "set SOORMA_TEST_REDIS_URL and _DATABASE_URL"
    stack.start()
    try:
        # A tracker that reads this stack's registry (the page's data source).
        stack.urls["agents_tracker"] = stack.run(
            stack.add_tracker(
                registry_url=stack.urls["registry"], tracker_projector=False, tracker_timeouts=False
            )
        )
        yield stack
    finally:
        driver.get("about:blank")
        stack.stop()


def page(driver: Any, stack: Stack, tenant: str = TENANT) -> None:
    driver.get(f"{stack.urls['agents_tracker']}/ui/agents?tenant={tenant}")
    wait_for(
        driver,
        lambda d: int(d.find_element("tag name", "body").get_attribute("data-loaded") or 0) >= 1,
        message="page never loaded",
    )


def agent_rows(driver: Any) -> dict[str, dict[str, Any]]:
    """Agent name -> what its row shows (read in one go: the page re-renders)."""
    return dict(
        driver.execute_script(
            "const out = {};"
            "for (const r of document.querySelectorAll('#agents-body tr')) {"
            "  const text = (sel) => Array.from(r.querySelectorAll(sel), (e) => e.textContent);"
            "  out[r.dataset.name] = {"
            "    status: r.querySelector('.pill').textContent,"
            "    stale: r.classList.contains('agent-stale'),"
            "    capabilities: text('.capabilities .chip'),"
            "    consumes: text('.consumes .chip'),"
            "    produces: text('.produces .chip'),"
            "    last_seen: r.querySelector('.last-seen').textContent,"
            "    lag: r.querySelector('td.lag') ? r.querySelector('td.lag').textContent : null,"
            "    pending: r.querySelector('td.pending') ?"
            "      r.querySelector('td.pending').textContent : null,"
            "    behind: !!r.querySelector('td.lag.behind'),"
            "  };"
            "}"
            "return out;"
        )
    )


def screenshot(driver: Any, name: str) -> None:
    if not SCREENSHOTS:
        return
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1360, min(max(int(height), 500), 2400))
    target = Path(SCREENSHOTS) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(target))
    driver.set_window_size(1360, 900)


def start_translator(stack: Stack, gate: asyncio.Event) -> Agent:
    """An in-process agent whose handler holds each event until ``gate`` opens."""
    agent = Agent(
        name="translator",
        description="translates text",
        capabilities=[
            AgentCapability(
                task_name="translate",
                consumed_event=EventDefinition(event_name="translate.requested"),
                produced_events=[EventDefinition(event_name="translate.completed")],
            )
        ],
        options=AgentOptions(max_concurrency=1, prefetch=1),
        context=stack.agent_context("translator", TENANT),
    )

    @agent.on_event(topic="action-requests", event_type="translate.requested")
    async def translate(event: Any, context: PlatformContext) -> None:
        await gate.wait()

    return agent


async def publish(stack: Stack, topic: str, event_type: str, count: int) -> None:
    async with stack.context(TENANT) as context:
        for n in range(count):
            await context.bus.publish(topic, event_type, {"n": n})


def test_no_agents_says_how_to_start_one(driver: Any, stack: Stack) -> None:
    page(driver, stack, tenant="nobody-here")
    empty = driver.find_element("id", "empty")
    wait_for(driver, lambda d: empty.is_displayed(), message="no empty state")
    assert "soorma init" in empty.text and "soorma dev" in empty.text
    assert "nobody-here" in empty.text
    assert agent_rows(driver) == {}
    # The plans page links here from its header, keeping the tenant.
    driver.get(f"{stack.urls['agents_tracker']}/ui?tenant=nobody-here")
    link = wait_for(driver, lambda d: d.find_element("id", "nav-agents"))
    assert link.get_attribute("href").endswith("/ui/agents?tenant=nobody-here")
    assert console_errors(driver) == []


def test_agents_show_their_events_heartbeat_lag_and_going_stale(
    driver: Any, stack: Stack, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    translator = start_translator(stack, gate)
    stack.run(stack.started(translator))
    env = {
        **os.environ,
        "SOORMA_EVENT_SERVICE_URL": stack.urls["events"],
        "SOORMA_REGISTRY_URL": stack.urls["registry"],
        "SOORMA_MEMORY_URL": stack.urls["memory"],
        "SOORMA_TRACKER_URL": stack.urls["tracker"],
        "SOORMA_TENANT_ID": TENANT,
        "SOORMA_STATE_DIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    script = tmp_path / "mailer.py"
    script.write_text(CRASHING_AGENT)
    mailer = subprocess.Popen(
        [sys.executable, str(script)], env=env, cwd=ROOT, stderr=subprocess.DEVNULL
    )
    try:
        page(driver, stack)
        # Both agents appear live, with what they consume and produce.
        wait_for(
            driver,
            lambda d: {"translator", "mailer"} <= set(agent_rows(d)),
            message="agents not listed",
        )
        shown = agent_rows(driver)
        translator_row = shown["translator"]
        assert translator_row["status"] == "live" and not translator_row["stale"]
        assert translator_row["capabilities"] == ["translate"]
        assert translator_row["consumes"] == ["translate.requested"]
        assert translator_row["produces"] == ["translate.completed"]
        assert translator_row["last_seen"].endswith("s ago")
        assert (translator_row["lag"], translator_row["pending"]) == ("0", "0")
        assert shown["mailer"]["consumes"] == ["mail.requested"]

        # Events published and not consumed: the page shows the lag without a reload.
        stack.run(publish(stack, "action-requests", "translate.requested", 6))
        wait_for(
            driver,
            lambda d: (
                (agent_rows(d)["translator"]["lag"], agent_rows(d)["translator"]["pending"])
                == ("5", "1")
            ),
            message="lag not shown",
        )
        assert agent_rows(driver)["translator"]["behind"]

        # The mailer's process dies (no deregistration): past its TTL it goes stale,
        # and what is published for it waits in its group.
        mailer.send_signal(signal.SIGKILL)
        mailer.wait(30)
        stack.run(publish(stack, "notification-events", "mail.requested", 3))

        def mailer_stale(d: Any) -> dict[str, Any] | None:
            row = agent_rows(d)["mailer"]
            return row if row["stale"] and row["lag"] == "3" else None

        # A heartbeat the mailer sent just before the SIGKILL may still land (a loaded
        # machine) and make it live for one more TTL: the row is read from the render
        # that showed it stale, and the badge is waited for.
        mailer_row = wait_for(driver, mailer_stale, message="crashed agent never went stale")
        assert mailer_row["status"] == "stale"
        badge = wait_for(
            driver,
            lambda d: d.find_element("css selector", 'tr[data-name="mailer"] .badge-stale').text,
            message="no stale badge",
        )
        assert "no heartbeat for over 2 s" in badge
        assert agent_rows(driver)["translator"]["status"] == "live"
        screenshot(driver, "tracker-ui-agents.png")

        # Hiding stale agents leaves the live one.
        driver.find_element("id", "show-stale").click()
        wait_for(driver, lambda d: set(agent_rows(d)) == {"translator"}, message="stale shown")
        driver.find_element("id", "show-stale").click()
        assert console_errors(driver) == []

        # Once the held events are handled, the lag drains on screen.
        stack.call(gate.set)
        wait_for(
            driver,
            lambda d: (
                (agent_rows(d)["translator"]["lag"], agent_rows(d)["translator"]["pending"])
                == ("0", "0")
            ),
            message="lag never drained",
        )

        # Another tenant sees none of it.
        page(driver, stack, tenant="someone-else")
        wait_for(driver, lambda d: d.find_element("id", "empty").is_displayed())
        assert agent_rows(driver) == {}
    finally:
        stack.call(gate.set)
        if mailer.poll() is None:
            mailer.kill()
            mailer.wait(30)
