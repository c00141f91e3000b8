"""The doctor's findings: the weak node (a host whose every inter-node link of one kind, or every rank, is
affected) and one ``Finding`` per weak node, slow link and straggler, each with its evidence, from the judged
links (links.py) and ranks (stragglers.py). verdict.py's docstring states the rules."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from suite.api import metrics

from .links import link_name, measured_text
from .stragglers import STRAGGLER_FACTOR


@dataclass
class Finding:
    kind: str
    """slow_link | straggler | weak_node"""
    where: str
    measured: str
    expected: str
    ratio: float
    confidence: str
    evidence: list[str] = field(default_factory=list)
    detail: dict = field(default_factory=dict)


_WEAK_NODE_SIGNS = (
    ("outgoing bandwidth", lambda e, h: e["probe"] == "bandwidth" and e["src_host"] == h),
    ("incoming bandwidth", lambda e, h: e["probe"] == "bandwidth" and e["dst_host"] == h),
    ("latency", lambda e, h: e["probe"] == "latency" and h in (e["src_host"], e["dst_host"])),
    ("both directions at once", lambda e, h: e["probe"] == "bidirectional" and h in (e["src_host"], e["dst_host"])),
)
"""What makes a host weak: every inter-node link of one of these kinds (at least two) is slow."""


def weak_nodes(links: list[dict], ranks: list[dict], hosts: list[str]) -> tuple[list[dict], set, set]:
    """Hosts where every inter-node link of one direction (or every rank) is affected.
    Returns (weak, the links and the ranks used as their evidence)."""
    weak, used_links, used_ranks = [], set(), set()
    host_list = sorted(set(hosts))
    if len(host_list) < 2:
        return weak, used_links, used_ranks
    for h in host_list:
        reasons = []
        for what, sel in _WEAK_NODE_SIGNS:
            mine = [e for e in links if e["class"] == "inter-node" and sel(e, h)]
            if len(mine) >= 2 and all(e["slow"] for e in mine):
                reasons.append((what, mine))
        my_ranks = [e for e in ranks if e["host"] == h]
        if len(my_ranks) >= 2 and all(e["straggler"] for e in my_ranks):
            reasons.append(("compute: every rank a straggler", []))
        if not reasons:
            continue
        ev_links = [e for _, es in reasons for e in es]
        used_links |= {(e["probe"], e["src"], e["dst"]) for e in ev_links}
        if any(w.startswith("compute") for w, _ in reasons):
            used_ranks |= {e["rank"] for e in my_ranks}
        if any(es for _, es in reasons):
            # its slow links slow its ranks' sends and receives too: a rank of it flagged only in the
            # communication probes is that same cause (its evidence), not a second finding
            used_ranks |= {e["rank"] for e in my_ranks if e["straggler"] and not e["in_compute"]}
        weak.append(
            {
                "host": h,
                "ranks": [e["rank"] for e in my_ranks],
                "affected": [w for w, _ in reasons],
                "links": [link_name(e["probe"], e["src"], e["dst"], hosts) + f" [{e['probe']}]" for e in ev_links],
            }
        )
    return weak, used_links, used_ranks


def weak_node_findings(
    weak: list[dict], links: list[dict], stragglers: list[dict], used_links: set, used_ranks: set, hosts: list[str]
) -> list[Finding]:
    findings = []
    for w in weak:
        ev = [
            e
            for e in links
            if (e["probe"], e["src"], e["dst"]) in used_links and w["host"] in (e["src_host"], e["dst_host"])
        ]
        bw = [e for e in ev if e["probe"] == "bandwidth"]
        main = bw or ev
        if main:
            med = statistics.median(e["median_us"] for e in main)
            ref = statistics.median(e["class_median_us"] for e in main)
            size, probe = main[0]["size_bytes"], main[0]["probe"]
            measured, expected, ratio = (
                measured_text(probe, size, med),
                measured_text(probe, size, ref) + " (its class)",
                ref / med,
            )
        else:
            s = [x for x in stragglers if x["host"] == w["host"]]
            med = statistics.median(x["median_us"] for x in s)
            ref = statistics.median(x["others_median_us"] for x in s)
            measured, expected = (
                f"{metrics.format_time_us(med)} compute",
                f"{metrics.format_time_us(ref)} (the other ranks)",
            )
            ratio = ref / med
        findings.append(
            Finding(
                kind="weak_node",
                where=f"{w['host']} (ranks {', '.join(map(str, w['ranks']))}): " + "; ".join(w["affected"]),
                measured=measured,
                expected=expected,
                ratio=ratio,
                confidence=f"every affected link slow in all {n_passes(links)} passes (95% CI of each median beyond "
                f"the threshold)"
                if main
                else f"every rank flagged (binomial p < alpha/n, effect >= {STRAGGLER_FACTOR}x)",
                evidence=w["links"] + [f"rank {r}" for r in w["ranks"] if r in used_ranks],
                detail=w,
            )
        )
    return findings


def slow_link_findings(slow: list[dict], used_links: set, hosts: list[str]) -> list[Finding]:
    findings = []
    for e in slow:
        if (e["probe"], e["src"], e["dst"]) in used_links:
            continue
        vs_exp = e["slow_vs_expectation"] and not e["slow_vs_class"]
        ref_us = e["expected_us"] if vs_exp else e["class_median_us"]
        findings.append(
            Finding(
                kind="slow_link",
                where=link_name(e["probe"], e["src"], e["dst"], hosts) + f" [{e['probe']}, {e['class']}]",
                measured=measured_text(e["probe"], e["size_bytes"], e["median_us"]),
                expected=measured_text(e["probe"], e["size_bytes"], ref_us)
                + (" (expected)" if vs_exp else " (its class)"),
                ratio=ref_us / e["median_us"],
                confidence=f"slow in all {len(e['passes'])} passes: 95% CI of the median beyond "
                f"{e['passes'][0]['threshold']:z.2f}x the reference",
                evidence=[p["case"] for p in e["passes"]],
                detail=e,
            )
        )
    return findings


def _in_communication(s: dict) -> str:
    """The collectives' own hold-back beside a compute headline (", X inside the collectives"), else ""."""
    held = s.get("holds_back_in_communication_us")
    if not s["in_compute"] or held is None:
        return ""
    return f" in compute, {metrics.format_time_us(held)} inside the collectives"


def straggler_findings(stragglers: list[dict], used_ranks: set) -> list[Finding]:
    return [
        Finding(
            kind="straggler",
            where=f"rank {s['rank']} ({s['host']})",
            measured=metrics.format_time_us(s["median_us"]),
            expected=f"{metrics.format_time_us(s['others_median_us'])} (the other ranks)",
            ratio=s["others_median_us"] / s["median_us"] if s["median_us"] > 0 else 0.0,
            confidence=f"slower than the others' median in {s['slower_than_others']}/{s['samples']} samples "
            f"(chance 1/2: p = {s['p_value']:z.1g}), the slowest in {s['slowest']}"
            + ("" if s["late_arrival"] is None else f", entered the op last in {s['late_arrival']}")
            + f"; holds the others back by {metrics.format_time_us(s['holds_back_us'])} per step"
            + _in_communication(s),
            evidence=s["evidence"],
            detail=s,
        )
        for s in stragglers
        if s["rank"] not in used_ranks
    ]


def n_passes(links: list[dict]) -> int:
    return max((len(e["passes"]) for e in links), default=0)
