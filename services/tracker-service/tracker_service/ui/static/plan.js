/* One plan: summary, state machine with the path taken, timeline, actions, sub-plans,
 * LLM audit trail; kept live by the plan's SSE stream (each update re-reads the views). */
(function () {
  "use strict";
  const ui = window.TrackerUI;
  const { h } = ui;

  const marker = "/ui/plans/";
  const planId = decodeURIComponent(location.pathname.slice(location.pathname.indexOf(marker) + marker.length));
  const enc = encodeURIComponent(planId);
  let stream = null;
  let pending = null;
  let definition = null;  // {state_machine, llm_audit, ...} when the API has it

  function list(page) {
    if (Array.isArray(page)) return page;
    return page.items || page.entries || page.timeline || page.actions || page.plans || page.data || [];
  }

  function when(entry) {
    return entry.at || entry.timestamp || entry.occurred_at || entry.time || entry.created_at;
  }

  function data(entry) { return entry.data || entry.payload || {}; }

  function fact(dl, label, value) {
    if (value === null || value === undefined || value === "") return;
    dl.append(h("dt", null, label), h("dd", null, value));
  }

  function planLink(id) { return h("a", { href: ui.planHref(id), class: "mono" }, id); }

  function renderSummary(plan) {
    document.title = "Plan " + planId + " \u00b7 Soorma tracker";
    ui.clear(document.getElementById("plan-title")).append("Plan ", h("span", { class: "mono" }, planId));
    ui.clear(document.getElementById("plan-status")).append(ui.statusPill(plan.status));
    const dl = ui.clear(document.getElementById("facts"));
    fact(dl, "Goal event", plan.goal_event);
    fact(dl, "Planner", plan.planner || plan.planner_name);
    fact(dl, "Current state", plan.current_state);
    fact(dl, "Session", plan.session_id);
    fact(dl, "Started", ui.fmtTime(plan.started_at || plan.created_at));
    fact(dl, "Ended", ui.fmtTime(plan.ended_at || plan.completed_at || plan.finished_at));
    fact(dl, "Duration", ui.fmtDuration(plan.duration_ms));
    fact(dl, "Parent plan", plan.parent_plan_id ? planLink(plan.parent_plan_id) : null);
    fact(dl, "Correlation", plan.correlation_id || (plan.correlation_ids || []).join(", "));
    fact(dl, "Failure", plan.reason || plan.failure_reason || plan.error);
    fact(dl, "Tenant", plan.tenant_id);
  }

  function who(entry) {
    const d = data(entry);
    return entry.agent || entry.source || entry.actor || entry.agent_id || d.agent || "";
  }

  function what(entry) { return entry.event_type || entry.type || entry.kind || ""; }

  function detail(entry) {
    const d = data(entry);
    const type = what(entry);
    if (entry.summary) return entry.summary;
    if (type === "plan.state_changed" || d.to_state !== undefined) {
      return (d.from_state || "\u2205") + " \u2192 " + (d.to_state || "?") + (d.trigger_event ? "  (on " + d.trigger_event + ")" : "");
    }
    if (d.reason) return "reason: " + (typeof d.reason === "string" ? d.reason : ui.json(d.reason));
    if (d.error) return "error: " + (typeof d.error === "string" ? d.error : ui.json(d.error));
    const keys = Object.keys(d).filter((k) => !["plan_id", "current_state", "status", "parent_plan_id"].includes(k));
    if (!keys.length) return d.status ? "status: " + d.status : "";
    const picked = {};
    keys.slice(0, 6).forEach((k) => { picked[k] = d[k]; });
    return ui.short(JSON.stringify(picked), 160);
  }

  /** The path taken: the plan.state_changed entries, in order. */
  function pathFrom(entries) {
    const path = [];
    for (const entry of entries) {
      const d = data(entry);
      const type = what(entry);
      if (type === "plan.state_changed" || (entry.to_state !== undefined)) {
        path.push({ from: d.from_state !== undefined ? d.from_state : entry.from_state,
                    to: d.to_state !== undefined ? d.to_state : entry.to_state,
                    event: d.trigger_event || entry.trigger_event || null });
      }
    }
    return path;
  }

  function durations(entries) {
    // "How long": the API's own figure if any; for a state change, time until the next one
    // (or the plan's end / now while it runs).
    const out = new Map();
    const stateIdx = [];
    entries.forEach((e, i) => { if (what(e) === "plan.state_changed") stateIdx.push(i); });
    stateIdx.forEach((i, k) => {
      const a = ui.parseTime(when(entries[i]));
      let b = null;
      if (k + 1 < stateIdx.length) b = ui.parseTime(when(entries[stateIdx[k + 1]]));
      else {
        const end = entries.findIndex((e, j) => j > i && /^plan\.(completed|failed|cancelled)$/.test(what(e)));
        if (end >= 0) b = ui.parseTime(when(entries[end]));
      }
      if (a !== null && b !== null) out.set(i, b - a);
    });
    return out;
  }

  function renderTimeline(entries) {
    const body = ui.clear(document.getElementById("timeline-body"));
    const first = entries.length ? ui.parseTime(when(entries[0])) : null;
    const spans = durations(entries);
    entries.forEach((entry, i) => {
      const t = ui.parseTime(when(entry));
      const took = entry.duration_ms ?? entry.latency_ms ?? spans.get(i);
      body.append(h("tr", { class: "tl-row", "data-event-type": what(entry) },
        h("td", { class: "nowrap mono" }, ui.fmtTime(t)),
        h("td", { class: "num mono" }, first !== null && t !== null ? "+" + ui.fmtDuration(t - first) : ""),
        h("td", null, who(entry)),
        h("td", { class: "mono" }, what(entry)),
        h("td", null, detail(entry)),
        h("td", { class: "num" }, ui.fmtDuration(took))));
    });
    document.getElementById("timeline-count").textContent = "(" + entries.length + ")";
  }

  function renderActions(actions) {
    const body = ui.clear(document.getElementById("actions-body"));
    if (!actions.length) body.append(h("tr", null, h("td", { colspan: "4", class: "muted" }, "none")));
    for (const a of actions) {
      const outcome = a.outcome || a.status || (a.result_event_type ? "done" : "waiting");
      body.append(h("tr", { class: "action-row" },
        h("td", { class: "mono" }, a.event_type || a.request_event_type || a.request_type || ""),
        h("td", null, a.agent || a.agent_id || a.responder || ""),
        h("td", null, ui.statusPill(outcome)),
        h("td", { class: "num" }, ui.fmtDuration(a.latency_ms))));
    }
  }

  function renderSubPlans(plans) {
    const ul = ui.clear(document.getElementById("sub-plans"));
    if (!plans.length) { ul.append(h("li", { class: "muted" }, "none")); return; }
    for (const p of plans) {
      const id = p.plan_id || p.id;
      ul.append(h("li", { class: "sub-plan" }, ui.statusPill(p.status), " ", planLink(id), " ",
        h("span", { class: "muted" }, p.goal_event || "")));
    }
  }

  function renderMachine(plan, entries) {
    const box = ui.clear(document.getElementById("machine"));
    const machine = plan.state_machine || (definition && definition.state_machine) || {};
    const path = pathFrom(entries);
    const initial = plan.initial_state || (definition && definition.initial_state) || null;
    const svg = ui.drawMachine(machine, initial, path, plan.current_state);
    if (svg) box.append(svg);
    else box.append(h("p", { class: "muted" }, "No state machine recorded for this plan."));
  }

  function renderAudit(plan) {
    const records = plan.llm_audit || (plan.state && plan.state.llm_audit) || (definition && definition.llm_audit) || [];
    const panel = document.getElementById("audit-panel");
    panel.hidden = !records.length;
    const box = ui.clear(document.getElementById("audit"));
    records.forEach((r, i) => {
      const ok = r.valid !== false && !(r.errors || []).length;
      const tokens = r.tokens && Object.keys(r.tokens).length
        ? Object.entries(r.tokens).map(([k, v]) => k + " " + v).join(", ") : "";
      const body = h("div", null);
      if (r.errors && r.errors.length) {
        body.append(h("strong", null, "Validation errors"),
          h("ul", { class: "audit-errors" }, r.errors.map((e) => h("li", { class: "bad" }, typeof e === "string" ? e : ui.json(e)))));
      }
      body.append(h("strong", null, "Prompt"));
      for (const m of r.prompt || []) {
        body.append(h("div", { class: "muted" }, m.role || ""), h("pre", { class: "audit-prompt" }, m.content || ""));
      }
      if (!r.prompt || !r.prompt.length) body.append(h("p", { class: "muted" }, "(not recorded)"));
      body.append(h("strong", null, "Raw output"),
        h("pre", { class: "audit-raw" }, r.raw_output === null || r.raw_output === undefined ? "(none)" : String(r.raw_output)));
      box.append(h("details", { class: "audit", open: i === records.length - 1 },
        h("summary", null,
          h("span", { class: "mono" }, "#" + (i + 1)),
          h("span", null, r.attempt || ""),
          h("span", { class: "mono audit-model" }, r.model || "(no model)"),
          h("span", null, ui.fmtDuration(r.latency_ms)),
          tokens ? h("span", { class: "muted" }, tokens) : null,
          h("span", { class: ok ? "ok" : "bad" }, ok ? "valid" : "invalid"),
          h("span", { class: "muted" }, ui.fmtTime(r.at))),
        body));
    });
  }

  async function optional(path) {
    try { return await ui.api(path); } catch (err) {
      if (err instanceof ui.ApiError && (err.status === 404 || err.status === 405)) return null;
      throw err;
    }
  }

  async function loadDefinition() {
    // The state machine and the LLM audit live with the plan's context in the memory
    // service; the UI's own endpoint fetches them with the caller's identity.
    try {
      const response = await fetch(ui.root + "/ui/api/plans/" + enc + "/definition", { headers: ui.headers() });
      if (response.ok) definition = await response.json();
    } catch (err) { /* optional */ }
  }

  async function load() {
    try {
      const plan = await ui.api("/plans/" + enc);
      const [timeline, actions, subs] = await Promise.all([
        ui.api("/plans/" + enc + "/timeline", { limit: 1000 }),
        optional("/plans/" + enc + "/actions"),
        optional("/plans/" + enc + "/sub-plans"),
      ]);
      if (!plan.state_machine || !plan.llm_audit) await loadDefinition();
      const entries = list(timeline);
      renderSummary(plan);
      renderMachine(plan, entries);
      renderTimeline(entries);
      renderActions(actions ? list(actions) : []);
      renderSubPlans(subs ? list(subs) : []);
      renderAudit(plan);
      document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
      ui.showError(null);
      return plan;
    } catch (err) {
      ui.showError(err);
      return null;
    }
  }

  function refreshSoon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; load(); }, 150);
  }

  function live(on, text) {
    const el = document.getElementById("live");
    el.className = "live " + (on ? "on" : "off");
    el.textContent = text;
  }

  async function start() {
    await load();
    if (stream) stream.close();
    stream = ui.stream("/plans/" + enc + "/stream", {
      onOpen() { live(true, "live"); },
      onEvent(message) {
        document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
        refreshSoon();
      },
      onClose(err) { live(false, err ? "disconnected: " + err.message : "reconnecting"); },
    });
  }

  document.addEventListener("DOMContentLoaded", () => ui.boot("Plan", start));
})();
