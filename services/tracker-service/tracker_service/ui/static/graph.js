/* Draw a plan's state machine as SVG, the path taken highlighted.
 *
 * Layout: states in columns by their shortest distance from the initial state (BFS),
 * forward transitions as curves left to right, back/same-column transitions as arcs below,
 * self loops above. Hand-written: small machines (a few dozen states) are the norm.
 */
(function () {
  "use strict";
  const ui = window.TrackerUI;
  const { s } = ui;

  const NODE_H = 34, COL_GAP = 150, ROW_GAP = 30, PAD = 24, CHAR_W = 7.2;

  function nodeWidth(name) { return Math.max(96, Math.min(220, name.length * CHAR_W + 28)); }

  /** machine: {name: StateConfig}; path: [{from, to, event}]; returns an <svg>. */
  ui.drawMachine = function (machine, initial, path, current) {
    const names = Object.keys(machine || {});
    const edges = [];
    for (const name of names) {
      const cfg = machine[name] || {};
      for (const t of cfg.transitions || []) {
        if (!t || typeof t.to_state !== "string") continue;
        edges.push({ from: name, to: t.to_state, label: String(t.on_event || "") + (t.condition ? " [" + t.condition + "]" : ""), event: t.on_event });
      }
      if (typeof cfg.default_next === "string" && cfg.default_next) {
        edges.push({ from: name, to: cfg.default_next, label: "(default)", event: null });
      }
    }
    // Transitions taken but absent from the definition (or no definition at all) still show.
    for (const step of path) {
      if (step.from === null || step.from === undefined) continue;
      const known = edges.some((e) => e.from === step.from && e.to === step.to);
      if (!known) edges.push({ from: step.from, to: step.to, label: step.event || "", event: step.event, extra: true });
    }
    for (const e of edges) for (const n of [e.from, e.to]) if (!names.includes(n)) names.push(n);
    for (const step of path) if (step.to && !names.includes(step.to)) names.push(step.to);
    if (current && !names.includes(current)) names.push(current);
    if (!names.length) return null;

    // Layers by BFS from the initial state.
    // The initial state: given, else the first step's origin, else a state nothing enters.
    const entered = new Set(edges.filter((e) => e.from !== e.to).map((e) => e.to));
    const first = path.length ? (path[0].from || path[0].to) : null;
    const start = [initial, first, names.find((n) => !entered.has(n)), names[0]]
      .find((n) => n && names.includes(n));
    const layer = new Map([[start, 0]]);
    const queue = [start];
    while (queue.length) {
      const n = queue.shift();
      for (const e of edges) {
        if (e.from === n && !layer.has(e.to)) { layer.set(e.to, layer.get(n) + 1); queue.push(e.to); }
      }
    }
    let maxLayer = Math.max(...layer.values());
    for (const n of names) if (!layer.has(n)) layer.set(n, ++maxLayer);
    const columns = [];
    for (const n of names) (columns[layer.get(n)] = columns[layer.get(n)] || []).push(n);

    const colWidth = columns.map((col) => Math.max(...col.map(nodeWidth)));
    const tallest = Math.max(...columns.map((col) => col.length));
    const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * ROW_GAP + 60;
    const pos = new Map();
    let x = PAD;
    columns.forEach((col, i) => {
      const colH = col.length * NODE_H + (col.length - 1) * ROW_GAP;
      let y = PAD + 24 + ((tallest * NODE_H + (tallest - 1) * ROW_GAP) - colH) / 2;
      for (const n of col) {
        const w = nodeWidth(n);
        pos.set(n, { x: x + (colWidth[i] - w) / 2, y, w, h: NODE_H });
        y += NODE_H + ROW_GAP;
      }
      x += colWidth[i] + COL_GAP;
    });
    const width = x - COL_GAP + PAD;

    const visited = new Set();
    const taken = new Set();
    for (const step of path) {
      if (step.to) visited.add(step.to);
      if (step.from !== null && step.from !== undefined) {
        visited.add(step.from);
        const exact = edges.find((e) => e.from === step.from && e.to === step.to && step.event && e.event === step.event);
        for (const e of edges) {
          if (e.from === step.from && e.to === step.to && (!exact || e === exact)) taken.add(e);
        }
      }
    }

    const svg = s("svg", { class: "machine", id: "machine-svg", viewBox: "0 0 " + width + " " + height,
      width: width, height: height, role: "img", "aria-label": "state machine" });
    svg.append(s("defs", null,
      s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#b4bccb" })),
      s("marker", { id: "arrow-taken", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#e8590c" }))));

    const pairCount = new Map();
    const edgeLayer = s("g", { class: "edges" });
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      const key = e.from + "\u0000" + e.to;
      const k = pairCount.get(key) || 0;
      pairCount.set(key, k + 1);
      let d, lx, ly;
      if (e.from === e.to) {
        const cx = a.x + a.w / 2, top = a.y;
        const r = 16 + k * 8;
        d = `M${cx - 12},${top} C${cx - 30},${top - r * 2} ${cx + 30},${top - r * 2} ${cx + 12},${top}`;
        lx = cx; ly = top - r * 1.6 - 4;
      } else if (layer.get(e.to) > layer.get(e.from)) {
        const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
        const dx = Math.max(30, (x2 - x1) / 2);
        const off = k * 12;
        d = `M${x1},${y1 + off / 2} C${x1 + dx},${y1 + off} ${x2 - dx},${y2 + off} ${x2},${y2 + off / 2}`;
        lx = (x1 + x2) / 2; ly = (y1 + y2) / 2 + off - 5;
      } else if (layer.get(e.to) === layer.get(e.from)) {
        // Same column: a bulge out to the right, between the two boxes.
        const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x + b.w, y2 = b.y + b.h / 2;
        const bulge = 40 + k * 14;
        const xr = Math.max(x1, x2) + bulge;
        d = `M${x1},${y1} C${xr},${y1} ${xr},${y2} ${x2},${y2}`;
        lx = xr - bulge * 0.2; ly = (y1 + y2) / 2 + 4;
      } else {
        const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y + b.h;
        const depth = 34 + Math.abs(x1 - x2) * 0.12 + k * 14;
        const bottom = Math.max(y1, y2) + depth;
        d = `M${x1},${y1} C${x1},${bottom} ${x2},${bottom} ${x2},${y2}`;
        lx = (x1 + x2) / 2; ly = bottom - depth * 0.25 + 10;
      }
      const isTaken = taken.has(e);
      const g = s("g", { class: "edge" + (isTaken ? " taken" : "") + (e.extra ? " extra" : ""),
        "data-from": e.from, "data-to": e.to },
        s("title", null, e.from + " \u2192 " + e.to + (e.label ? " on " + e.label : "")),
        s("path", { d, "marker-end": isTaken ? "url(#arrow-taken)" : "url(#arrow)",
          "stroke-dasharray": e.extra ? "5 4" : null }),
        e.label ? s("text", { x: lx, y: ly, "text-anchor": layer.get(e.to) === layer.get(e.from) && e.from !== e.to ? "start" : "middle" }, ui.short(e.label, 28)) : null);
      edgeLayer.append(g);
    }
    svg.append(edgeLayer);

    const nodeLayer = s("g", { class: "nodes" });
    for (const n of names) {
      const p = pos.get(n);
      const cfg = (machine || {})[n] || {};
      const classes = ["node"];
      if (visited.has(n)) classes.push("visited");
      if (n === current) classes.push("current");
      if (cfg.is_terminal) classes.push("terminal");
      const tip = n + (cfg.description ? " \u2014 " + cfg.description : "") +
        (cfg.action && cfg.action.event_type ? "\naction: " + cfg.action.event_type : "");
      nodeLayer.append(s("g", { class: classes.join(" "), "data-state": n },
        s("title", null, tip),
        s("rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: cfg.is_terminal ? 16 : 5 }),
        s("text", { x: p.x + p.w / 2, y: p.y + p.h / 2 + 4, "text-anchor": "middle" }, ui.short(n, 28))));
    }
    svg.append(nodeLayer);
    if (start) {
      const p = pos.get(start);
      svg.append(s("g", { class: "edge start" },
        s("path", { d: `M${p.x - 22},${p.y + p.h / 2} L${p.x},${p.y + p.h / 2}`, "marker-end": "url(#arrow)" })));
    }
    return svg;
  };
})();
