/* One plan: summary, state machine with the path taken, timeline, actions, waits,
 * sub-plans, LLM audit trail; kept live by the plan's SSE stream.
 *
 * API (see tracker_service.schemas): GET /plans/{id} -> PlanDetail (state_path, waits,
 * context.state_machine, context.llm_audit), /timeline -> Timeline, /actions -> ActionList,
 * /sub-plans -> PlanList, /stream -> SSE frames "plan", "entry", "end", "heartbeat".
 */
(function () {
  "use strict";
  const ui = window.TrackerUI;
  const { h } = ui;

  const marker = "/ui/plans/";
  const planId = decodeURIComponent(location.pathname.slice(location.pathname.indexOf(marker) + marker.length));
  const enc = encodeURIComponent(planId);
  const MAX_PAGES = 20;
  const TERMINAL = ["completed", "failed", "cancelled"];

  let plan = null;          // the latest PlanDetail (summary fields refreshed by "plan" frames)
  let entries = [];         // timeline entries, by seq
  const seqs = new Set();
  let stream = null;
  let pending = null;
  let actionsSeen = [];      // the latest actions and sub-plans (for the waterfall)
  let subPlansSeen = [];
  let ticker = null;         // redraws the waterfall's running bars every second

  function fact(dl, label, value) {
    if (value === null || value === undefined || value === "") return;
    dl.append(h("dt", null, label), h("dd", null, value));
  }

  function planLink(id) { return h("a", { href: ui.planHref(id), class: "mono plan-link" }, id); }

  function bump(key) { document.body.dataset[key] = String(Number(document.body.dataset[key] || 0) + 1); }

  function renderSummary() {
    document.title = "Plan " + planId + " \u00b7 Soorma tracker";
    ui.clear(document.getElementById("plan-title")).append("Plan ", h("span", { class: "mono" }, planId));
    ui.clear(document.getElementById("plan-status")).append(ui.statusPill(plan.status));
    const dl = ui.clear(document.getElementById("facts"));
    fact(dl, "Goal event", plan.goal_event);
    fact(dl, "Planner", plan.planner);
    fact(dl, "Current state", plan.current_state);
    fact(dl, "Session", plan.session_id);
    fact(dl, "Started", ui.fmtTime(plan.started_at || plan.created_at));
    fact(dl, "Ended", ui.fmtTime(plan.ended_at));
    fact(dl, "Duration", ui.fmtDuration(plan.duration_ms));
    fact(dl, "Events", plan.event_count);
    fact(dl, "Parent plan", plan.parent_plan_id ? planLink(plan.parent_plan_id) : null);
    fact(dl, "Goal correlation", plan.goal_correlation_id);
    fact(dl, plan.status === "paused" ? "Paused because" : "Reason", plan.reason);
    if (plan.result !== undefined && plan.result !== null) {
      fact(dl, "Result", h("code", null, ui.short(JSON.stringify(plan.result), 300)));
    }
    if (plan.context_error) fact(dl, "Context", h("span", { class: "muted" }, plan.context_error));
    document.getElementById("plan-actions").hidden = TERMINAL.includes(plan.status);
  }

  /* Cancel: the tracker publishes plan.cancel_requested as the user; the plan's planner
   * ends it, and the stream brings the outcome. Two steps, so a click alone never cancels. */
  function setupCancel() {
    const form = document.getElementById("cancel-form");
    const open = document.getElementById("cancel-open");
    const note = document.getElementById("cancel-note");
    open.addEventListener("click", () => {
      form.hidden = false;
      open.hidden = true;
      document.getElementById("cancel-reason").focus();
    });
    document.getElementById("cancel-back").addEventListener("click", () => {
      form.hidden = true;
      open.hidden = false;
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const reason = document.getElementById("cancel-reason").value.trim();
      if (!reason) return;
      document.getElementById("cancel-confirm").disabled = true;
      try {
        const sent = await ui.post("/plans/" + enc + "/cancel", { reason });
        note.textContent = "cancel requested (event " + sent.event_id + "); waiting for the planner";
        document.body.dataset.cancelRequested = sent.event_id;
        ui.showError(null);
      } catch (err) {
        document.getElementById("cancel-confirm").disabled = false;
        ui.showError(err);
      }
    });
  }

  /** The path taken: PlanDetail.state_path, plus moves seen live since. */
  function path() {
    const steps = (plan.state_path || []).map((s) => ({ from: s.from_state, to: s.to_state, event: s.trigger_event, id: s.event_id }));
    const known = new Set(steps.map((s) => s.id));
    for (const e of entries) {
      if (e.type !== "plan.state_changed" || known.has(e.event_id)) continue;
      const d = e.data || {};
      if (typeof d.to_state === "string") steps.push({ from: d.from_state, to: d.to_state, event: d.trigger_event || null, id: e.event_id });
    }
    return steps;
  }

  function renderMachine() {
    const box = ui.clear(document.getElementById("machine"));
    const legend = document.getElementById("machine-legend");
    const context = plan.context || {};
    const steps = path();
    const current = steps.length ? steps[steps.length - 1].to : plan.current_state;
    const machine = context.state_machine || {};
    const states = Object.keys(machine).length;
    // A ChoreographyPlanner plan sits in one placeholder state: its steps are LLM choices.
    const llm = (context.llm_audit || []).length > 0 && states <= 1;
    if ((!states && !steps.length) || llm) {
      box.append(h("p", { class: "muted", id: "no-machine" }, (context.llm_audit || []).length
        ? "No state machine: an LLM (ChoreographyPlanner) chooses each step; see the audit trail below."
        : "No state machine recorded for this plan."));
      legend.hidden = true;
      return;
    }
    legend.hidden = false;
    const svg = ui.drawMachine(machine, null, steps, plan.current_state || current);
    if (svg) box.append(svg);
  }

  function renderWaterfall() {
    if (!plan || !ui.drawWaterfall) return;
    ui.drawWaterfall(document.getElementById("waterfall"), plan, entries, actionsSeen, subPlansSeen, Date.now());
    bump("waterfall");
    const running = !TERMINAL.includes(plan.status);
    if (running && !ticker) ticker = setInterval(renderWaterfall, 1000);
    if (!running && ticker) { clearInterval(ticker); ticker = null; }
  }

  function timelineRow(entry, first) {
    const t = ui.parseTime(entry.time);
    return h("tr", { class: "tl-row", "data-event-type": entry.type, "data-seq": entry.seq },
      h("td", { class: "nowrap mono" }, ui.fmtTime(t)),
      h("td", { class: "num mono" }, first !== null && t !== null ? "+" + ui.fmtDuration(t - first) : ""),
      h("td", { class: "nowrap" }, entry.source || ""),
      h("td", { class: "mono" }, entry.type),
      h("td", null, entry.data && Object.keys(entry.data).length
        ? h("details", { class: "tl-data", "data-seq": entry.seq }, h("summary", null, entry.summary || entry.type),
          h("pre", null, ui.json(entry.data)))
        : entry.summary || ""),
      h("td", { class: "num" }, ui.fmtDuration(entry.duration_ms)));
  }

  function openSet(selector, key) {
    return new Set(Array.from(document.querySelectorAll(selector), (d) => d.open ? d.dataset[key] : null).filter(Boolean));
  }

  function renderTimeline() {
    // A re-render keeps the rows a person opened open.
    const open = openSet("#timeline-body details.tl-data", "seq");
    const body = ui.clear(document.getElementById("timeline-body"));
    const first = entries.length ? ui.parseTime(entries[0].time) : null;
    entries.forEach((entry) => {
      const row = timelineRow(entry, first);
      const details = row.querySelector("details");
      if (details && open.has(String(entry.seq))) details.open = true;
      body.append(row);
    });
    document.getElementById("timeline-count").textContent = "(" + entries.length + ")";
  }

  function addEntry(entry) {
    if (!entry || seqs.has(entry.seq)) return false;
    seqs.add(entry.seq);
    if (entries.length && entry.seq < entries[entries.length - 1].seq) {
      entries.push(entry);
      entries.sort((a, b) => a.seq - b.seq);
      renderTimeline();
    } else {
      entries.push(entry);
      const body = document.getElementById("timeline-body");
      const row = timelineRow(entry, ui.parseTime(entries[0].time));
      row.classList.add("fresh");
      body.append(row);
      document.getElementById("timeline-count").textContent = "(" + entries.length + ")";
    }
    return true;
  }

  function renderActions(actions) {
    const body = ui.clear(document.getElementById("actions-body"));
    if (!actions.length) body.append(h("tr", null, h("td", { colspan: "4", class: "muted" }, "none")));
    for (const a of actions) {
      const why = a.reason || a.error;
      body.append(h("tr", { class: "action-row", title: why || null },
        h("td", { class: "mono" }, a.event_type || ""),
        h("td", null, a.agent || ""),
        h("td", null, ui.statusPill(a.status), why ? h("span", { class: "muted" }, " " + ui.short(why, 60)) : null),
        h("td", { class: "num" }, ui.fmtDuration(a.latency_ms))));
    }
  }

  function renderWaits() {
    const waits = plan.waits || [];
    document.getElementById("waits-panel").hidden = !waits.length;
    const body = document.getElementById("waits-body");
    // An answer row outlives re-renders, but taking it out of the table blurs the field
    // being typed in, and the next keystrokes would go to the page: the focus and the caret
    // are put back before anything else can run.
    const focused = body.contains(document.activeElement) ? document.activeElement : null;
    const caret = focused && typeof focused.selectionStart === "number"
      ? [focused.selectionStart, focused.selectionEnd, focused.selectionDirection] : null;
    ui.clear(body);
    for (const w of waits) {
      body.append(h("tr", { class: "wait-row" },
        h("td", null, w.kind),
        h("td", { class: "mono" }, w.expected_event || ""),
        h("td", null, ui.statusPill(w.status)),
        h("td", { class: "nowrap" }, ui.fmtTime(w.deadline)),
        h("td", { class: "nowrap" }, ui.fmtTime(w.answered_at || w.timed_out_at)),
        h("td", null, w.late_answer_at ? "late answer at " + ui.fmtTime(w.late_answer_at) : "")));
      if (w.status === "waiting" && w.expected_event) body.append(answerRow(w));
    }
    if (focused && focused.isConnected && document.activeElement !== focused) {
      focused.focus({ preventScroll: true });
      if (caret) focused.setSelectionRange(...caret);
    }
  }

  /* A person answers a pending human input, or releases a planner WAIT, here: the tracker
   * publishes the answer as the event waited for, as the chosen identity; the stream then
   * shows the wait answered. Where the registry holds that event's schema, the form has
   * one input per property, checked here before sending; otherwise it takes JSON.
   * "Time out now" publishes the wait's timeout (what the deadline would) instead. */
  const answerRows = new Map();  // wait id -> its row: kept across re-renders (typing, focus)

  function answerRow(w) {
    if (answerRows.has(w.wait_id)) return answerRows.get(w.wait_id);
    const cell = h("td", { colspan: 6 }, h("span", { class: "muted" }, "reading the answer's schema\u2026"));
    const row = h("tr", { class: "answer-row", "data-wait-id": w.wait_id }, cell);
    answerRows.set(w.wait_id, row);
    ui.api("/tasks/" + encodeURIComponent(w.wait_id) + "/answer-schema")
      .catch((err) => ({ schema: null, note: "schema unavailable: " + err.message }))
      .then((found) => {
        ui.clear(cell).append(answerForm(w, found || {}), timeoutControls(w));
        bump("answerForms");
      });
    return row;
  }

  function typeOf(prop) {
    const t = Array.isArray(prop.type) ? prop.type.find((x) => x !== "null") : prop.type;
    if (Array.isArray(prop.enum) && prop.enum.length) return "enum";
    return ["string", "number", "integer", "boolean"].includes(t) ? t : "json";
  }

  /** One input for a schema property: {node, read() -> {value, present, error}}. */
  function schemaField(waitId, name, prop, required) {
    const kind = typeOf(prop);
    const id = "answer-" + waitId + "-" + name;
    let input;
    if (kind === "enum") {
      input = h("select", { id, name, "data-type": kind },
        required ? null : h("option", { value: "" }, "(none)"),
        prop.enum.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
    } else if (kind === "boolean") {
      input = h("input", { id, name, type: "checkbox", "data-type": kind, checked: prop.default === true });
    } else if (kind === "json") {
      input = h("textarea", { id, name, rows: 1, class: "mono", "data-type": kind, placeholder: "JSON" });
    } else {
      input = h("input", { id, name, "data-type": kind, type: kind === "string" ? "text" : "number",
        step: kind === "integer" ? "1" : kind === "number" ? "any" : null,
        placeholder: prop.default !== undefined ? String(prop.default) : null });
    }
    if (required) input.setAttribute("aria-required", "true");
    const error = h("span", { class: "field-error", role: "alert" });
    const label = h("label", { for: id }, name, required ? h("span", { class: "req", title: "required" }, " *") : null);
    const about = prop.description || prop.title;
    const node = h("div", { class: "answer-field", "data-field": name, "data-type": kind },
      label, input, about ? h("small", { class: "muted" }, about) : null, error);

    function check(value) {
      if (kind === "integer" && !Number.isInteger(value)) return "must be a whole number";
      if ((kind === "number" || kind === "integer")) {
        if (!Number.isFinite(value)) return "must be a number";
        if (typeof prop.minimum === "number" && value < prop.minimum) return "must be at least " + prop.minimum;
        if (typeof prop.maximum === "number" && value > prop.maximum) return "must be at most " + prop.maximum;
        if (typeof prop.exclusiveMinimum === "number" && value <= prop.exclusiveMinimum) return "must be more than " + prop.exclusiveMinimum;
        if (typeof prop.exclusiveMaximum === "number" && value >= prop.exclusiveMaximum) return "must be less than " + prop.exclusiveMaximum;
      }
      if (kind === "string") {
        if (typeof prop.minLength === "number" && value.length < prop.minLength) return "must have at least " + prop.minLength + " characters";
        if (typeof prop.maxLength === "number" && value.length > prop.maxLength) return "must have at most " + prop.maxLength + " characters";
        if (typeof prop.pattern === "string") {
          let re = null;
          try { re = new RegExp(prop.pattern, "u"); } catch (err) { re = null; }
          if (re && !re.test(value)) return "must match " + prop.pattern;
        }
      }
      return null;
    }

    function read() {
      if (kind === "boolean") return { present: true, value: input.checked };
      const raw = input.value;
      if (raw === "" || (kind === "string" && raw.trim() === "" && !required)) {
        return required ? { error: "required" } : { present: false };
      }
      let value;
      if (kind === "enum") value = prop.enum[Number(raw)];
      else if (kind === "json") {
        try { value = JSON.parse(raw); } catch (err) { return { error: "not JSON: " + err.message }; }
      } else if (kind === "string") value = raw;
      else value = input.valueAsNumber;
      const why = check(value);
      return why ? { error: why } : { present: true, value };
    }
    return { node, input, error, read };
  }

  function usableSchema(schema) {
    return schema && typeof schema === "object" && (schema.type === undefined || schema.type === "object") &&
      schema.properties && typeof schema.properties === "object" && Object.keys(schema.properties).length > 0;
  }

  function answerForm(w, found) {
    const label = w.kind === "human_input" ? "Send answer" : "Release with " + w.expected_event;
    const send = h("button", { type: "submit", class: "primary" }, label);
    const note = h("span", { class: "muted answer-note", role: "status" });
    const schema = found.schema;
    let collect;
    let form;
    if (usableSchema(schema)) {
      const required = new Set(Array.isArray(schema.required) ? schema.required : []);
      const fields = Object.entries(schema.properties).map(([name, prop]) =>
        [name, schemaField(w.wait_id, name, prop && typeof prop === "object" ? prop : {}, required.has(name))]);
      form = h("form", { class: "answer-form schema-form", "data-wait-id": w.wait_id, "data-schema": "true", novalidate: true },
        h("div", { class: "schema-head" }, h("strong", null, "Answer with " + w.expected_event),
          found.description ? h("span", { class: "muted" }, " \u2014 " + found.description) : null),
        h("div", { class: "answer-fields" }, fields.map(([, f]) => f.node)),
        h("div", { class: "answer-send" }, send, note));
      collect = () => {
        const data = {};
        let bad = 0;
        for (const [name, f] of fields) {
          const got = f.read();
          f.error.textContent = got.error ? name + ": " + got.error : "";
          f.node.classList.toggle("invalid", !!got.error);
          if (got.error) { bad += 1; continue; }
          if (got.present) data[name] = got.value;
        }
        if (bad) {
          note.textContent = bad === 1 ? "fix the marked field" : "fix the " + bad + " marked fields";
          const first = fields.find(([, f]) => f.node.classList.contains("invalid"));
          if (first) first[1].input.focus();
          return null;
        }
        return data;
      };
    } else {
      const text = h("textarea", { class: "answer-data mono", rows: 2, "aria-label": "answer (JSON)",
        placeholder: '{"approved": true}' });
      form = h("form", { class: "answer-form", "data-wait-id": w.wait_id, "data-schema": "false" },
        h("label", { title: found.note || null }, "Answer as JSON "), text, send, note,
        found.note ? h("small", { class: "muted schema-note" }, "(" + found.note + ")") : null);
      collect = () => {
        let data;
        try {
          data = JSON.parse(text.value || "{}");
        } catch (err) {
          note.textContent = "not JSON: " + err.message;
          return null;
        }
        if (data === null || typeof data !== "object" || Array.isArray(data)) {
          note.textContent = "the answer must be a JSON object";
          return null;
        }
        return data;
      };
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = collect();
      if (data === null) return;
      note.textContent = "";
      send.disabled = true;
      try {
        const sent = await ui.post("/tasks/" + encodeURIComponent(w.wait_id) + "/answer", { data });
        note.textContent = "sent (" + sent.event_type + ")";
        refreshSoon();
      } catch (err) {
        send.disabled = false;
        ui.showError(err);
      }
    });
    return form;
  }

  /** "Time out now": two clicks, then the wait's timeout is published as the user. */
  function timeoutControls(w) {
    const open = h("button", { type: "button", class: "timeout-open" }, "Time out now\u2026");
    const confirm = h("button", { type: "button", class: "danger timeout-confirm", hidden: true },
      w.kind === "human_input" ? "Yes, give up waiting" : "Yes, take the timeout branch");
    const back = h("button", { type: "button", class: "timeout-back", hidden: true }, "Keep waiting");
    const note = h("span", { class: "muted timeout-note", role: "status" });
    const show = (asking) => { open.hidden = asking; confirm.hidden = back.hidden = !asking; };
    open.addEventListener("click", () => show(true));
    back.addEventListener("click", () => show(false));
    confirm.addEventListener("click", async () => {
      confirm.disabled = true;
      try {
        const sent = await ui.post("/tasks/" + encodeURIComponent(w.wait_id) + "/timeout", {});
        note.textContent = "timeout sent (" + sent.event_type + ")";
        back.hidden = true;
        refreshSoon();
      } catch (err) {
        confirm.disabled = false;
        ui.showError(err);
      }
    });
    return h("div", { class: "timeout-controls", "data-wait-id": w.wait_id }, open, confirm, back, note);
  }

  function renderSubPlans(plans) {
    const ul = ui.clear(document.getElementById("sub-plans"));
    const known = new Set(plans.map((p) => p.plan_id));
    for (const id of plan.sub_plan_ids || []) if (!known.has(id)) plans.push({ plan_id: id, status: "pending" });
    if (!plans.length) { ul.append(h("li", { class: "muted" }, "none")); return; }
    for (const p of plans) {
      ul.append(h("li", { class: "sub-plan" }, ui.statusPill(p.status), " ", planLink(p.plan_id), " ",
        h("span", { class: "muted" }, [p.goal_event, p.current_state].filter(Boolean).join(" \u00b7 "))));
    }
  }

  function renderAudit() {
    const records = (plan.context && plan.context.llm_audit) || [];
    document.getElementById("audit-panel").hidden = !records.length;
    const before = document.querySelectorAll("#audit details.audit");
    const open = openSet("#audit details.audit", "index");
    const box = ui.clear(document.getElementById("audit"));
    records.forEach((r, i) => {
      const errors = r.errors || [];
      const ok = r.valid !== false && !errors.length;
      const tokens = r.tokens && Object.keys(r.tokens).length
        ? Object.entries(r.tokens).map(([k, v]) => k + " " + v).join(", ") : "";
      const body = h("div", null);
      if (errors.length) {
        body.append(h("strong", null, "Validation errors"),
          h("ul", { class: "audit-errors" }, errors.map((e) => h("li", { class: "bad" }, String(e)))));
      }
      body.append(h("strong", null, "Prompt"));
      for (const m of r.prompt || []) {
        body.append(h("div", { class: "muted" }, String(m.role || "")),
          h("pre", { class: "audit-prompt" }, typeof m.content === "string" ? m.content : ui.json(m.content)));
      }
      if (!r.prompt || !r.prompt.length) body.append(h("p", { class: "muted" }, "(not recorded)"));
      body.append(h("strong", null, "Raw output"),
        h("pre", { class: "audit-raw" }, r.raw_output === null || r.raw_output === undefined ? "(none)" : String(r.raw_output)));
      const isOpen = before.length ? open.has(String(i)) : i === records.length - 1;
      box.append(h("details", { class: "audit", "data-index": i, open: isOpen },
        h("summary", null,
          h("span", { class: "mono" }, "#" + (i + 1)),
          h("span", null, r.attempt || ""),
          h("span", { class: "mono audit-model" }, r.model || "(no model)"),
          h("span", { class: "audit-latency" }, ui.fmtDuration(r.latency_ms)),
          tokens ? h("span", { class: "muted" }, tokens) : null,
          h("span", { class: ok ? "ok" : "bad" }, ok ? "valid" : "invalid"),
          h("span", { class: "muted" }, ui.fmtTime(r.at))),
        body));
    });
  }

  async function pages(path, key) {
    const out = [];
    let cursor = null;
    for (let i = 0; i < MAX_PAGES; i++) {
      const page = await ui.api(path, { cursor });
      out.push(...(page[key] || []));
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    return out;
  }

  async function load() {
    try {
      const [detail, timeline, actions, subs] = await Promise.all([
        ui.api("/plans/" + enc),
        pages("/plans/" + enc + "/timeline", "entries"),
        pages("/plans/" + enc + "/actions", "actions"),
        pages("/plans/" + enc + "/sub-plans", "plans"),
      ]);
      plan = detail;
      entries = [];
      seqs.clear();
      timeline.forEach((e) => { if (!seqs.has(e.seq)) { seqs.add(e.seq); entries.push(e); } });
      renderSummary();
      renderMachine();
      renderTimeline();
      actionsSeen = actions;
      subPlansSeen = subs.slice();
      renderActions(actions);
      renderWaits();
      renderSubPlans(subs);
      renderAudit();
      renderWaterfall();
      bump("loaded");
      // For tests and scripts: nothing more will change on this page. A plan that has
      // ended keeps its stream until the stream's "end": events of other topics can still
      // be projected just after the terminal one, and they come as entries before it.
      document.body.dataset.settled = String(!pending && !stream && TERMINAL.includes(plan.status));
      ui.showError(null);
    } catch (err) {
      ui.showError(err);
      return err;
    }
    return null;
  }

  function refreshSoon() {
    document.body.dataset.settled = "false";
    if (pending) return;
    pending = setTimeout(() => { pending = null; load(); }, 300);
  }

  function live(state, text) {
    const el = document.getElementById("live");
    el.className = "live " + state;
    el.textContent = text;
  }

  function onFrame(frame) {
    if (frame.event === "heartbeat") return;
    bump("frames");
    if (frame.event === "entry") {
      if (addEntry(frame.data) && plan) {
        if (frame.data.type === "plan.state_changed") { renderMachine(); renderWaterfall(); }
        bump("updates");
      }
    } else if (frame.event === "plan" || frame.event === "end") {
      const changed = !plan || frame.data.updated_at !== plan.updated_at || frame.data.status !== plan.status;
      if (plan) {
        Object.assign(plan, frame.data);
        renderSummary();
        renderWaterfall();
      }
      if (frame.event === "end" && stream) {
        stream.close();
        stream = null;
        live("", "ended");
      }
      // The detail (waits, context, LLM audit, actions) is not in the frame: re-read it,
      // and once more at the end, for what the last entries changed there.
      if (changed || frame.event === "end") refreshSoon();
    }
  }

  let retries = 0;

  async function start() {
    if (!start.wired) { setupCancel(); start.wired = true; }
    const err = await load();
    if (!plan) {
      // Not projected yet (a plan opened as it starts) or the service unreachable: try
      // again. A refused identity (401/403) or a bad request will not heal by waiting.
      const transient = !(err instanceof ui.ApiError) || err.status === 404 || err.status >= 500;
      if (transient) setTimeout(start, Math.min(1000 * ++retries, 5000));
      return;
    }
    if (stream) stream.close();
    if (plan && TERMINAL.includes(plan.status)) { live("", "ended"); return; }
    stream = ui.stream("/plans/" + enc + "/stream", {
      onOpen() { live("on", "live"); },
      onEvent: onFrame,
      onClose(err) { live("off", err ? "disconnected: " + err.message : "reconnecting"); },
    });
  }

  document.addEventListener("DOMContentLoaded", () => ui.boot("Plan", start));
})();
