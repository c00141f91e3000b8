"""The doctor's slow links: each link probe's passes judged against its class (verdict.py's docstring has the
rule), then one entry per link, slow only when slow in every pass. Reads stored records only."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from suite.api import metrics

EXPERIMENT = "doctor"
SLOW_FACTOR = 1.5
"""A bandwidth link (or both directions at once) is slow from 1.5x its class's time per message (2/3 of
its bandwidth) or 1.5x the expected time."""
LATENCY_FACTOR = 2.0
"""A latency pair is slow from 2x its class's round trip (small messages vary more than bulk transfers)."""
NOISE_K = 3.0
"""The class's own spread widens the threshold to exp(NOISE_K x robust sd of the links' log-medians)."""
CONFIDENCE = 0.95
LINK_PROBES = ("latency", "bandwidth", "bidirectional")
MAD_TO_SD = 1.4826
"""MAD x 1.4826 estimates the standard deviation of a normal sample (Rousseeuw & Croux 1993)."""


@dataclass
class LinkPass:
    """One link in one pass: its samples judged against its class."""

    probe: str
    src: int
    dst: int
    pass_no: int
    size_bytes: int
    cls: str
    src_host: str
    dst_host: str
    median_us: float
    ci_us: tuple[float, float]
    label: str
    reference_us: float = math.nan
    threshold: float = math.nan
    expected_us: float | None = None
    slow_vs_class: bool = False
    slow_vs_expectation: bool = False

    @property
    def slow(self) -> bool:
        return self.slow_vs_class or self.slow_vs_expectation


def _cls(a_host: str, b_host: str) -> str:
    return "intra-node" if a_host == b_host else "inter-node"


def link_passes(recs: list[dict], hostnames: list[str]) -> list[LinkPass]:
    """The link probes of a run, one entry per link and pass (no judgement yet)."""
    out = []
    for r in recs:
        if r.get("experiment") != EXPERIMENT or r.get("probe") not in LINK_PROBES or not r.get("samples_us"):
            continue
        a, b = int(r["src"]), int(r["dst"])
        ha, hb = hostnames[a], hostnames[b]
        out.append(
            LinkPass(
                probe=r["probe"],
                src=a,
                dst=b,
                pass_no=int(r.get("pass", 1)),
                size_bytes=int(r["size_bytes"]),
                cls=_cls(ha, hb),
                src_host=ha,
                dst_host=hb,
                median_us=metrics.percentile(r["samples_us"], 50),
                ci_us=metrics.median_ci(r["samples_us"], CONFIDENCE),
                label=r["label"],
            )
        )
    return out


def judge_links(links: list[LinkPass], expect_gbps: float | None = None) -> None:
    """Set reference, threshold and the slow flags of every link pass (in place)."""
    groups: dict[tuple, list[LinkPass]] = defaultdict(list)
    for lp in links:
        groups[(lp.probe, lp.cls, lp.pass_no)].append(lp)
    for (probe, cls, _), group in groups.items():
        meds = [lp.median_us for lp in group]
        ref = statistics.median(meds)
        logs = [math.log(m / ref) for m in meds if m > 0 and ref > 0]
        spread = MAD_TO_SD * statistics.median([abs(x) for x in logs]) if logs else 0.0
        factor = LATENCY_FACTOR if probe == "latency" else SLOW_FACTOR
        threshold = max(factor, math.exp(NOISE_K * spread))
        for lp in group:
            lp.reference_us, lp.threshold = ref, threshold
            lp.slow_vs_class = len(group) > 1 and lp.ci_us[0] > threshold * ref
            if expect_gbps and probe == "bandwidth" and cls == "inter-node":
                lp.expected_us = lp.size_bytes / (expect_gbps * 1e3)
                lp.slow_vs_expectation = lp.ci_us[0] > SLOW_FACTOR * lp.expected_us


def rate_gbps(size_bytes: int, us: float) -> float:
    return size_bytes / (us * 1e3) if us > 0 else math.inf


def fmt_rate(gbps: float) -> str:
    """A rate for people: ``310 MB/s``, ``1.41 GB/s`` (suite.metrics.format_rate_gbps)."""
    return metrics.format_rate_gbps(gbps)


def link_name(probe: str, a: int, b: int, hosts: list[str]) -> str:
    arrow = "->" if probe == "bandwidth" else "<->"
    return f"{a} ({hosts[a]}) {arrow} {b} ({hosts[b]})"


def measured_text(probe: str, size: int, us: float) -> str:
    return f"{metrics.format_time_us(us)} one-way" if probe == "latency" else f"{fmt_rate(rate_gbps(size, us))}"


def link_entries(passes: list[LinkPass]) -> list[dict]:
    """One entry per link (probe, src, dst) over its passes; slow only when slow in every pass."""
    by_link: dict[tuple, list[LinkPass]] = defaultdict(list)
    for lp in passes:
        by_link[(lp.probe, lp.src, lp.dst)].append(lp)
    links = []
    for (probe, a, b), lps in sorted(by_link.items()):
        lps.sort(key=lambda x: x.pass_no)
        med = statistics.median(lp.median_us for lp in lps)
        ref = statistics.median(lp.reference_us for lp in lps)
        entry = {
            "probe": probe,
            "src": a,
            "dst": b,
            "src_host": lps[0].src_host,
            "dst_host": lps[0].dst_host,
            "class": lps[0].cls,
            "size_bytes": lps[0].size_bytes,
            "median_us": med,
            "class_median_us": ref,
            "ratio": med / ref if ref > 0 else math.inf,
            "gbps": None if probe == "latency" else rate_gbps(lps[0].size_bytes, med),
            "expected_us": lps[0].expected_us,
            "slow_vs_class": all(lp.slow_vs_class for lp in lps),
            "slow_vs_expectation": all(lp.slow_vs_expectation for lp in lps),
            "passes": [
                {
                    "pass": lp.pass_no,
                    "median_us": lp.median_us,
                    "ci_us": list(lp.ci_us),
                    "class_median_us": lp.reference_us,
                    "threshold": lp.threshold,
                    "slow": lp.slow,
                    "case": lp.label,
                }
                for lp in lps
            ],
        }
        entry["slow"] = all(lp.slow for lp in lps)
        links.append(entry)
    return links
