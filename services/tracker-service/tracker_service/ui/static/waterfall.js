/* A plan's time as bars: the plan, each state it was in, and within each state the tasks
 * it asked for, the waits it opened and the sub-plans it started, on one time axis.
 *
 * Built from what the plan page already reads (PlanDetail.state_path and waits, the
 * timeline's plan.state_changed entries, the actions, the sub-plans). A bar of something
 * still running ends at "now"; the page redraws it every second while the plan runs.
 *
 * A ChoreographyPlanner plan's LLM calls are rows too (from its audit trail).
 *
 * Every row carries data-kind (plan|state|task|wait|sub-plan|llm), data-id, data-parent,
 * data-depth, data-start / data-end (epoch ms) and data-running, for scripts and tests.
 */
(function () {
  "use strict";
  const ui = window.TrackerUI;
  const { h } = ui;

  const TERMINAL = ["completed", "failed", "cancelled"];
  const OPEN_TASK = ["pending", "running", "delegated", "waiting"];
  const TICKS = 6;

  /** The plan's state moves with their times: the detail's path plus moves seen live. */
  function moves(plan, entries) {
    const steps = (plan.state_path || []).map((s) => ({ to: s.to_state, event: s.trigger_event, at: ui.parseTime(s.at), id: s.event_id }));
    const known = new Set(steps.map((s) => s.id));
    for (const e of entries) {
      if (e.type !== "plan.state_changed" || known.has(e.event_id)) continue;
      const d = e.data || {};
      if (typeof d.to_state === "string") steps.push({ to: d.to_state, event: d.trigger_event || null, at: ui.parseTime(e.time), id: e.event_id });
    }
    return steps.filter((s) => s.at !== null).sort((a, b) => a.at - b.at);
  }

  /** The rows, in display order (a parent, then its children by start). */
  function rows(plan, entries, actions, subPlans, now) {
    const running = !TERMINAL.includes(plan.status);
    const planStart = ui.parseTime(plan.started_at) ?? ui.parseTime(plan.created_at) ?? now;
    const planEnd = running ? now : (ui.parseTime(plan.ended_at) ?? ui.parseTime(plan.updated_at) ?? now);
    const root = { kind: "plan", id: plan.plan_id, name: plan.goal_event || "plan", label: "plan " + (plan.goal_event || plan.plan_id),
      status: plan.status, start: planStart, end: Math.max(planEnd, planStart), running, children: [] };

    const steps = moves(plan, entries);
    const states = steps.map((step, i) => {
      const next = steps[i + 1];
      const last = !next;
      const end = next ? next.at : planEnd;
      const status = !last ? "completed" : running ? "running" : plan.status;
      return { kind: "state", id: "state:" + i + ":" + step.to, name: step.to, label: step.to,
        detail: step.event ? "entered on " + step.event : "first state", status,
        start: step.at, end: Math.max(end, step.at), running: last && running, children: [] };
    });
    root.children.push(...states);

    // Each task, wait and sub-plan goes under the state it started in (else the plan).
    function parentOf(start) {
      let found = root;
      for (const s of states) if (s.start <= start) found = s;
      return found;
    }
    function add(item) {
      if (item.start === null) return;
      item.end = Math.max(item.end ?? now, item.start);
      parentOf(item.start).children.push(item);
    }
    // A human-input request that timed out has no answer: it ends when its wait did.
    const waitEnds = new Map((plan.waits || []).map((w) => [w.wait_id, ui.parseTime(w.answered_at) ?? ui.parseTime(w.timed_out_at)]));
    for (const a of actions || []) {
      const start = ui.parseTime(a.requested_at);
      const open = OPEN_TASK.includes(a.status);
      const end = ui.parseTime(a.responded_at) ?? (open && running ? now : (waitEnds.get(a.correlation_id) ?? planEnd));
      add({ kind: "task", id: a.task_id || a.correlation_id, name: a.event_type || "task",
        label: a.event_type || "task", detail: [a.agent ? "answered by " + a.agent : null, a.response_event ? "expects " + a.response_event : null,
          a.reason || a.error].filter(Boolean).join(" \u00b7 "),
        status: a.status, start, end, running: open && running && ui.parseTime(a.responded_at) === null, children: [] });
    }
    for (const w of plan.waits || []) {
      const start = ui.parseTime(w.created_at);
      const ended = ui.parseTime(w.answered_at) ?? ui.parseTime(w.timed_out_at);
      const open = w.status === "waiting" && running;  // an ended plan's open wait stops with it
      add({ kind: "wait", id: w.wait_id, name: (w.kind === "human_input" ? "human input" : "WAIT") + " for " + (w.expected_event || "?"),
        label: (w.kind === "human_input" ? "person: " : "WAIT: ") + (w.expected_event || "?"),
        detail: w.deadline ? "deadline " + ui.fmtTime(w.deadline) : "", status: w.status,
        start, end: ended ?? (open ? now : planEnd), running: open, children: [] });
    }
    // A ChoreographyPlanner's steps are its LLM calls (the audit records when each ended).
    ((plan.context && plan.context.llm_audit) || []).forEach((r, i) => {
      const end = ui.parseTime(r.at);
      if (end === null) return;
      const ok = r.valid !== false && !(r.errors || []).length;
      add({ kind: "llm", id: "llm:" + i, name: "LLM call #" + (i + 1) + " (" + (r.attempt || "call") + ", " + (r.model || "no model") + ")",
        label: "LLM #" + (i + 1) + " " + (r.attempt || ""), detail: ok ? "valid" : "invalid: " + (r.errors || []).join("; "),
        status: ok ? "completed" : "failed", start: end - (Number(r.latency_ms) || 0), end, running: false, children: [] });
    });
    for (const p of subPlans || []) {
      const start = ui.parseTime(p.started_at) ?? ui.parseTime(p.created_at);
      const open = !TERMINAL.includes(p.status) && running;
      add({ kind: "sub-plan", id: p.plan_id, name: "sub-plan " + (p.goal_event || p.plan_id), label: "sub-plan: " + (p.goal_event || p.plan_id),
        detail: p.plan_id + (p.current_state ? " \u00b7 " + p.current_state : ""), status: p.status,
        start, end: ui.parseTime(p.ended_at) ?? (open ? now : planEnd), running: open, href: ui.planHref(p.plan_id), children: [] });
    }

    // The plan's bar covers all it holds (the goal's request comes just before it starts).
    for (const c of root.children) {
      root.start = Math.min(root.start, c.start);
      root.end = Math.max(root.end, c.end);
    }
    const out = [];
    (function walk(node, depth, parent) {
      node.depth = depth;
      node.parent = parent;
      out.push(node);
      node.children.sort((a, b) => a.start - b.start || a.end - b.end);
      for (const c of node.children) walk(c, depth + 1, node.id);
    })(root, 0, null);
    return out;
  }

  function tickStep(span) {
    const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000,
      120000, 300000, 600000, 900000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000];
    return steps.find((s) => span / s <= TICKS) || span / TICKS;
  }

  /** Set a row's times, status, bar geometry, hover text and duration. */
  function fill(row, r, t0, span, pct) {
    const took = r.end - r.start;
    row.title = r.name + " \u2014 " + r.status + (r.running ? " (still running)" : "") +
      "\nstart " + ui.fmtTime(r.start) + " (+" + ui.fmtDuration(r.start - t0) + ")" +
      "\n" + (r.running ? "now " : "end ") + ui.fmtTime(r.end) + "\ntook " + ui.fmtDuration(took) +
      (r.detail ? "\n" + r.detail : "");
    row.dataset.status = r.status;
    row.dataset.start = String(Math.round(r.start));
    row.dataset.end = String(Math.round(r.end));
    row.dataset.running = String(!!r.running);
    const bar = row.querySelector(".wf-bar");
    bar.className = "wf-bar status-" + String(r.status).replace(/[^a-z_]/g, "") + (r.running ? " running" : "");
    bar.style.left = pct(r.start) + "%";
    bar.style.width = (100 * took / span) + "%";
    row.querySelector(".wf-took").textContent = ui.fmtDuration(took);
  }

  /**
   * Draw into ``box``: plan (PlanDetail), entries (timeline), actions (TaskSummary[]),
   * subPlans (PlanSummary[]); ``now`` (epoch ms) ends what still runs.
   */
  ui.drawWaterfall = function (box, plan, entries, actions, subPlans, now) {
    const list = rows(plan, entries, actions, subPlans, now);
    const t0 = Math.min(...list.map((r) => r.start));
    const t1 = Math.max(...list.map((r) => r.end), t0 + 1);
    const span = t1 - t0;
    const pct = (t) => (100 * (t - t0) / span);

    const axis = h("div", { class: "wf-axis" });
    const step = tickStep(span);
    for (let t = 0; t <= span + 0.5; t += step) {
      const tick = h("span", { class: "wf-tick" }, "+" + ui.fmtDuration(t));
      tick.style.left = pct(t0 + t) + "%";
      axis.append(tick);
    }
    // Same rows as drawn already (a tick of a running plan): update them in place, so a
    // tooltip being read, or a link being hovered, is not swept away every second.
    const key = JSON.stringify(list.map((r) => [r.kind, r.id]));
    const old = box.querySelector(".wf");
    if (old && old.dataset.key === key) {
      ui.clear(old.querySelector(".wf-axis")).append(...axis.childNodes);
      const els = old.querySelectorAll(".wf-row[data-kind]");
      list.forEach((r, i) => fill(els[i], r, t0, span, pct));
      return list.length;
    }
    const grid = h("div", { class: "wf", role: "table", "aria-label": "plan timeline as bars", "data-key": key },
      h("div", { class: "wf-row wf-head", role: "row" },
        h("div", { class: "wf-label", role: "columnheader" }, "Step"),
        h("div", { class: "wf-track", role: "columnheader" }, axis),
        h("div", { class: "wf-took", role: "columnheader" }, "Took")));
    for (const r of list) {
      const label = h("div", { class: "wf-label" },
        r.href ? h("a", { href: r.href, class: "mono" }, ui.short(r.label, 40)) : h("span", { class: r.kind === "state" ? "wf-state" : "mono" }, ui.short(r.label, 40)),
        r.kind === "state" ? h("span", { class: "muted wf-kind" }, " state") : null);
      label.style.paddingLeft = (6 + r.depth * 16) + "px";
      const row = h("div", { class: "wf-row wf-" + r.kind, role: "row", "data-kind": r.kind, "data-id": r.id,
        "data-name": r.name, "data-parent": r.parent || "", "data-depth": r.depth },
        label, h("div", { class: "wf-track" }, h("div", { class: "wf-bar" })), h("div", { class: "wf-took num" }));
      fill(row, r, t0, span, pct);
      grid.append(row);
    }
    ui.clear(box).append(grid);
    return list.length;
  };
})();
