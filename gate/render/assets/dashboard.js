// rag-gate's dashboard: quality over time from the history file. Every element, the SVG charts included, is built
// here from the JSON data block, text by textContent only: nothing from the data is ever parsed as HTML, put in an
// attribute that loads or runs something, or fetched. A link is made only for an http(s) run page.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("rag-gate-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const RUNS = DATA.runs; // oldest first
  const W = 640, H = 230, L = 56, R = 92, T = 30, B = 36; // a chart's size and margins (the right one holds the line labels)
  const LINK = /^https?:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?\/[A-Za-z0-9_.\/-]+$/; // the page's own check of a run page
  const KIND_NAME = { push: "push", schedule: "schedule", merge: "merge", other: "other (dispatch, deployment, pr…)" };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = String(v);
      else if (k === "cls") node.className = v;
      else if (k.startsWith("data-") || ["id", "title", "scope", "role", "aria-label", "tabindex"].includes(k)) node.setAttribute(k, String(v));
      else throw new Error("attribute not allowed: " + k);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v)); // numbers and fixed names only
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function link(run, label) {
    if (typeof run.link !== "string" || !LINK.test(run.link)) return document.createTextNode(run.url ? run.url + " (not linked)" : "—");
    const a = el("a", { text: label });
    a.setAttribute("href", run.link);
    a.setAttribute("rel", "noopener noreferrer");
    a.setAttribute("target", "_blank");
    return a;
  }
  const f1 = (v) => v.toFixed(1);
  function fmt(chart, v) {
    if (v === null || v === undefined) return "—";
    if (chart.ms) return v.toFixed(1) + " ms";
    if (chart.tokens) return v.toFixed(1) + " tokens";
    return v.toFixed(4);
  }
  const bad = (run) => run.verdict === "fail" || run.verdict === "error";
  const changeText = (c) => `${c[0]}: ${c[1]} → ${c[2]}`;

  // ------------------------------------------------------------------------------------------ markers
  function marker(shape, x, y) {
    const r = 4;
    if (shape === "push") return `M${f1(x - r)},${f1(y)}a${r},${r} 0 1,0 ${2 * r},0a${r},${r} 0 1,0 ${-2 * r},0z`;
    if (shape === "schedule") return `M${f1(x - r)},${f1(y - r)}h${2 * r}v${2 * r}h${-2 * r}z`;
    if (shape === "merge") return `M${f1(x)},${f1(y - 5.5)}l5.5,5.5l-5.5,5.5l-5.5,-5.5z`;
    return `M${f1(x)},${f1(y - 5.5)}l5,9h-10z`; // every other kind: a triangle
  }
  function tooltip(run, chart, v) {
    const lines = [`${run.date} · ${run.kind}`, `commit ${run.short || "—"}${run.branch ? " (" + run.branch + ")" : ""}`,
      `verdict ${run.verdict || "unknown"}`, `${chart.metric}: ${fmt(chart, v)}`];
    for (const c of run.changes) lines.push("changed " + changeText(c));
    lines.push("run: " + (run.link || (run.url ? run.url + " (not linked)" : "—")));
    return lines.join("\n");
  }

  // ------------------------------------------------------------------------------------------ the charts
  const times = RUNS.map((r) => r.t);
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const xOf = (t) => L + (t1 === t0 ? (W - L - R) / 2 : ((t - t0) * (W - L - R)) / (t1 - t0));

  function yScale(chart) {
    const known = chart.values.filter((v) => v !== null);
    for (const v of [chart.min, chart.max, chart.baseline]) if (v !== null) known.push(v);
    let lo = known.length ? Math.min(...known) : 0, hi = known.length ? Math.max(...known) : 1;
    const pad = hi - lo < 1e-9 ? Math.max(Math.abs(hi) * 0.05, 0.01) : (hi - lo) * 0.08;
    lo -= pad; hi += pad;
    return { lo, hi, y: (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo)) };
  }
  function axes(g, chart, s) {
    g.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }), svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
    for (let i = 0; i <= 3; i++) {
      const v = s.lo + ((s.hi - s.lo) * i) / 3, y = s.y(v);
      g.append(svg("line", { class: "grid", x1: L, y1: f1(y), x2: W - R, y2: f1(y) }));
      g.append(svg("text", { class: "tick", x: L - 4, y: f1(y + 3), "text-anchor": "end" }, fmt(chart, v).replace(/ (ms|tokens)$/, "")));
    }
    const ticks = !RUNS.length ? [] : t1 === t0 ? [t0] : [0, 1, 2, 3].map((i) => t0 + ((t1 - t0) * i) / 3);
    ticks.forEach((t, i) => {
      const anchor = ticks.length === 1 ? "middle" : i === 0 ? "start" : i === ticks.length - 1 ? "end" : "middle";
      g.append(svg("text", { class: "tick", x: f1(xOf(t)), y: H - B + 14, "text-anchor": anchor }, new Date(t * 1000).toISOString().slice(0, 10)));
    });
  }
  function level(g, s, v, cls, label) {
    const y = f1(s.y(v));
    const line = svg("line", { class: cls, x1: L, y1: y, x2: W - R, y2: y, "data-value": v });
    line.append(svg("title", {}, label));
    g.append(line, svg("text", { class: cls + "-label", x: W - R + 4, y: f1(s.y(v) + 3) }, label));
  }
  function series(chart, s) {
    let d = "", pen = "M";
    chart.values.forEach((v, i) => {
      if (v === null) { pen = "M"; return; }
      d += `${pen}${f1(xOf(RUNS[i].t))},${f1(s.y(v))}`;
      pen = "L";
    });
    return svg("path", { class: "series", d: d || "M0,0" });
  }
  function points(chart, s) {
    const g = svg("g", { class: "points" });
    chart.values.forEach((v, i) => {
      if (v === null) return;
      const run = RUNS[i], x = xOf(run.t), y = s.y(v);
      if (run.changes.length) {
        g.append(svg("line", { class: "changed-tick", x1: f1(x), y1: T - 6, x2: f1(x), y2: T }));
        g.append(svg("circle", { class: "ring", cx: f1(x), cy: f1(y), r: 8 }));
      }
      const cls = `pt k-${run.shape} v-${run.verdict || "none"}` + (bad(run) ? " bad" : "") + (run.changes.length ? " changed" : "");
      const p = svg("path", { class: cls, d: marker(run.shape, x, y), "data-run": i, "data-x": f1(x), "data-y": f1(y) });
      p.append(svg("title", {}, tooltip(run, chart, v)));
      g.append(p);
    });
    return g;
  }
  function chartFigure(chart, index) {
    const s = yScale(chart);
    const box = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "data-chart": index });
    box.setAttribute("aria-label", `${chart.stage} ${chart.metric} over ${RUNS.length} runs`);
    box.append(svg("text", { class: "title", x: L, y: 16 }, `${chart.stage} · ${chart.metric}`));
    box.append(svg("text", { class: "sub", x: W - R, y: 16, "text-anchor": "end" },
      (chart.rule ? "gate: " + chart.rule + " · " : "") + (chart.higher ? "higher is better" : "lower is better")));
    axes(box, chart, s);
    if (chart.min !== null) level(box, s, chart.min, "threshold", "min " + fmt(chart, chart.min));
    if (chart.max !== null) level(box, s, chart.max, "threshold", "max " + fmt(chart, chart.max));
    if (chart.baseline !== null) level(box, s, chart.baseline, "baseline", "baseline " + fmt(chart, chart.baseline));
    box.append(series(chart, s), points(chart, s));
    const fig = el("figure", { cls: "chart-box", "data-stage": chart.stage, "data-metric": chart.metric });
    fig.append(box);
    return fig;
  }

  function legend() {
    const list = el("ul", { cls: "legend", "aria-label": "legend" });
    const item = (label, ...shapes) => {
      const icon = svg("svg", { class: "icon", viewBox: "0 0 16 16", width: 16, height: 16 });
      icon.append(...shapes);
      list.append(el("li", {}, icon, document.createTextNode(label)));
    };
    for (const k of DATA.kinds) item(KIND_NAME[k] || k, svg("path", { class: `pt k-${k} v-pass`, d: marker(k, 8, 8) }));
    item("failing run (fail or error)", svg("path", { class: "pt k-push bad", d: marker("push", 8, 8) }));
    item("setup changed (see the run's changes)", svg("circle", { class: "ring", cx: 8, cy: 8, r: 6.5 }),
      svg("path", { class: "pt k-push v-pass", d: marker("push", 8, 8) }));
    if (DATA.charts.some((c) => c.min !== null || c.max !== null)) item("gate's min / max", svg("line", { class: "threshold", x1: 0, y1: 8, x2: 16, y2: 8 }));
    if (DATA.charts.some((c) => c.baseline !== null)) item("baseline", svg("line", { class: "baseline", x1: 0, y1: 8, x2: 16, y2: 8 }));
    return list;
  }

  // ------------------------------------------------------------------------------------------ a run's details, the table
  const detail = el("aside", { id: "detail", role: "status", "aria-label": "run details" });
  detail.hidden = true;
  function showRun(i) {
    const run = RUNS[i];
    if (!run) return;
    detail.replaceChildren(el("h3", { text: `${run.date} · ${run.kind} · ${run.verdict || "unknown"}` }),
      el("p", { cls: "mono", text: "commit " + (run.commit || "—") }), el("p", { text: "branch " + (run.branch || "—") }),
      el("p", {}, document.createTextNode("run: "), link(run, "open the run")));
    const values = DATA.charts.map((c) => `${c.metric} ${fmt(c, c.values[i])}`).join(" · ");
    if (values) detail.append(el("p", { cls: "values", text: values }));
    if (run.changes.length) detail.append(el("ul", { cls: "changes" }, ...run.changes.map((c) => el("li", { text: changeText(c) }))));
    if (run.system.length) detail.append(el("p", { cls: "system", text: run.system.map((s) => `${s[0]}: ${s[1]}`).join(" · ") }));
    detail.hidden = false;
  }
  function select(i) {
    for (const row of document.querySelectorAll("#runs tr.sel")) row.classList.remove("sel");
    const row = document.getElementById("run-" + i);
    if (row) { row.classList.add("sel"); row.scrollIntoView({ block: "center" }); }
    showRun(i);
  }

  function table() {
    const head = ["Date", "Kind", "Commit", "Branch", "Verdict", ...DATA.charts.map((c) => c.metric), "Changes", "Run"];
    const t = el("table", { id: "runs" }, el("thead", {}, el("tr", {}, ...head.map((h, i) => {
      const chart = i >= 5 && i < 5 + DATA.charts.length ? DATA.charts[i - 5] : null;
      return el("th", { scope: "col", text: h, title: chart ? `${chart.stage} · ${chart.metric}` : null });
    }))));
    const body = el("tbody");
    for (let i = RUNS.length - 1; i >= 0; i--) {
      const run = RUNS[i];
      const row = el("tr", { id: "run-" + i, "data-run": i, cls: (bad(run) ? "bad" : "") + (run.changes.length ? " changed" : "") },
        el("td", { cls: "nowrap", text: run.date }), el("td", { text: run.kind }),
        el("td", { cls: "mono", text: run.short || "—", title: run.commit || null }), el("td", { text: run.branch || "—" }),
        el("td", { cls: "verdict v-" + (run.verdict || "none"), text: run.verdict || "unknown" }),
        ...DATA.charts.map((c) => el("td", { cls: "num", text: fmt(c, c.values[i]) })),
        el("td", { cls: "changes" }, ...run.changes.map((c) => el("div", { text: changeText(c) }))),
        el("td", {}, link(run, "run")));
      body.append(row);
    }
    t.append(body);
    return t;
  }

  // ------------------------------------------------------------------------------------------ the page
  document.title = DATA.title;
  const app = document.getElementById("app");
  const last = RUNS[RUNS.length - 1];
  const summary = RUNS.length
    ? `${RUNS.length} run${RUNS.length === 1 ? "" : "s"} from ${RUNS[0].date} to ${last.date}; the latest: ${last.verdict || "unknown"}` +
      (last.short ? ` at ${last.short}` : "")
    : "no runs";
  app.append(el("header", {}, el("h1", { text: DATA.title }), el("p", { cls: "muted", id: "summary", text: summary })));
  for (const n of DATA.notes) app.append(el("div", { cls: "notice", text: n }));
  const charts = el("section", { id: "charts" }, el("h2", { text: DATA.gated ? "Gated metrics" : "Metrics" }), legend(),
    el("p", { cls: "muted", text: "Hover a point for its run; click it to find the run in the table." }));
  const grid = el("div", { cls: "charts" });
  DATA.charts.forEach((c, i) => grid.append(chartFigure(c, i)));
  if (!DATA.charts.length) grid.append(el("p", { text: "No metric to draw." }));
  charts.append(grid);
  app.append(charts, el("section", { id: "runs-section" }, el("h2", { text: "Runs, newest first" }), el("div", { cls: "table-wrap" }, table())), detail);
  grid.addEventListener("mouseover", (e) => { if (e.target.dataset && e.target.dataset.run !== undefined) showRun(Number(e.target.dataset.run)); });
  grid.addEventListener("click", (e) => { if (e.target.dataset && e.target.dataset.run !== undefined) select(Number(e.target.dataset.run)); });
  performance.mark("rag-gate-ready");
  document.body.dataset.ready = "1";
  window.__ready = true;
})();
