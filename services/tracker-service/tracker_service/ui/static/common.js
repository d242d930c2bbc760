/* Soorma tracker UI: shared helpers (identity, API calls, SSE over fetch, safe DOM).
 *
 * Everything on screen is built with createElement/textContent: event data is never parsed
 * as HTML, so a payload like "<img onerror=...>" shows up as text.
 */
(function () {
  "use strict";

  const ui = {};
  window.TrackerUI = ui;

  // The pages live under ".../ui"; the API is the same origin's ".../v1/tracker".
  const at = location.pathname.indexOf("/ui");
  ui.root = at >= 0 ? location.pathname.slice(0, at) : "";
  ui.apiBase = ui.root + "/v1/tracker";

  /* ---------- safe DOM ---------- */

  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach((c) => append(node, c)); return; }
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) throw new Error("event handlers are attached with addEventListener");
      if (key === "href" || key === "src") {
        node.setAttribute(key, ui.safeUrl(value));
      } else {
        node.setAttribute(key, value === true ? "" : String(value));
      }
    }
  }

  /** h("td", {class: "x"}, "text", child...) -> HTMLElement; strings become text nodes. */
  ui.h = function (tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  };

  const SVG_NS = "http://www.w3.org/2000/svg";
  ui.s = function (tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  };

  /** Only same-origin relative links and http(s): never "javascript:" from data. */
  ui.safeUrl = function (value) {
    const text = String(value);
    if (text.startsWith("/") || text.startsWith("?") || text.startsWith("#")) return text;
    try {
      const url = new URL(text, location.href);
      if (url.protocol === "http:" || url.protocol === "https:") return url.href;
    } catch (err) { /* fall through */ }
    return "#";
  };

  ui.clear = function (node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  };

  ui.planHref = function (planId) {
    return ui.root + "/ui/plans/" + encodeURIComponent(planId) + ui.identityQuery();
  };

  /* ---------- identity ---------- */

  const KEYS = { tenant: "soorma.tracker.tenant", token: "soorma.tracker.token" };
  ui.config = { auth_mode: "dev", default_tenant: "default" };

  ui.identity = function () {
    return {
      tenant: localStorage.getItem(KEYS.tenant) || "",
      token: localStorage.getItem(KEYS.token) || "",
    };
  };

  ui.setIdentity = function (tenant, token) {
    for (const [key, value] of [[KEYS.tenant, tenant], [KEYS.token, token]]) {
      if (value) localStorage.setItem(key, value); else localStorage.removeItem(key);
    }
  };

  /** "?tenant=acme" keeps links shareable in dev mode (tokens never go into URLs). */
  ui.identityQuery = function () {
    const tenant = ui.identity().tenant;
    return ui.config.auth_mode === "dev" && tenant ? "?tenant=" + encodeURIComponent(tenant) : "";
  };

  ui.headers = function () {
    const id = ui.identity();
    const headers = { Accept: "application/json" };
    if (id.tenant) headers["X-Tenant-ID"] = id.tenant;
    if (id.token) headers.Authorization = "Bearer " + id.token;
    return headers;
  };

  /* ---------- API ---------- */

  ui.ApiError = class ApiError extends Error {
    constructor(status, message, body) { super(message); this.status = status; this.body = body; }
  };

  async function failure(response) {
    let body = null;
    try { body = await response.json(); } catch (err) { /* not JSON */ }
    const info = body && body.error ? body.error : null;
    const message = info && info.message ? info.message : response.status + " " + response.statusText;
    return new ui.ApiError(response.status, message, body);
  }

  /** GET {apiBase}{path}?{params} with the chosen identity; JSON back or ApiError. */
  ui.api = async function (path, params) {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(params || {})) {
      if (value !== null && value !== undefined && value !== "") query.set(key, value);
    }
    const qs = query.toString();
    const response = await fetch(ui.apiBase + path + (qs ? "?" + qs : ""), { headers: ui.headers() });
    if (!response.ok) throw await failure(response);
    return response.json();
  };

  /** POST {apiBase}{path} with a JSON body and the chosen identity; JSON back or ApiError. */
  ui.post = async function (path, body) {
    const headers = ui.headers();
    headers["Content-Type"] = "application/json";
    const response = await fetch(ui.apiBase + path, { method: "POST", headers, body: JSON.stringify(body) });
    if (!response.ok) throw await failure(response);
    return response.json();
  };

  /* ---------- SSE over fetch ----------
   * EventSource cannot send headers, and the API's identity is in headers (X-Tenant-ID or a
   * bearer token, which must not leak into URLs and logs). So the stream is read with fetch
   * and parsed here per the SSE format; it reconnects with Last-Event-ID like EventSource.
   */
  ui.stream = function (path, handlers) {
    const state = { closed: false, lastId: null, retry: 2000, controller: null };

    function dispatch(message) {
      if (message.id !== null) state.lastId = message.id;
      if (!message.data.length) return;
      const text = message.data.join("\n");
      let data = text;
      try { data = JSON.parse(text); } catch (err) { /* keep text */ }
      handlers.onEvent({ event: message.event || "message", id: message.id, data: data });
    }

    async function readOnce() {
      const headers = ui.headers();
      headers.Accept = "text/event-stream";
      if (state.lastId) headers["Last-Event-ID"] = state.lastId;
      state.controller = new AbortController();
      const response = await fetch(ui.apiBase + path, { headers, signal: state.controller.signal, cache: "no-store" });
      if (!response.ok) throw await failure(response);
      if (handlers.onOpen) handlers.onOpen();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let message = { event: null, data: [], id: null };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + (buffer[nl] === "\r" && buffer[nl + 1] === "\n" ? 2 : 1));
          if (line === "") { dispatch(message); message = { event: null, data: [], id: null }; continue; }
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? "" : line.slice(colon + 1);
          if (val.startsWith(" ")) val = val.slice(1);
          if (field === "data") message.data.push(val);
          else if (field === "event") message.event = val;
          else if (field === "id") message.id = val;
          else if (field === "retry" && /^\d+$/.test(val)) state.retry = Number(val);
        }
      }
    }

    async function loop() {
      while (!state.closed) {
        try {
          await readOnce();
          if (state.closed) return;
          if (handlers.onClose) handlers.onClose(null);
        } catch (err) {
          if (state.closed) return;
          if (handlers.onClose) handlers.onClose(err);
          // Not-found / forbidden will not heal by retrying.
          if (err instanceof ui.ApiError && err.status >= 400 && err.status < 500) return;
        }
        if (state.closed) return;
        await new Promise((resolve) => setTimeout(resolve, state.retry));
      }
    }

    loop();
    return {
      close() { state.closed = true; if (state.controller) state.controller.abort(); },
    };
  };

  /* Calls ``load`` every few seconds while the page is visible, as the page's
   * #auto-refresh checkbox and #refresh-every select say (both re-read on change). */
  ui.autoRefresh = function (load) {
    let timer = null;
    function schedule() {
      if (timer) clearInterval(timer);
      timer = null;
      if (!document.getElementById("auto-refresh").checked) return;
      const every = Number(document.getElementById("refresh-every").value) * 1000;
      timer = setInterval(() => { if (!document.hidden) load(); }, every);
    }
    document.getElementById("auto-refresh").addEventListener("change", schedule);
    document.getElementById("refresh-every").addEventListener("change", schedule);
    schedule();
  };

  /* ---------- formatting ---------- */

  ui.parseTime = function (value) {
    if (value === null || value === undefined || value === "") return null;
    const t = typeof value === "number" ? value : Date.parse(value);
    return Number.isNaN(t) ? null : t;
  };

  ui.fmtTime = function (value) {
    const t = ui.parseTime(value);
    if (t === null) return "";
    const d = new Date(t);
    const pad = (n, w) => String(n).padStart(w || 2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3);
  };

  ui.fmtDuration = function (ms) {
    if (ms === null || ms === undefined || Number.isNaN(Number(ms))) return "";
    ms = Number(ms);
    if (ms < 1) return ms.toFixed(2) + " ms";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
    const sec = Math.round(ms / 1000);
    if (sec < 3600) return Math.floor(sec / 60) + " min " + (sec % 60) + " s";
    return Math.floor(sec / 3600) + " h " + Math.floor((sec % 3600) / 60) + " min";
  };

  ui.statusPill = function (status) {
    const value = String(status || "unknown").toLowerCase();
    return ui.h("span", { class: "pill status-" + value.replace(/[^a-z_]/g, ""), "data-status": value }, value);
  };

  ui.short = function (text, max) {
    const s = text === null || text === undefined ? "" : String(text);
    return s.length > max ? s.slice(0, max - 1) + "\u2026" : s;
  };

  ui.json = function (value) {
    try { return JSON.stringify(value, null, 2); } catch (err) { return String(value); }
  };

  /* ---------- page chrome: header with the identity controls ---------- */

  async function loadConfig() {
    try {
      const response = await fetch(ui.root + "/ui/config.json");
      if (response.ok) ui.config = await response.json();
    } catch (err) { /* keep defaults */ }
  }

  function identityControls() {
    const id = ui.identity();
    const box = ui.h("form", { class: "identity", id: "identity" });
    let input;
    if (ui.config.auth_mode === "jwt") {
      input = ui.h("input", { id: "token-input", type: "password", placeholder: "bearer token (JWT)", autocomplete: "off" });
      input.value = id.token;
      box.append(ui.h("label", { for: "token-input" }, "Token"), input);
    } else {
      input = ui.h("input", { id: "tenant-input", placeholder: ui.config.default_tenant, spellcheck: "false" });
      input.value = id.tenant;
      box.append(ui.h("label", { for: "tenant-input" }, "Tenant"), input);
    }
    box.append(ui.h("button", { type: "submit" }, "Use"));
    box.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const value = input.value.trim();
      if (ui.config.auth_mode === "jwt") ui.setIdentity(ui.identity().tenant, value);
      else ui.setIdentity(value, ui.identity().token);
      syncTenantQuery();
      location.reload();  // every request, link and stream restarts with the new identity
    });
    return box;
  }

  function syncTenantQuery() {
    if (ui.config.auth_mode !== "dev") return;
    const url = new URL(location.href);
    const tenant = ui.identity().tenant;
    if (tenant) url.searchParams.set("tenant", tenant); else url.searchParams.delete("tenant");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  /** Load the config, take ?tenant= from the URL, draw the header; then call start(). */
  ui.boot = async function (title, start) {
    await loadConfig();
    const tenant = new URLSearchParams(location.search).get("tenant");
    if (tenant !== null && ui.config.auth_mode === "dev") ui.setIdentity(tenant, ui.identity().token);
    const header = document.getElementById("top");
    const onAgents = location.pathname.endsWith("/ui/agents");
    ui.clear(header).append(
      ui.h("h1", null, ui.h("a", { href: ui.root + "/ui" + ui.identityQuery(), id: "home" }, "Soorma tracker"),
        ui.h("span", { class: "muted" }, " \u00b7 " + title)),
      ui.h("nav", { class: "nav" },
        ui.h("a", { href: ui.root + "/ui" + ui.identityQuery(), id: "nav-plans",
          "aria-current": onAgents ? null : "page" }, "Plans"),
        ui.h("a", { href: ui.root + "/ui/agents" + ui.identityQuery(), id: "nav-agents",
          "aria-current": onAgents ? "page" : null }, "Agents")),
      identityControls(),
    );
    start();
  };

  ui.showError = function (err) {
    const box = document.getElementById("error");
    ui.clear(box);
    if (err) box.append(err.message || String(err));
  };
})();
