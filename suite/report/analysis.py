"""Analysis of stored runs for the reports: grouping records into sections and series, α–β fits,
link figures, the environment summary. Reads records only; renders nothing (suite/report/render.py)."""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict
from dataclasses import dataclass, field

from suite import registry, results
from suite.report.compare import MEASUREMENT_FIELDS, case_key
from suite.model.fit import Model
from suite.model.link_rate import configured_link_rate
from suite.report.tables import format_tables, formatter


# --- grouping: what the HTML/Markdown report keys on --------------------------------------------

_SERIES_SKIP = {"experiment", "size_bytes", "count", "backend", "device", "world_size", "table"}
_NICE_ORDER = ("variant", "op", "function", "dtype", "redop", "in_place", "root", "timing_mode")


def group_key(r: dict) -> str:
    return str(r.get("table") or r.get("pattern") or r.get("variant") or r["op"])


def _pair(r: dict) -> bool:
    """A record of one ordered rank pair (src and dst are real ranks, not -1 placeholders)."""
    try:
        return int(r["src"]) >= 0 and int(r["dst"]) >= 0
    except (KeyError, TypeError, ValueError):
        return False


def is_pair_matrix(recs: list[dict]) -> bool:
    """Records that form a src x dst matrix (several sources and several destinations)."""
    pairs = [r for r in recs if _pair(r)]
    return len(pairs) == len(recs) and len({r["src"] for r in pairs}) > 1 and len({r["dst"] for r in pairs}) > 1


def varying_fields(recs: list[dict]) -> list[str]:
    """Identity fields (suite.report.compare.case_key) whose value differs between records, in a stable
    order, leaving out those that only follow the size (e.g. a micro-batch count that sets the
    size): they would split one curve into one-point series."""
    values: OrderedDict = OrderedDict()
    per_size: dict = {}
    for r in recs:
        for k, v in case_key(r):
            if k not in _SERIES_SKIP:
                values.setdefault(k, set()).add(repr(v))
                per_size.setdefault(k, {}).setdefault(r["size_bytes"], set()).add(repr(v))
    n_sizes = len({r["size_bytes"] for r in recs})
    fields = [
        k
        for k, vs in values.items()
        if len(vs) > 1 and not (n_sizes > 1 and all(len(x) == 1 for x in per_size[k].values()))
    ]
    # Free-text descriptions vary with the case but make poor legends: keep them only if
    # nothing else tells the series apart.
    prose = {k for k in fields if any(isinstance(r.get(k), str) and " " in r[k] and len(r[k]) > 24 for r in recs)}
    if len(fields) > len(prose) and prose:
        keep = [k for k in fields if k not in prose]
        if len({tuple(repr(r.get(k)) for k in keep) for r in recs}) == len(
            {tuple(repr(r.get(k)) for k in fields) for r in recs}
        ):
            fields = keep
    fields = sorted(fields, key=lambda k: (_NICE_ORDER.index(k) if k in _NICE_ORDER else len(_NICE_ORDER), k))
    # the fewest fields that still tell every series apart (variant alone often does)
    target = len({tuple(repr(r.get(k)) for k in fields) for r in recs})
    chosen: list[str] = []
    for k in fields:
        if len({tuple(repr(r.get(c)) for c in chosen) for r in recs}) == target:
            break
        if len({tuple(repr(r.get(c)) for c in chosen + [k]) for r in recs}) > len(
            {tuple(repr(r.get(c)) for c in chosen) for r in recs}
        ):
            chosen.append(k)
    return chosen


def label_of(r: dict, fields: list[str], width: int = 48) -> str:
    parts = []
    for k in fields:
        v = r.get(k)
        if k == "in_place":
            parts.append("in-place" if v else "out-of-place")
        elif k in ("variant", "op", "function", "dtype", "redop"):
            parts.append(str(v))
        else:
            parts.append(f"{k}={v}")
    text = " ".join(parts) or str(r.get("variant") or r["op"])
    return text if len(text) <= width else text[: width - 1] + "…"


def _series(recs: list[dict], fields: list[str]) -> OrderedDict:
    full = [label_of(r, fields, width=10**6) for r in recs]
    short = [label_of(r, fields) for r in recs]
    names = short if len(set(short)) == len(set(full)) else full  # never merge series by truncation
    out: OrderedDict = OrderedDict()
    for name, r in zip(names, recs):
        out.setdefault(name, []).append(r)
    return out


def _extra_numeric_fields(recs: list[dict], varying_only: bool = False) -> list[str]:
    """Measured numbers an experiment adds beyond the shared schema (samples_per_s, efficiency, ...):
    float fields, and int fields with a unit suffix of a rate, share or time."""
    seen: OrderedDict = OrderedDict()
    for r in recs:
        for k, v in r.items():
            if k in MEASUREMENT_FIELDS or k in results.REQUIRED_FIELDS or k in ("src", "dst", "peer", "root"):
                continue
            if (
                isinstance(v, (int, float))
                and not isinstance(v, bool)
                and (isinstance(v, float) or k.endswith(("_per_s", "_pct", "_us", "_ms", "_s")))
            ):
                seen.setdefault(k, set()).add(v)
    fields = [k for k, vs in seen.items() if not varying_only or len(vs) > 1]
    # headline numbers first: rates, efficiency, overlap, speed-up
    first = ("_per_s", "efficiency", "overlap_pct", "speedup", "speed_up", "bubble")
    return sorted(fields, key=lambda k: (not any(w in k for w in first), fields.index(k)))


# --- the report model ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Plot:
    name: str
    """File stem of the PNG (unique in the report)."""
    title: str
    png: bytes


@dataclass(frozen=True, kw_only=True)
class FitRow:
    experiment: str
    op: str
    series: str
    backend: str
    device: str
    world_size: int
    fit: Model
    """The series' α–β model: one line, or two pieces around a knee (suite.fit.fit_model)."""
    link_beta_gbps: float | None
    """β of a link implied by the ring model (= asymptotic busbw)."""
    ring_ratio: float | None
    """Measured / ring-model time at the largest size."""
    rate_ratio: float | None
    """link β / configured LINK_RATE."""


@dataclass(kw_only=True)
class Section:
    title: str
    anchor: str
    notes: list[str] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    text_tables: list[str] = field(default_factory=list)
    grids: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)


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


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-") or "x"


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


def _is_sweep(recs: list[dict]) -> bool:
    """Some series of the group (per world size) was measured at two or more sizes."""
    by_world: dict = {}
    for r in recs:
        by_world.setdefault(r["world_size"], []).append(r)
    return any(
        len({r["size_bytes"] for r in s if r["size_bytes"] > 0}) >= 2
        for rs in by_world.values()
        for s in _series(rs, varying_fields(rs)).values()
    )


def _fit_series(recs: list[dict]):
    from suite.model.fit import fit_model

    pts = [(r["size_bytes"], r["time_us"]) for r in recs if r["size_bytes"] > 0 and r.get("time_us", 0) > 0]
    if len(pts) < 2:
        return None
    return fit_model([p[0] for p in pts], [p[1] for p in pts])


def _links(recs: list[dict], fits_by_group: dict) -> dict:
    """Per (backend, device, world_size): the link α, β the ring model is drawn with.

    Point-to-point records (``src``/``dst`` present) measure one link directly; if the run
    has them their fits are used (median over series). Otherwise the median of the link
    parameters implied by every collective's fit: the ring prediction is then the
    consensus of the ops, and an op far from it runs a different algorithm or a slower path.
    """
    from suite.model.fit import Link, implied_link

    out = {}
    p2p: dict = {}
    for r in recs:
        if _pair(r) and r["op"] == "send_recv" and r["size_bytes"] > 0:
            p2p.setdefault((r["backend"], r["device"], r["world_size"]), []).append(r)
    for key, rs in p2p.items():
        # ping-pong / pair-matrix records time one message on one link; prefer them
        direct = [
            r
            for r in rs
            if any(w in str(r.get(f, "")).lower() for f in ("table", "pattern", "variant") for w in ("ping", "pair"))
        ]
        rs = direct or rs
        groups: OrderedDict = OrderedDict()
        for r in rs:
            groups.setdefault(group_key(r), []).append(r)
        fs = [
            f
            for g in groups.values()
            for s in _series(g, varying_fields(g)).values()
            if (f := _fit_series(s)) and f.holds and math.isfinite(f.beta_gbps)
        ]
        if fs:
            out[key] = Link(
                alpha_us=statistics.median(f.alpha_us for f in fs),
                beta_gbps=statistics.median(f.beta_gbps for f in fs),
                source=f"median of {len(fs)} point-to-point fit(s)",
            )
    implied: dict = {}
    # the collectives experiment runs the library's own algorithms; other experiments' sweeps
    # (hand-made algorithms, training steps) speak for the link only when it is absent
    prefer = [k for k in fits_by_group if _library_collectives(k[0])] or list(fits_by_group)
    for exp, gk, backend, device, n in prefer:
        for op, f in fits_by_group[(exp, gk, backend, device, n)].values():
            if f is not None and f.holds and math.isfinite(f.beta_gbps) and f.beta_gbps > 0:
                link = implied_link(op, n, f)
                if link is not None:
                    implied.setdefault((backend, device, n), []).append(link)
    for key, ls in implied.items():
        if key not in out:
            out[key] = Link(
                alpha_us=statistics.median(x.alpha_us for x in ls),
                beta_gbps=statistics.median(x.beta_gbps for x in ls),
                source=f"median of {len(ls)} fit(s) mapped through the ring model",
            )
    return out


def build_report(
    run: dict, run_name: str = "", predict_doc: dict | None = None, base: tuple[str, list[list[dict]]] | None = None
) -> Report:
    """Analyse a loaded run: sections with plots and tables, α–β fits, ring-model comparison (and the
    prediction section, with the extrapolation table of ``predict_doc``, the run's predict.json)."""
    from suite.report import plots
    from suite.model.fit import ring_coefficients, ring_time_us

    recs = results.records(run)
    link_rate = configured_link_rate(run.get("machine_info") or {})
    # Sweeps and pair matrices are per world size; single-size groups (e.g. DDP scaling)
    # keep every world size in one chart, so that scaling reads off one figure.
    per_world: dict = {}
    for r in recs:
        k = (r["experiment"], group_key(r), r["backend"], r["device"])
        per_world.setdefault(k, []).append(r)
    split_of = {k: is_pair_matrix(rs) or _is_sweep(rs) for k, rs in per_world.items()}
    by_exp: OrderedDict = OrderedDict()
    for r in recs:
        k = (r["experiment"], group_key(r), r["backend"], r["device"])
        split = split_of[k]
        by_exp.setdefault(r["experiment"], OrderedDict()).setdefault(
            (group_key(r), r["backend"], r["device"], r["world_size"] if split else None), []
        ).append(r)
    # each experiment's place: its spec's report_order (the doctor's verdict leads, then collectives), then
    # the records' order
    by_exp = OrderedDict(sorted(by_exp.items(), key=lambda kv: _spec_value(kv[0], "report_order", 0)))

    # fits for every sweep (a group with >= 2 sizes)
    fits_by_group: dict = {}
    sweep_series: dict = {}
    for exp, groups in by_exp.items():
        for (gk, backend, device, n), rs in groups.items():
            if is_pair_matrix(rs):
                continue
            if not _is_sweep(rs):
                continue
            ser = _series(rs, varying_fields(rs))
            sweep_series[(exp, gk, backend, device, n)] = ser
            fits_by_group[(exp, gk, backend, device, n)] = {lab: (s[0]["op"], _fit_series(s)) for lab, s in ser.items()}
    links = _links(recs, fits_by_group)

    fit_rows: list[FitRow] = []
    sections: list[Section] = []
    used_names: set = set()

    def plot_name(*parts) -> str:
        base = _slug("-".join(str(p) for p in parts))[:80]
        name, i = base, 2
        while name in used_names:
            name, i = f"{base}-{i}", i + 1
        used_names.add(name)
        return name

    memo: dict = {}  # what an experiment's report hooks share within this report (the doctor's diagnosis)
    for exp, groups in by_exp.items():
        own = _spec_value(exp, "report_section", None)
        if own is not None:  # an experiment that draws its own section (the doctor's verdicts)
            sections.append(own(run, plot_name, memo.setdefault(exp, {})))
            continue
        sec = Section(title=f"{exp}", anchor=_slug(exp))
        fmt = formatter(exp)
        spec = registry.spec(exp)
        if spec is not None and spec.guide:
            sec.notes.append(spec.guide.strip())  # "how to read" of its tables
        for (gk, backend, device, n), rs in groups.items():
            worlds = sorted({r["world_size"] for r in rs})
            title = f"{exp}: {gk} ({backend}, {device}, {'/'.join(map(str, worlds))} ranks)"
            ops = {r["op"] for r in rs}
            op = rs[0]["op"] if len(ops) == 1 else None  # one op: the ring model is drawn with it
            if is_pair_matrix(rs):
                sec.plots.append(
                    Plot(
                        name=plot_name(exp, gk, backend, device, n, "pairs"),
                        title=title,
                        png=plots.pair_matrix_plot(title, rs),
                    )
                )
            elif (exp, gk, backend, device, n) in sweep_series:
                ser = sweep_series[(exp, gk, backend, device, n)]
                op_fits = {k: v for k, v in fits_by_group[(exp, gk, backend, device, n)].items() if v[1] is not None}
                fits = {k: f for k, (_, f) in op_fits.items() if f.holds}  # only lines that could fail and did not
                link = links.get((backend, device, n))
                ring = None
                ring_label = "ring model"
                if link is not None and op is not None and ring_coefficients(op, n) is not None:

                    def ring(xs, op=op, n=n, link=link):
                        return ring_time_us(op, n, link, xs)

                    ring_label = f"ring model ({link.alpha_us:.3g} µs, {link.beta_gbps:.3g} GB/s per link)"
                sec.plots.append(
                    Plot(
                        name=plot_name(exp, gk, backend, device, n),
                        title=title,
                        png=plots.sweep_plot(
                            title,
                            list(ser.items()),
                            fits=fits,
                            ring=ring,
                            ring_label=ring_label,
                            link_rate_gbps=link_rate[1] if link_rate else None,
                            link_rate_text=link_rate[0] if link_rate else "",
                        ),
                    )
                )
                for lab, (sop, f) in op_fits.items():
                    srecs = [r for r in ser[lab] if r["size_bytes"] > 0]
                    smax = max(r["size_bytes"] for r in srecs)
                    tmax = next(r["time_us"] for r in srecs if r["size_bytes"] == smax)
                    c = ring_coefficients(sop, n)
                    link_beta = f.beta_gbps * c[1] if c and math.isfinite(f.beta_gbps) else None
                    rt = ring_time_us(sop, n, link, smax) if link is not None and c else None
                    fit_rows.append(
                        FitRow(
                            experiment=exp,
                            op=sop,
                            series=f"{gk} {lab}" if lab != gk else gk,
                            backend=backend,
                            device=device,
                            world_size=n,
                            fit=f,
                            link_beta_gbps=link_beta,
                            ring_ratio=float(tmax / rt) if rt else None,
                            # LINK_RATE shapes the links between hosts: a one-host series has none
                            rate_ratio=(link_beta / link_rate[1])
                            if (link_beta and link_rate and max(int(r.get("hosts") or 1) for r in srecs) > 1)
                            else None,
                        )
                    )
            else:
                fields = varying_fields(rs) + (["world_size"] if len(worlds) > 1 else [])
                labels = [label_of(r, fields) for r in rs]
                panels = [
                    (
                        f"time (µs), {results.BAND_LABEL}",
                        [r["time_us"] for r in rs],
                        [results.band_us(r) for r in rs],
                    )
                ]
                for k in _extra_numeric_fields(rs, varying_only=True)[:4]:
                    panels.append((k, [r.get(k) for r in rs], None))
                sec.plots.append(
                    Plot(
                        name=plot_name(exp, gk, backend, device, *worlds),
                        title=title,
                        png=plots.bar_plot(title, labels, panels),
                    )
                )
            if fmt is None:
                sec.grids.append(_grid(title, rs))
        sec.text_tables.append(format_tables([r for rs in groups.values() for r in rs]))
        sections.append(sec)
    pred = prediction_section(run, predict_doc)
    if pred is not None:
        sections.append(pred)

    return Report(
        run_name=run_name,
        environment=environment_summary(run),
        sections=sections,
        fits=fit_rows,
        links=links,
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
        if _library_collectives(r.get("experiment")) and r.get("busbw_gbps") and r["op"] != "barrier":
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


def _spec_value(experiment: str, attr: str, default):
    """An experiment's spec hook or setting; ``default`` for an experiment this checkout does not have."""
    spec = registry.spec(experiment)
    return default if spec is None else getattr(spec, attr)


def _library_collectives(experiment) -> bool:
    """Whether an experiment's sweeps time the library's own collectives (its spec says so)."""
    return bool(_spec_value(str(experiment), "library_collectives", False))


def _experiment_of(nodeids: list[str]) -> str:
    names = sorted({registry.experiment_of(n) for n in nodeids})
    return "/".join(names) + " case" + ("s" if len(nodeids) > 1 else "")


def prediction_section(run: dict, predict_doc: dict | None = None) -> Section | None:
    """Predicted vs measured at the run's scale and the extrapolation table (suite.predict); None when the
    run has nothing to fit."""
    from suite.model import report_section

    parts = report_section.report_parts(run, predict_doc)
    if parts is None:
        return None
    notes, grids, text = parts
    return Section(title="prediction at scale", anchor="prediction", notes=notes, grids=grids, text_tables=[text])


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _grid(title: str, rs: list[dict]) -> tuple[list[str], list[list[str]]]:
    """An HTML table of a generic group: varying identity fields, the shared measurements, added numbers."""
    ident = varying_fields(rs) + (["world_size"] if len({r["world_size"] for r in rs}) > 1 else [])
    extra = _extra_numeric_fields(rs)
    cols = ident + ["size_bytes", "time_us", "iterations", "p05_us", "p95_us", "algbw_gbps", "busbw_gbps", "n_wrong"]
    cols += extra

    def cell(r, c):
        if c in results.TAIL_PERCENTILES:
            v = results.tail_us(r, c)
            return f"- (n={results.n_samples(r)})" if v is None else _fmt(v)
        return _fmt(r.get(c, ""))

    return [title] + cols, [[""] + [cell(r, c) for c in cols] for r in rs]


def _interval(v: float, ci, fmt: str) -> str:
    """``v [lo, hi]``; an infinite end (a resample with no bandwidth term) reads "unbounded"."""

    def f(x):
        return "unbounded" if math.isinf(x) else format(x, fmt)

    return f(v) + ("" if ci is None else f" [{f(ci[0])}, {f(ci[1])}]")


def fit_cells(p) -> list[str]:
    """The α, β and R² cells of one fitted line (a suite.fit.AlphaBeta): numbers only where the line
    could have failed and did not. Fewer than suite.fit.MIN_FIT_SIZES sizes: "too few sizes" (a line
    through two passes exactly); R² below MIN_R2 and off by more than MAX_RMS_REL: "model does not
    fit"; no bandwidth term (time flat in size): no β, and the rms error where R² has no meaning."""
    from suite.model.fit import MIN_FIT_SIZES, MIN_R2

    if not p.testable:
        return ["-", "-", f"too few sizes ({p.n_sizes}; a line needs {MIN_FIT_SIZES} to be tested)"]
    if not p.holds:
        return ["-", "-", f"model does not fit (R² < {MIN_R2})"]
    beta = "- (time flat in size)" if p.latency_only else _interval(p.beta_gbps, p.beta_ci_gbps, ".4g")
    r2 = f"{p.r2:.3f}" if p.r2 >= MIN_R2 else f"- (flat: within {p.rms_rel_err:.1%} rms)"
    return [_interval(p.alpha_us, p.alpha_ci_us, ".1f"), beta, r2]


def fit_table_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    """One row per line of each series' model (two around a knee), cells as ``fit_cells``."""
    from suite.metrics import format_size

    head = [
        "experiment",
        "series",
        "backend",
        "ranks",
        "sizes",
        "α (µs) [95% CI]",
        "β (GB/s) [95% CI]",
        "R²",
        "points",
        "link β = busbw∞ (GB/s)",
        "measured / ring at max size",
    ]
    if rep.link_rate:
        head.append(f"link β / LINK_RATE ({rep.link_rate[0]})")
    rows = []
    for f in rep.fits:
        pw = f.fit.piecewise
        pieces = (
            [("all", f.fit.single)]
            if pw is None
            else [
                (f"< {format_size(int(pw.knee_bytes))} (knee)", pw.below),
                (f">= {format_size(int(pw.knee_bytes))}", pw.above),
            ]
        )
        for i, (sizes, p) in enumerate(pieces):
            last = i == len(pieces) - 1
            nums = fit_cells(p)
            row = [
                f.experiment,
                f.series,
                f"{f.backend}/{f.device}",
                str(f.world_size),
                sizes,
                *nums,
                str(p.n_points),
                "-" if f.link_beta_gbps is None or not last or not p.holds else f"{f.link_beta_gbps:.4g}",
                "-" if f.ring_ratio is None or not last else f"{f.ring_ratio:.2f}",
            ]
            if rep.link_rate:
                row.append("-" if f.rate_ratio is None or not last or not p.holds else f"{f.rate_ratio:.2f}")
            rows.append(row)
    return head, rows


FIT_NOTE = (
    "α–β fit: time(S) = α + S/β per series, weighted least squares on relative error; R² of log(time); "
    "[95% CI] from a bootstrap over the sizes (fixed seed). Where the protocol changes with size the series "
    "is fitted as two lines around a knee, kept only if that cuts the weighted squared error to a fifth and one line "
    "misses by more than 3% rms; a line with R² below 0.8 says 'model does not fit', and a line of fewer than "
    "3 sizes says 'too few sizes' (through two sizes any line passes exactly: R² = 1 by construction). "
    "A series whose time does not grow with size has no β ('time flat in size'). "
    "Ring model: time = a(n)·α_link + f(n)·S/β_link with a(n) latency steps and f(n) the busbw factor "
    "(all_reduce 2(n−1), 2(n−1)/n; all_gather/reduce_scatter/all_to_all (n−1), (n−1)/n; broadcast/reduce "
    "(n−1), 1). 'link β' is the large-size β times f(n), i.e. the asymptotic busbw; "
    "'measured / ring' > 1 means the op is slower than a ring over the reference link would be."
)


# --- writers ---------------------------------------------------------------------------------------
