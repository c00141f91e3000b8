"""The run's headline: one sentence per experiment of a stored run that says what was measured and the
verdict, every number with its unit and its source. The report's first screen and the terminal's last
lines lead with them; a figure may reuse the numbers (``Headline.numbers``).

The collectives' sentence quotes all_reduce's canonical form (sum, float32, out-of-place where measured) at
its largest size with its interval, against the link's rate: the run's one figure per link
(suite.model.link_rate.link_figures: the streaming probe's fitted rate, else the declared rate across
hosts), else it says that there is none; a share above 100% says against what else it reads, or is marked.
The other forms are the tables'. An experiment
may say its own clause (its spec's ``headline`` hook, returning a ``Clause``); the core adds the
correctness count (wrong of checked cases) to every sentence. Reads records only."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from suite import results
from suite.metrics import format_rate_gbps, format_time_us
from suite.model.link_rate import LinkFigure, link_for
from suite.report.environment import fmt_bytes
from suite.report.specs import spec_value


@dataclass(frozen=True, kw_only=True)
class Clause:
    """What an experiment's ``headline`` hook says: the measured part of its sentence."""

    text: str
    """What was measured and what it shows, every number with its unit and source."""
    verdict: str | None = None
    """Its own verdict (the doctor's: healthy | findings); None: the core's, from the wrong count."""
    numbers: dict = field(default_factory=dict)
    """The sentence's numbers by name, units in the names (``busbw_gbps``, ``size_bytes``)."""


@dataclass(frozen=True, kw_only=True)
class Headline:
    """One experiment's sentence, its verdict and its numbers."""

    experiment: str
    text: str
    verdict: str
    """correct | WRONG | unchecked, or the experiment's own (the doctor's healthy | findings)."""
    n_cases: int
    n_wrong: int
    """Cases with at least one wrong element."""
    n_unchecked: int
    """Cases with nothing to check (``checked`` false)."""
    numbers: dict = field(default_factory=dict)


def headlines(run: dict) -> list[str]:
    """One sentence per experiment of the run, in the report's order."""
    return [h.text for h in headline_items(run)]


def headline_items(run: dict) -> list[Headline]:
    """Each experiment's Headline, in the report's order (its spec's report_order, then the records')."""
    by_exp: OrderedDict = OrderedDict()
    for r in results.records(run):
        by_exp.setdefault(r["experiment"], []).append(r)
    order = sorted(by_exp, key=lambda e: spec_value(e, "report_order", 0))
    return [_headline(run, exp, by_exp[exp]) for exp in order]


def _headline(run: dict, exp: str, recs: list[dict]) -> Headline:
    hook = spec_value(exp, "headline", None)
    timed = results.communication_records(recs)  # not the oversubscribed pass's: counted below, not timed
    clause = (hook(run, timed) if hook is not None else None) if timed else Clause(text=OVERSUBSCRIBED_ONLY)
    if clause is None:
        clause = (
            collectives_clause(run, timed) if spec_value(exp, "library_collectives", False) else generic_clause(timed)
        )
    wrong = sum(1 for r in recs if (r.get("n_wrong") or 0) > 0)
    unchecked = sum(1 for r in recs if r.get("checked") is False)
    verdict = clause.verdict or ("WRONG" if wrong else "correct" if unchecked < len(recs) else "unchecked")
    return Headline(
        experiment=exp,
        text=f"{exp}: {clause.text}; {correctness_text(len(recs), wrong, unchecked)}",
        verdict=verdict,
        n_cases=len(recs),
        n_wrong=wrong,
        n_unchecked=unchecked,
        numbers=clause.numbers,
    )


OVERSUBSCRIBED_ONLY = "no time stated: every case ran in the oversubscribed pass, with more ranks than cores"


def correctness_text(n: int, wrong: int, unchecked: int) -> str:
    """``0 wrong of 34 cases``; with unchecked cases ``0 wrong of 30 checked cases, 4 unchecked``."""
    if not unchecked:
        return f"{wrong} wrong of {n} cases"
    if unchecked == n:
        return f"none of {n} cases checked"
    return f"{wrong} wrong of {n - unchecked} checked cases, {unchecked} unchecked"


def _bandwidth_recs(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r.get("busbw_gbps") and r["op"] != "barrier" and r.get("size_bytes")]


CANONICAL = (("redop", ("sum", None, "none")), ("dtype", ("float32",)), ("in_place", (False, None)))
"""The form the headline quotes of a collective (nccl-tests' default: ``sum``, float32, out-of-place): each
field in turn keeps the records of those values, and is passed over where none has them. Other forms are
the tables'."""


def canonical_form(recs: list[dict], op: str) -> list[dict]:
    """The records of the op's canonical form (its own variant over its list forms, then CANONICAL), one per
    size (the median one where several remain), sizes ascending."""
    mine = [r for r in recs if r["op"] == op]
    for key, values in (("variant", (op, None)), *CANONICAL):
        mine = [r for r in mine if r.get(key) in values] or mine
    by_size: dict = {}
    for r in mine:
        by_size.setdefault(r["size_bytes"], []).append(r)
    return [sorted(at, key=lambda r: r["time_us"])[len(at) // 2] for _, at in sorted(by_size.items())]


def canonical_record(recs: list[dict], op: str) -> dict | None:
    """The op's canonical form at its largest size."""
    form = canonical_form(recs, op)
    return form[-1] if form else None


def noisy_dips(recs: list[dict]) -> list[int]:
    """The sizes where a bandwidth curve (records by size, ascending) falls from the size before by more than
    both intervals allow (the upper end of this size's below the lower end of the one before): noise of the
    machine, not a feature of the op."""
    out = []
    for a, b in zip(recs, recs[1:]):
        ia, ib = busbw_interval(a), busbw_interval(b)
        if ia and ib and ib[1] < ia[0]:
            out.append(b["size_bytes"])
    return out


def busbw_interval(rec: dict) -> tuple[float, float] | None:
    """The 95% interval of a record's bus bandwidth, from its median's (results.median_ci_pct)."""
    pct = results.median_ci_pct(rec)
    if pct is None or pct >= 100:
        return None
    return rec["busbw_gbps"] / (1 + pct / 100), rec["busbw_gbps"] / (1 - pct / 100)


def _form(rec: dict) -> str:
    parts = [str(rec[k]) for k in ("redop", "dtype") if rec.get(k) not in (None, "none")]
    return f" ({', '.join(parts)})" if parts else ""


def collectives_clause(run: dict, recs: list[dict]) -> Clause:
    """all_reduce's (else the first op's) canonical form at its largest size with its interval, against the
    link's rate (suite.model.link_rate.link_figures)."""
    bw = _bandwidth_recs(recs)
    if not bw:
        return generic_clause(recs)
    ops = list(OrderedDict.fromkeys(r["op"] for r in bw))
    op = "all_reduce" if "all_reduce" in ops else ops[0]
    top = canonical_record(bw, op)
    ci = busbw_interval(top)
    numbers = {"op": op, "busbw_gbps": top["busbw_gbps"], "size_bytes": top["size_bytes"], "busbw_ci_gbps": ci}
    text = f"{op}{_form(top)} reaches {format_rate_gbps(top['busbw_gbps'])} busbw"
    if ci:
        text += f" [{format_rate_gbps(ci[0])}, {format_rate_gbps(ci[1])}]"
    text += f" at {fmt_bytes(top['size_bytes'])}"
    link = link_reference(run, top)
    if link is None:
        text += ", no link rate to set it against (no p2p probe in this run, no LINK_RATE across hosts)"
    else:
        s = share(top["busbw_gbps"], link)
        text += f", {s.text} ({link_text(link)})"
        numbers |= {"link_gbps": link.beta_gbps, "link_source": link.source, "link_fraction": s.fraction}
    others = len(ops) - 1
    forms = len({tuple(r.get(k) for k in ("variant", "redop", "dtype", "in_place")) for r in bw if r["op"] == op}) > 1
    more = [f"{others} more collective{'s' if others > 1 else ''}"] if others else []
    more += ["the other forms"] if forms else []
    if more:
        text += f"; {' and '.join(more)} in the tables"
    return Clause(text=text, numbers=numbers)


def link_text(link: LinkFigure) -> str:
    """``2.1 GB/s [1.9 GB/s, 2.3 GB/s], p2p window 0->1, α–β fit over 1.0 KiB–1.0 MiB``: the rate, its
    interval, its source and how far the probe went."""
    text = format_rate_gbps(link.beta_gbps)
    if link.beta_ci_gbps:
        lo, hi = link.beta_ci_gbps
        text += f" [{format_rate_gbps(lo)}, {'unbounded' if math.isinf(hi) else format_rate_gbps(hi)}]"
    text += f", {link.source}"
    if link.measured:
        lo, hi = (fmt_bytes(x) for x in link.sizes)
        text += f", {link.n_sizes} sizes {lo}–{hi}" if link.n_sizes > 1 else f", at {hi} alone"
        if not link.saturated:
            text += f", still growing at {fmt_bytes(link.sizes[1])} ({link.reached:z.0%} of β there)"
    return text


@dataclass(frozen=True, kw_only=True)
class Share:
    """A bandwidth as a share of the link's rate, and the words that must go with it."""

    fraction: float
    """busbw / the link's rate (one direction)."""
    text: str
    """``85% of the link's measured rate``; above 100% it says against what else it reads, or marks it."""
    cell: str
    """The same in a table cell: ``85%``, ``132% of one direction (66% of both)``, ``317% (above the link: ...)``."""


def share(gbps: float, link: LinkFigure) -> Share:
    """``gbps`` against the link: a share of its rate; above it (and beyond the rate's interval), against both
    directions at once (the bidirectional window) where that holds it, else marked with the reason (ranks on
    one host share memory, not a link; across hosts more than one link carries the op)."""
    frac = gbps / link.beta_gbps
    kind = "measured" if link.measured else "declared"
    pct = f"{frac:z.0%}"
    if frac <= 1.0 or (link.beta_ci_gbps and gbps <= link.beta_ci_gbps[1] < math.inf):
        within = "" if frac <= 1.0 else " (within its interval)"
        return Share(fraction=frac, text=f"{pct} of the link's {kind} rate{within}", cell=pct + within)
    if link.both_gbps and gbps <= link.both_gbps:
        both = f"{gbps / link.both_gbps:z.0%}"
        return Share(
            fraction=frac,
            text=f"{pct} of one direction's {kind} rate, {both} of both directions' at once "
            f"({format_rate_gbps(link.both_gbps)}, p2p window bidirectional): the op sends both ways",
            cell=f"{pct} of one direction ({both} of both)",
        )
    why = (
        "ranks on one host move it through shared memory, not a link"
        if link.link_class == "intra"
        else "more than one link carries it" + ("" if link.measured else ", or the declared rate is not the link's")
    )
    return Share(
        fraction=frac,
        text=f"{pct} of the link's {kind} rate, marked: above every link figure of this run ({why})",
        cell=f"{pct} (above the link: {why})",
    )


def pingpong_records(recs: list[dict]) -> list[dict]:
    """The p2p ping-pong records (one message on one link, one-way time) that carry a rate."""
    return [
        r
        for r in recs
        if r["op"] == "send_recv" and str(r.get("pattern", "")).startswith("ping") and r.get("busbw_gbps")
    ]


def link_reference(run: dict, rec: dict) -> LinkFigure | None:
    """The link a record is set against (suite.model.link_rate.link_for: the run's probe of the link on the
    record's backend, device and world size, else the declared rate across hosts), or None."""
    return link_for(run, rec)


def generic_clause(recs: list[dict]) -> Clause:
    """An experiment without its own clause: its highest bus bandwidth, else its shortest time."""
    bw = _bandwidth_recs(recs)
    if bw:
        top = max(bw, key=lambda r: r["busbw_gbps"])
        return Clause(
            text=f"{len(recs)} cases; the highest busbw is {format_rate_gbps(top['busbw_gbps'])} "
            f"({top.get('label') or top['op']}, {fmt_bytes(top['size_bytes'])})",
            numbers={"busbw_gbps": top["busbw_gbps"], "size_bytes": top["size_bytes"]},
        )
    timed = [r for r in recs if r.get("time_us")]
    if not timed:
        return Clause(text=f"{len(recs)} cases, none timed")
    fast = min(timed, key=lambda r: r["time_us"])
    return Clause(
        text=f"{len(recs)} cases; the shortest takes {format_time_us(fast['time_us'])} "
        f"({fast.get('label') or fast['op']})",
        numbers={"time_us": fast["time_us"]},
    )


def time_ratio(recs: list[dict], side, base: str, other: str) -> tuple[float, dict, dict] | None:
    """time(other) / time(base) of the same op at the largest size both sides ran (``side(record)`` names
    a record's side; the shortest time where a side has several records there), with the two records;
    None where the sides share no op and size."""
    best: dict = {}
    for r in recs:
        s = side(r)
        if s in (base, other) and r.get("time_us"):
            key = (s, r["op"], r["size_bytes"])
            if key not in best or r["time_us"] < best[key]["time_us"]:
                best[key] = r
    shared = [(size, op) for (s, op, size) in best if s == base and (other, op, size) in best]
    if not shared:
        return None
    size, op = max(shared)
    a, b = best[(base, op, size)], best[(other, op, size)]
    return b["time_us"] / a["time_us"], a, b
