"""A comparison as text: the table ``make compare`` prints, its verdict first (the overall ratio, what the runs
given can detect, the REPEAT advice, the gate and why) and the verdict counts under it.
"""

from __future__ import annotations

from suite.report.compare.case_identity import describe_key
from suite.report.compare.stats import MAX_RUNS
from suite.report.compare.verdicts import VERDICTS, Comparison


def runs_text(k: int | None) -> str:
    return "" if k is None else (f">{MAX_RUNS}" if k > MAX_RUNS else str(k))


def _bound(x: float) -> str:
    """An interval bound in 7 characters (a case that cannot tell can have bounds like 1e-13 and 1e13)."""
    return f"{x:z7.3f}" if 1e-3 <= x < 1e3 else f"{x:z7.1e}"


def count_line(c: Comparison) -> str:
    """'N matched case(s): a slower, b faster, c same, d inconclusive' (+ the refused ones)."""
    n = {v: sum(1 for r in c.cases if r.verdict == v) for v in VERDICTS}
    text = f"{len(c.cases) + len(c.refused)} matched case(s): " + ", ".join(f"{n[v]} {v}" for v in VERDICTS)
    return text + (f", {len(c.refused)} not compared (settings differ)" if c.refused else "")


def repeat_advice(c: Comparison) -> str:
    """How many runs per side would resolve the inconclusive cases ('' when there are none)."""
    needs = sorted(r.runs_needed for r in c.inconclusive if r.runs_needed is not None)
    if not needs:
        return ""
    half, most = needs[(len(needs) - 1) // 2], needs[-1]
    say = lambda k: f"REPEAT={k}" if k <= MAX_RUNS else f"more than {MAX_RUNS} runs"  # noqa: E731
    return (
        f"{len(needs)} case(s) inconclusive: their noise says {say(half)} on each side would resolve half of "
        f"them, {say(most)} all (make bench-cpu REPEAT=k on each commit; the runs column per case), or a "
        f"larger TOLERANCE"
    )


def change_text(ratio: float) -> str:
    """A ratio as the change it means, signed: 1.41 -> '+41%', 0.94 -> '-6.0%' (one decimal under 10%),
    15.3 -> '×15' (ten times or more)."""
    x = ratio - 1
    if ratio >= 10:
        return f"×{ratio:z.0f}"
    return f"{x:+z.1%}" if abs(x) < 0.1 else f"{x:+z.0%}"


def sides_text(c: Comparison) -> str:
    """'REPEAT=3 a side', 'one run a side', or '2 base and 3 new runs'."""
    if c.base_runs == c.new_runs:
        return "one run a side" if c.base_runs == 1 else f"REPEAT={c.base_runs} a side"
    return f"{c.base_runs} base and {c.new_runs} new run(s)"


def detect_line(c: Comparison) -> str:
    """What the gate can tell with the runs given, from its own thresholds: the measured change beyond which
    a case is called slower or faster at its noise (for half the cases, and for all), and the change
    common to every case beyond which the overall ratio is ('' for identical runs or no case)."""
    if c.identical or not c.cases:
        return ""
    ups = sorted(r.detect_slower for r in c.cases)
    downs = sorted((r.detect_faster for r in c.cases), reverse=True)
    half = (len(ups) - 1) // 2
    lo, hi = c.overall_detect
    return (
        f"detectable with {sides_text(c)} here: changes beyond {change_text(ups[half])}/{change_text(downs[half])} "
        f"in half the cases, {change_text(ups[-1])}/{change_text(downs[-1])} in all; beyond "
        f"{change_text(hi)}/{change_text(lo)} common to every case (the overall ratio). A case measured beyond its "
        f"'detect' column is called slower; a true change of that size is caught about half the time"
    )


def gate_line(c: Comparison) -> str:
    """The gate's status and why, in one line."""
    total = len(c.cases) + len(c.refused)
    limit = f"MAX_INCONCLUSIVE={c.max_inconclusive:zg}"
    if c.gate == "FAIL":
        what = [f"{len(c.regressions)} case(s) slower beyond the tolerance"] if c.regressions else []
        what += ["the overall ratio slower beyond the tolerance"] if c.overall == "slower" else []
        if c.regressions and max(c.base_runs, c.new_runs) == 1:
            what.append(
                "one run per side: each case was assumed as noisy as the others, so a noisier case can be "
                "slower by chance; confirm with REPEAT=2 or more"
            )
        return f"gate: FAIL (regression: {'; '.join(what)})"
    if c.gate == "INCONCLUSIVE":
        why = [
            f"{c.not_judged} of {total} case(s) could not be judged ({len(c.inconclusive)} inconclusive, "
            f"{len(c.refused)} with differing settings; more than {limit} allows)"
        ] * (c.not_judged > c.max_inconclusive * total)
        why += ["the overall interval straddles a tolerance boundary"] * (c.overall == "inconclusive")
        return f"gate: INCONCLUSIVE (no regression found, none ruled out: {'; '.join(why)})"
    if c.identical:
        return "gate: PASS (identical runs: both sides hold the same samples, every case same)"
    return "gate: PASS" + (f" ({c.not_judged} case(s) not judged, within {limit})" if c.not_judged else "")


def format_comparison(c: Comparison, *, show: str = "all") -> str:
    """Text table of a comparison; ``show='changed'`` lists only cases not judged same."""
    names = {r.key: describe_key(r.key) for r in c.cases}
    w = min(90, max([len(n) for n in names.values()] + [4]))
    lines = []
    if c.settings_diffs:
        act = (
            f"{len(c.refused)} case(s) they affect get no verdict (ALLOW_CONFIG_DIFF=1 compares them)"
            if c.refused
            else "every case compared (ALLOW_CONFIG_DIFF, or no case's records differ)"
        )
        lines.append(f"# settings differ between the sides: {act}")
        lines += [f"#   {s}" for s in c.settings_diffs]
    lines += [
        f"# compare: base={c.base_name} ({c.base_runs} run(s))  new={c.new_name} ({c.new_runs} run(s))  "
        f"(ratio = new/base median of run medians; >1 slower; CI {100 - c.alpha * 100:z.10g}% simultaneous over the "
        f"cases; tolerance ±{c.tolerance:z.0%}; p Holm-adjusted)",
        f"# between-run variation: pooled sd {c.between_run_sd:z.3g} of a run's log median; {c.between_run_note}",
        *verdict_lines(c),
        f"#{'case':<{w}} {'base(us)':>10} {'new(us)':>10} {'ratio':>7} {'CI low':>7} {'CI high':>7}"
        f" {'p_adj':>7} {'noise':>6} {'detect':>6} {'runs':>5}  verdict",
    ]
    for r in c.cases:
        if show == "changed" and r.verdict == "same":
            continue
        lines.append(
            f" {names[r.key][:w]:<{w}} {r.base_median_us:z10.1f} {r.new_median_us:z10.1f}"
            f" {r.ratio:z7.3f} {_bound(r.ci_low)} {_bound(r.ci_high)} {r.p_adjusted:z7.3g} {r.noise_sd:z6.3f}"
            f" {change_text(r.detect_slower):>6} {runs_text(r.runs_needed):>5}  {r.verdict}"
        )
    lines.append(
        f"# {count_line(c)}  (noise: the case's between-run sd; detect: the measured slowdown beyond which it is "
        f"called slower; runs: REPEAT that would resolve it)"
    )
    if c.refused:
        lines.append(
            f"# not compared (settings differ): {', '.join(describe_key(k) for k in c.refused[:5])}"
            f"{' ...' if len(c.refused) > 5 else ''}"
        )
    if c.only_base or c.only_new:
        lines.append(f"# unmatched: {len(c.only_base)} only in base, {len(c.only_new)} only in new")
    if c.oversubscribed:
        lines.append(f"# not compared: {oversubscribed_line(c)}")
    if c.unusable:
        lines.append(
            f"# not compared (no positive median time in some run): "
            f"{', '.join(describe_key(k) for k in c.unusable[:5])}{' ...' if len(c.unusable) > 5 else ''}"
        )
    lines.append(f"# {gate_line(c)}")  # again under the table, where a terminal's last screen shows it
    return "\n".join(lines) + "\n"


def oversubscribed_line(c: Comparison) -> str:
    """The cases of the oversubscribed pass that the gate left out, and why."""
    return (
        f"{c.oversubscribed} case(s) of the OVERSUBSCRIBED pass not judged (more ranks than usable cores: their "
        "times measure CPU contention, not communication)"
    )


def verdict_lines(c: Comparison) -> list[str]:
    """The comparison's verdict, printed before its table: the overall ratio, what it could detect, the
    REPEAT advice and the gate."""
    lines = [
        f"# overall (median case ratio): {c.overall_ratio:z.3f}  CI [{c.overall_ci[0]:z.3f}, "
        f"{c.overall_ci[1]:z.3f}]  -> {c.overall}{' (identical runs)' * c.identical}"
    ]
    lines += [f"# {text}" for text in (detect_line(c), repeat_advice(c)) if text]
    return lines + [f"# {gate_line(c)}"]
