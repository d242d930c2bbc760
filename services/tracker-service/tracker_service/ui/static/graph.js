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

  const NODE_H = 34, COL_GAP = 150, ROW_GAP = 30, PAD = 24, CHAR_W = 7.2, LABEL_CHAR_W = 6.3;

  function nodeWidth(name) { return Math.max(96, Math.min(220, name.length * CHAR_W + 28)); }

  /** A label in at most ``max`` characters: a dotted event name loses its leading parts
   * first ("content.analyze.completed" -> "\u2026analyze.completed"), then its end. */
  function shortLabel(label, max) {
    if (label.length <= max) return label;
    const parts = label.split(".");
    for (let i = 1; i < parts.length; i++) {
      const tail = "\u2026" + parts.slice(i).join(".");
      if (tail.length <= max) return tail;
    }
    return ui.short(label, max);
  }

  function bezier(c, t) {
    const u = 1 - t;
    const f = (i) => u * u * u * c[0][i] + 3 * u * u * t * c[1][i] + 3 * u * t * t * c[2][i] + t * t * t * c[3][i];
    return [f(0), f(1)];
  }

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

    // Edge paths first; their labels are placed after, clear of every node and of each
    // other (a long event name is shortened to fit; its full name shows on hover).
    const pairCount = new Map();
    const drawn = [];
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      const key = e.from + "\u0000" + e.to;
      const k = pairCount.get(key) || 0;
      pairCount.set(key, k + 1);
      let c, room;  // c: the cubic's points [p0, p1, p2, p3]; room: px a label may take
      if (e.from === e.to) {
        const cx = a.x + a.w / 2, top = a.y;
        const r = 16 + k * 8;
        c = [[cx - 12, top], [cx - 30, top - r * 2], [cx + 30, top - r * 2], [cx + 12, top]];
        room = Math.max(a.w, 120);
      } else if (layer.get(e.to) > layer.get(e.from)) {
        const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
        const dx = Math.max(30, (x2 - x1) / 2);
        const off = k * 12;
        c = [[x1, y1 + off / 2], [x1 + dx, y1 + off], [x2 - dx, y2 + off], [x2, y2 + off / 2]];
        room = Math.max(x2 - x1 - 12, 80);
      } else if (layer.get(e.to) === layer.get(e.from)) {
        // Same column: a bulge out to the right, between the two boxes.
        const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x + b.w, y2 = b.y + b.h / 2;
        const bulge = 40 + k * 14;
        const xr = Math.max(x1, x2) + bulge;
        c = [[x1, y1], [xr, y1], [xr, y2], [x2, y2]];
        room = COL_GAP - 16;
      } else {
        // Backwards: an arc below every box it passes under.
        const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y + b.h;
        const lo = Math.min(x1, x2), hi = Math.max(x1, x2);
        let floor = Math.max(y1, y2);
        for (const p of pos.values()) if (p.x < hi && p.x + p.w > lo) floor = Math.max(floor, p.y + p.h);
        const depth = 34 + Math.abs(x1 - x2) * 0.12 + k * 14;
        const bottom = floor + depth;
        c = [[x1, y1], [x1, bottom], [x2, bottom], [x2, y2]];
        room = Math.max(hi - lo - 20, 120);
      }
      const d = `M${c[0][0]},${c[0][1]} C${c[1][0]},${c[1][1]} ${c[2][0]},${c[2][1]} ${c[3][0]},${c[3][1]}`;
      drawn.push({ e, c, d, room });
    }
    // Labels of the path taken get the best places.
    const order = drawn.slice().sort((p, q) => Number(taken.has(q.e)) - Number(taken.has(p.e)));
    const boxes = Array.from(pos.values(), (p) => ({ x: p.x - 3, y: p.y - 3, w: p.w + 6, h: p.h + 6 }));
    const hits = (r) => boxes.some((b) => r.x < b.x + b.w && r.x + r.w > b.x && r.y < b.y + b.h && r.y + r.h > b.y);
    for (const item of order) {
      if (!item.e.label) continue;
      const text = shortLabel(item.e.label, Math.max(8, Math.floor(item.room / LABEL_CHAR_W)));
      const w = text.length * LABEL_CHAR_W, hgt = 12;
      let best = null;
      for (const t of [0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8]) {
        const [px, py] = bezier(item.c, t);
        for (const dy of [-6, 10, -18, 22, -30, 34]) {
          const r = { x: px - w / 2, y: py + dy - hgt + 2, w, h: hgt };
          if (!hits(r)) { best = r; break; }
        }
        if (best) break;
      }
      if (!best) {  // nowhere free near the line: keep it out of the boxes at least
        const [px, py] = bezier(item.c, 0.5);
        best = { x: px - w / 2, y: py - 4 - hgt, w, h: hgt };
      }
      boxes.push(best);
      item.label = { text, x: best.x + w / 2, y: best.y + hgt - 2 };
    }
    // Arcs and labels below the boxes may need more room than the boxes alone.
    let low = height - PAD;
    for (const item of drawn) {
      low = Math.max(low, item.c[1][1] * 0.75 + item.c[0][1] * 0.25, item.label ? item.label.y + 4 : 0);
    }
    const fullHeight = Math.ceil(Math.max(height, low + PAD));
    svg.setAttribute("height", fullHeight);
    svg.setAttribute("viewBox", "0 0 " + width + " " + fullHeight);
    const edgeLayer = s("g", { class: "edges" });
    for (const item of drawn) {
      const e = item.e;
      const isTaken = taken.has(e);
      const full = e.from + " \u2192 " + e.to + (e.label ? " on " + e.label : "");
      const g = s("g", { class: "edge" + (isTaken ? " taken" : "") + (e.extra ? " extra" : ""),
        "data-from": e.from, "data-to": e.to, "data-label": e.label || null },
        s("title", null, full),
        s("path", { d: item.d, "marker-end": isTaken ? "url(#arrow-taken)" : "url(#arrow)",
          "stroke-dasharray": e.extra ? "5 4" : null }),
        item.label ? s("text", { x: item.label.x, y: item.label.y, "text-anchor": "middle" },
          s("title", null, full), item.label.text) : null);
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
