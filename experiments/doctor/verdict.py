"""The doctor's verdicts: the slow link, the straggling rank and the weak node, from one stored run.

    python -m experiments.doctor.verdict results/<run>      (make doctor runs the probes, then this)

Reads only the run's stored records (experiments/doctor/cases.py's probes, every rank's own time of every
sample kept), writes ``<run>/doctor.json`` atomically, prints the verdict table, and exits
``EXIT_OK`` (0) when healthy or ``EXIT_FINDING`` (8) when something is wrong. The rules, each a pure
function of the samples (links.py, stragglers.py, the weak node in findings.py; unit-tested on synthetic samples):

**Slow link.** A link is an ordered pair src -> dst for bandwidth (a window of large messages from
src to dst), an unordered pair for latency (a round trip) and for both directions at once. Links
are compared within their class: intra-node (same host) or inter-node, and the same probe. For each
pass, the class's reference is the median over its links of their median time per message, and its
spread the robust (MAD) standard deviation of the links' log-medians. A link is slow in a pass when
the *lower* end of its median's 95% confidence interval (exact binomial, ``metrics.median_ci``) is
beyond ``max(factor, exp(NOISE_K x spread))`` times the reference: worse than the class by more than
both the effect that matters (``SLOW_FACTOR`` 1.5 for bandwidth, ``LATENCY_FACTOR`` 2 for latency) and
the noise the class itself shows. With an expectation (EXPECT_LINK_RATE, else the compose LINK_RATE),
an inter-node bandwidth link is also slow when even the upper end of its bandwidth interval is below
expected / SLOW_FACTOR. A link is named only when it is slow in *every* pass (probes.PASSES, run one
after the other). Half or more of a class being slow leaves no healthy majority to compare with: then
only the expectation can tell (say one).

**Straggler rank.** In every probe where all ranks work at once (the fixed compute, the ring, the
collectives), each sample compares each rank's own time with the median of the other ranks' times in
the same sample. Without a straggler a rank is the slower one with probability 1/2 whatever the
distribution (the ranks are exchangeable); a rank is flagged in a probe when it is slower
significantly more often (one-sided sign test, binomial upper tail < ALPHA / n, Bonferroni over the
ranks) *and* its median time is at least ``STRAGGLER_FACTOR`` (1.25) times the median of the others'
medians. (Counting only how often a rank is *the* slowest would miss two starved ranks that share that
place.) It is named a straggler when flagged in the compute probe (its passes pooled), or in most of
the communication probes; "holds the others back by" is the median over samples of its time minus the
others' median, what the group waits at the next collective. In a communication probe a rank that
*arrives late* (slow before the op) makes every rank wait inside the op, so all their times are equal;
there a rank's time is its own: its sample minus how long it waited inside the op for the last rank to
arrive (``own_times_us``: the latest arrival minus its own, each rank's time from its barrier exit to
its op call, ``rank_arrivals_us``). The late rank keeps its whole time, the others lose their wait, and
the same sign test names it; a rank slow after its op has no wait to lose either way.

**Weak node.** A host with at least two inter-node links (or ranks) in one direction, all of them
affected: all its outgoing bandwidth links slow, all incoming, all its latency pairs, or all its ranks
stragglers. That is one finding (the links and ranks are its evidence), not N; a rank of a host weak by its
links that is a straggler in the communication probes only is part of it (those links carry its own sends).

Anything else is **healthy**: the measured figures per class, and against the expectation when known -- where
the run could have seen what these rules look for. Where its noise hides more than that (detectable.py: per
class the smallest slowdown the rules name at this run's noise, beyond 1.25x its rule), it is **inconclusive**,
with the advice that would resolve it; the exit status stays 0 (nothing was found).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from suite.api import metrics
from suite.api import EXIT_BAD_INPUT, EXIT_FINDING, EXIT_OK
from suite.api import write_json_atomic
from suite.api import declared_link_rate
from suite.api import load_run, records

from .links import (
    CONFIDENCE,
    EXPERIMENT,
    LATENCY_FACTOR,
    NOISE_K,
    SLOW_FACTOR,
    fmt_rate,
    rate_gbps,
    judge_links,
    link_entries,
    link_passes,
)
from .findings import Finding, slow_link_findings, straggler_findings, weak_node_findings, weak_nodes
from . import detectable
from .stragglers import ALPHA, STRAGGLER_FACTOR, pooled_compute, rank_entries


@dataclass
class Diagnosis:
    verdict: str
    """healthy | inconclusive (no finding, but the run's noise hides slowdowns its rules name) | findings |
    no probes"""
    findings: list[Finding]
    slow_links: list[dict]
    stragglers: list[dict]
    weak_nodes: list[dict]
    classes: list[dict]
    ranks: list[dict]
    links: list[dict]
    expectation: dict | None
    rules: dict
    hosts: list[str]
    detectable: list[dict] = field(default_factory=list)
    """Per class (detectable.py): the smallest slowdown this run's noise lets its rule name, against the rule."""
    advice: list[str] = field(default_factory=list)
    """What would narrow the noise, where a class is not conclusive."""

    @property
    def exit_status(self) -> int:
        return EXIT_FINDING if self.findings else EXIT_OK

    @property
    def headline(self) -> str:
        """The verdict in one line: each finding (kind, where, measured vs expected), or healthy. doctor.json
        holds it, the report's health row shows it and docker/first-failure.sh prints it when the doctor's
        exit status ends a compose run."""
        if self.verdict == "inconclusive":
            return f"inconclusive: no finding, but {hidden_text(self.detectable)}; to tell: {'; '.join(self.advice)}"
        if not self.findings:
            return "healthy: no slow link, straggler or weak node" if self.verdict == "healthy" else self.verdict
        said = "; ".join(f"{f.kind.replace('_', ' ')} {f.where}: {f.measured} vs {f.expected}" for f in self.findings)
        return said if len(self.findings) == 1 else f"{len(self.findings)} findings: {said}"

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "exit_status": self.exit_status, "headline": self.headline, **asdict(self)}


# --- the whole diagnosis ----------------------------------------------------------------------------


def expectation(run: dict, recs: list[dict]) -> dict | None:
    """What an inter-node link should carry: EXPECT_LINK_RATE from the run's config, else LINK_RATE (the
    declared rate every reader of the run's link figure uses, suite.model.link_rate)."""
    return declared_link_rate(run)


def diagnose(run: dict) -> Diagnosis:
    """The doctor's verdict on a stored run: slow links, stragglers and weak nodes, each with its evidence."""
    recs = [r for r in records(run) if r.get("experiment") == EXPERIMENT]
    suite_info = (run.get("machine_info") or {}).get("suite") or {}
    hosts = list(suite_info.get("hostnames") or [])
    world = max([int(r.get("world_size", 0)) for r in recs] or [0])
    if len(hosts) < world:
        hosts += [f"rank{r}" for r in range(len(hosts), world)]
    expect = expectation(run, recs)
    rules = {
        "slow_factor": SLOW_FACTOR,
        "latency_factor": LATENCY_FACTOR,
        "noise_k": NOISE_K,
        "straggler_factor": STRAGGLER_FACTOR,
        "alpha": ALPHA,
        "confidence": CONFIDENCE,
    }
    if not recs:
        return Diagnosis(
            verdict="no probes",
            findings=[],
            slow_links=[],
            stragglers=[],
            weak_nodes=[],
            classes=[],
            ranks=[],
            links=[],
            expectation=expect,
            rules=rules,
            hosts=hosts,
        )
    passes = link_passes(recs, hosts)
    judge_links(passes, expect["gbps"] if expect else None)
    links = link_entries(passes)
    slow = [e for e in links if e["slow"]]
    ranks, stragglers = rank_entries(recs, world, hosts)
    weak, used_links, used_ranks = weak_nodes(links, ranks, hosts[:world])
    findings = (
        weak_node_findings(weak, links, stragglers, used_links, used_ranks, hosts)
        + slow_link_findings(slow, used_links, hosts)
        + straggler_findings(stragglers, used_ranks)
    )
    classes = detectable.detectable(passes, pooled_compute(recs)[1], hosts[:world])
    conclusive = all(e["conclusive"] for e in classes)
    return Diagnosis(
        verdict="findings" if findings else "healthy" if conclusive else "inconclusive",
        detectable=classes,
        advice=[] if findings else detectable.advice(run, passes, classes),
        findings=findings,
        slow_links=slow,
        stragglers=stragglers,
        weak_nodes=weak,
        classes=_class_figures(links, expect),
        ranks=ranks,
        links=links,
        expectation=expect,
        rules=rules,
        hosts=hosts[:world],
    )


def _class_figures(links: list[dict], expect: dict | None) -> list[dict]:
    """The healthy figures: per probe and class, the median over links and the range."""
    out = []
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for e in links:
        groups[(e["probe"], e["class"])].append(e)
    for (probe, cls), es in sorted(groups.items()):
        meds = sorted(e["median_us"] for e in es)
        size = es[0]["size_bytes"]
        row = {
            "probe": probe,
            "class": cls,
            "links": len(es),
            "size_bytes": size,
            "median_us": statistics.median(meds),
            "min_us": meds[0],
            "max_us": meds[-1],
        }
        if probe != "latency":
            row["median_gbps"] = rate_gbps(size, row["median_us"])
        if expect and probe == "bandwidth" and cls == "inter-node":
            row["of_expected"] = row["median_gbps"] / expect["gbps"]
        out.append(row)
    return out


# --- output ---------------------------------------------------------------------------------------


def format_verdict(d: Diagnosis) -> str:
    lines = []
    n_hosts = len(set(d.hosts))
    head = f"# doctor: {len(d.hosts)} ranks on {n_hosts} host(s); verdict: " + (
        "HEALTHY"
        if d.verdict == "healthy"
        else f"INCONCLUSIVE (exit {d.exit_status}: nothing found, nothing ruled out)"
        if d.verdict == "inconclusive"
        else f"{len(d.findings)} FINDING(S) (exit {d.exit_status})"
        if d.findings
        else d.verdict
    )
    lines.append(head)
    if d.findings:
        lines.append(f"#  {'finding':<10} {'where':<52} {'measured':>14} {'expected':>26} {'ratio':>6}  confidence")
        for f in d.findings:
            lines.append(
                f"   {f.kind:<10} {f.where:<52} {f.measured:>14} {f.expected:>26} {f.ratio:>z6.2f}  {f.confidence}"
            )
            if f.evidence:
                shown = ", ".join(f.evidence[:6]) + (f", ... ({len(f.evidence)} in all)" if len(f.evidence) > 6 else "")
                lines.append(f"   {'':<10} evidence: {shown}")
    lines.append("# measured link figures (median over links of each link's median; the range over links)")
    for c in d.classes:
        size = metrics.format_size(c["size_bytes"])
        if c["probe"] == "latency":
            t = metrics.format_time_us
            fig = f"{t(c['median_us'])} one-way at {size}B ({t(c['min_us'])} .. {t(c['max_us'])})"
        else:
            fig = (
                f"{fmt_rate(c['median_gbps'])} per {'direction' if c['probe'] == 'bandwidth' else 'pair, both ways'}"
                f" at {size}B ({fmt_rate(rate_gbps(c['size_bytes'], c['max_us']))} .. "
                f"{fmt_rate(rate_gbps(c['size_bytes'], c['min_us']))})"
            )
        if "of_expected" in c:
            fig += f" = {c['of_expected']:z.0%} of the expected {d.expectation['rate']}"
        lines.append(f"   {c['class']:<11} {c['probe']:<14} {c['links']:>3} links  {fig}")
    if d.expectation is None:
        lines.append(
            "#  no link expectation (EXPECT_LINK_RATE=10gbit, or the compose LINK_RATE): "
            "links are compared with their class only"
        )
    lines += detectable_lines(d)
    comp = [r for r in d.ranks if r["compute_median_us"] is not None]
    if comp:
        meds = [r["compute_median_us"] for r in comp]
        lines.append(
            f"   compute probe per rank: {metrics.format_time_us(min(meds))} .. {metrics.format_time_us(max(meds))} "
            f"(median {metrics.format_time_us(statistics.median(meds))})"
        )
    return "\n".join(lines) + "\n"


def hidden_text(classes: list[dict]) -> str:
    """The classes that are not conclusive: ``a link slowed up to 4.2x (its rule: 1.5x) hides in this run's
    noise``."""
    said = [
        f"{e['what']} slowed up to {e['detectable']:z.3g}x (its rule: {e['rule']:z.3g}x)"
        for e in classes
        if not e["conclusive"]
    ]
    return f"{'; '.join(said)} could hide in this run's noise"


def detectable_lines(d: Diagnosis) -> list[str]:
    """What this run could have found, per class (detectable.py), and the advice where it falls short."""
    if not d.detectable:
        return []
    lines = ["# what this run could find: the smallest slowdown its rules name at this run's noise (half / all)"]
    for e in d.detectable:
        fig = (
            "not judged"
            if not e["judged"]
            else f"{e['detectable']:z.3g}x / {e['detectable_all']:z.3g}x"
            + ("" if e["conclusive"] else f"  NOT CONCLUSIVE: its rule is {e['rule']:z.3g}x")
        )
        lines.append(f"   {e['kind']:<5} {e['what']:<26} {fig}" + (f" ({e['note']})" if e["note"] else ""))
    if d.advice:
        lines.append(f"#  to tell: {'; '.join(d.advice)}")
    return lines


def write(run_dir: str | Path, d: Diagnosis) -> Path:
    path = Path(run_dir) / "doctor.json"
    write_json_atomic(path, d.as_dict())
    return path


def run_doctor(run_dir: str | Path, out=None) -> int:
    """Diagnose a stored run: doctor.json, the verdict table (on ``out``, default the current stdout);
    EXIT_FINDING when something is wrong."""
    out = out or sys.stdout
    d = diagnose(load_run(run_dir))
    if d.verdict == "no probes":
        print(f"error: {run_dir} has no doctor probes (run make doctor, or EXPERIMENTS=doctor)", file=sys.stderr)
        return EXIT_BAD_INPUT
    path = write(run_dir, d)
    out.write(format_verdict(d))
    out.write(f"# doctor.json: {path}\n")
    out.flush()
    return d.exit_status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.doctor.verdict", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run directory (results/<run-id>) or its bench.json")
    a = ap.parse_args(argv)
    p = Path(a.run)
    if not (p / "bench.json").is_file() and not p.is_file():
        print(f"error: {a.run} is not a run (no bench.json)", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run_doctor(p.parent if p.is_file() else p)


if __name__ == "__main__":
    sys.exit(main())
