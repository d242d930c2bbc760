/* Plans list: filters (kept in the URL), status colours, auto-refresh, cursor paging. */
(function () {
  "use strict";
  const ui = window.TrackerUI;
  const { h } = ui;
  const FILTERS = ["q", "status", "goal_event", "planner", "session_id", "parent_plan_id", "since", "until"];
  const PAGE = 50;

  let nextCursor = null;
  let pages = 1;          // how many pages are shown: a refresh reloads as many
  let seen = new Map();   // plan_id -> status|updated, to flag rows that changed
  let loading = false;

  function fieldsFromUrl() {
    const query = new URLSearchParams(location.search);
    for (const name of FILTERS) {
      const input = document.getElementById("f-" + name);
      input.value = query.get(name) || "";
    }
  }

  function filterParams() {
    const params = {};
    for (const name of FILTERS) {
      const value = document.getElementById("f-" + name).value.trim();
      if (!value) continue;
      // datetime-local has no zone: send what the user meant, in UTC ISO form.
      params[name] = name === "since" || name === "until" ? new Date(value).toISOString() : value;
    }
    return params;
  }

  function writeUrl() {
    const url = new URL(location.href);
    for (const name of FILTERS) {
      const value = document.getElementById("f-" + name).value.trim();
      if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
    }
    history.replaceState(null, "", url.pathname + url.search);
  }

  function items(page) {
    return page.items || page.plans || page.data || [];
  }

  function started(plan) {
    return plan.started_at || plan.created_at || plan.first_seen_at;
  }

  function duration(plan) {
    if (plan.duration_ms !== undefined && plan.duration_ms !== null) return plan.duration_ms;
    const a = ui.parseTime(started(plan));
    const b = ui.parseTime(plan.ended_at || plan.completed_at || plan.finished_at);
    if (a === null) return null;
    if (b !== null) return b - a;
    return ["running", "pending", "paused"].includes(plan.status) ? Date.now() - a : null;
  }

  /** A cell that narrows the list to plans sharing this value (same page, filter set). */
  function filterLink(name, value, text) {
    if (!value) return "";
    const a = h("a", { href: "#", class: "filter-link", title: "show only " + name + " = " + value }, text || value);
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      document.getElementById("f-" + name).value = value;
      document.getElementById("filters").requestSubmit();
    });
    return a;
  }

  /** The outcome at a glance, beside the status: why it ended, or what it waits for. */
  function outcome(plan, status) {
    const badges = [];
    if (status === "failed") {
      // A planner's reason names the step it failed at; else the state it stopped in does.
      badges.push(["failed", plan.reason ? "failed: " + plan.reason
        : "failed" + (plan.current_state ? " at " + plan.current_state : "")]);
    } else if (status === "cancelled") {
      badges.push(["cancelled", "cancelled" + (plan.cancelled_by ? " by " + plan.cancelled_by : "") +
        (plan.reason ? ": " + plan.reason : "")]);
    }
    if (plan.waiting_on_person) {
      badges.push(["person", "waiting on a person" + (plan.waiting_until ? " until " + ui.fmtTime(plan.waiting_until) : "")]);
    }
    if (plan.took_timeout_branch) badges.push(["timeout", "took the timeout branch"]);
    return badges.map(([kind, text]) =>
      h("span", { class: "badge badge-" + kind, title: text }, ui.short(text, 80)));
  }

  function row(plan, compare) {
    const id = plan.plan_id || plan.id;
    const status = String(plan.status || "unknown").toLowerCase();
    const stamp = status + "|" + (plan.updated_at || plan.last_event_at || "");
    const fresh = compare && seen.get(id) !== stamp;
    seen.set(id, stamp);
    const parent = plan.parent_plan_id;
    return h("tr", { class: "row-" + status.replace(/[^a-z_]/g, "") + (fresh ? " fresh" : ""), "data-plan-id": id },
      h("td", { title: plan.reason || null }, ui.statusPill(status), outcome(plan, status)),
      h("td", { class: "mono" }, h("a", { href: ui.planHref(id), class: "plan-link" }, ui.short(id, 40))),
      h("td", null, filterLink("goal_event", plan.goal_event)),
      h("td", null, filterLink("planner", plan.planner)),
      h("td", null, plan.current_state || ""),
      h("td", { class: "mono" }, filterLink("session_id", plan.session_id, ui.short(plan.session_id || "", 24))),
      h("td", { class: "nowrap" }, ui.fmtTime(started(plan))),
      h("td", { class: "num" }, ui.fmtDuration(duration(plan))),
      h("td", { class: "mono" }, parent ? h("a", { href: ui.planHref(parent) }, ui.short(parent, 20)) : ""),
    );
  }

  async function load() {
    if (loading) return;
    loading = true;
    try {
      const params = filterParams();
      const rows = [];
      let cursor = null;
      for (let i = 0; i < pages; i++) {
        const page = await ui.api("/plans", Object.assign({ limit: PAGE, cursor }, params));
        rows.push(...items(page));
        cursor = page.next_cursor || null;
        if (!cursor) break;
      }
      nextCursor = cursor;
      const body = ui.clear(document.getElementById("plans-body"));
      const compare = seen.size > 0;  // the first load flags nothing
      rows.forEach((plan) => body.appendChild(row(plan, compare)));
      document.getElementById("empty").hidden = rows.length > 0;
      document.getElementById("more").hidden = !nextCursor;
      document.getElementById("count").textContent = rows.length + (nextCursor ? "+" : "") + " plans";
      document.getElementById("refreshed").textContent = "updated " + new Date().toLocaleTimeString();
      document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
      ui.showError(null);
    } catch (err) {
      ui.showError(err);
    } finally {
      loading = false;
    }
  }

  function start() {
    fieldsFromUrl();
    const form = document.getElementById("filters");
    form.addEventListener("submit", (ev) => {
      ev.preventDefault(); writeUrl(); pages = 1; seen = new Map(); load();
    });
    document.getElementById("f-clear").addEventListener("click", () => {
      form.reset(); writeUrl(); pages = 1; seen = new Map(); load();
    });
    document.getElementById("more").addEventListener("click", () => { pages += 1; load(); });
    load();
    ui.autoRefresh(load);
  }

  document.addEventListener("DOMContentLoaded", () => ui.boot("Plans", start));
})();
