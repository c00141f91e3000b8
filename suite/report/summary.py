"""The report's summary, below its pictures: (what, finding) rows a reader can act on -- status, what
was measured, peak bus bandwidths, each experiment's own summary hook, unstable cases, skipped cases and
the comparison with a baseline. Reads records only."""

from __future__ import annotations

import math
from collections import OrderedDict

from suite import registry, results
from suite.model.link_rate import configured_link_rate
from suite.report.environment import fmt_bytes
from suite.report.specs import library_collectives
from suite.report.tables import precision_missed
from suite.system import cpu_load, cpuidle

UNSTABLE_CI_PCT = 10.0
"""A case is unstable when the 95% confidence interval of its median (the number the tables print) is
wider than ±10% of it: its p05-p95 band is so wide relative to the median, or its samples so few, that
the median cannot be trusted to 10%. (The band alone flags almost every case on a shared CPU: p95 tails
of 2-3x the median are normal there, and the median is still known to a few percent.)"""


def summary_rows(
    run: dict, base: tuple[str, list[list[dict]]] | None = None, memo: dict | None = None
) -> list[tuple[str, str]]:
    """The report's summary (below its pictures): (what, finding) rows a reader can act on, before any detail
    (``memo``: what the experiments' report hooks found already, by experiment)."""
    recs = results.records(run)
    return [
        _status_row(run, recs),
        _measured_row(run, recs),
        *cpu_rows(run),
        *idle_rows(run),
        *_peak_rows(run, recs),
        *_hook_rows(run, {} if memo is None else memo),
        *_precision_rows(run, recs),
        _unstable_row(run, recs),
        _skipped_row(run),
        *_baseline_rows(recs, base),
    ]


def _hostnames(run: dict) -> list[str]:
    """Every rank's host name, in rank order."""
    return (((run.get("machine_info") or {}).get("suite") or {}).get("hostnames")) or []


def _status_row(run: dict, recs: list[dict]) -> tuple[str, str]:
    """Whether the run completed, its exit status and what it means, and how many cases were right."""
    from suite.common.failures import MEANING

    st = run.get("suite") or {}
    status = st.get("exit_status", st.get("exitstatus"))
    wrong = sum(1 for r in recs if (r.get("n_wrong") or 0) > 0)
    return (
        "status",
        f"{'complete' if st.get('complete') else 'PARTIAL (interrupted or still running)'}; exit status "
        f"{status} ({MEANING.get(status, 'unknown') if isinstance(status, int) else '?'}); "
        f"{len(recs)} cases measured, {wrong} with wrong results, "
        f"{sum(1 for r in recs if r.get('checked') is False)} with nothing to check",
    )


def _measured_row(run: dict, recs: list[dict]) -> tuple[str, str]:
    """Cases per experiment, ranks and hosts, and so which link classes the run could see."""
    hosts = _hostnames(run)
    exps = OrderedDict()
    for r in recs:
        exps[r["experiment"]] = exps.get(r["experiment"], 0) + 1
    n_hosts = len(set(hosts))
    return (
        "measured",
        f"{', '.join(f'{e} ({n})' for e, n in exps.items()) or 'nothing'}; {ranks_on_hosts(hosts)}; link classes: "
        f"{'intra-node and inter-node' if n_hosts > 1 else 'intra-node only (one host)'}",
    )


def ranks_on_hosts(hosts: list[str]) -> str:
    """``4 ranks on 1 host (vm)``; ``8 ranks on 2 hosts (node0: 4, node1: 4)``."""
    per: OrderedDict = OrderedDict()
    for h in hosts:
        per[h] = per.get(h, 0) + 1
    if len(per) == 1:
        return f"{len(hosts)} ranks on 1 host ({next(iter(per))})"
    shown = ", ".join(f"{h}: {n}" for h, n in list(per.items())[:6]) + (", ..." if len(per) > 6 else "")
    return f"{len(hosts)} ranks on {len(per)} hosts ({shown})"


def world_text(run: dict, recs: list[dict]) -> str:
    """Which backend(s) ran on which device, with which world sizes, and the ranks' hosts:
    ``gloo on cpu; 2 ranks on 1 host (vm)``."""
    lanes: OrderedDict = OrderedDict()
    for r in recs:
        lanes.setdefault((r.get("backend"), r.get("device")), set()).add(r.get("world_size"))
    su = (run.get("machine_info") or {}).get("suite") or {}
    if not lanes and su.get("backend"):
        lanes[(su.get("backend"), su.get("device"))] = {su.get("world_size")}
    said = " and ".join(f"{b} on {d}" for b, d in lanes) or "no backend recorded"
    worlds = sorted({n for ns in lanes.values() for n in ns if isinstance(n, int)})
    hosts = _hostnames(run)
    where = ranks_on_hosts(hosts) if hosts else "hosts not recorded"
    if worlds and hosts and worlds != [len(hosts)]:
        where += f" (cases on {'/'.join(map(str, worlds))} ranks)"
    return f"backend {said}; {where}"


def _peak_rows(run: dict, recs: list[dict]) -> list[tuple[str, str]]:
    """The highest bus bandwidth of each of the library's collectives (against LINK_RATE across hosts)."""
    n_hosts = len(set(_hostnames(run)))
    rate = configured_link_rate(run.get("machine_info") or {})
    peaks: dict = {}
    for r in recs:
        if library_collectives(r.get("experiment")) and r.get("busbw_gbps") and r["op"] != "barrier":
            if r["op"] not in peaks or r["busbw_gbps"] > peaks[r["op"]]["busbw_gbps"]:
                peaks[r["op"]] = r
    rows = []
    for op, r in peaks.items():
        vs = ""
        if rate and n_hosts > 1:
            vs = f" = {r['busbw_gbps'] / rate[1]:z.0%} of the inter-node LINK_RATE {rate[0]}"
        rows.append(
            (
                f"peak {op}",
                f"{r['busbw_gbps']:z.3g} GB/s busbw at {fmt_bytes(r['size_bytes'])} "
                f"({r.get('variant', op)}, {r.get('dtype')}, {r['world_size']} ranks){vs}",
            )
        )
    return rows


def _hook_rows(run: dict, memo: dict) -> list[tuple[str, str]]:
    """One row per experiment with a ``summary`` hook (also without its records: the row says how to get
    them), each with its share of ``memo``."""
    return [
        spec.summary(run, memo.setdefault(name, {}))
        for name, spec in registry.discover().items()
        if spec.summary is not None
    ]


def _spread_text(r: dict) -> str:
    """How wide a record's samples are around its median, with how many there were."""
    lo, hi = results.tail_us(r, "p05_us"), results.tail_us(r, "p95_us")
    n = results.n_samples(r)
    if lo is not None and hi is not None:
        return f"p05-p95 band {(hi - lo) / r['p50_us']:z.1f}x the median ({n} samples)"
    return f"min-max {(r['max_us'] - r['min_us']) / r['p50_us']:z.1f}x the median ({n} samples, too few for a p95)"


def unstable_cases(recs: list[dict]) -> tuple[list[tuple[float, dict]], list[tuple[float, dict]]]:
    """(the cases whose median is uncertain by more than UNSTABLE_CI_PCT, widest first; every case with a CI),
    each as (its CI's half-width in %, the record); not the oversubscribed pass's (its times measure CPU
    contention: suite.results.communication_records)."""
    recs = results.communication_records(recs)
    widths = [(w, r) for r in recs for w in [results.median_ci_pct(r)] if w is not None]
    return sorted([(w, r) for w, r in widths if w > UNSTABLE_CI_PCT], key=lambda x: -x[0]), widths


def _unstable_row(run: dict, recs: list[dict]) -> tuple[str, str]:
    """The cases whose median is uncertain by more than UNSTABLE_CI_PCT, widest first, their likely cause
    (the machine's load, ranks that outnumber the cores) and what to do; else how well every median is known."""
    unstable, widths = unstable_cases(recs)
    if not unstable:
        return ("unstable cases", _known_text(widths, len(results.communication_records(recs))))
    causes = load_causes(run)
    return (
        "unstable cases",
        f"{len(unstable)} of {len(widths)}: the median is uncertain by more than "
        f"±{UNSTABLE_CI_PCT:z.0f}% (95% CI; widest: "
        + ", ".join(
            f"{r['experiment']} {r.get('label') or r['op']} ±{w:z.0f}%, " + _spread_text(r) for w, r in unstable[:3]
        )
        + ")"
        + "".join(f"; likely cause: {c}" for c in causes[:1])
        + "; to act on them: more ITERS, PRECISION=5 (sample until the median's CI is ±5%), "
        "or a quieter machine",
    )


def _known_text(widths: list[tuple[float, dict]], n_recs: int) -> str:
    """No case unstable: the widest CI there is, as the bound every median is known to (rounded up, so the
    claim holds), and the cases too short to have one."""
    if not widths:
        return f"not known: none of the {n_recs} cases has the 2 samples a CI needs"
    widest = math.ceil(max(w for w, _ in widths) * 10) / 10
    short = n_recs - len(widths)
    return (
        f"none: every median is known to ±{widest:z.1f}% or better (95% CI)"
        if not short
        else f"none: the medians of {len(widths)} cases are known to ±{widest:z.1f}% or better (95% CI); "
        f"{short} cases have too few samples for a CI"
    )


def _host_shares(run: dict) -> dict[str, dict]:
    """Each host's ranks against its cores (``cpu_load.cpu_share``), as the run recorded it, or as it follows
    from what a run stored before that records (each host's ranks, affinity and cgroup quota, rank 0's
    intra-op threads)."""
    su = (run.get("machine_info") or {}).get("suite") or {}
    threads = (su.get("versions") or {}).get("num_threads")
    out = {}
    for name, h in (su.get("hosts") or {}).items():
        share = h.get("cpu_share")
        if share is None and h.get("ranks"):
            usable = cpu_load.usable_cpus(h.get("affinity_cpus"), (h.get("container") or {}).get("cgroup_cpus"))
            share = cpu_load.cpu_share(len(h["ranks"]), threads, usable)
        if share is not None:
            out[name] = share
    return out


def cpu_rows(run: dict) -> list[tuple[str, str]]:
    """One row per way the hosts' ranks outnumber their cores (none when they fit), naming the hosts and
    the numbers it distorts."""
    shares = _host_shares(run)
    lines: OrderedDict = OrderedDict()
    for name, share in shares.items():
        line = cpu_load.describe_share(share)
        if line is not None:
            lines.setdefault(line, []).append(name)
    one_host = len(shares) == 1
    return [
        ("CPU oversubscribed", line if one_host else f"{line} (host {', '.join(hosts)})")
        for line, hosts in lines.items()
    ]


def idle_rows(run: dict) -> list[tuple[str, str]]:
    """One row where the run's hosts' idle CPUs halt at once (``cpuidle.halts_at_once``, as each host recorded its
    idle states), naming the hosts where not all of them do; none otherwise, and none for a run stored before hosts
    recorded it."""
    hosts = ((run.get("machine_info") or {}).get("suite") or {}).get("hosts") or {}
    halting = [name for name, h in hosts.items() if cpuidle.halts_at_once(h.get("cpuidle"))]
    if not halting:
        return []
    where = "" if len(halting) == len(hosts) else f" (host {', '.join(halting)})"
    return [("CPUs halt when idle", cpuidle.WAKE_UP + where)]


def load_causes(run: dict, load_only: bool = False) -> list[str]:
    """Why medians may wander, per host (``cpu_load.load_contention``): its load average (the peak of the
    start and, for rank 0's host, of the samples through the run) against its CPUs, or (not ``load_only``) its
    ranks against its usable cores; empty when neither says so."""
    su = (run.get("machine_info") or {}).get("suite") or {}
    hosts = su.get("hosts") or {}
    first = (su.get("hostnames") or [None])[0]
    during = su.get("load_avg_run") or {}
    out = []
    for name, share in _host_shares(run).items():
        h = hosts.get(name) or {}
        peak = cpu_load.peak_load(
            h.get("load_avg_start"),
            [during["peak_1min"]] if name == first and during.get("peak_1min") is not None else None,
        )
        if load_only:
            share = {k: v for k, v in share.items() if k != "oversubscribed"}
        cause = cpu_load.load_contention(peak, h.get("cpu_count"), share)
        if cause is not None:
            out.append(cause if len(hosts) == 1 else f"{cause} (host {name})")
    return out


def _precision_rows(run: dict, recs: list[dict]) -> list[tuple[str, str]]:
    """Precision mode (PRECISION): how many cases reached the target, how close the others came, and the
    iterations that ran; none without it."""
    timed = [r for r in recs if "precision_reached" in r]
    if not timed:
        return []
    cfg = (run.get("suite") or {}).get("config") or {}
    target = cfg.get("precision_pct")
    goal = f"target ±{target:z.3g}%" if isinstance(target, (int, float)) else "target"
    missed = precision_missed(timed)
    iters = sorted(r["iterations"] for r in timed)
    ran = f"{iters[0]}-{iters[-1]} iterations ran" if iters[0] != iters[-1] else f"{iters[0]} iterations ran"
    if not missed:
        return [("precision", f"{goal} reached by all {len(timed)} cases; {ran}")]
    got = [ci for r in missed if (ci := results.median_ci_pct(r)) is not None]
    span = f"; they got ±{min(got):z.1f}% (best) to ±{max(got):z.1f}%" if got else ""
    cap = cfg.get("max_time_s")
    why = f"MAX_TIME_S={cap:zg} s per case ended them" if isinstance(cap, (int, float)) else "the time cap ended them"
    reached = f"; reached by {len(timed) - len(missed)}" if len(missed) < len(timed) else ""
    return [("precision", f"{goal} MISSED by {len(missed)} of {len(timed)} cases ({why}){span}{reached}; {ran}")]


def _skipped_row(run: dict) -> tuple[str, str]:
    """The skipped cases by reason, most common first."""
    st = run.get("suite") or {}
    skipped = st.get("skipped") or []
    if not skipped:
        return ("skipped", "nothing" if "skipped" in st else "not recorded by this run")
    by_reason: OrderedDict = OrderedDict()
    for sk in skipped:
        by_reason.setdefault(sk["reason"], []).append(sk["case"])
    return (
        "skipped",
        f"{len(skipped)} cases: "
        + "; ".join(
            f"{len(cs)} {_experiment_of(cs)}: {reason}"
            for reason, cs in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))
        ),
    )


def _experiment_of(nodeids: list[str]) -> str:
    names = sorted({registry.experiment_of(n) for n in nodeids})
    return "/".join(names) + " case" + ("s" if len(nodeids) > 1 else "")


def _baseline_rows(recs: list[dict], base: tuple[str, list[list[dict]]] | None) -> list[tuple[str, str]]:
    """The run against a baseline's runs, case by case (suite.report.compare); none without one."""
    if base is None:
        return []
    from suite.report.compare import compare_runs
    from suite.report.compare.text import count_line, gate_line

    name, base_runs = base
    c = compare_runs(base_runs, [recs], base_name=name, new_name="this run")
    return [
        (
            "against " + name,
            f"{c.overall} overall (median case ratio {c.overall_ratio:z.3f}, CI "
            f"[{c.overall_ci[0]:z.3f}, {c.overall_ci[1]:z.3f}]); {count_line(c)}; {gate_line(c)}",
        )
    ]
