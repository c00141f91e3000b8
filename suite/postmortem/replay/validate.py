"""``make validate-what-if``: the what-ifs checked against runs that measure them. Two runs of the same cases
(``clean`` and ``slow``: rank r slowed k times at compute for the whole run, ``INJECT=slow:<r>:0:<k>:rest``):

- replay error of each run: the step replayed unchanged against the steps on the timeline, and against the
  record's mean sample (the larger of the two runs');
- "no straggler" on the slow run, against the clean run's measured step (counterfactual error);
- "rank r k× slower" on the clean run, against the slow run's measured step (counterfactual error);
- M_W of rank r on the slow run (a planted single-rank slowdown: near 100%), and in a pipeline M_S of its stage.

    python -m suite.postmortem.replay.validate CLEAN_RUN SLOW_RUN --rank R --factor K [--out table.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from suite.postmortem.replay import cli, load
from suite.postmortem.replay.whatif import WhatIf


def _err(predicted: float, measured: float) -> float:
    return round(100.0 * abs(predicted - measured) / measured, 1)


def rows(clean: Path, slow: Path, rank: int, factor: float) -> list[dict]:
    """One row per case the two runs share."""
    w = WhatIf("rank", (rank,), factor)
    spans = {run: load.step_spans(load.read_timeline(run)) for run in (clean, slow)}
    out = []
    for case in sorted(set(spans[clean]) & set(spans[slow])):
        c, _ = cli.case_result(clean, case, spans[clean][case], [w])
        s, _ = cli.case_result(slow, case, spans[slow][case], [])
        if not c.get("steps") or not s.get("steps"):
            continue
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
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if not args.factor > 0:
        print(f"error: --factor must be above 0, got {args.factor:zg}", file=sys.stderr)
        return 2
    try:
        found = rows(Path(args.clean), Path(args.slow), args.rank, args.factor)
    except load.BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not found:
        print("error: the two runs share no training case whose steps could be rebuilt", file=sys.stderr)
        return 2
    text = table(found, args.rank, args.factor)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
        print(f"# table: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
