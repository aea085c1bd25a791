// rag-gate's HTML report. Every element is built here from the JSON data block, text by textContent only:
// nothing from the data is ever parsed as HTML, put in an attribute that loads or runs something, or fetched.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("rag-gate-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const ICON = { pass: "✓", fail: "✗", error: "!", skipped: "–" }; // in every text font (no emoji font needed)

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = String(v);
      else if (k === "cls") node.className = v;
      else if (k.startsWith("data-") || ["id", "title", "colspan", "tabindex", "role", "aria-sort", "aria-expanded", "for",
        "type", "placeholder", "value", "scope", "aria-label"].includes(k)) node.setAttribute(k, String(v));
      else throw new Error("attribute not allowed: " + k);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  const txt = (s) => document.createTextNode(s === null || s === undefined ? "" : String(s));
  const isMs = (m) => /_ms$/.test(m);
  function fmt(metric, v) {
    if (v === null || v === undefined) return "—";
    if (typeof v === "boolean") return v ? "yes" : "no";
    return isMs(metric) ? v.toFixed(1) + " ms" : Number(v).toFixed(4);
  }
  const LOWER = new Set(DATA.lower_is_better);
  const higherIsBetter = (metric) => !LOWER.has(metric);

  // ------------------------------------------------------------------------------------------ summary
  function header() {
    const box = el("header", { cls: "verdict-" + DATA.verdict, id: "verdict", "data-verdict": DATA.verdict },
      el("h1", { text: (ICON[DATA.verdict] || "") + " " + DATA.headline }));
    const dl = el("dl", { cls: "facts" });
    for (const [k, v] of DATA.facts) dl.append(el("dt", { text: k }), el("dd", { text: v }));
    box.append(dl);
    for (const e of DATA.errors) box.append(el("div", { cls: "notice error", role: "alert", text: e }));
    for (const w of DATA.warnings) box.append(el("div", { cls: "notice", text: w }));
    return box;
  }

  function stageTables() {
    const sec = el("section", { id: "gates" }, el("h2", { text: "Gates" }));
    for (const st of DATA.stages) {
      sec.append(el("h3", { "data-stage": st.name },
        txt((ICON[st.status] || "") + " " + st.name.charAt(0).toUpperCase() + st.name.slice(1) + ": "),
        el("span", { cls: "status s-" + st.status, text: st.status })));
      if (st.status === "skipped") { sec.append(el("p", { cls: "stage-note", text: st.reason || "skipped" })); continue; }
      if (st.note) sec.append(el("p", { cls: "stage-note", text: st.note }));
      const table = el("table", { cls: "gates", "data-stage": st.name });
      table.append(el("thead", {}, el("tr", {}, ...["Metric", "Baseline", "This run", "Δ", "Gate", "Status"].map((h) => el("th", { scope: "col", text: h })))));
      const body = el("tbody");
      for (const r of st.rows) {
        body.append(el("tr", { "data-metric": r.metric },
          el("td", {}, el("code", { text: r.metric })), el("td", { cls: "num", text: r.baseline }), el("td", { cls: "num", text: r.value }),
          el("td", { cls: "num", text: r.delta }), el("td", { text: r.rule || "—" }),
          el("td", { cls: "status s-" + (r.status || "none"), text: r.status ? (ICON[r.status] || "") + " " + r.status : "" })));
      }
      table.append(body);
      sec.append(el("div", { cls: "table-wrap" }, table));
      if (st.failed.length) {
        const ul = el("ul", { cls: "reasons" });
        for (const g of st.failed) ul.append(el("li", {}, txt((ICON[g.status] || "") + " "), el("code", { text: g.metric }), txt(": " + g.reason)));
        sec.append(ul);
      }
      const skipped = Object.entries(st.not_evaluated || {});
      if (skipped.length) {
        const ul = el("ul", { cls: "reasons muted" });
        for (const [m, why] of skipped) ul.append(el("li", {}, el("code", { text: m }), txt(": " + why)));
        sec.append(ul);
      }
    }
    return sec;
  }

  // ------------------------------------------------------------------------------------------ trend charts (SVG)
  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function trendChart(series) {
    const W = 340, H = 170, L = 44, R = 12, T = 24, B = 34;
    const pts = series.points.map(([label, v], i) => ({ label, v, i })).filter((p) => p.v !== null);
    const vals = pts.map((p) => p.v);
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (hi - lo < 0.02) { lo -= 0.01; hi += 0.01; }
    const n = series.points.length;
    const x = (i) => L + (n === 1 ? 0 : (i * (W - L - R)) / (n - 1));
    const y = (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
    const chart = svg("svg", { class: "trend", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
      "data-metric": series.metric, "data-stage": series.stage });
    chart.append(svg("title", {}, `${series.stage} ${series.metric} over the last ${n - 1} default-branch runs and this run`));
    chart.append(svg("text", { class: "title", x: L, y: 14 }, `${series.stage} · ${series.metric}`));
    chart.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B }), svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B }));
    chart.append(svg("text", { x: L - 4, y: T + 4, "text-anchor": "end" }, hi.toFixed(3)));
    chart.append(svg("text", { x: L - 4, y: H - B, "text-anchor": "end" }, lo.toFixed(3)));
    chart.append(svg("polyline", { points: pts.map((p) => `${x(p.i).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ") }));
    for (const p of pts) {
      const dot = svg("circle", { cx: x(p.i).toFixed(1), cy: y(p.v).toFixed(1), r: 3.5, class: p.i === n - 1 ? "now" : "" });
      dot.append(svg("title", {}, `${p.label}: ${p.v.toFixed(4)}`));
      chart.append(dot);
    }
    const first = series.points[0][0], last = series.points[n - 1][0];
    chart.append(svg("text", { x: L, y: H - B + 14 }, first));
    chart.append(svg("text", { x: W - R, y: H - B + 14, "text-anchor": "end" }, last));
    return chart;
  }
  function trends() {
    if (!DATA.trends.length) return null;
    const sec = el("section", { id: "trends" }, el("h2", { text: "Trends of the judge metrics" }));
    const box = el("div", { cls: "trends" });
    for (const s of DATA.trends) box.append(trendChart(s));
    sec.append(box);
    return sec;
  }

  // ------------------------------------------------------------------------------------------ the cases table
  const cases = DATA.cases;
  const colKey = (c) => c.stage + ":" + c.metric;
  const columns = [
    { key: "id", label: "Case", get: (c) => c.id },
    { key: "question", label: "Question", get: (c) => c.question || "" },
    { key: "type", label: "Type", get: (c) => c.type },
    { key: "category", label: "Category", get: (c) => c.category || "" },
    { key: "flags", label: "Status", get: (c) => 4 * c.flags.errored.length + 2 * c.flags.failed.length + c.flags.worse.length },
    ...DATA.columns.map((col) => ({ key: colKey(col), label: col.metric, stage: col.stage, metric: col.metric, numeric: true,
      get: (c) => (c.metrics[col.stage] || {})[col.metric] })),
    { key: "latency_ms", label: "latency", numeric: true, metric: "latency_ms", get: (c) => c.latency_ms },
  ];
  const PAGE_SIZES = [25, 100, 200, 500, 0]; // 0: every matching case on one page
  const state = { status: "all", stage: "", type: "", question_type: "", category: "", tag: "", diagnosis: "", q: "", sort: null, dir: 1,
    page: 0, size: 200 };
  const rows = new Map(); // case id -> its <tr>, made when first shown
  const details = new Map(); // case id -> its open drill-down <tr>
  const byId = new Map(cases.map((c) => [c.id, c]));
  let order = cases; // the current sort order
  function options(values) { return [...new Set(values.filter((v) => v !== null && v !== undefined && v !== ""))].sort(); }
  function select(id, label, values, key, first) {
    const s = el("select", { id, "aria-label": label });
    s.append(el("option", { value: "", text: first || "any" }));
    for (const v of values) s.append(typeof v === "string" ? el("option", { value: v, text: v }) : el("option", { value: v[0], text: v[1] }));
    s.addEventListener("change", () => { state[key] = s.value; apply(); });
    return el("label", {}, txt(label), s);
  }
  function filters() {
    const count = (f) => cases.filter((c) => c.flags[f].length).length;
    const status = el("select", { id: "f-status", "aria-label": "Show" });
    for (const [v, t] of [["all", `all cases (${cases.length})`], ["worse", `worse than the baseline (${count("worse")})`],
      ["failed", `failed (${count("failed")})`], ["errored", `errored (${count("errored")})`]]) status.append(el("option", { value: v, text: t }));
    status.addEventListener("change", () => { state.status = status.value; apply(); });
    const search = el("input", { id: "search", type: "search", placeholder: "id, question, answer…", "aria-label": "Search" });
    search.addEventListener("input", () => { state.q = search.value.trim().toLowerCase(); apply(); });
    return el("div", { cls: "filters", role: "search" },
      el("label", {}, txt("Show"), status),
      select("f-stage", "Stage", DATA.stages.map((s) => s.name), "stage"),
      select("f-type", "Type", options(cases.map((c) => c.type)), "type"),
      select("f-qtype", "Question type", options(cases.map((c) => c.question_type)), "question_type"),
      select("f-category", "Category", options(cases.map((c) => c.category)), "category"),
      select("f-tag", "Tag", options(cases.flatMap((c) => c.tags || [])), "tag"),
      select("f-diagnosis", "Where it broke", options(cases.map((c) => c.diagnosis && c.diagnosis.code)), "diagnosis"),
      el("label", {}, txt("Search"), search),
      el("span", { id: "shown", role: "status" }));
  }
  function badges(c) {
    const td = el("td", { cls: "flags" });
    for (const f of ["errored", "failed", "worse"]) if (c.flags[f].length) td.append(el("span", { cls: "badge " + f, title: c.flags[f].join("\n"), text: f }));
    return td;
  }
  function row(c) {
    const tr = el("tr", { cls: "case", tabindex: 0, "data-id": c.id, "aria-expanded": "false" },
      el("td", {}, el("code", { text: c.id })), el("td", { cls: "question", text: c.question || "" }), el("td", { text: c.type }),
      el("td", { text: c.category || "" }), badges(c));
    for (const col of columns.slice(5)) {
      const v = col.get(c);
      const td = el("td", { cls: "num", text: v === undefined ? "" : fmt(col.metric, v) });
      const b = col.stage ? (c.baseline_metrics[col.stage] || {})[col.metric] : undefined;
      if (typeof v === "number" && typeof b === "number" && Math.abs(v - b) > 5e-5) {
        td.classList.add((v > b) === higherIsBetter(col.metric) ? "up" : "down");
        td.title = "baseline " + fmt(col.metric, b);
      }
      tr.append(td);
    }
    tr.addEventListener("click", () => toggle(c.id));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(c.id); } });
    return tr;
  }
  function table() {
    const head1 = el("tr");
    const head2 = el("tr");
    let i = 0;
    while (i < columns.length) {
      const stage = columns[i].stage;
      let j = i;
      while (j < columns.length && columns[j].stage === stage) j++;
      head1.append(el("th", { cls: "group", colspan: j - i, text: stage || "" }));
      i = j;
    }
    for (const col of columns) {
      const th = el("th", { scope: "col", "data-key": col.key, text: col.label, title: "sort by " + (col.stage ? col.stage + " " : "") + col.label });
      th.addEventListener("click", () => sortBy(col.key));
      head2.append(th);
    }
    return el("table", { cls: "cases", id: "cases" }, el("thead", {}, head1, head2), el("tbody"));
  }
  function rowOf(c) {
    if (!rows.has(c.id)) rows.set(c.id, row(c));
    return rows.get(c.id);
  }
  function visible(c) {
    if (state.status !== "all" && !c.flags[state.status].length) return false;
    if (state.stage && !c.stages.includes(state.stage)) return false;
    if (state.type && c.type !== state.type) return false;
    if (state.question_type && c.question_type !== state.question_type) return false;
    if (state.category && c.category !== state.category) return false;
    if (state.tag && !(c.tags || []).includes(state.tag)) return false;
    if (state.diagnosis && !(c.diagnosis && c.diagnosis.code === state.diagnosis)) return false;
    if (state.q) {
      const hay = [c.id, c.question, c.answer, c.ground_truth].filter(Boolean).join("\n").toLowerCase();
      if (!hay.includes(state.q)) return false;
    }
    return true;
  }
  // The table holds one page of the matching cases (a browser lays out a table of thousands of rows in seconds).
  function render() {
    const matching = order.filter(visible);
    const size = state.size || Math.max(matching.length, 1);
    const pages = Math.max(1, Math.ceil(matching.length / size));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    const shown = matching.slice(state.page * size, (state.page + 1) * size);
    const frag = document.createDocumentFragment();
    for (const c of shown) { frag.append(rowOf(c)); if (details.has(c.id)) frag.append(details.get(c.id)); }
    document.querySelector("#cases tbody").replaceChildren(frag);
    const from = shown.length ? state.page * size + 1 : 0;
    document.getElementById("shown").textContent = pages === 1 ? `showing ${matching.length} of ${cases.length} cases`
      : `showing ${from}–${from + shown.length - 1} of ${matching.length} matching cases (${cases.length} in all)`;
    document.getElementById("page").textContent = `page ${state.page + 1} of ${pages}`;
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    return matching;
  }
  function apply() { state.page = 0; render(); }
  function pager() {
    const prev = el("button", { id: "prev", type: "button", text: "← previous" });
    const next = el("button", { id: "next", type: "button", text: "next →" });
    prev.addEventListener("click", () => { state.page -= 1; render(); });
    next.addEventListener("click", () => { state.page += 1; render(); });
    const size = el("select", { id: "page-size", "aria-label": "Cases per page" });
    for (const n of PAGE_SIZES) size.append(el("option", { value: n, text: n ? `${n} a page` : "all on one page" }));
    size.value = String(state.size);
    size.addEventListener("change", () => { state.size = Number(size.value); apply(); });
    return el("div", { cls: "pager" }, prev, el("span", { id: "page" }), next, size);
  }
  function sortBy(key) {
    state.dir = state.sort === key ? -state.dir : 1;
    state.sort = key;
    const col = columns.find((c) => c.key === key);
    const val = (c) => { const v = col.get(c); return v === undefined || v === null ? null : v; };
    order = [...cases].sort((a, b) => {
      const x = val(a), y = val(b);
      if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1; // no value: always last
      return (x < y ? -1 : x > y ? 1 : 0) * state.dir;
    });
    for (const th of document.querySelectorAll("#cases th[data-key]")) {
      if (th.dataset.key === key) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    apply();
  }
  function toggle(id) {
    const tr = rowOf(byId.get(id));
    if (details.has(id)) {
      details.get(id).remove(); details.delete(id);
      tr.classList.remove("open"); tr.setAttribute("aria-expanded", "false");
      return;
    }
    const d = el("tr", { cls: "detail", "data-for": id }, el("td", { colspan: columns.length }, drill(byId.get(id))));
    tr.after(d);
    details.set(id, d);
    tr.classList.add("open"); tr.setAttribute("aria-expanded", "true");
  }
  function reveal(id) {
    // the page of the matching cases that holds the case (every filter cleared if none does), then its drill-down
    let at = render().findIndex((c) => c.id === id);
    if (at < 0) {
      Object.assign(state, { status: "all", stage: "", type: "", question_type: "", category: "", tag: "", diagnosis: "", q: "" });
      for (const e of document.querySelectorAll(".filters select, .filters input")) e.value = e.id === "f-status" ? "all" : "";
      at = order.findIndex((c) => c.id === id);
    }
    state.page = state.size ? Math.floor(at / state.size) : 0;
    render();
    if (!details.has(id)) toggle(id);
    rowOf(byId.get(id)).scrollIntoView();
  }

  // ------------------------------------------------------------------------------------------ a case's drill-down
  function dl(pairs) {
    const box = el("dl");
    for (const [k, v, cls] of pairs) if (v !== null && v !== undefined && v !== "") box.append(el("dt", { text: k }), el("dd", { cls: cls || null, text: v }));
    return box;
  }
  function rankWord(r) { return r === null ? "not retrieved" : "rank " + r; }
  function passages(c) {
    const part = el("div", { cls: "retrieval" }, el("h4", { text: `Retrieved passages (top ${c.retrieved.length})` }));
    const ranks = new Map((c.ranks || []).map((r) => [r[0], r]));
    const relevant = c.relevant || {};
    const ol = el("ol", { cls: "passages" });
    c.retrieved.forEach((pid, i) => {
      const isRel = pid in relevant || ranks.has(pid);
      const li = el("li", { cls: isRel ? "relevant" : null, "data-passage": pid },
        el("span", { cls: "rank", text: String(i + 1) + "." }), el("code", { text: pid }));
      if (isRel) li.append(txt(" "), el("span", { cls: "badge relevant", text: "relevant" + (relevant[pid] > 1 ? " (grade " + relevant[pid] + ")" : "") }));
      const r = ranks.get(pid);
      if (r && r.length > 2 && r[2] !== r[1]) {
        const moved = r[2] === null ? "new in the list (baseline: not retrieved)" : (r[2] > i + 1 ? "▲ up from " : "▼ down from ") + "rank " + r[2];
        li.append(el("span", { cls: "move", text: r[2] === null ? moved : moved + " in the baseline" }));
      }
      const text = DATA.passages[pid];
      if (text) li.append(el("div", { cls: "text", text }));
      ol.append(li);
    });
    if (!c.retrieved.length) ol.append(el("li", { cls: "muted", text: "nothing retrieved" }));
    part.append(ol);
    const missing = (c.ranks || []).filter((r) => r[1] === null || r[1] > c.retrieved.length);
    if (missing.length) {
      const ul = el("ul", { cls: "reasons" });
      for (const r of missing) ul.append(el("li", {}, txt("relevant "), el("code", { text: r[0] }), txt(": " + rankWord(r[1]) + (r.length > 2 ? " (baseline: " + rankWord(r[2]) + ")" : ""))));
      part.append(ul);
    }
    return part;
  }
  function answer(c) {
    const part = el("div", { cls: "answer" }, el("h4", { text: "Answer" + (c.latency_ms !== null ? ` (${c.latency_ms.toFixed(0)} ms)` : "") }));
    if (c.error) { part.append(el("p", { cls: "s-error", text: "target error: " + c.error })); return part; }
    if (c.diff) {
      const box = el("div", { cls: "diff", "aria-label": "the answer against the baseline's answer" });
      for (const [op, t] of c.diff) box.append(op === "=" ? txt(t) : el(op === "+" ? "ins" : "del", { text: t }));
      part.append(el("p", { cls: "muted", text: "Against the baseline's answer: removed words struck out, added words highlighted." }), box);
      part.append(dl([["This run", c.answer], ["Baseline", c.baseline_answer]]));
    } else {
      part.append(el("div", { cls: "diff", text: c.answer === null ? "(no answer)" : c.answer }));
      if (c.baseline_answer !== null && c.baseline_answer === c.answer) part.append(el("p", { cls: "muted", text: "The same as the baseline's answer." }));
      else if (c.baseline_answer !== null) part.append(dl([["Baseline", c.baseline_answer]]));
      else part.append(el("p", { cls: "muted", text: "The baseline kept no answer for this case." }));
    }
    return part;
  }
  function scores(c) {
    const stages = Object.keys(c.metrics);
    if (!stages.length && !c.not_scored.length) return null;
    const t = el("table", { cls: "scores" }, el("thead", {}, el("tr", {}, ...["Stage", "Metric", "Baseline", "This run", "Δ"].map((h) => el("th", { text: h })))));
    const body = el("tbody");
    for (const s of stages) {
      for (const [m, v] of Object.entries(c.metrics[s])) {
        const b = (c.baseline_metrics[s] || {})[m];
        const d = typeof b === "number" ? v - b : null;
        const td = el("td", { cls: "num", text: d === null ? "—" : Math.abs(d) < 5e-5 ? "±0" : (d > 0 ? "+" : "−") + fmt(m, Math.abs(d)) });
        if (d !== null && Math.abs(d) >= 5e-5) td.classList.add((d > 0) === higherIsBetter(m) ? "up" : "down");
        body.append(el("tr", {}, el("td", { text: s }), el("td", {}, el("code", { text: m })), el("td", { cls: "num", text: fmt(m, b) }),
          el("td", { cls: "num", text: fmt(m, v) }), td));
      }
    }
    for (const [s, m, why] of c.not_scored) {
      body.append(el("tr", { cls: "not-scored" }, el("td", { text: s }), el("td", {}, el("code", { text: m })),
        el("td", { colspan: 3, cls: "s-error", text: "not scored: " + why })));
    }
    t.append(body);
    return el("div", {}, el("h4", { text: "Scores" }), el("div", { cls: "table-wrap" }, t));
  }
  function noise(c) {
    const n = c.noise;
    if (!n) return null;
    const part = el("div", { cls: "noise" }, el("h4", { text: "Noise test" }));
    const ul = el("ul", { cls: "reasons" });
    for (const d of n.distractors || []) ul.append(el("li", {}, el("code", { text: d.id || "distractor" }), txt(": " + (d.text || ""))));
    part.append(el("p", { text: `${(n.distractors || []).length} distractor(s) put ${n.position === "front" ? "in front of" : n.position || "among"} the passages:` }), ul);
    part.append(dl([["Clean answer", n.clean_answer], ["Clean", n.clean_correct === null || n.clean_correct === undefined ? null : n.clean_correct ? "right" : "wrong"],
      ["With distractors", n.noisy_answer], ["Noisy", n.noisy_correct === null || n.noisy_correct === undefined ? null : n.noisy_correct ? "right" : "wrong"]]));
    part.append(el("p", { cls: n.flipped ? "s-fail" : "s-pass", text: n.flipped ? "The distractors turned a right answer wrong." : "Not turned wrong by the distractors." }));
    return part;
  }
  function rewrites(c) {
    const p = c.paraphrase;
    if (!p) return null;
    const part = el("div", { cls: "paraphrase" }, el("h4", { text: "Paraphrases" }));
    if (!(p.rewrites || []).length) {
      part.append(el("p", { text: "No rewrite was asked: the golden set gives this case no paraphrases, and none were generated." }));
      return part;
    }
    part.append(el("p", { text: p.found === true ? "Found on the original question." : p.found === false ? "Not found on the original question." : "The original question's call failed." }));
    const ul = el("ul", { cls: "reasons" });
    for (const r of p.rewrites || []) {
      const said = r.found === true ? "found" : r.found === false ? "lost" : "failed: " + (r.error || "");
      ul.append(el("li", { cls: r.found === false ? "s-fail" : "" }, txt(r.text), txt(` (${r.source}: ${said})`)));
    }
    part.append(ul);
    return part;
  }
  function asks(c) {
    const s = c.stability;
    if (!s) return null;
    const part = el("div", { cls: "stability" }, el("h4", { text: "Asked again" }));
    const ul = el("ol", { cls: "reasons" });
    (s.answers || []).forEach((a, i) => {
      const ok = (s.correct || [])[i];
      ul.append(el("li", {}, txt(a === null ? "(the call failed)" : a), txt(ok === true ? " (right)" : ok === false ? " (wrong)" : "")));
    });
    part.append(ul, dl([["Top-k overlap", s.jaccard === null ? null : s.jaccard.toFixed(3)], ["Answers agree", s.agreement === null ? null : s.agreement.toFixed(3)]]));
    part.append(el("p", { cls: s.flipped ? "s-fail" : "s-pass", text: s.flipped ? "Right on one ask, wrong on another." : "The same correctness on every ask." }));
    return part;
  }
  function rejection(c) {
    const r = c.rejection;
    if (!r) return null;
    const part = el("div", { cls: "rejection" }, el("h4", { text: "Refusal check" }));
    if (r.error) { part.append(el("p", { cls: "s-error", text: "not checked: " + r.error })); return part; }
    const decided = (r.method || "?") + (r.phrase ? ` (matched "${r.phrase}")` : "");
    part.append(dl([["Question type", r.type], ["Decision", r.refused ? "refused" : "answered"], ["Decided by", decided],
      ["Leaked", (r.leaked || []).join(", ")], ["Answer", r.answer]]));
    part.append(el("p", { cls: r.miss ? "s-fail" : "s-pass", text: r.miss ? "A miss: " + r.miss : "As it should." }));
    return part;
  }
  function drill(c) {
    const labels = [c.type, c.category && "category " + c.category, c.question_type && "question type " + c.question_type,
      (c.tags || []).length ? "tags " + c.tags.join(", ") : null].filter(Boolean).join(" · ");
    const box = el("div", { cls: "drill" }, el("h3", {}, el("code", { text: c.id }), txt(" " + labels)));
    box.append(dl([["Question", c.question], ["Ground truth", c.ground_truth],
      ["Where it broke", c.diagnosis ? `${c.diagnosis.code} (${c.diagnosis.layer}): ${c.diagnosis.evidence}` +
        (c.diagnosis.moved ? "" : "; the same in the baseline") : null],
      ["Missing keywords", (c.missing_keywords || []).join(", ") || null]]));
    const why = [...c.flags.errored.map((t) => ["errored", t]), ...c.flags.failed.map((t) => ["failed", t]), ...c.flags.worse.map((t) => ["worse", t])];
    if (why.length) {
      const ul = el("ul", { cls: "reasons flags-why" });
      for (const [f, t] of why) ul.append(el("li", {}, el("span", { cls: "badge " + f, text: f }), txt(t)));
      box.append(ul);
    }
    box.append(answer(c));
    if (c.stages.includes("retrieval") || c.retrieved.length) box.append(passages(c));
    for (const part of [scores(c), noise(c), rewrites(c), asks(c), rejection(c)]) if (part) box.append(part);
    return box;
  }

  // ------------------------------------------------------------------------------------------ the page
  const app = document.getElementById("app");
  app.append(header(), stageTables());
  const t = trends();
  if (t) app.append(t);
  app.append(el("section", { id: "cases-section" }, el("h2", { text: "Cases" }),
    el("p", { cls: "muted", text: "Click a case (or press Enter on it) for its passages, answer, scores and checks. " +
      "worse: a figure fell against the baseline; failed: it misses on its own (no relevant passage in the top k, " +
      "turned wrong by distractors, a refusal miss); errored: the target or a judge could not answer or score it." }),
    filters(), el("div", { cls: "table-wrap" }, table()), pager()));
  apply();
  const m = /^#case=(.+)$/.exec(location.hash);
  if (m && byId.has(decodeURIComponent(m[1]))) reveal(decodeURIComponent(m[1]));
  performance.mark("rag-gate-ready");
  document.body.dataset.ready = "1";
})();
