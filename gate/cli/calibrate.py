"""``rag-gate calibrate`` (people's labels against the report's judge: the calibration file) and ``rag-gate label``
(the sheet people label a sample of the judged cases on)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gate.core.errors import EXIT_PASS, InputError


def add_parsers(sub: Any) -> None:
    cal = sub.add_parser("calibrate", help="compare people's labels with the report's judge scores: agreement, intervals, "
                         "the calibration file judge.calibration reads")
    cal.add_argument("--labels", required=True, metavar="FILE", help="labels.jsonl (the sheet's download, or the filled CSV's rows)")
    cal.add_argument("--report", required=True, metavar="PATH", help="report.json of the run whose judged cases were labelled")
    cal.add_argument("--out", required=True, metavar="PATH", help="where to write the calibration file (e.g. eval/calibration.json)")
    cal.add_argument("--json", metavar="OUT", help="also write it here ('-' for stdout)")
    cal.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    lab = sub.add_parser("label", help="a sheet to label a sample of the judged cases on (HTML, or CSV with --format csv)")
    lab.add_argument("--report", required=True, metavar="PATH", help="report.json of a run with judged cases")
    lab.add_argument("--config", default=None, help="the spec the report was made from (default: the report's run.config)")
    lab.add_argument("--metrics", required=True, metavar="M1,M2", help="the judged metrics to label, comma-separated")
    lab.add_argument("--n", type=int, default=50, metavar="N", help="how many cases (default 50)")
    lab.add_argument("--seed", type=int, default=1, help="which cases (default 1)")
    lab.add_argument("--scale", choices=("pass-fail", "1-5"), default="pass-fail", help="the control: pass/fail, or 1 to 5 "
                     "mapped to 0, 0.25, ..., 1 (default pass-fail)")
    lab.add_argument("--out", required=True, metavar="PATH", help="where to write the sheet")
    lab.add_argument("--format", choices=("html", "csv"), default="html", help="html (default) or csv")


def cmd_calibrate(args: argparse.Namespace) -> int:
    from gate.io.calibration import read_labels
    from gate.io.files import write_text
    from gate.io.reports import read_report
    from gate.judges.labelled import build_calibration
    from gate.run.options import now_iso

    report = read_report(Path(args.report), allow_error=True)
    labels = read_labels(Path(args.labels))
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise InputError("calibrate needs numpy and scipy", hint="pip install 'rag-gate[judges]'") from None
    doc = build_calibration(report, labels, created_at=now_iso(), seed=args.seed)
    if not doc["metrics"]:
        left = "; ".join(f"{n} because {why}" for why, n in doc["left_out"].items()) or "none"
        raise InputError(f"no label matches a judged case of the report (left out: {left})", file=args.labels,
                         hint="label the report's own judged cases: `rag-gate label --report` on this report")
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    write_text(args.out, text, what="calibration file")
    if args.json:
        write_text(args.json, text, what="calibration JSON")
    out = sys.stderr if args.json == "-" else sys.stdout
    print(_table(doc), file=out)
    print(f"wrote {args.out}", file=out)
    return EXIT_PASS


def _fmt(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def _table(doc: dict[str, Any]) -> str:
    from gate.render.console import log_safe

    lines = [f"{'metric':<28} {'n':>4} {'spearman':>9} {'kendall':>8} {'kappa':>7} {'mae':>6} {'bias':>7}  kappa 95 %"]
    for metric, m in doc["metrics"].items():
        ci = m["intervals"].get("kappa")
        lines.append(f"{metric:<28} {m['n']:>4} {_fmt(m['spearman']):>9} {_fmt(m['kendall']):>8} {_fmt(m['kappa']):>7} "
                     f"{_fmt(m['mae']):>6} {_fmt(m['bias']):>7}  " + (f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "—"))
        if m["labellers"]["count"] > 1:
            lines.append(f"  {m['labellers']['count']} labellers, kappa between them {_fmt(m['labellers']['kappa'])}")
    for why, n in doc["left_out"].items():
        lines.append(f"left out: {n} label{'s' if n != 1 else ''}: {why}")
    return log_safe("\n".join(lines))


def cmd_label(args: argparse.Namespace) -> int:
    from gate.core.labelsample import candidates, csv_rows, sheet_data, stratified
    from gate.io.files import write_text
    from gate.io.reports import read_report

    report = read_report(Path(args.report), allow_error=True)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    if not metrics:
        raise InputError("name at least one judged metric, e.g. --metrics faithfulness", key="--metrics")
    if args.n < 1:
        raise InputError(f"must be at least 1, got {args.n}", key="--n")
    gen = report["stages"].get("generation")
    judged: set[str] = set().union(*(s["metrics"] for s in gen["samples"])) if gen else set()
    unknown = [m for m in metrics if m not in judged]
    if unknown:
        raise InputError(f"the report has no judge scores of {', '.join(unknown)} (judged: {', '.join(sorted(judged)) or 'none'})",
                         file=args.report, key="--metrics")
    pool = candidates(report, metrics)
    picked = stratified(pool, metrics, args.n, args.seed)
    data = sheet_data(report, picked, metrics, _golden(args, report), args.scale)
    if args.format == "csv":
        import csv
        import io

        buf = io.StringIO()
        csv.writer(buf).writerows(csv_rows(data))
        write_text(args.out, buf.getvalue(), what="label sheet")
    else:
        from importlib.resources import files

        from gate.render.html import Assets
        from gate.render.page import self_contained_page

        assets = files("gate.render") / "assets"
        page = self_contained_page(data, Assets((assets / "label.css").read_text(encoding="utf-8"), (assets / "label.js").read_text(
            encoding="utf-8")), title="rag-gate label sheet", noscript="The label sheet needs its own script, which the browser did not run.")
        write_text(args.out, page, what="label sheet")
    print(f"wrote {args.out}: {len(picked)} of {len(pool)} judged cases, {len(metrics)} metric{'s' if len(metrics) != 1 else ''} "
          f"({args.format})")
    return EXIT_PASS


def _golden(args: argparse.Namespace, report: Any) -> dict[str, Any]:
    """The golden cases by id (questions and ground truths), from the spec the report was made from."""
    from gate.config.loader import load_spec
    from gate.io.golden import load_golden_set

    spec = load_spec(args.config or report["run"]["config"], unset_ok=True)
    return {c.id: c for c in load_golden_set(spec.golden_set_path)}
