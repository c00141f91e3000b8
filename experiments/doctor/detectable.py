"""What the doctor could have found: per class -- a link against the other links of its probe and class, a rank
against the other ranks, a node against the other nodes -- the smallest slowdown its own rules (links.py,
stragglers.py, findings.py) would have named in this run, given the run's own noise. Like the comparison's
"detectable" line, it is the answer to "healthy, or just too noisy to tell?". Reads the judged links and the
stored records only.

**A link** slowed by a factor s has its median's interval scaled by s, so it is named slow in a pass once
s x (its interval's lower end) exceeds the class's threshold x reference: s = threshold x reference / lower end,
the largest over its passes (it must be slow in every one). The class's figure is the median over its links (a
slowdown of that size is found on half of them). A class of one link has nothing to compare with: it is not
judged, and says so.

**A rank** slowed by s is slower than the others' median in sample i once s > others_i / own_i; the sign test
needs k of the m pooled compute samples (the least k with binomial tail < ALPHA / n), so s must exceed the k-th
smallest of those ratios, and its median must reach STRAGGLER_FACTOR x the others'. The class's figure is the
median over ranks.

**A node** (with three hosts or more: with two, a node's inter-node links are half their class and there is no
healthy majority) needs every inter-node link it sends on slowed: the largest of their figures; or every one of
its ranks a straggler: the largest of theirs. The class's figure is the median over hosts of the smaller.

The doctor trusts its verdict where every judged class's figure is within NOISE_ALLOWANCE (1.25x) of the rule it
applies (1.5x for a bandwidth link, 2x for a latency pair, 1.25x for a rank). Beyond it, a run without findings
is INCONCLUSIVE, not healthy, with the advice that would narrow the noise (its exit status stays 0: nothing was
found).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from .links import LATENCY_FACTOR, SLOW_FACTOR, LinkPass
from .stragglers import ALPHA, STRAGGLER_FACTOR, binomial_upper_tail

NOISE_ALLOWANCE = 1.25
"""How far beyond its rule a class's detectable slowdown may lie and the verdict still stand: the rules are set
at effects that matter (1.5x a link's class), one a quarter larger still matters (1.875x), and a verdict that
could miss it is no verdict. (Medians known to ±10% over two passes cost about 1.13x.)"""


def link_detectable(passes: list[LinkPass]) -> list[dict]:
    """Per probe and link class: the slowdown of a link that its passes' noise lets the class rule name (for
    half the links, and for every one), against the rule's own factor; inf for a class of one link."""
    by_link: dict[tuple, list[LinkPass]] = defaultdict(list)
    for lp in passes:
        by_link[(lp.probe, lp.cls, lp.src, lp.dst)].append(lp)
    per_class: dict[tuple, list[float]] = defaultdict(list)
    for (probe, cls, _, _), lps in by_link.items():
        per_class[(probe, cls)].append(max(_pass_detect(lp) for lp in lps))
    out = []
    for (probe, cls), figures in sorted(per_class.items()):
        one = len(figures) < 2
        rule = LATENCY_FACTOR if probe == "latency" else SLOW_FACTOR
        out.append(
            _entry(
                "link",
                f"{cls} {probe}",
                math.inf if one else statistics.median(figures),
                math.inf if one else max(figures),
                rule,
                "one link in its class: nothing to compare it with" if one else "",
            )
        )
    return out


def _pass_detect(lp: LinkPass) -> float:
    """The slowdown that makes this link pass slow against its class (inf: a degenerate interval)."""
    lo = lp.ci_us[0]
    return lp.threshold * lp.reference_us / lo if lo > 0 else math.inf


def rank_detect(pooled: list[list[float]]) -> list[float]:
    """Per rank, the smallest slowdown the straggler rule names from these samples (every rank's time in each,
    the compute probe's passes pooled); inf where the samples are too few for the sign test to pass."""
    n = len(pooled)
    m = min((len(r) for r in pooled), default=0)
    if n < 2 or m < 1:
        return []
    k = next((k for k in range(m + 1) if binomial_upper_tail(k, m, 0.5) < ALPHA / n), None)
    meds = [statistics.median(r[:m]) for r in pooled]
    out = []
    for r in range(n):
        others_at = [statistics.median(pooled[j][i] for j in range(n) if j != r) for i in range(m)]
        ratios = sorted(o / x if x > 0 else math.inf for o, x in zip(others_at, pooled[r]))
        sign = math.inf if k is None or k == 0 else ratios[k - 1]
        others = statistics.median(meds[j] for j in range(n) if j != r)
        effect = STRAGGLER_FACTOR * others / meds[r] if meds[r] > 0 else math.inf
        out.append(max(sign, effect))
    return out


def rank_detectable(per_rank: list[float]) -> list[dict]:
    """The rank class's entry (none without a compute probe)."""
    if not per_rank:
        return []
    return [_entry("rank", "straggler", statistics.median(per_rank), max(per_rank), STRAGGLER_FACTOR, "")]


def node_detectable(links_of: dict[str, list[float]], ranks_of: dict[str, list[float]]) -> list[dict]:
    """The node class's entry from each host's inter-node link figures (the links it sends on) and its ranks'
    figures; none on one host, not judged by its links on two."""
    hosts = sorted(set(links_of) | set(ranks_of))
    if len(hosts) < 2:
        return []
    per_host = []
    for h in hosts:
        via_links = max(links_of.get(h) or [math.inf]) if len(hosts) > 2 else math.inf
        via_ranks = max(ranks_of.get(h) or [math.inf]) if len(ranks_of.get(h) or []) >= 2 else math.inf
        per_host.append(min(via_links, via_ranks))
    why = "" if len(hosts) > 2 else "two hosts: by their ranks only (each host's links are half their class)"
    return [_entry("node", "weak node", statistics.median(per_host), max(per_host), SLOW_FACTOR, why)]


def _entry(kind: str, what: str, half: float, every: float, rule: float, note: str) -> dict:
    return {
        "kind": kind,
        "what": what,
        "detectable": half,
        "detectable_all": every,
        "rule": rule,
        "judged": not note.startswith("one link"),
        "conclusive": half <= rule * NOISE_ALLOWANCE or note.startswith("one link"),
        "note": note,
    }


def sending_links(passes: list[LinkPass]) -> dict[str, list[float]]:
    """Each host -> the detectable slowdown of each inter-node bandwidth link it sends on (the largest over
    the link's passes)."""
    per: dict[tuple, float] = {}
    for lp in passes:
        if lp.probe == "bandwidth" and lp.cls == "inter-node":
            key = (lp.src_host, lp.src, lp.dst)
            per[key] = max(per.get(key, 0.0), _pass_detect(lp))
    out: dict[str, list[float]] = defaultdict(list)
    for (host, _, _), s in per.items():
        out[host].append(s)
    return dict(out)


def detectable(passes: list[LinkPass], pooled: list[list[float]], hosts: list[str]) -> list[dict]:
    """Every class's entry: the links' (per probe and class), the ranks' and the nodes'."""
    ranks = rank_detect(pooled)
    ranks_of: dict[str, list[float]] = defaultdict(list)
    for r, s in enumerate(ranks):
        ranks_of[hosts[r]].append(s)
    return link_detectable(passes) + rank_detectable(ranks) + node_detectable(sending_links(passes), ranks_of)


def advice(run: dict, passes: list[LinkPass], entries: list[dict]) -> list[str]:
    """What would narrow the noise of the classes that are not conclusive: one rank per core where the ranks
    outnumber the cores, more samples where the links' intervals are wide, a quieter machine where the links of
    one class differ among themselves; empty when every class is conclusive."""
    if all(e["conclusive"] for e in entries):
        return []
    out = []
    su = (run.get("machine_info") or {}).get("suite") or {}
    for name, h in (su.get("hosts") or {}).items():
        share = h.get("cpu_share") or {}
        cores = share.get("usable_cpus") or h.get("affinity_cpus") or h.get("cpu_count")
        ranks = share.get("ranks") or len(h.get("ranks") or [])
        if cores and ranks > cores:
            fits = max(1, int(cores))
            out.append(f"NPROC={fits} (one rank per core: {ranks} ranks share {cores:zg} cores on {name})")
            break
    widths = [(lp.ci_us[1] - lp.ci_us[0]) / (2 * lp.median_us) for lp in passes if lp.median_us > 0]
    if widths and statistics.median(widths) > 0.10:
        iters = ((run.get("suite") or {}).get("config") or {}).get("iters")
        more = f"ITERS={max(20, 2 * iters)}" if isinstance(iters, int) else "a larger ITERS"
        out.append(f"{more} (more samples: half the links' medians are uncertain by more than ±10%)")
    spread = max(
        (lp.threshold / (LATENCY_FACTOR if lp.probe == "latency" else SLOW_FACTOR) for lp in passes), default=1
    )
    if spread > NOISE_ALLOWANCE:
        out.append(
            f"a quieter machine (the links of one class differ so much among themselves that the class's threshold "
            f"widens {spread:z.3g}x beyond its rule: other load, or ranks that share cores)"
        )
    return out or ["more samples (ITERS) or a quieter machine"]
