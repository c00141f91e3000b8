"""Reports from stored runs: tables, an HTML/Markdown report with plots and fits, CSV, comparisons.

Reads only stored result JSON (the ``extra_info`` records and ``machine_info`` of
a run); never measures.

    python -m suite.report RUN                  nccl-tests-style tables (RUN: results/latest, a run dir or bench.json)
    python -m suite.report html RUN [--out D]   D/index.html (self-contained), D/report.md, D/*.png, D/results.csv
    python -m suite.report csv RUN [--out F]    one row per record
    python -m suite.report validation FILE.json   FILE.html and FILE.png: the page of a model validation (python -m
                                                suite.model validate --out FILE.json), predicted against measured
    python -m suite.report screenshot PAGE [--out P]  P: the first screen (1400x1800) of PAGE, a report
                                                (RUN: its report/index.html) in headless Chromium
    python -m suite.report compare BASE NEW...  per-case ratios with CIs; exit 1 on a regression, 3 if too
                                                many cases are inconclusive (suite.report.compare)
                                                (a side: a run, runs joined by commas, or results/<id> for
                                                the repeats <id>-r1..rk of make bench-cpu REPEAT=k)

What the report keys on (so new experiments appear without code changes): records are
grouped by ``experiment``, then by ``table`` (else ``variant``, else ``op``), then by
``backend``/``device``/``world_size``; within a group, series are the identity fields that
vary (suite.report.compare.case_identity.case_key: dtype, redop, in_place, ...). A group whose records carry
``src`` and ``dst`` gets a pair-matrix heatmap; one with two or more sizes gets busbw and
latency-vs-size plots with α–β fits (suite.model.fit); any other gets bar charts of ``time_us``
(p05–p95) and of every other numeric field the records add (samples_per_s, efficiency, ...).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from suite import results
from suite.report.compare.page import write_comparison
from suite.report.render import to_csv, write_report
from suite.report.tables import format_tables


# --- command line ------------------------------------------------------------------------------------


def _load(path: str):
    try:
        return results.load_run(path)
    except (OSError, ValueError) as e:
        print(f"error: cannot read run {path}: {e}", file=sys.stderr)
        return None


def _cmd_tables(args) -> int:
    run = _load(args.run)
    if run is None:
        return 2
    sys.stdout.write(format_tables(results.records(run)))
    return 0


def _cmd_html(args) -> int:
    if _load(args.run) is None:
        return 2
    base = None
    if args.base:
        side = _load_side(args.base)
        if side is None:
            return 2
        base = (args.base, side)
    path = write_report(args.run, args.out, base=base)
    print(f"report: {path}")
    print(f"markdown: {path.parent / 'report.md'}")
    return 0


def _cmd_csv(args) -> int:
    run = _load(args.run)
    if run is None:
        return 2
    text = to_csv(run)
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"csv: {args.out}")
    return 0


def run_set(arg: str) -> list[str]:
    """The runs one side of a comparison names: comma-separated runs, and a run id ``<dir>/<id>``
    that is not itself a run stands for its repeats ``<id>-r1`` .. ``<id>-rk`` (make bench-cpu REPEAT=k)."""
    out = []
    for p in (x for x in arg.split(",") if x):
        reps = (
            []
            if Path(p).exists()
            else [
                q
                for q in Path(p).parent.glob(Path(p).name + "-r*")
                if re.fullmatch(r"r\d+", q.name[len(Path(p).name) + 1 :])
            ]
        )
        out += [str(q) for q in sorted(reps, key=lambda q: int(q.name.rsplit("-r", 1)[1]))] or [p]
    return out


def _load_runs(arg: str) -> list[dict] | None:
    runs = [_load(p) for p in run_set(arg)]
    return None if any(r is None for r in runs) else runs


def _load_side(arg: str) -> list[list[dict]] | None:
    runs = _load_runs(arg)
    return None if runs is None else [results.records(r) for r in runs]


def _cmd_compare(args) -> int:
    from suite.report.compare.case_settings import run_settings
    from suite.report.compare import compare_runs, format_comparison
    from suite.report.failslow import compare as failslow

    if failslow.is_bench(args.base):  # two fail-slow benches: their scores, not cases' times
        return failslow.main(args.base, args.new)

    if not 0 < args.alpha < 1 or args.tolerance < 0 or not 0 <= args.max_inconclusive <= 1:
        print(
            "error: --alpha must be in (0, 1), --tolerance >= 0 and --max-inconclusive in [0, 1]; got "
            f"{args.alpha}, {args.tolerance}, {args.max_inconclusive}",
            file=sys.stderr,
        )
        return 2
    base = _load_runs(args.base)
    if base is None:
        return 2
    status = 0
    for new_path in args.new:
        new = _load_runs(new_path)
        if new is None:
            return 2
        c = compare_runs(
            [results.records(r) for r in base],
            [results.records(r) for r in new],
            base_name=args.base,
            new_name=new_path,
            tolerance=args.tolerance,
            alpha=args.alpha,
            max_inconclusive=args.max_inconclusive,
            base_settings=[run_settings(r) for r in base],
            new_settings=[run_settings(r) for r in new],
            allow_settings_diff=args.allow_settings_diff,
        )
        if not c.cases and not c.refused:
            print(f"error: {args.base} and {new_path} have no case in common", file=sys.stderr)
            return 2
        sys.stdout.write(format_comparison(c, show=args.show))
        if args.out:
            stem = "compare" if len(args.new) == 1 else f"compare-{args.new.index(new_path) + 1}"
            print(f"comparison report: {write_comparison(c, args.out, stem)}")
        status = max(status, c.exit_status, key=lambda s: (s == 1, s == 3))  # a regression first, then "could not tell"
    return status


def _cmd_validation(args) -> int:
    from suite.report.validation_page import write_validation_page

    try:
        v = json.loads(Path(args.validation).read_text())
    except (OSError, ValueError) as e:
        print(f"error: cannot read the validation {args.validation}: {e}", file=sys.stderr)
        return 2
    if not isinstance(v, dict) or not v.get("rows"):
        print(f"error: {args.validation} is not a model validation (suite.model validate --out)", file=sys.stderr)
        return 2
    print(f"page: {write_validation_page(v, args.validation)}")
    return 0


def _cmd_screenshot(args) -> int:
    from suite.report.browser import FIRST_SCREEN, screenshot

    page = Path(args.page)
    if page.is_dir():
        page = page / "report" / "index.html" if (page / "report").is_dir() else page / "index.html"
    if not page.is_file():
        print(f"error: no page {page}; write a run's report first (python -m suite.report html RUN)", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else page.parent / "first-screen.png"
    try:
        screenshot(page, out)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"error: no screenshot of {page}: {e}", file=sys.stderr)
        return 2
    print(f"screenshot: {out} (the first {FIRST_SCREEN[0]}x{FIRST_SCREEN[1]} pixels of {page})")
    return 0


SUBCOMMANDS = ("tables", "html", "csv", "compare", "validation", "screenshot")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        argv = ["tables", *argv]  # `python -m suite.report RUN` prints the tables, as before
    ap = argparse.ArgumentParser(
        prog="python -m suite.report",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:3]),
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("tables", help="print nccl-tests-style tables")
    p.add_argument("run", help="results directory (e.g. results/latest) or bench.json")
    p.set_defaults(fn=_cmd_tables)
    p = sub.add_parser("html", help="write the HTML + Markdown report with plots and fits")
    p.add_argument("run")
    p.add_argument("--out", default=None, help="output directory (default: RUN/report)")
    p.add_argument(
        "--base",
        default=None,
        help="a baseline run (or runs, as for compare): the summary gives the comparison verdict",
    )
    p.set_defaults(fn=_cmd_html)
    p = sub.add_parser("csv", help="export the run's records as CSV")
    p.add_argument("run")
    p.add_argument("--out", default=None, help="file (default: stdout)")
    p.set_defaults(fn=_cmd_csv)
    p = sub.add_parser("compare", help="compare runs case by case; exit 1 on a regression, 3 if it cannot tell")
    p.add_argument("base", help="a run, comma-separated runs, or results/<id> for its repeats <id>-r1..rk")
    p.add_argument("new", nargs="+", help="one side per argument, each compared with base (same forms)")
    p.add_argument("--tolerance", type=float, default=0.05, help="practical margin, fraction (default 0.05)")
    p.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="family-wise error rate of the case verdicts: runs of one commit call any case slower or faster "
        "with at most this probability (default 0.05)",
    )
    p.add_argument(
        "--max-inconclusive",
        type=float,
        default=0.1,
        help="the gate is INCONCLUSIVE (exit 3), not PASS, when more than this fraction of the cases could not be "
        "judged (default 0.1)",
    )
    p.add_argument(
        "--allow-settings-diff",
        action="store_true",
        help="give a verdict also for cases whose settings (versions, pipeline depth, iterations, ...) differ",
    )
    p.add_argument("--show", choices=("all", "changed"), default="all", help="which cases to list")
    p.add_argument("--out", default=None, help="also write DIR/compare.html and compare.png")
    p.set_defaults(fn=_cmd_compare)
    p = sub.add_parser("validation", help="the page of a model validation: predicted against measured")
    p.add_argument("validation", help="the JSON of python -m suite.model validate --out")
    p.set_defaults(fn=_cmd_validation)
    p = sub.add_parser("screenshot", help="a PNG of a page's first screen, as a person sees it (headless Chromium)")
    p.add_argument("page", help="a page, a report folder, or a run (its report/index.html)")
    p.add_argument("--out", default=None, help="the PNG (default: first-screen.png beside the page)")
    p.set_defaults(fn=_cmd_screenshot)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
