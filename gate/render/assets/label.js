"use strict";
// The label sheet: built from the page's JSON data block with textContent only (no data is ever parsed as HTML).
// Answers are kept in localStorage under the sheet's key; the judge's score of a metric stays hidden until the person
// has answered it; "Download labels" writes labels.jsonl (one label a line), the same text window.ragGateLabels() gives.
(function () {
  var data = JSON.parse(document.getElementById("rag-gate-data").textContent);
  var app = document.getElementById("app");
  var key = data.storage_key;
  var state = load();
  var current = 0;

  function load() {
    try {
      var got = JSON.parse(window.localStorage.getItem(key) || "{}");
      return got && typeof got === "object" ? got : {};
    } catch (e) { return {}; }
  }
  function save() {
    try { window.localStorage.setItem(key, JSON.stringify(state)); } catch (e) { /* storage full or off: kept in the page */ }
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function answers() { state.answers = state.answers || {}; return state.answers; }
  function slot(c, m) { return c.case_id + "\u0000" + m; }
  function done() {
    var n = 0;
    data.cases.forEach(function (c) { data.metrics.forEach(function (m) { if (slot(c, m.name) in answers()) { n += 1; } }); });
    return n;
  }

  function labels() {
    var out = [];
    data.cases.forEach(function (c) {
      data.metrics.forEach(function (m) {
        var a = answers()[slot(c, m.name)];
        if (a) {
          out.push(JSON.stringify({case_id: c.case_id, metric: m.name, score: a.score, labeler: state.labeler || "anonymous",
                                   labelled_at: a.at, answer_id: c.answer_id}));
        }
      });
    });
    return out.length ? out.join("\n") + "\n" : "";
  }
  window.ragGateLabels = labels;

  function header() {
    var h = el("header", "top");
    h.appendChild(el("h1", null, data.title));
    var who = el("label", "who", "Your name ");
    var input = el("input");
    input.id = "labeler";
    input.value = state.labeler || "";
    input.addEventListener("input", function () { state.labeler = input.value; save(); });
    who.appendChild(input);
    h.appendChild(who);
    var progress = el("p", "progress");
    progress.id = "progress";
    h.appendChild(progress);
    var nav = el("p", "nav");
    var prev = el("button", null, "← previous");
    prev.id = "prev";
    prev.addEventListener("click", function () { go(current - 1); });
    var next = el("button", null, "next →");
    next.id = "next";
    next.addEventListener("click", function () { go(current + 1); });
    var download = el("button", "download", "Download labels");
    download.id = "download";
    download.addEventListener("click", function () {
      var blob = new Blob([labels()], {type: "application/x-ndjson"});
      var a = el("a");
      a.href = URL.createObjectURL(blob);
      a.download = "labels.jsonl";
      document.body.appendChild(a);
      a.click();
      a.remove();
    });
    nav.appendChild(prev); nav.appendChild(next); nav.appendChild(download);
    h.appendChild(nav);
    h.appendChild(el("p", "keys", "Keys: ← → move between cases; 1–" + data.scale.length + " answer the first unanswered metric."));
    return h;
  }

  function metricBlock(c, m) {
    var box = el("section", "metric");
    box.dataset.metric = m.name;
    box.appendChild(el("h3", null, m.name));
    box.appendChild(el("p", "definition", m.definition));
    var choices = el("div", "choices");
    var given = answers()[slot(c, m.name)];
    data.scale.forEach(function (v, i) {
      var b = el("button", "choice", v.label);
      b.dataset.score = String(v.score);
      b.dataset.index = String(i + 1);
      if (given && given.score === v.score) { b.className += " chosen"; }
      b.addEventListener("click", function () { answer(c, m, v.score); });
      choices.appendChild(b);
    });
    box.appendChild(choices);
    var judge = el("p", "judge");
    if (given) { judge.textContent = "The judge's score: " + c.judge[m.name].toFixed(3); } else { judge.textContent = "The judge's score is shown once you have answered."; judge.className += " hidden"; }
    box.appendChild(judge);
    return box;
  }

  function answer(c, m, score) {
    answers()[slot(c, m.name)] = {score: score, at: new Date().toISOString().replace(/\.\d{3}Z$/, "+00:00")};
    save();
    render();
  }

  function caseCard(c, i) {
    var card = el("article", "case");
    card.id = "case";
    card.dataset.caseId = c.case_id;
    card.appendChild(el("h2", null, "Case " + (i + 1) + " of " + data.cases.length + ": " + c.case_id));
    card.appendChild(el("h4", null, "Question"));
    card.appendChild(el("p", "question", c.question));
    card.appendChild(el("h4", null, "Answer"));
    card.appendChild(el("pre", "answer", c.answer));
    if (c.ground_truth) { card.appendChild(el("h4", null, "Reference answer")); card.appendChild(el("p", "truth", c.ground_truth)); }
    card.appendChild(el("h4", null, "Passages"));
    var ol = el("ol", "passages");
    c.passages.forEach(function (p) { ol.appendChild(el("li", null, p)); });
    card.appendChild(ol);
    data.metrics.forEach(function (m) { card.appendChild(metricBlock(c, m)); });
    return card;
  }

  function go(i) {
    current = Math.max(0, Math.min(data.cases.length - 1, i));
    state.current = current;
    save();
    render();
  }

  function render() {
    app.textContent = "";
    app.appendChild(header());
    document.getElementById("progress").textContent = done() + " of " + data.cases.length * data.metrics.length + " labelled";
    if (data.cases.length) { app.appendChild(caseCard(data.cases[current], current)); }
    document.body.dataset.ready = "1";
  }

  document.addEventListener("keydown", function (e) {
    if (e.target && e.target.tagName === "INPUT") { return; }
    if (e.key === "ArrowRight") { go(current + 1); } else if (e.key === "ArrowLeft") { go(current - 1); }
    var n = parseInt(e.key, 10);
    if (n >= 1 && n <= data.scale.length && data.cases.length) {
      var c = data.cases[current];
      var m = data.metrics.filter(function (x) { return !(slot(c, x.name) in answers()); })[0] || data.metrics[data.metrics.length - 1];
      answer(c, m, data.scale[n - 1].score);
    }
  });
  current = Math.min(Number(state.current) || 0, Math.max(0, data.cases.length - 1));
  render();
})();
