"""``make validate-what-if``: the what-ifs checked against runs that measure them. Two runs of the same cases
(``clean`` and ``slow``: rank r's forward k times as long for the whole run, examples/whatif_straggler.py):

- replay error of each run: the step replayed unchanged against the steps on the timeline, and against the
  record's mean sample (the larger of the two runs'; the link table's the same of its two runs);
- "no straggler" on the slow run, against the clean run's measured step (counterfactual error);
- "rank r k× slower" on the clean run, against the slow run's measured step (counterfactual error);
- M_W of rank r on the slow run (a planted single-rank slowdown: near 100%), and in a pipeline M_S of its stage.

With ``--link BASE_RUN,SHAPED_RUN`` (two runs whose link the shaped one has k times slower), a second table:
"link 0-1 k× slower" on the base run against the shaped run's measured step.

    python -m suite.postmortem.replay.validate CLEAN_RUN SLOW_RUN --rank R --factor K [--link BASE,SHAPED]
        [--out table.md] [--one-machine]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from suite.postmortem.replay import cli, load
from suite.postmortem.replay.whatif import WhatIf


def _err(predicted: float, measured: float) -> float:
    return round(100.0 * abs(predicted - measured) / measured, 1)


def _pairs(before: Path, after: Path, w: WhatIf, one_machine: bool = False):
    """(case, its result on ``before`` with the what-if ``w``, its result on ``after``) for each training case
    whose steps both runs rebuilt."""
    spans = {run: load.step_spans(load.read_timeline(run)) for run in (before, after)}
    for case in sorted(set(spans[before]) & set(spans[after])):
        b, _ = cli.case_result(before, case, spans[before][case], [w], one_machine=one_machine)
        a, _ = cli.case_result(after, case, spans[after][case], [], one_machine=one_machine)
        if b.get("steps") and a.get("steps"):
            yield case, b, a


def rows(clean: Path, slow: Path, rank: int, factor: float, one_machine: bool = False) -> list[dict]:
    """One row per case the two runs share."""
    out = []
    for case, c, s in _pairs(clean, slow, WhatIf("rank", (rank,), factor), one_machine):
        predicted_slow = c["whatifs"][0]["step_ms"]
        out.append(
            {
                "case": case,
                "clean_ms": c["measured_ms"],
                "slow_ms": s["measured_ms"],
                "replay_error_pct": max(c["replay_error_pct"], s["replay_error_pct"]),
                "vs_record_pct": max(x["replay_error_vs_record_pct"] or 0.0 for x in (c, s)),
                "no_straggler_ms": s["ideal_ms"],
                "no_straggler_error_pct": _err(s["ideal_ms"], c["measured_ms"]),
                "rank_slower_ms": predicted_slow,
                "rank_slower_error_pct": _err(predicted_slow, s["measured_ms"]),
                "M_W_pct": s["M_W_pct"].get(str(rank)),
                "M_S_pct": (s["M_S_pct"] or {}).get(str(rank)),
            }
        )
    return out


def link_rows(base: Path, shaped: Path, factor: float, one_machine: bool = False) -> list[dict]:
    """One row per case the two runs share: "link 0-1 k× slower" on ``base`` against ``shaped``."""
    out = []
    for case, b, s in _pairs(base, shaped, WhatIf("link", (0, 1), factor), one_machine):
        predicted = b["whatifs"][0]["step_ms"]
        out.append(
            {
                "case": case,
                "base_ms": b["measured_ms"],
                "shaped_ms": s["measured_ms"],
                "replay_error_pct": max(b["replay_error_pct"], s["replay_error_pct"]),
                "vs_record_pct": max(x["replay_error_vs_record_pct"] or 0.0 for x in (b, s)),
                "predicted_ms": predicted,
                "error_pct": _err(predicted, s["measured_ms"]),
                "priced": b["whatifs"][0].get("priced", ""),
            }
        )
    return out


def link_table(found: list[dict], factor: float) -> str:
    head = (
        "| case | base step, ms (measured) | link shaped step, ms (measured) | replay error (against the record) "
        f"| link 0-1 {factor:zg}x slower on base, ms (modelled) | error vs shaped |"
    )
    lines = [head, "|" + "---|" * 6]
    for r in found:
        lines.append(
            f"| {r['case']} | {r['base_ms']:z.2f} | {r['shaped_ms']:z.2f} | {r['replay_error_pct']:zg}% "
            f"({r['vs_record_pct']:zg}%) "
            f"| {r['predicted_ms']:z.2f} | {r['error_pct']:zg}% |"
        )
    lines += [""] + [f"- {r['case']}, the link what-if priced by {r['priced']}" for r in found if r["priced"]]
    return "\n".join(lines) + "\n"


def table(found: list[dict], rank: int, factor: float) -> str:
    head = (
        "| case | clean step, ms (measured) | slow step, ms (measured) | replay error (against the record) "
        "| no straggler on slow, ms (modelled) | error vs clean "
        f"| rank {rank} {factor:zg}x slower on clean, ms (modelled) | error vs slow "
        f"| M_W rank {rank} on slow (modelled) | M_S its stage on slow (modelled) |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in found:
        mw, ms = ("-" if r[k] is None else f"{r[k]:zg}%" for k in ("M_W_pct", "M_S_pct"))
        lines.append(
            f"| {r['case']} | {r['clean_ms']:z.2f} | {r['slow_ms']:z.2f} | {r['replay_error_pct']:zg}% "
            f"({r['vs_record_pct']:zg}%) | "
            f"{r['no_straggler_ms']:z.2f} | {r['no_straggler_error_pct']:zg}% | {r['rank_slower_ms']:z.2f} | "
            f"{r['rank_slower_error_pct']:zg}% | {mw} | {ms} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suite.postmortem.replay.validate")
    ap.add_argument("clean")
    ap.add_argument("slow")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--factor", type=float, required=True)
    ap.add_argument("--link", default="", help="BASE_RUN,SHAPED_RUN: the shaped run's link --factor times slower")
    ap.add_argument("--out", default="")
    ap.add_argument("--one-machine", action="store_true", help="the runs' hosts are containers of one machine")
    args = ap.parse_args(argv)
    if not args.factor > 0:
        print(f"error: --factor must be above 0, got {args.factor:zg}", file=sys.stderr)
        return 2
    try:
        found = rows(Path(args.clean), Path(args.slow), args.rank, args.factor, args.one_machine)
        pair = [Path(p) for p in args.link.split(",")] if args.link else []
        linked = link_rows(pair[0], pair[1], args.factor, args.one_machine) if len(pair) == 2 else []
    except load.BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not found:
        print("error: the two runs share no training case whose steps could be rebuilt", file=sys.stderr)
        return 2
    if args.link and not linked:
        print(f"error: --link {args.link}: not two runs sharing a training case with rebuilt steps", file=sys.stderr)
        return 2
    text = table(found, args.rank, args.factor) + (f"\n{link_table(linked, args.factor)}" if linked else "")
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
        print(f"# table: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
