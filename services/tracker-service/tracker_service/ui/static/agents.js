/* Connected agents: one row per registered agent with its events, last heartbeat (ages
 * live, stale once past the registry's TTL) and its consumer group's lag; auto-refresh. */
(function () {
  "use strict";
  const ui = window.TrackerUI;
  const { h } = ui;

  let ticker = null;
  let loading = false;
  let listing = null;     // the last answer of GET /agents
  let fetchedAt = 0;      // Date.now() when it arrived
  let serverSkew = 0;     // server clock minus ours, from checked_at

  /** The server's "now": ages and staleness follow its clock, not the browser's. */
  function serverNow() {
    return Date.now() + serverSkew;
  }

  function ago(value) {
    const t = ui.parseTime(value);
    if (t === null) return "never";
    const sec = Math.max(0, Math.floor((serverNow() - t) / 1000));
    if (sec < 60) return sec + " s ago";
    if (sec < 3600) return Math.floor(sec / 60) + " min ago";
    if (sec < 86400) return Math.floor(sec / 3600) + " h ago";
    return Math.floor(sec / 86400) + " d ago";
  }

  // Agent id -> the expiry this page has seen pass. A listing the server made just
  // before that moment (and that arrived after it) must not bring the agent back to
  // life: only a heartbeat, which moves the expiry, does.
  const expired = new Map();

  /** Stale as the registry decides (its TTL), re-checked as the page's clock runs. */
  function isStale(agent) {
    if (expired.has(agent.agent_id) && expired.get(agent.agent_id) === agent.expires_at) return true;
    const expires = ui.parseTime(agent.expires_at);
    const stale = agent.stale || expires === null || expires <= serverNow();
    if (stale) expired.set(agent.agent_id, agent.expires_at);
    return stale;
  }

  function chips(names, kind) {
    if (!names || !names.length) return h("span", { class: "muted" }, "\u2014");
    return names.map((name) => h("span", { class: "chip chip-" + kind, title: name }, ui.short(name, 48)));
  }

  function topicBreakdown(group) {
    return (group.topics || []).map((t) => t.topic + ": lag " + t.lag + ", pending " + t.pending).join("\n");
  }

  function countCell(group, field) {
    if (!group) return h("td", { class: "num muted", title: "no consumer group in the event service" }, "\u2014");
    const value = group[field];
    return h("td", { class: "num " + field + (value > 0 ? " behind" : ""), title: topicBreakdown(group) }, String(value));
  }

  function lastSeenCell(agent) {
    const stale = isStale(agent);
    const title = "last heartbeat " + ui.fmtTime(agent.last_seen) + "; TTL " + agent.ttl_seconds +
      " s" + (agent.expires_at ? (stale ? ", expired " : ", expires ") + ui.fmtTime(agent.expires_at) : "");
    return h("td", { class: "nowrap last-seen" + (stale ? " stale" : ""), title },
      ago(agent.last_seen), stale ? h("span", { class: "badge badge-stale" }, "no heartbeat for over " + agent.ttl_seconds + " s") : null);
  }

  function agentRow(agent) {
    const stale = isStale(agent);
    const group = agent.consumer_group;
    return h("tr", { class: "agent-row" + (stale ? " agent-stale" : ""), "data-agent-id": agent.agent_id, "data-name": agent.name },
      h("td", null, ui.statusPill(stale ? "stale" : "live")),
      h("td", { title: agent.description || null },
        h("div", { class: "agent-name" }, agent.name),
        agent.agent_id !== agent.name ? h("div", { class: "mono muted" }, ui.short(agent.agent_id, 40)) : null,
        h("div", { class: "muted small" }, agent.agent_type + (agent.version ? " " + agent.version : ""))),
      h("td", { class: "capabilities" }, chips(agent.capabilities, "cap")),
      h("td", { class: "consumes" }, chips(agent.consumes, "event")),
      h("td", { class: "produces" }, chips(agent.produces, "event")),
      lastSeenCell(agent),
      countCell(group, "lag"),
      countCell(group, "pending"),
      h("td", { class: "nowrap" }, group ? ago(group.last_delivered_at) : ""),
    );
  }

  function groupRow(group) {
    return h("tr", { "data-group": group.group },
      h("td", { class: "mono" }, group.group),
      countCell(group, "lag"),
      countCell(group, "pending"),
      h("td", null, chips((group.topics || []).map((t) => t.topic), "event")),
      h("td", { class: "nowrap" }, ago(group.last_delivered_at)),
    );
  }

  function render() {
    if (!listing) return;
    const showStale = document.getElementById("show-stale").checked;
    const agents = listing.agents.filter((a) => showStale || !isStale(a));
    const body = ui.clear(document.getElementById("agents-body"));
    agents.forEach((agent) => body.appendChild(agentRow(agent)));
    document.getElementById("empty").hidden = listing.agents.length > 0;
    document.getElementById("empty-tenant").textContent = ui.identity().tenant || ui.config.default_tenant;
    const live = listing.agents.filter((a) => !isStale(a)).length;
    document.getElementById("count").textContent =
      live + " live, " + (listing.agents.length - live) + " stale";
    const groups = listing.other_groups || [];
    const groupsBody = ui.clear(document.getElementById("groups-body"));
    groups.forEach((g) => groupsBody.appendChild(groupRow(g)));
    document.getElementById("groups-panel").hidden = groups.length === 0;
    const warnings = (listing.errors || []).slice();
    if (!listing.lag_complete && !warnings.length) warnings.push("lag covers only part of the tenant's topics");
    const box = ui.clear(document.getElementById("warnings"));
    if (warnings.length) box.append("Consumer lag unknown or partial: " + warnings.join("; "));
  }

  async function load() {
    if (loading) return;
    loading = true;
    try {
      listing = await ui.api("/agents");
      fetchedAt = Date.now();
      const checked = ui.parseTime(listing.checked_at);
      serverSkew = checked === null ? 0 : checked - fetchedAt;
      render();
      document.getElementById("refreshed").textContent = "updated " + new Date(fetchedAt).toLocaleTimeString();
      document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
      ui.showError(null);
    } catch (err) {
      ui.showError(err);
    } finally {
      loading = false;
    }
  }

  function start() {
    document.getElementById("show-stale").addEventListener("change", render);
    load();
    ui.autoRefresh(load);
    // Ages and staleness move between refreshes too.
    ticker = setInterval(() => { if (!document.hidden) render(); }, 1000);
  }

  document.addEventListener("DOMContentLoaded", () => ui.boot("Agents", start));
})();
