"""Predict at scale: the time of every collective, and of a DDP step, at N ranks from a small run.

Reads stored runs only (bench.json); measures nothing.

    python -m suite.model RUN --ranks 1024 --ranks-per-node 8 [--sizes 1M,64M]
        the extrapolation table; writes RUN/predict.json (atomically)
    python -m suite.model validate --fit RUN,RUN --check RUN,RUN [--out FILE] [--one-machine]
        fit on some runs (e.g. 2 and 3 compose nodes), predict the others' sizes (4, 5, 6 nodes),
        print predicted / measured / error per op and size and the geomean |error| per op
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from suite import metrics
from suite.model import step
from suite.model.algorithms import OPS
from suite.model.document import format_links, format_predictions, prediction_document, stored_predictions
from suite.model.links import Topology, complete_links
from suite.model.run_model import RunModel, fit_runs
from suite.model.validate import format_validation, validate

MAX_RANKS = 1 << 20


class InputError(ValueError):
    """Bad input: one line, exit status 2."""


def _load(path: str) -> dict:
    from suite import results

    p = Path(path)
    if not (p / "bench.json").is_file() and not p.is_file():
        raise InputError(f"no stored run at {path} (expected {p / 'bench.json'})")
    try:
        return results.load_run(p)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read run {path}: {e}") from None


def _positive_int(name: str, text: str) -> int:
    if not re.fullmatch(r"\s*\d+\s*", str(text)) or int(text) < 1:
        raise InputError(f"{name} must be a positive integer, got {text!r}")
    return int(text)


def _debug_text(run_dir: Path) -> str:
    return (
        "".join(f.read_text(errors="replace") for f in sorted(run_dir.glob("*.log")) if f.is_file())
        if run_dir.is_dir()
        else ""
    )


def run_sizes(model: RunModel) -> list[int]:
    return sorted({p.size_bytes for p in model.points if p.size_bytes > 0}) or [1 << 10, 1 << 20, 1 << 26]


def _cmd_predict(args) -> int:
    ranks = _positive_int("RANKS", args.ranks)
    per = _positive_int("RANKS_PER_NODE", args.ranks_per_node)
    if ranks < 2 or ranks > MAX_RANKS:
        raise InputError(f"RANKS must be in 2..{MAX_RANKS}, got {ranks}")
    if per > ranks or ranks % per:
        raise InputError(f"RANKS_PER_NODE={per} must divide RANKS={ranks} (whole nodes)")
    sizes = None
    if args.sizes:
        try:
            sizes = sorted({metrics.parse_size(x) for x in args.sizes.split(",") if x.strip()})
        except ValueError as e:
            raise InputError(f"SIZES: {e}") from None
        if not sizes or min(sizes) <= 0:
            raise InputError(f"SIZES must be positive byte sizes, got {args.sizes!r}")
    run = _load(args.run)
    rd = Path(args.run) if Path(args.run).is_dir() else Path(args.run).parent
    model = fit_runs([run], _debug_text(rd))
    if not model.points and not model.p2p:
        raise InputError(f"run {args.run} has no collective or point-to-point records to fit links from")
    topo = Topology(ranks, per)
    sizes = sizes or run_sizes(model)
    doc = prediction_document(model, topo, sizes, str((run.get("suite") or {}).get("run_id") or rd.resolve().name))
    out = [
        f"# prediction at {ranks} ranks ({per} per node, {topo.nodes} nodes) from run {args.run} "
        f"({model.topo.ranks} ranks, {model.topo.ranks_per_node} per node, {model.backend})"
    ]
    shown = set()
    for op in OPS:
        ls = model.links_for(op)
        key = tuple(sorted((c, lk.source) for c, lk in ls.items()))
        if key not in shown:
            shown.add(key)
            out += format_links(complete_links(ls, topo), f"{op} link")
    for op in OPS:
        c = model.choice(op, max(sizes))
        out.append(
            f"#   {op}: backend runs {c.algorithm or 'unknown'} ({c.how})" + (f"; check: {c.check}" if c.check else "")
        )
    out.append("#   * = the algorithm the backend runs; time interval from the links' 95% intervals")
    sys.stdout.write("\n".join(out) + "\n" + format_predictions(stored_predictions(doc)))
    for name, sm in step.step_models().items():
        for d in doc.get(name) or []:
            print(sm.step_line(d, ranks))
        for line in sm.notes_at(model, topo):
            print(line)
    from suite.common.fileio import write_json_atomic

    dest = rd / "predict.json"
    write_json_atomic(dest, doc)
    print(f"predict.json: {dest}")
    return 0


def _cmd_validate(args) -> int:
    fit_on = [_load(p) for p in args.fit.split(",") if p]
    check = [_load(p) for p in args.check.split(",") if p]
    if not fit_on or not check:
        raise InputError("validate needs --fit RUN[,RUN...] and --check RUN[,RUN...]")
    v = validate(fit_on, check, one_machine=args.one_machine)
    if not v["rows"]:
        raise InputError("the check runs have no collective records the fitted model can predict")
    sys.stdout.write(format_validation(v))
    if args.out:
        from suite.common.fileio import write_json_atomic

        write_json_atomic(args.out, v)
        print(f"validation: {args.out} (its page: python -m suite.report validation {args.out})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m suite.model", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("predict", help="the extrapolation table of a stored run; writes RUN/predict.json")
    p.add_argument("run")
    p.add_argument("--ranks", required=True)
    p.add_argument("--ranks-per-node", required=True)
    p.add_argument("--sizes", default="", help="comma-separated sizes (default: the run's)")
    p.set_defaults(fn=_cmd_predict)
    p = sub.add_parser("validate", help="fit on some runs, predict and compare with others")
    p.add_argument("--fit", required=True)
    p.add_argument("--check", required=True)
    p.add_argument("--out", default="")
    p.add_argument(
        "--one-machine",
        action="store_true",
        help="the check runs' hosts are containers of one machine (the compose simulation): their ranks share its "
        "cores, and where they outnumber them a step's compute is its probe at N (suite.model.contention)",
    )
    p.set_defaults(fn=_cmd_validate)
    if argv and argv[0] not in ("predict", "validate", "-h", "--help"):
        argv = ["predict", *argv]
    try:
        args = ap.parse_args(argv)
        if not getattr(args, "fn", None):
            ap.print_help()
            return 2
        return args.fn(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
