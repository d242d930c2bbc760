"""The tracker's web UI in a real headless Chromium, against real services and real plans.

One browser and one platform (event, memory, registry, tracker under uvicorn) for the
module. Plans are run by real agents: the research state machine of examples/04 (a
Planner and its workers) and a ChoreographyPlanner whose LLM is the only stand-in (a
litellm custom provider answering from a script). The pages are checked for what a
person sees: rows, colours, the path taken, time as bars, the audit trail, updates
arriving without a reload, acting on a plan (cancel, answer, time out) and hostile event
data shown as text.

``SOORMA_UI_SCREENSHOTS=docs/img`` saves the screenshots linked from docs/tracker-ui.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ui_browser import IN_CI, click, console_errors, start_chromium, wait_for
from ui_stack import Stack

from servicekit.auth import issue_token
from servicekit.settings import ServiceSettings
from soorma import Agent, PlatformContext
from soorma.agents.planner import Planner

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "04-planner-state-machine"))
sys.path.insert(0, str(ROOT / "tests" / "choreography"))
from research import GOAL_EVENT, RESEARCH, RESPONSE_EVENT  # noqa: E402

TENANT = "acme"
XSS = "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>"
SCREENSHOTS = os.environ.get("SOORMA_UI_SCREENSHOTS")


# -- the platform and its agents ------------------------------------------------------


class Research:
    """The examples/04 research planner and workers; the user stand-in answers only
    once ``gate`` is set, so a plan can be held in ``ask_user`` while a page watches."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.gate = asyncio.Event()

    async def start(self) -> None:
        ctx = self.stack.agent_context
        await self.stack.started(
            Planner(
                name="research-planner",
                plan_definition=RESEARCH,
                context=ctx("research-planner", TENANT),
            )
        )
        searcher = Agent(name="web-searcher", context=ctx("web-searcher", TENANT))
        analyzer = Agent(name="content-analyzer", context=ctx("content-analyzer", TENANT))
        user = Agent(name="user-stand-in", context=ctx("user-stand-in", TENANT))
        gate = self.gate

        async def reply(event: Any, context: PlatformContext, event_type: str, data: dict) -> None:
            await context.bus.respond(
                event_type, data, correlation_id=event.correlation_id, topic=event.response_topic
            )

        @searcher.on_event(topic="action-requests", event_type="web.search.requested")
        async def search(event: Any, context: PlatformContext) -> None:
            query = event.data.get("query")
            if query == "broken":
                await reply(event, context, "web.search.failed", {"error": "backend timed out"})
            elif str(query).startswith("obscure") and not event.data.get("details"):
                await reply(event, context, "web.search.no_results", {"count": 0})
            else:
                await reply(
                    event,
                    context,
                    "web.search.completed",
                    {"pages": [f"https://example.org/{i}" for i in range(3)]},
                )

        @analyzer.on_event(topic="action-requests", event_type="content.analyze.requested")
        async def analyze(event: Any, context: PlatformContext) -> None:
            pages = event.data.get("pages") or []
            await reply(
                event,
                context,
                "content.analyze.completed",
                {"summary": f"{len(pages)} pages about {event.data.get('topic')}"},
            )

        @user.on_event(topic="action-requests", event_type="notification.human_input")
        async def clarify(event: Any, context: PlatformContext) -> None:
            await gate.wait()
            await reply(event, context, "user.clarification.provided", {"details": "the 1970s"})

        for agent in (searcher, analyzer, user):
            await self.stack.started(agent)


async def ask(stack: Stack, topic: str, *, wait: bool = True) -> str:
    """Send a research goal; the answer's plan id (or, not waiting, the correlation id)."""
    async with stack.context(TENANT) as context:
        if not wait:
            correlation = f"goal-{topic}"
            await context.bus.request(
                GOAL_EVENT,
                {"topic": topic},
                response_event=RESPONSE_EVENT,
                correlation_id=correlation,
            )
            return correlation
        answer = await context.bus.call(
            GOAL_EVENT, {"topic": topic}, response_event=RESPONSE_EVENT, timeout=30
        )
        return str(answer.data["plan_id"])


async def ask_a_human(
    stack: Stack,
    plan_id: str,
    seconds: float,
    response_event: str = "approval.answered",
    sub_task: str | None = None,
) -> None:
    """What a Worker publishes when it asks a person (``notification.human_input``)."""
    async with stack.context(TENANT) as context:
        context.bus.source = "approver"
        sub_task = sub_task or f"sub-{plan_id}"
        deadline = datetime.now(UTC) + timedelta(seconds=seconds)
        await context.bus.publish(
            "notification-events",
            "notification.human_input",
            {
                "task_id": f"task-{plan_id}",
                "sub_task_id": sub_task,
                "question": "Approve?",
                "response_event": response_event,
                "response_topic": "action-results",
                "timeout_seconds": seconds,
                "deadline": deadline.isoformat(),
            },
            correlation_id=sub_task,
            plan_id=plan_id,
        )


async def tracked(stack: Stack, path: str, tenant: str = TENANT) -> Any:
    """GET the tracker API until it answers 200 (the projection is asynchronous)."""
    async with stack.context(tenant) as context, asyncio.timeout(20):
        while True:
            response = await context.http.get(
                stack.urls["tracker"] + "/v1/tracker" + path, headers={"X-Tenant-ID": tenant}
            )
            if response.status_code == 200:
                return response.json()
            await asyncio.sleep(0.1)


async def timeline_with(stack: Stack, plan_id: str, text: str, count: int) -> None:
    """Wait until ``count`` entries of the plan's timeline carry ``text`` in their data.

    The tracker projects each topic on its own: the plan's end can be projected before an
    earlier request on another topic, and a finished plan's page does not re-read.
    """
    async with asyncio.timeout(20):
        while True:
            timeline = await tracked(stack, f"/plans/{plan_id}/timeline")
            entries = timeline["entries"]
            if sum(text in json.dumps(e.get("data")) for e in entries) >= count:
                return
            await asyncio.sleep(0.1)


async def plan_with(stack: Stack, correlation_id: str, state: str) -> str:
    """The id of the plan started by ``correlation_id`` once it is in ``state``."""
    async with asyncio.timeout(20):
        while True:
            plan = await tracked(stack, f"/plans/by-correlation/{correlation_id}")
            if plan.get("current_state") == state:
                return str(plan["plan_id"])
            await asyncio.sleep(0.1)


async def held_with_a_question(stack: Stack, topic: str, seconds: float, **question: Any) -> str:
    """A research plan held at ``ask_user`` whose worker has asked a person (the wait)."""
    held = await plan_with(stack, await ask(stack, topic, wait=False), "ask_user")
    await ask_a_human(stack, held, seconds, **question)
    return held


def open_answer_form(driver: Any, stack: Stack, topic: str) -> str:
    """Open the plan page of a plan with a pending question; its id once the form shows."""
    held = stack.run(held_with_a_question(stack, topic, seconds=120))
    page(driver, stack, f"/ui/plans/{held}")
    loaded(driver)
    wait_for(driver, lambda d: css(d, "form.answer-form"), message="no answer form")
    return held


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    browser = start_chromium()
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, driver: Any) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("ui-stack"))
    if IN_CI:  # CI runs the pages on the production backends
        assert stack.backend == "redis+postgres", "set SOORMA_TEST_REDIS_URL and _DATABASE_URL"
    stack.start()
    research = Research(stack)
    try:
        stack.research = research  # type: ignore[attr-defined]
        stack.run(research.start())
        yield stack
    finally:
        driver.get("about:blank")  # close the page's streams before the services stop
        stack.call(research.gate.set)  # a held plan's handler must end for agents to stop
        stack.stop()


def page(driver: Any, stack: Stack, path: str) -> None:
    sep = "&" if "?" in path else "?"
    driver.get(f"{stack.urls['tracker']}{path}{sep}tenant={TENANT}")


def counter(driver: Any, name: str) -> int:
    """A count the pages keep on <body> (loads, stream frames, live updates)."""
    return int(driver.find_element("tag name", "body").get_attribute(f"data-{name}") or 0)


def loaded(driver: Any, count: int = 1) -> None:
    wait_for(driver, lambda d: counter(d, "loaded") >= count, message="page never loaded")


def settled(driver: Any) -> None:
    """Wait until a finished plan's page has its final content (no reload pending)."""
    wait_for(
        driver,
        lambda d: d.find_element("tag name", "body").get_attribute("data-settled") == "true",
        message="page never settled",
    )


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def attrs(driver: Any, selector: str, name: str) -> set[str]:
    """The values of attribute ``name`` over ``selector`` (read in one go)."""
    return set(
        driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]),"
            " (e) => e.getAttribute(arguments[1]));",
            selector,
            name,
        )
    )


def status(driver: Any) -> str:
    return str(
        driver.execute_script(
            "const pill = document.querySelector('#plan-status .pill');"
            "return pill ? pill.textContent : '';"
        )
    )


def rows(driver: Any) -> dict[str, str]:
    """Plan id -> status of the list's rows (read in one go: the list re-renders)."""
    return dict(
        driver.execute_script(
            "const out = {};"
            "for (const r of document.querySelectorAll('#plans-body tr'))"
            "  out[r.dataset.planId] = r.querySelector('.pill').textContent;"
            "return out;"
        )
    )


def screenshot(driver: Any, name: str) -> None:
    if not SCREENSHOTS:
        return
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    # The window is taller than the page it shows (its frame): leave room for the end.
    driver.set_window_size(1360, min(max(int(height) + 140, 700), 2600))
    target = Path(SCREENSHOTS) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(target))
    driver.set_window_size(1360, 900)


def no_injection(driver: Any) -> None:
    assert driver.execute_script("return window.__xss") is None
    injected = driver.execute_script(
        "return document.querySelectorAll('main img, main script, main [onerror]').length"
    )
    assert injected == 0


# -- tests ------------------------------------------------------------------------------


def test_plans_list_shows_plans_with_status_colours_filters_and_refreshes(driver, stack):
    done = stack.run(ask(stack, "owls"))
    failed = stack.run(ask(stack, "broken"))
    held = stack.run(plan_with(stack, stack.run(ask(stack, "obscure", wait=False)), "ask_user"))

    page(driver, stack, "/ui")
    loaded(driver)
    wait_for(driver, lambda d: {done, failed, held} <= set(rows(d)), message="plans not listed")
    listed = rows(driver)
    assert (listed[done], listed[failed], listed[held]) == ("completed", "failed", "running")
    # The outcome at a glance: where and why the failed plan failed.
    badge = driver.find_element("css selector", f'tr[data-plan-id="{failed}"] .badge-failed')
    title = badge.get_attribute("title")
    assert title.startswith("failed: step 'retry_search' got web.search.failed"), title
    assert css(driver, f'tr[data-plan-id="{done}"] .badge') == []
    # Search by an id prefix: only that plan is left, and the search is in the URL.
    driver.find_element("id", "f-q").send_keys(failed[:8])
    driver.find_element("css selector", "#filters button[type=submit]").click()
    wait_for(driver, lambda d: set(rows(d)) == {failed}, message="id search ignored")
    assert f"q={failed[:8]}" in driver.current_url
    driver.find_element("id", "f-q").clear()
    driver.find_element("css selector", "#filters button[type=submit]").click()
    wait_for(driver, lambda d: {done, held} <= set(rows(d)), message="search not cleared")
    pill = driver.find_element("css selector", f'tr[data-plan-id="{done}"] .pill')
    assert "status-completed" in pill.get_attribute("class")
    # Completed green, running blue: the colours come from the status classes.
    colour = pill.value_of_css_property("background-color")
    running = driver.find_element("css selector", f'tr[data-plan-id="{held}"] .pill')
    assert colour != running.value_of_css_property("background-color")

    # A filter narrows the list and lands in the URL (shareable).
    driver.find_element("id", "f-status").send_keys("completed")
    driver.find_element("css selector", "#filters button[type=submit]").click()
    wait_for(driver, lambda d: held not in rows(d) and done in rows(d), message="filter ignored")
    assert "status=completed" in driver.current_url
    driver.find_element("id", "f-clear").click()
    wait_for(driver, lambda d: held in rows(d), message="clear ignored")
    # Clicking a planner narrows the list to that planner's plans.
    click(driver, f'tr[data-plan-id="{done}"] a.filter-link', index=1)
    wait_for(driver, lambda d: "planner=research-planner" in d.current_url)
    assert driver.find_element("id", "f-planner").get_attribute("value") == "research-planner"
    driver.find_element("id", "f-clear").click()
    # A time range (local time in the form, UTC to the API): nothing started in 2099.
    driver.execute_script("document.getElementById('f-since').value = '2099-01-01T00:00:00'")
    driver.find_element("css selector", "#filters button[type=submit]").click()
    wait_for(driver, lambda d: rows(d) == {}, message="time filter ignored")
    assert driver.find_element("id", "error").text == ""
    driver.find_element("id", "f-clear").click()
    wait_for(driver, lambda d: held in rows(d), message="clear ignored")

    # Auto-refresh: a plan started after the page loaded appears without a reload.
    driver.execute_script("window.__same_page = true")
    driver.find_element("id", "refresh-every").send_keys("2 s")
    later = stack.run(ask(stack, "herons"))
    wait_for(driver, lambda d: later in rows(d), timeout=15, message="no auto-refresh")
    assert driver.execute_script("return window.__same_page") is True

    # Clicking a plan opens its page.
    click(driver, f'tr[data-plan-id="{later}"] a.plan-link')
    wait_for(driver, lambda d: "/ui/plans/" in d.current_url)
    assert console_errors(driver) == []

    # Another tenant sees none of acme's plans.
    driver.get(f"{stack.urls['tracker']}/ui?tenant=someone-else")
    loaded(driver)
    assert rows(driver) == {}
    assert driver.find_element("id", "empty").is_displayed()


async def cancel_as(stack: Stack, plan_id: str, tenant: str) -> Any:
    """``POST /plans/{id}/cancel`` as ``tenant`` (what the page's form sends)."""
    async with stack.context(tenant) as context:
        return await context.http.post(
            f"{stack.urls['tracker']}/v1/tracker/plans/{plan_id}/cancel",
            json={"reason": "not yours"},
            headers={"X-Tenant-ID": tenant},
        )


def test_plan_page_cancels_a_running_plan_after_confirmation(driver, stack):
    held = stack.run(
        plan_with(stack, stack.run(ask(stack, "obscure-cancel", wait=False)), "ask_user")
    )
    # Another tenant does not see the plan, so cannot cancel it.
    refused = stack.run(cancel_as(stack, held, "globex"))
    assert refused.status_code == 404, refused.text
    page(driver, stack, f"/ui/plans/{held}")
    loaded(driver)
    wait_for(driver, lambda d: d.find_element("id", "cancel-open").is_displayed())
    form = driver.find_element("id", "cancel-form")
    assert not form.is_displayed()
    driver.find_element("id", "cancel-open").click()  # one click only opens the form
    assert form.is_displayed() and status(driver) == "running"
    driver.find_element("id", "cancel-back").click()
    assert not form.is_displayed()
    driver.find_element("id", "cancel-open").click()
    driver.find_element("id", "cancel-reason").send_keys("wrong topic")
    driver.find_element("id", "cancel-confirm").click()
    wait_for(driver, lambda d: status(d) == "cancelled", timeout=20, message="plan never cancelled")
    wait_for(driver, lambda d: "wrong topic" in d.find_element("id", "facts").text)
    assert not driver.find_element("id", "plan-actions").is_displayed()
    settled(driver)
    assert "plan.cancel_requested" in attrs(driver, "#timeline-body tr", "data-event-type")
    detail = stack.run(tracked(stack, f"/plans/{held}"))
    assert (detail["status"], detail["reason"]) == ("cancelled", "wrong topic")
    again = stack.run(cancel_as(stack, held, TENANT))
    assert again.status_code == 409, again.text
    assert console_errors(driver) == []
    screenshot(driver, "tracker-plan-cancelled.png")
    # The list says who cancelled it, and why.
    page(driver, stack, "/ui")
    wait_for(driver, lambda d: css(d, f'tr[data-plan-id="{held}"] .badge-cancelled'))
    badge = css(driver, f'tr[data-plan-id="{held}"] .badge-cancelled')[0]
    assert badge.get_attribute("title") == "cancelled by anonymous: wrong topic"


def test_plan_page_answers_a_pending_human_input(driver, stack):
    held = open_answer_form(driver, stack, "obscure-answer")
    form = css(driver, "form.answer-form")[0]
    assert form.get_attribute("data-wait-id") == f"sub-{held}"
    # No schema registered for approval.answered: the form takes JSON, and says why.
    assert form.get_attribute("data-schema") == "false"
    note = form.find_element("css selector", ".schema-note").get_attribute("textContent")
    assert "approval.answered is not registered" in note
    form.find_element("css selector", "textarea").send_keys("[1]")
    form.find_element("css selector", "button").click()
    # Read the DOM text, not the rendered text: a live re-render may hide the panel for a
    # moment, and selenium's ``.text`` is empty for anything not displayed.
    wait_for(
        driver,
        lambda d: (
            "JSON object"
            in (
                form.find_element("css selector", ".answer-note").get_attribute("textContent") or ""
            )
        ),
        timeout=10,
        message="the form never said the answer must be a JSON object",
    )
    area = form.find_element("css selector", "textarea")
    area.clear()
    area.send_keys('{"approved": true, "by": "<b>dana</b>"}')
    form.find_element("css selector", "button").click()
    wait_for(
        driver,
        lambda d: attrs(d, "#waits-body .pill", "data-status") == {"answered"},
        timeout=20,
        message="the wait never showed answered",
    )
    assert css(driver, "form.answer-form") == []
    wait_for(
        driver,
        lambda d: "approval.answered" in attrs(d, "#timeline-body tr", "data-event-type"),
        message="the answer never reached the timeline",
    )
    task = stack.run(tracked(stack, f"/tasks/sub-{held}"))
    assert task["waits"][0]["status"] == "answered"
    no_injection(driver)
    assert console_errors(driver) == []
    screenshot(driver, "tracker-plan-answer.png")


def test_typing_an_answer_survives_a_live_update(driver, stack):
    """A live update re-renders the waits while a person types: the field keeps the focus
    and the caret, so the next keystrokes still land in it (they used to go to the page,
    and the form then sent what little had been typed)."""
    from selenium.webdriver.common.action_chains import ActionChains

    held = open_answer_form(driver, stack, "obscure-typing")
    area = css(driver, "form.answer-form textarea")[0]
    area.click()
    area.send_keys('{"approved": ')
    # A second question on the plan: the page re-reads the plan and renders its waits anew.
    stack.run(ask_a_human(stack, held, seconds=120, sub_task=f"second-{held}"))
    wait_for(
        driver,
        lambda d: len(css(d, "form.answer-form")) == 2,
        message="the second question never showed",
    )
    assert driver.execute_script("return document.activeElement === arguments[0]", area)
    ActionChains(driver).send_keys("true}").perform()
    assert area.get_attribute("value") == '{"approved": true}'
    assert console_errors(driver) == []


def waterfall(driver: Any) -> list[dict[str, Any]]:
    """The waterfall's rows in display order, with their bars' on-screen geometry."""
    return list(
        driver.execute_script(
            "return Array.from(document.querySelectorAll('#waterfall .wf-row[data-kind]'),"
            " (r) => { const b = r.querySelector('.wf-bar').getBoundingClientRect();"
            " return {kind: r.dataset.kind, id: r.dataset.id, name: r.dataset.name,"
            " parent: r.dataset.parent, depth: Number(r.dataset.depth),"
            " status: r.dataset.status, start: Number(r.dataset.start),"
            " end: Number(r.dataset.end), running: r.dataset.running === 'true',"
            " title: r.getAttribute('title'), left: b.left, width: b.width}; });"
        )
    )


def check_bars(bars: list[dict[str, Any]]) -> None:
    """One plan bar at the root; every other bar one level under a bar above it, starting
    no earlier than it; siblings in order of start; widths proportional to durations."""
    assert [b["kind"] for b in bars].count("plan") == 1 and bars[0]["kind"] == "plan"
    seen: dict[str, dict[str, Any]] = {}
    last_start: dict[str, float] = {}
    for bar in bars:
        if bar["kind"] != "plan":
            parent = seen[bar["parent"]]  # drawn above its children
            assert bar["depth"] == parent["depth"] + 1, bar
            assert bar["start"] >= parent["start"], (bar, parent)
            assert bar["start"] >= last_start.get(bar["parent"], 0), bar
            last_start[bar["parent"]] = bar["start"]
        assert bar["end"] >= bar["start"]
        seen[bar["id"]] = bar
    # Pixels per millisecond, the same for every bar long enough to measure.
    scale = bars[0]["width"] / (bars[0]["end"] - bars[0]["start"])
    measured = [b for b in bars if b["width"] > 20]
    assert len(measured) >= 3
    for bar in measured:
        ratio = bar["width"] / ((bar["end"] - bar["start"]) * scale)
        assert 0.95 < ratio < 1.05, (bar, ratio)


def test_plan_page_shows_time_as_nested_bars_that_grow_while_running(driver, stack):
    held = stack.run(held_with_a_question(stack, "obscure-bars", seconds=600))
    page(driver, stack, f"/ui/plans/{held}")
    loaded(driver)

    def complete(d: Any) -> bool:
        """The wait and both human-input requests (the planner's, the approver's) shown."""
        found = [(b["kind"], b["name"]) for b in waterfall(d)]
        return ("wait", "human input for approval.answered") in found and found.count(
            ("task", "notification.human_input")
        ) == 2

    wait_for(driver, complete, timeout=90, message="no bars for the wait and its request")
    bars = waterfall(driver)
    check_bars(bars)
    kinds = {(b["kind"], b["name"]) for b in bars}
    assert {("state", "searching"), ("state", "ask_user")} <= kinds
    assert {("task", "web.search.requested"), ("task", "notification.human_input")} <= kinds
    (wait,) = [b for b in bars if b["kind"] == "wait"]
    assert wait["id"] == f"sub-{held}" and wait["status"] == "waiting" and wait["running"]
    # The state it was asked in holds it; hovering shows full names and times.
    ask_user = [b for b in bars if b["kind"] == "state" and b["name"] == "ask_user"][-1]
    assert wait["parent"] == ask_user["id"]
    assert "human input for approval.answered" in wait["title"]
    assert "deadline" in wait["title"] and "took" in wait["title"]
    # Still running: the plan, its current state and the wait end at "now", and grow, in
    # place (the row a person hovers is not replaced every second).
    assert ask_user["running"] and bars[0]["running"]
    driver.execute_script(
        "document.querySelector('#waterfall .wf-row[data-id=\"' + arguments[0] + '\"]')"
        ".dataset.marked = 'yes';",
        ask_user["id"],
    )
    grown = wait_for(
        driver,
        lambda d: [
            b
            for b in waterfall(d)
            if b["id"] == ask_user["id"]
            and b["end"] >= ask_user["end"] + 1000
            and b["width"] > ask_user["width"]
        ],
        timeout=15,
        message="the running bar never grew",
    )
    assert grown[0]["running"]
    assert attrs(driver, "#waterfall .wf-row[data-marked]", "data-id") == {ask_user["id"]}

    # Edge labels: a long event name is shortened to fit between its states, the full
    # name on hover, and no label sits on a state's box or on another label.
    overlaps = driver.execute_script(
        "const boxes = Array.from(document.querySelectorAll('#machine .node rect'),"
        "  (r) => [r.getBBox(), r.parentNode.dataset.state]);"
        "const out = [];"
        "const over = (b, n) => b.x < n.x + n.width && b.x + b.width > n.x"
        "  && b.y < n.y + n.height && b.y + b.height > n.y;"
        "for (const t of document.querySelectorAll('#machine .edge text')) {"
        "  const b = t.getBBox();"
        "  for (const [n, name] of boxes) if (over(b, n)) out.push([t.textContent, name]);"
        "  boxes.push([b, t.textContent]); }"
        "return out;"
    )
    assert overlaps == []
    label = driver.execute_script(
        "const g = document.querySelector("
        "  '#machine .edge[data-label=\"content.analyze.completed\"]');"
        "const t = g.querySelector('text');"
        "return [t.lastChild.textContent, t.querySelector('title').textContent];"
    )
    assert label[0] != "content.analyze.completed" and label[0].endswith("completed"), label
    assert "content.analyze.completed" in label[1]

    # Nobody will answer the approver: time its human input out from the page (after
    # confirming). Its bar stops while the plan's goes on.
    controls = css(driver, f'.timeout-controls[data-wait-id="sub-{held}"]')[0]
    controls.find_element("css selector", ".timeout-open").click()
    controls.find_element("css selector", ".timeout-confirm").click()
    wait_for(
        driver,
        lambda d: attrs(d, "#waits-body .pill", "data-status") == {"timed_out"},
        timeout=20,
        message="the human input never showed timed out",
    )
    wait_for(
        driver,
        lambda d: "task.timeout" in attrs(d, "#timeline-body tr", "data-event-type"),
        message="the timeout never reached the timeline",
    )
    shown = driver.execute_script(
        "return document.querySelector("
        "  '#timeline-body tr[data-event-type=\"task.timeout\"]').textContent;"
    )
    assert "human input timed out by " in shown
    wait_for(
        driver,
        lambda d: [
            b
            for b in waterfall(d)
            if b["kind"] == "wait" and b["status"] == "timed_out" and not b["running"]
        ],
        message="the wait's bar never stopped",
    )
    assert status(driver) == "running"

    # The person answers (the stand-in's gate opens): the plan ends, every bar stops.
    stack.call(stack.research.gate.set)  # type: ignore[attr-defined]
    wait_for(driver, lambda d: status(d) == "completed", timeout=20, message="never completed")
    stack.call(stack.research.gate.clear)  # later tests hold their plans again
    settled(driver)
    bars = waterfall(driver)
    check_bars(bars)
    assert not any(b["running"] for b in bars)
    assert "done" in {b["name"] for b in bars if b["kind"] == "state"}
    # The timed-out request (failed, never answered) ends with its wait, not the plan.
    (timed_out,) = [b for b in bars if b["kind"] == "wait"]
    (failed,) = [b for b in bars if b["kind"] == "task" and b["status"] == "failed"]
    assert failed["end"] == timed_out["end"] < bars[0]["end"]
    assert console_errors(driver) == []
    screenshot(driver, "tracker-plan-waterfall.png")


async def register_budget_event(stack: Stack) -> None:
    """The registry holds the schema of the answer a person gives."""
    from soorma_common.registry import EventDefinition

    async with stack.context(TENANT) as context:
        assert context.registry is not None
        await context.registry.register_event(
            EventDefinition(
                event_name="budget.approved",
                topic="action-results",
                description="A manager's decision on a budget",
                payload_schema={
                    "type": "object",
                    "required": ["approved", "amount"],
                    "properties": {
                        "approved": {"type": "boolean", "description": "yes or no"},
                        "amount": {
                            "type": "number",
                            "minimum": 0,
                            "description": "granted, in euros",
                        },
                        "currency": {"enum": ["EUR", "USD"]},
                        "count": {"type": "integer"},
                        "note": {"type": "string", "maxLength": 20},
                    },
                },
            )
        )


async def get_as(stack: Stack, path: str, tenant: str) -> Any:
    """``GET /v1/tracker{path}`` as ``tenant``, whatever it answers."""
    async with stack.context(tenant) as context:
        return await context.http.get(
            f"{stack.urls['tracker']}/v1/tracker{path}", headers={"X-Tenant-ID": tenant}
        )


def test_plan_page_answer_form_follows_the_registered_schema(driver, stack):
    stack.run(register_budget_event(stack))
    held = stack.run(
        held_with_a_question(stack, "obscure-schema", seconds=600, response_event="budget.approved")
    )
    # The schema is read as the caller's tenant: another tenant does not see the wait.
    found = stack.run(tracked(stack, f"/tasks/sub-{held}/answer-schema"))
    assert (found["event_type"], found["schema"]["required"]) == (
        "budget.approved",
        ["approved", "amount"],
    )
    refused = stack.run(get_as(stack, f"/tasks/sub-{held}/answer-schema", "globex"))
    assert refused.status_code == 404, refused.text
    page(driver, stack, f"/ui/plans/{held}")
    loaded(driver)
    form = wait_for(
        driver,
        lambda d: css(d, 'form.answer-form[data-schema="true"]'),
        message="no schema-driven form",
    )[0]
    fields = {
        f.get_attribute("data-field"): f.get_attribute("data-type")
        for f in form.find_elements("css selector", ".answer-field")
    }
    assert fields == {
        "approved": "boolean",
        "amount": "number",
        "currency": "enum",
        "count": "integer",
        "note": "string",
    }
    assert css(driver, "form.answer-form textarea.answer-data") == []
    required = {
        e.get_attribute("data-field")
        for e in form.find_elements("css selector", ".answer-field")
        if e.find_elements("css selector", ".req")
    }
    assert required == {"approved", "amount"}
    assert "granted, in euros" in form.text

    def field(name: str) -> Any:
        return form.find_element("css selector", f'.answer-field[data-field="{name}"]')

    def errors() -> dict[str, str]:
        return {
            name: field(name).find_element("css selector", ".field-error").text
            for name in fields
            if field(name).find_element("css selector", ".field-error").text
        }

    # Checked before anything is sent, with a message per field.
    form.find_element("css selector", "button[type=submit]").click()
    assert errors() == {"amount": "amount: required"}
    assert form.find_element("css selector", ".answer-note").text == "fix the marked field"
    field("amount").find_element("tag name", "input").send_keys("-5")
    field("count").find_element("tag name", "input").send_keys("2.5")
    field("note").find_element("tag name", "input").send_keys("x" * 25)
    form.find_element("css selector", "button[type=submit]").click()
    assert errors() == {
        "amount": "amount: must be at least 0",
        "count": "count: must be a whole number",
        "note": "note: must have at most 20 characters",
    }
    assert "3 marked fields" in form.find_element("css selector", ".answer-note").text
    screenshot(driver, "tracker-plan-answer-schema.png")
    for name, value in (("amount", "1200.5"), ("count", "3"), ("note", "ok")):
        box = field(name).find_element("tag name", "input")
        box.clear()
        box.send_keys(value)
    field("approved").find_element("tag name", "input").click()
    from selenium.webdriver.support.ui import Select

    Select(field("currency").find_element("tag name", "select")).select_by_visible_text("USD")
    form.find_element("css selector", "button[type=submit]").click()
    wait_for(
        driver,
        lambda d: attrs(d, "#waits-body .pill", "data-status") == {"answered"},
        timeout=20,
        message="the wait never showed answered",
    )
    timeline = stack.run(tracked(stack, f"/plans/{held}/timeline"))
    (answer,) = [e for e in timeline["entries"] if e["type"] == "budget.approved"]
    assert answer["data"] == {
        "approved": True,
        "amount": 1200.5,
        "currency": "USD",
        "count": 3,
        "note": "ok",
    }
    assert console_errors(driver) == []


async def start_spender(stack: Stack) -> None:
    """A planner whose plan WAITs for a manager (a declarative WAIT state)."""
    from soorma_common.state import PlanDefinition, StateConfig, StateWait

    states = {
        "start": StateConfig(state_name="start", default_next="approval"),
        "approval": StateConfig(
            state_name="approval",
            wait=StateWait(
                event="manager.approved",
                on_event="approved",
                timeout_seconds=600,
                on_timeout="expired",
                reason="a manager approves the spend",
            ),
        ),
        "approved": StateConfig(state_name="approved", is_terminal=True),
        "expired": StateConfig(state_name="expired", is_terminal=True),
    }
    await stack.started(
        Planner(
            name="spender",
            plan_definition=PlanDefinition(plan_type="spend.goal", states=states),
            context=stack.agent_context("spender", TENANT),
        )
    )


async def spend(stack: Stack) -> str:
    async with stack.context(TENANT) as context:
        await context.bus.request(
            "spend.goal", {"amount": 5000}, response_event="spend.done", correlation_id="spend-1"
        )
    return "spend-1"


async def timeout_as(stack: Stack, wait_id: str, tenant: str) -> Any:
    """``POST /tasks/{id}/timeout`` as ``tenant`` (what the page's button sends)."""
    async with stack.context(tenant) as context:
        return await context.http.post(
            f"{stack.urls['tracker']}/v1/tracker/tasks/{wait_id}/timeout",
            json={},
            headers={"X-Tenant-ID": tenant},
        )


def test_plan_page_times_out_a_planner_wait_after_confirmation(driver, stack):
    stack.run(start_spender(stack))
    plan_id = stack.run(plan_with(stack, stack.run(spend(stack)), "approval"))
    detail = stack.run(tracked(stack, f"/plans/{plan_id}"))
    while not detail["waits"]:
        detail = stack.run(tracked(stack, f"/plans/{plan_id}"))
    wait_id = detail["waits"][0]["wait_id"]
    # Another tenant does not see the wait, so cannot time it out.
    refused = stack.run(timeout_as(stack, wait_id, "globex"))
    assert refused.status_code == 404, refused.text
    page(driver, stack, f"/ui/plans/{plan_id}")
    loaded(driver)
    controls = wait_for(
        driver, lambda d: css(d, ".timeout-controls"), message="no time-out button"
    )[0]
    # Beside the answer form (JSON: manager.approved has no registered schema).
    assert css(driver, 'form.answer-form[data-schema="false"]')
    confirm = controls.find_element("css selector", ".timeout-confirm")
    assert not confirm.is_displayed()
    controls.find_element("css selector", ".timeout-open").click()  # one click only asks
    assert confirm.is_displayed() and status(driver) in {"running", "paused"}
    controls.find_element("css selector", ".timeout-back").click()
    assert not confirm.is_displayed()
    controls.find_element("css selector", ".timeout-open").click()
    confirm.click()
    wait_for(driver, lambda d: status(d) == "completed", timeout=20, message="never timed out")
    wait_for(driver, lambda d: "expired" in d.find_element("id", "facts").text)
    settled(driver)
    assert attrs(driver, "#waits-body .pill", "data-status") == {"timed_out"}
    wait_for(
        driver,
        lambda d: "plan.wait_timeout" in attrs(d, "#timeline-body tr", "data-event-type"),
        message="the timeout never reached the timeline",
    )
    shown = driver.execute_script(
        "return document.querySelector("
        "  '#timeline-body tr[data-event-type=\"plan.wait_timeout\"]').textContent;"
    )
    assert "plan wait timeout by " in shown
    # The WAIT is a bar under its state, ended by the timeout; the path took the branch.
    bars = waterfall(driver)
    check_bars(bars)
    (wait,) = [b for b in bars if b["kind"] == "wait"]
    approval = next(b for b in bars if b["kind"] == "state" and b["name"] == "approval")
    assert (wait["parent"], wait["status"], wait["running"]) == (approval["id"], "timed_out", False)
    assert "expired" in {b["name"] for b in bars if b["kind"] == "state"}
    again = stack.run(timeout_as(stack, wait_id, TENANT))
    assert again.status_code == 409, again.text
    assert console_errors(driver) == []
    screenshot(driver, "tracker-plan-wait-timeout.png")


def test_plan_page_draws_the_timeline_and_path_and_updates_live(driver, stack):
    held = stack.run(
        plan_with(stack, stack.run(ask(stack, "obscure-live", wait=False)), "ask_user")
    )
    page(driver, stack, f"/ui/plans/{held}")
    loaded(driver)
    wait_for(
        driver, lambda d: "live" in d.find_element("id", "live").text, message="stream never opened"
    )
    timeline = css(driver, "#timeline-body tr")
    types = attrs(driver, "#timeline-body tr", "data-event-type")
    assert {"plan.started", "plan.state_changed", "web.search.requested"} <= types
    # Who did it (the planner, the searcher), when, and how long an answer took.
    cells = [r.find_elements("tag name", "td") for r in timeline]
    assert {"research-planner", "web-searcher"} <= {c[2].text for c in cells}
    assert all(c[0].text.startswith("20") for c in cells)

    def visited(d: Any) -> set[str]:
        return attrs(d, "#machine .node.visited", "data-state")

    def taken(d: Any) -> set[tuple[str, str]]:
        return {
            tuple(pair)
            for pair in d.execute_script(
                "return Array.from(document.querySelectorAll('#machine .edge.taken'),"
                " (e) => [e.dataset.from, e.dataset.to]);"
            )
        }

    assert {"searching", "ask_user"} <= visited(driver)
    assert "analyzing" not in visited(driver) and "done" not in visited(driver)
    assert ("searching", "ask_user") in taken(driver)
    assert attrs(driver, "#machine .node.current", "data-state") == {"ask_user"}
    # Every state of the definition is drawn, reached or not.
    assert set(RESEARCH.states) <= attrs(driver, "#machine .node", "data-state")
    rows_before = len(timeline)

    # A worker in the plan asks a person with a 1 s deadline; nobody answers: the page
    # shows the wait, then (tracker-fired task.timeout, over the stream) its timeout.
    stack.run(ask_a_human(stack, held, seconds=1))
    wait_for(
        driver,
        lambda d: attrs(d, "#waits-body .pill", "data-status") == {"timed_out"},
        message="the wait's timeout never showed",
    )
    assert "task.timeout" in attrs(driver, "#timeline-body tr", "data-event-type")

    # The human answers: the plan moves on; the open page follows over SSE, no reload.
    driver.execute_script("window.__same_page = true")
    stack.call(stack.research.gate.set)  # type: ignore[attr-defined]
    wait_for(
        driver, lambda d: status(d) == "completed", timeout=20, message="status never updated live"
    )
    wait_for(driver, lambda d: "done" in visited(d))
    assert driver.execute_script("return window.__same_page") is True
    # The plan page does not poll: only the SSE stream can have brought this.
    assert counter(driver, "frames") > 0
    path = {("ask_user", "searching"), ("searching", "analyzing"), ("analyzing", "done")}
    # Drawn as the stream's frames arrive: "done" can be shown a frame before the last
    # edges (seen once in a 4-worker run), so the whole path is waited for.
    wait_for(driver, lambda d: path <= taken(d), message="the path taken was never drawn")
    assert ("searching", "retry_search") not in taken(driver)
    assert len(driver.find_elements("css selector", "#timeline-body tr")) > rows_before
    settled(driver)
    assert driver.find_element("id", "live").text == "ended"
    # The goal, search, ask the user, search again, analyze: requests with their answers.
    wait_for(
        driver, lambda d: len(css(d, "#actions-body tr.action-row")) >= 5, message="actions missing"
    )
    agents = {
        row.find_elements("tag name", "td")[1].text
        for row in css(driver, "#actions-body tr.action-row")
    }
    assert {"web-searcher", "user-stand-in", "content-analyzer"} <= agents
    assert console_errors(driver) == []
    screenshot(driver, "tracker-plan.png")


def test_event_data_is_shown_as_text_never_as_html(driver, stack):
    plan_id = stack.run(ask(stack, XSS))
    stack.run(timeline_with(stack, plan_id, XSS, 2))
    page(driver, stack, f"/ui/plans/{plan_id}")
    loaded(driver)
    settled(driver)
    assert status(driver) == "completed"
    # The topic travels in the goal, the search request and the analysis: open their data.
    shown = driver.execute_script(
        "return Array.from(document.querySelectorAll('#timeline-body details.tl-data'),"
        " (d) => { d.open = true; return d.querySelector('pre').innerText; });"
    )
    assert sum(XSS in text for text in shown) >= 2, shown
    no_injection(driver)
    page(driver, stack, "/ui")
    loaded(driver)
    wait_for(driver, lambda d: plan_id in rows(d))
    no_injection(driver)


async def start_orchestrator(stack: Stack) -> None:
    """A ChoreographyPlanner for ``report.goal`` (its LLM: the scripted litellm provider)."""
    from choreo_helpers import MODEL

    from soorma.ai.choreography import ChoreographyPlanner

    planner = ChoreographyPlanner(
        name="orchestrator",
        reasoning_model=MODEL,
        context=stack.agent_context("orchestrator", TENANT),
    )

    @planner.on_goal("report.goal")
    async def on_goal(goal: Any, context: PlatformContext) -> None:
        plan = await planner.open_plan(goal, context)
        await planner.step(plan, context, trigger=f"new goal {goal.event_type}: {goal.data}")

    @planner.on_transition()
    async def on_transition(transition: Any, context: PlatformContext) -> None:
        if transition.plan.goal_event != "report.goal":
            return  # the research sub-plan's events belong to the research planner
        event = transition.event
        await planner.step(transition.plan, context, trigger=f"{event.type}: {event.data}")

    await stack.started(planner)


async def report(stack: Stack) -> str:
    async with stack.context(TENANT) as context:
        answer = await context.bus.call(
            "report.goal", {"subject": "owls"}, response_event="report.done", timeout=30
        )
    assert answer.data["status"] == "completed", answer.data
    return str(answer.data["plan_id"])


def test_choreography_plan_shows_its_llm_audit_trail_and_links_its_sub_plan(driver, stack):
    from choreo_helpers import ScriptedLLM, complete, delegate, publish

    llm = ScriptedLLM()
    hostile = "<img src=x onerror=window.__xss=3>"
    # 1: an event nobody handles (invalid: the repair re-prompt names it), 2: hand the
    # research to the state-machine planner (a sub-plan), 3: complete with its answer.
    llm.say(
        publish(hostile, {"q": 1}),
        delegate("research-planner", GOAL_EVENT, {"topic": "owls"}),
        complete({"report": "owls, researched"}),
    )
    llm.answers[1]["next_action"]["response_event"] = RESPONSE_EVENT
    with llm.installed():
        stack.run(start_orchestrator(stack))
        plan_id = stack.run(report(stack))

    page(driver, stack, f"/ui/plans/{plan_id}")
    settled(driver)
    assert driver.find_element("id", "audit-panel").is_displayed()
    assert "ChoreographyPlanner" in driver.find_element("id", "no-machine").text
    records = driver.find_elements("css selector", "#audit details.audit")
    assert len(records) == len(llm.calls) == 3
    first = records[0]
    first.find_element("tag name", "summary").click()
    assert "scripted/planner" in first.find_element("css selector", ".audit-model").text
    assert first.find_element("css selector", ".bad").text == "invalid"
    assert re.fullmatch(r"[\d.]+ m?s", first.find_element("css selector", ".audit-latency").text)
    errors = first.find_element("css selector", ".audit-errors").text
    assert hostile in errors  # the validation error names the bad event, as text
    assert hostile in first.find_element("css selector", ".audit-raw").text
    assert "report.goal" in first.find_elements("css selector", ".audit-prompt")[-1].text
    assert records[-1].find_element("css selector", ".ok").text == "valid"
    no_injection(driver)

    # The delegated research is a sub-plan, linked both ways.
    link = wait_for(
        driver,
        lambda d: d.find_elements("css selector", "#sub-plans a.plan-link"),
        message="sub-plan not linked",
    )[0]
    sub_id = link.text
    assert status(driver) == "completed"
    # The sub-plan is a bar too, under the step that started it.
    bars = waterfall(driver)
    (sub_bar,) = [r for r in bars if r["kind"] == "sub-plan"]
    assert sub_bar["id"] == sub_id
    assert sub_bar["depth"] >= 1 and sub_bar["parent"] in {r["id"] for r in bars}
    # Its steps are the LLM's calls: one bar each, the invalid first one marked failed.
    calls = [r for r in bars if r["kind"] == "llm"]
    assert [c["status"] for c in calls] == ["failed", "completed", "completed"]
    assert "scripted/planner" in calls[0]["title"]
    check_bars(bars)
    screenshot(driver, "tracker-plan-llm.png")
    link.click()
    wait_for(driver, lambda d: sub_id in d.current_url)
    loaded(driver)
    parent = wait_for(driver, lambda d: d.find_elements("css selector", "#facts a.plan-link"))
    assert parent[0].text == plan_id
    assert console_errors(driver) == []

    # The list now has every kind of plan: the orchestrator and its linked sub-plan too.
    page(driver, stack, "/ui")
    loaded(driver)
    wait_for(driver, lambda d: {plan_id, sub_id} <= set(rows(d)))
    parent_link = css(driver, f'tr[data-plan-id="{sub_id}"] td:last-child a')[0]
    assert f"/ui/plans/{plan_id}" in parent_link.get_attribute("href")
    screenshot(driver, "tracker-plans.png")


def test_jwt_mode_asks_for_a_token_and_sends_it_as_a_bearer_header(driver, stack):
    secret = "ui-test-secret-" + "s" * 32
    # A second tracker (API and UI only) on the same projection, in jwt mode.
    url = stack.run(
        stack.add_tracker(
            auth_mode="jwt", jwt_secret=secret, tracker_projector=False, tracker_timeouts=False
        )
    )
    plan_id = stack.run(ask(stack, "owls-jwt"))
    stack.run(tracked(stack, f"/plans/{plan_id}"))

    driver.get(f"{url}/ui?tenant=ignored-in-jwt-mode")
    wait_for(driver, lambda d: css(d, "#token-input"), message="no token field")
    assert css(driver, "#tenant-input") == []
    # No token: the API's 401 message is shown, nothing else.
    wait_for(driver, lambda d: "bearer token" in d.find_element("id", "error").text)
    assert rows(driver) == {}

    token = issue_token(ServiceSettings(jwt_secret=secret), tenant_id=TENANT, user_id="ui")
    driver.find_element("id", "token-input").send_keys(token)
    driver.find_element("css selector", "#identity button").click()
    wait_for(driver, lambda d: plan_id in rows(d), message="token not used")
    assert driver.find_element("id", "error").text == ""
    assert token not in driver.current_url  # kept in localStorage, never in a URL

    click(driver, f'tr[data-plan-id="{plan_id}"] a.plan-link')
    settled(driver)
    assert status(driver) == "completed"
    assert token not in driver.current_url
    # The only failures were the token-less calls.
    assert all("status of 401" in m for m in console_errors(driver))
