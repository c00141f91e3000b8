"""The run's headline: one sentence per experiment of a stored run that says what was measured and the
verdict, every number with its unit and its source. The report's first screen and the terminal's last
lines lead with them; a figure may reuse the numbers (``Headline.numbers``).

The collectives' sentence sets their peak bus bandwidth against the link's rate: the run's own p2p
ping-pong (the same backend, device and size where the run has it, else its largest size), else
``LINK_RATE`` across hosts (suite/model/link_rate.py), else it says that there is none. An experiment
may say its own clause (its spec's ``headline`` hook, returning a ``Clause``); the core adds the
correctness count (wrong of checked cases) to every sentence. Reads records only."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from suite import results
from suite.metrics import format_rate_gbps, format_time_us
from suite.model.link_rate import configured_link_rate
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
class LinkRef:
    """The link's rate the collectives are set against, and where it comes from."""

    gbps: float
    source: str
    """``p2p ping-pong 0<->1, 1.0 KiB`` (measured) or ``LINK_RATE=200mbit`` (declared)."""
    measured: bool


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


def collectives_clause(run: dict, recs: list[dict]) -> Clause:
    """all_reduce's (else the fastest op's) highest bus bandwidth, against the link's rate."""
    bw = _bandwidth_recs(recs)
    if not bw:
        return generic_clause(recs)
    ops = list(OrderedDict.fromkeys(r["op"] for r in bw))
    op = "all_reduce" if "all_reduce" in ops else max(bw, key=lambda r: r["busbw_gbps"])["op"]
    top = max((r for r in bw if r["op"] == op), key=lambda r: r["busbw_gbps"])
    numbers = {"op": op, "busbw_gbps": top["busbw_gbps"], "size_bytes": top["size_bytes"]}
    text = f"{op} reaches {format_rate_gbps(top['busbw_gbps'])} busbw at {fmt_bytes(top['size_bytes'])}"
    link = link_reference(run, top)
    if link is None:
        text += ", no link rate to set it against (no p2p ping-pong in this run, no LINK_RATE across hosts)"
    else:
        pct = top["busbw_gbps"] / link.gbps
        kind = "measured" if link.measured else "declared"
        text += f", {pct:z.0%} of the link's {kind} rate ({format_rate_gbps(link.gbps)}, {link.source})"
        numbers |= {"link_gbps": link.gbps, "link_source": link.source, "link_fraction": pct}
    others = len(ops) - 1
    if others:
        text += f"; {others} more collective{'s' if others > 1 else ''} in the tables"
    return Clause(text=text, numbers=numbers)


def pingpong_records(recs: list[dict]) -> list[dict]:
    """The p2p ping-pong records (one message on one link, one-way time) that carry a rate."""
    return [
        r
        for r in recs
        if r["op"] == "send_recv" and str(r.get("pattern", "")).startswith("ping") and r.get("busbw_gbps")
    ]


def link_reference(run: dict, rec: dict) -> LinkRef | None:
    """The link's rate a record is set against: the run's ping-pong on its backend and device at its size
    (else at the ping-pong's largest size); else LINK_RATE where the run spans hosts; else None."""
    pp = [
        r
        for r in pingpong_records(results.communication_records(results.records(run)))
        if r["backend"] == rec["backend"] and r["device"] == rec["device"]
    ]
    if pp:
        same = [r for r in pp if r["size_bytes"] == rec["size_bytes"]]
        size = rec["size_bytes"] if same else max(r["size_bytes"] for r in pp)
        best = max((r for r in pp if r["size_bytes"] == size), key=lambda r: r["busbw_gbps"])
        pair = f" {best['src']}<->{best['dst']}" if "src" in best and "dst" in best else ""
        return LinkRef(gbps=best["busbw_gbps"], source=f"p2p ping-pong{pair}, {fmt_bytes(size)}", measured=True)
    hosts = len(set(((run.get("machine_info") or {}).get("suite") or {}).get("hostnames") or []))
    rate = configured_link_rate(run.get("machine_info") or {})
    if rate and max(hosts, int(rec.get("hosts") or 1)) > 1:
        return LinkRef(gbps=rate[1], source=f"LINK_RATE={rate[0]}", measured=False)
    return None


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
