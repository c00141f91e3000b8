"""A report of a stored run: Report, and build_report, which assembles it -- the environment, a section per
experiment (its own, or suite/report/sections.py's), the α–β fits, the prediction -- and the summary and
environment rows. Reads records only; renders nothing (suite/report/render.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from suite import registry, results
from suite.model.link_rate import configured_link_rate
from suite.report.fits import FitRow, fit_rows, fit_sweeps
from suite.report.sections import PlotNames, Section, experiment_section, prediction_section
from suite.report.series import groups_by_experiment
from suite.report.specs import library_collectives, spec_value


@dataclass(kw_only=True)
class Report:
    run_name: str
    environment: list[tuple[str, str]]
    sections: list[Section]
    fits: list[FitRow]
    links: dict
    link_rate: tuple[str, float] | None
    n_records: int
    summary: list[tuple[str, str]] = field(default_factory=list)
    """What the run means, first: status, what was measured, peaks, health, unstable, skipped, baseline."""


def _fmt_bytes(n) -> str:
    if not n:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def environment_summary(run: dict) -> list[tuple[str, str]]:
    """(name, value) rows: run, config, versions, hosts, relevant environment variables."""
    mi = run.get("machine_info") or {}
    su = mi.get("suite") or {}
    st = run.get("suite") or {}
    cfg = st.get("config") or {}
    rows = [
        ("run id", str(st.get("run_id"))),
        ("date (UTC)", str(run.get("datetime", "?"))),
        (
            "status",
            f"{'complete' if st.get('complete') else 'PARTIAL (interrupted or still running)'}, "
            f"exit status {st.get('exit_status', st.get('exitstatus'))}, {st.get('n_records', '?')} records",
        ),
    ]
    if cfg:
        rows.append(
            (
                "config",
                f"backend={cfg.get('backend')} device={cfg.get('device')} sizes "
                f"{_fmt_bytes(cfg.get('min_bytes'))}..{_fmt_bytes(cfg.get('max_bytes'))} x{cfg.get('step_factor')}"
                f" dtypes={','.join(cfg.get('dtypes') or [])} iters={cfg.get('iters')} warmup="
                f"{cfg.get('warmup_iters')} timing={cfg.get('timing_mode')}",
            )
        )
    if su:
        rows.append(
            (
                "world",
                f"{len(su.get('hostnames') or [])} ranks on {su.get('n_hosts')} host(s): "
                f"{', '.join(sorted(set(su.get('hostnames') or [])))}",
            )
        )
        v = su.get("versions") or {}
        rows.append(
            (
                "versions",
                f"torch {v.get('torch')}, CUDA {v.get('cuda')}, NCCL {v.get('nccl')}, gloo "
                f"{v.get('gloo')}, mpi {v.get('mpi')}, ucc {v.get('ucc')}; python "
                f"{mi.get('python_version')}; torch threads {v.get('num_threads')}",
            )
        )
        for name, h in (su.get("hosts") or {}).items():
            c = h.get("container") or {}
            rows.append(
                (
                    f"host {name}",
                    f"ranks {h.get('ranks')}; {h.get('cpu_model')} x{h.get('cpu_count')} "
                    f"(affinity {h.get('affinity_cpus')}), {_fmt_bytes(h.get('memory_bytes'))}"
                    f" RAM, kernel {h.get('kernel')}; container={c.get('in_container')} "
                    f"cgroup cpus={c.get('cgroup_cpus')} mem={_fmt_bytes(c.get('cgroup_memory_bytes'))}"
                    f" /dev/shm={_fmt_bytes(c.get('dev_shm_bytes'))}",
                )
            )
            env = h.get("env") or {}
            if env:
                rows.append((f"env {name}", " ".join(f"{k}={v}" for k, v in env.items())))
        gpus = (su.get("gpu") or {}).get("gpus") or []
        if gpus:
            rows.append(
                (
                    "GPUs",
                    "; ".join(f"{g.get('index')}: {g.get('name')} ({_fmt_bytes(g.get('memory_bytes'))})" for g in gpus)
                    + f"; driver {(su.get('gpu') or {}).get('driver')}",
                )
            )
        rows.append(("suite commit", str(su.get("suite_commit"))))
    ci = run.get("commit_info") or {}
    if ci.get("id"):
        rows.append(("git", f"{ci.get('branch')} {ci.get('id', '')[:12]}{' (dirty)' if ci.get('dirty') else ''}"))
    return rows


def build_report(
    run: dict, run_name: str = "", predict_doc: dict | None = None, base: tuple[str, list[list[dict]]] | None = None
) -> Report:
    """Analyse a loaded run: sections with plots and tables, α–β fits, ring-model comparison (and the
    prediction section, with the extrapolation table of ``predict_doc``, the run's predict.json)."""
    recs = results.records(run)
    link_rate = configured_link_rate(run.get("machine_info") or {})
    # each experiment's place: its spec's report_order (the doctor's verdict leads, then collectives), then
    # the records' order
    by_exp = OrderedDict(
        sorted(groups_by_experiment(recs).items(), key=lambda kv: spec_value(kv[0], "report_order", 0))
    )
    sweeps = fit_sweeps(recs, by_exp)  # fits for every sweep (a group with >= 2 sizes)

    fits: list[FitRow] = []
    sections: list[Section] = []
    plot_name = PlotNames()
    memo: dict = {}  # what an experiment's report hooks share within this report (the doctor's diagnosis)
    for exp, groups in by_exp.items():
        own = spec_value(exp, "report_section", None)
        if own is not None:  # an experiment that draws its own section (the doctor's verdicts)
            sections.append(own(run, plot_name, memo.setdefault(exp, {})))
            continue
        sections.append(experiment_section(exp, groups, sweeps, link_rate, plot_name))
        for gk, backend, device, n in groups:
            if (exp, gk, backend, device, n) in sweeps.series:
                fits += fit_rows((exp, gk, backend, device, n), sweeps, link_rate)
    pred = prediction_section(run, predict_doc)
    if pred is not None:
        sections.append(pred)

    return Report(
        run_name=run_name,
        environment=environment_summary(run),
        sections=sections,
        fits=fits,
        links=sweeps.links,
        link_rate=link_rate,
        n_records=len(recs),
        summary=summary_rows(run, base, memo),
    )


UNSTABLE_CI_PCT = 10.0
"""A case is unstable when the 95% confidence interval of its median (the number the tables print) is
wider than ±10% of it: its p05-p95 band is so wide relative to the median, or its samples so few, that
the median cannot be trusted to 10%. (The band alone flags almost every case on a shared CPU: p95 tails
of 2-3x the median are normal there, and the median is still known to a few percent.)"""


def _median_ci_pct(r: dict) -> float | None:
    from suite import metrics

    xs = r.get("samples_us")
    return metrics.median_ci_halfwidth_pct(xs) if xs and len(xs) >= 2 else None


def _spread_text(r: dict) -> str:
    """How wide a record's samples are around its median, with how many there were."""
    lo, hi = results.tail_us(r, "p05_us"), results.tail_us(r, "p95_us")
    n = results.n_samples(r)
    if lo is not None and hi is not None:
        return f"p05-p95 band {(hi - lo) / r['p50_us']:.1f}x the median ({n} samples)"
    return f"min-max {(r['max_us'] - r['min_us']) / r['p50_us']:.1f}x the median ({n} samples, too few for a p95)"


def summary_rows(
    run: dict, base: tuple[str, list[list[dict]]] | None = None, memo: dict | None = None
) -> list[tuple[str, str]]:
    """The report's first screen: (what, finding) rows a reader can act on, before any detail
    (``memo``: what the experiments' report hooks found already, by experiment)."""
    from suite.launch.failures import MEANING

    recs = results.records(run)
    st = run.get("suite") or {}
    su = (run.get("machine_info") or {}).get("suite") or {}
    status = st.get("exit_status", st.get("exitstatus"))
    wrong = sum(1 for r in recs if (r.get("n_wrong") or 0) > 0)
    rows = [
        (
            "status",
            f"{'complete' if st.get('complete') else 'PARTIAL (interrupted or still running)'}; exit status "
            f"{status} ({MEANING.get(status, 'unknown') if isinstance(status, int) else '?'}); "
            f"{len(recs)} cases measured, {wrong} with wrong results, "
            f"{sum(1 for r in recs if r.get('checked') is False)} with nothing to check",
        )
    ]
    hosts = su.get("hostnames") or []
    exps = OrderedDict()
    for r in recs:
        exps[r["experiment"]] = exps.get(r["experiment"], 0) + 1
    n_hosts = len(set(hosts))
    rows.append(
        (
            "measured",
            f"{', '.join(f'{e} ({n})' for e, n in exps.items()) or 'nothing'}; {len(hosts)} ranks on "
            f"{n_hosts} host(s); link classes: "
            f"{'intra-node and inter-node' if n_hosts > 1 else 'intra-node only (one host)'}",
        )
    )
    rate = configured_link_rate(run.get("machine_info") or {})
    peaks: dict = {}
    for r in recs:
        if library_collectives(r.get("experiment")) and r.get("busbw_gbps") and r["op"] != "barrier":
            if r["op"] not in peaks or r["busbw_gbps"] > peaks[r["op"]]["busbw_gbps"]:
                peaks[r["op"]] = r
    for op, r in peaks.items():
        vs = ""
        if rate and n_hosts > 1:
            vs = f" = {r['busbw_gbps'] / rate[1]:.0%} of the inter-node LINK_RATE {rate[0]}"
        rows.append(
            (
                f"peak {op}",
                f"{r['busbw_gbps']:.3g} GB/s busbw at {_fmt_bytes(r['size_bytes'])} "
                f"({r.get('variant', op)}, {r.get('dtype')}, {r['world_size']} ranks){vs}",
            )
        )
    memo = {} if memo is None else memo
    for name, spec in registry.discover().items():  # also without its records: the row says how to get them
        if spec.summary is not None:
            rows.append(spec.summary(run, memo.setdefault(name, {})))
    widths = [(w, r) for r in recs for w in [_median_ci_pct(r)] if w is not None]
    unstable = sorted([(w, r) for w, r in widths if w > UNSTABLE_CI_PCT], key=lambda x: -x[0])
    if unstable:
        rows.append(
            (
                "unstable cases",
                f"{len(unstable)} of {len(widths)}: the median is uncertain by more than "
                f"±{UNSTABLE_CI_PCT:.0f}% (95% CI; widest: "
                + ", ".join(
                    f"{r['experiment']} {r.get('label') or r['op']} ±{w:.0f}%, " + _spread_text(r)
                    for w, r in unstable[:3]
                )
                + "); to act on them: more ITERS, PRECISION=5 (sample until the median's CI is ±5%), "
                "or a quieter machine",
            )
        )
    else:
        rows.append(("unstable cases", f"none: every median is known to ±{UNSTABLE_CI_PCT:.0f}% (95% CI)"))
    skipped = st.get("skipped") or []
    if skipped:
        by_reason: OrderedDict = OrderedDict()
        for sk in skipped:
            by_reason.setdefault(sk["reason"], []).append(sk["case"])
        rows.append(
            (
                "skipped",
                f"{len(skipped)} cases: "
                + "; ".join(
                    f"{len(cs)} {_experiment_of(cs)}: {reason}"
                    for reason, cs in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))
                ),
            )
        )
    else:
        rows.append(("skipped", "nothing" if "skipped" in st else "not recorded by this run"))
    if base is not None:
        from suite.report.compare import compare_runs, count_line, gate_line

        name, base_runs = base
        c = compare_runs(base_runs, [recs], base_name=name, new_name="this run")
        rows.append(
            (
                "against " + name,
                f"{c.overall} overall (median case ratio {c.overall_ratio:.3f}, CI "
                f"[{c.overall_ci[0]:.3f}, {c.overall_ci[1]:.3f}]); {count_line(c)}; {gate_line(c)}",
            )
        )
    return rows


def _experiment_of(nodeids: list[str]) -> str:
    names = sorted({registry.experiment_of(n) for n in nodeids})
    return "/".join(names) + " case" + ("s" if len(nodeids) > 1 else "")
