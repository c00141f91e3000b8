"""Reports from stored runs: tables, an HTML/Markdown report with plots and fits, CSV, comparisons.

Reads only stored result JSON (the ``extra_info`` records and ``machine_info`` of
a run); never measures.

    python -m suite.report RUN                  nccl-tests-style tables (RUN: results/latest, a run dir or bench.json)
    python -m suite.report html RUN [--out D]   D/index.html (self-contained), D/report.md, D/*.png, D/results.csv
    python -m suite.report csv RUN [--out F]    one row per record
    python -m suite.report compare BASE NEW...  per-case ratios with CIs; exit 1 on a regression (suite.compare)

What the report keys on (so new experiments appear without code changes): records are
grouped by ``experiment``, then by ``table`` (else ``variant``, else ``op``), then by
``backend``/``device``/``world_size``; within a group, series are the identity fields that
vary (suite.compare.case_key: dtype, redop, in_place, ...). A group whose records carry
``src`` and ``dst`` gets a pair-matrix heatmap; one with two or more sizes gets busbw and
latency-vs-size plots with α–β fits (suite.fit); any other gets bar charts of ``time_us``
(p05–p95) and of every other numeric field the records add (samples_per_s, efficiency, ...).
"""

from __future__ import annotations

import argparse
import base64
import csv
import html
import importlib
import io
import json
import math
import os
import statistics
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from suite import results
from suite.tables import num, wrong, wrong_cell
from suite.compare import MEASUREMENT_FIELDS, case_key
from suite.fit import AlphaBeta

_DTYPE_SHORT = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
                "int32": "int32", "int64": "int64"}


def _cell(rec: dict | None) -> str:
    if rec is None:
        return f"{'-':>9} {'-':>7} {'-':>7} {'-':>6}"
    return (f"{rec['time_us']:9.1f} {rec['algbw_gbps']:7.3f} {num(rec['busbw_gbps'], '.3f', 7)} "
            f"{wrong_cell(rec)}")


def collective_table(recs: list[dict]) -> str:
    """One nccl-tests table (out-of-place | in-place columns) for one op variant."""
    first = recs[0]
    title = first.get("variant", first["op"])
    if first.get("function") and first["function"] != title:
        title += f" (torch.distributed.{first['function']})"
    ranks = first["world_size"]
    lines = [
        f"# {title}  ({first['backend']}, {first['device']}, {ranks} ranks, timing={first['timing_mode']}, "
        f"{first['iterations']} iters)",
        f"#{'':47}{'out-of-place':^33}  {'in-place':^32}",
        f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>7} {'root':>5}"
        f" {'time':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6}  {'time':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6}",
        f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>7} {'':>5}"
        f" {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>6}  {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>6}",
    ]
    rows: OrderedDict = OrderedDict()
    for r in recs:
        key = (r["size_bytes"], r["count"], r["dtype"], r.get("redop") or "none", r.get("root", -1))
        rows.setdefault(key, {})[bool(r["in_place"])] = r
    for (size, count, dtype, redop, root), pair in rows.items():
        lines.append(f" {size:>11} {count:>12} {_DTYPE_SHORT.get(dtype, dtype):>8} {redop:>7} {root:>5}"
                     f" {_cell(pair.get(False))}  {_cell(pair.get(True))}")
    bus = [r["busbw_gbps"] for r in recs if r["size_bytes"] > 0]
    n_wrong = sum(wrong(r) for r in recs)
    if bus:
        lines.append(f"# Avg bus bandwidth : {sum(bus) / len(bus):.4f} GB/s   "
                     f"#wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def generic_table(title: str, recs: list[dict]) -> str:
    """A compact table for experiments without a dedicated formatter."""
    lines = [f"# {title}",
             f"#{'case':>34} {'size(B)':>11} {'type':>8} {'time(us)':>10} {'p95(us)':>10}"
             f" {'algbw':>8} {'busbw':>8} {'#wrong':>6}"]
    for r in recs:
        label = str(r.get("label") or r["op"])[:34]
        lines.append(f" {label:>34} {r['size_bytes']:>11} {_DTYPE_SHORT.get(r['dtype'], r['dtype']):>8}"
                     f" {r['time_us']:10.1f} {r['p95_us']:10.1f} {r['algbw_gbps']:8.3f} {num(r['busbw_gbps'], '.3f', 8)}"
                     f" {wrong_cell(r)}")
    return "\n".join(lines) + "\n"


def _formatter(experiment: str):
    """``suite/tables/<experiment>.py``'s ``format_tables(recs)``, if the experiment has one."""
    if experiment == "collectives":
        return None
    try:
        mod = importlib.import_module(f"suite.tables.{experiment}")
    except ModuleNotFoundError:
        return None
    return getattr(mod, "format_tables", None)


def format_tables(recs: list[dict]) -> str:
    """Every table for a list of records: per experiment, its own formatter
    (``suite/tables/<experiment>.py``) or a generic table per op/``table`` key."""
    by_exp: OrderedDict = OrderedDict()
    for r in recs:
        by_exp.setdefault(r["experiment"], []).append(r)
    out = []
    for experiment, ers in by_exp.items():
        fmt = _formatter(experiment)
        if fmt is not None:
            try:
                out.append(fmt(ers))
                continue
            except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
                # Records from another version of the experiment (or hand-made ones) may lack
                # fields its formatter needs: show them generically rather than not at all.
                out.append(f"# {experiment}: its table formatter could not read these records "
                           f"({type(e).__name__}: {e}); generic table follows\n")
        groups: OrderedDict = OrderedDict()
        for r in ers:
            groups.setdefault(r.get("table") or r.get("variant") or r["op"], []).append(r)
        for table, rs in groups.items():
            out.append(collective_table(rs) if experiment == "collectives" else generic_table(f"{experiment}: {table}", rs))
    return "\n".join(out)



# --- grouping: what the HTML/Markdown report keys on --------------------------------------------

_SERIES_SKIP = {"experiment", "size_bytes", "count", "backend", "device", "world_size", "table"}
_NICE_ORDER = ("variant", "op", "function", "dtype", "redop", "in_place", "root", "timing_mode")


def _group_key(r: dict) -> str:
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
    """Identity fields (suite.compare.case_key) whose value differs between records, in a stable
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
    fields = [k for k, vs in values.items() if len(vs) > 1
              and not (n_sizes > 1 and all(len(x) == 1 for x in per_size[k].values()))]
    # Free-text descriptions vary with the case but make poor legends: keep them only if
    # nothing else tells the series apart.
    prose = {k for k in fields if any(isinstance(r.get(k), str) and " " in r[k] and len(r[k]) > 24 for r in recs)}
    if len(fields) > len(prose) and prose:
        keep = [k for k in fields if k not in prose]
        if len({tuple(repr(r.get(k)) for k in keep) for r in recs}) == len({tuple(repr(r.get(k)) for k in fields)
                                                                              for r in recs}):
            fields = keep
    fields = sorted(fields, key=lambda k: (_NICE_ORDER.index(k) if k in _NICE_ORDER else len(_NICE_ORDER), k))
    # the fewest fields that still tell every series apart (variant alone often does)
    target = len({tuple(repr(r.get(k)) for k in fields) for r in recs})
    chosen: list[str] = []
    for k in fields:
        if len({tuple(repr(r.get(c)) for c in chosen) for r in recs}) == target:
            break
        if len({tuple(repr(r.get(c)) for c in chosen + [k]) for r in recs}) > \
                len({tuple(repr(r.get(c)) for c in chosen) for r in recs}):
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
    return text if len(text) <= width else text[:width - 1] + "…"


def _series(recs: list[dict], fields: list[str]) -> OrderedDict:
    full = [label_of(r, fields, width=10 ** 6) for r in recs]
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
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (isinstance(v, float) or k.endswith(
                    ("_per_s", "_pct", "_us", "_ms", "_s"))):
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
    fit: AlphaBeta
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
    rows = [("run id", str(st.get("run_id"))), ("date (UTC)", str(run.get("datetime", "?"))),
            ("status", f"{'complete' if st.get('complete') else 'PARTIAL (interrupted or still running)'}, "
                       f"exit status {st.get('exit_status', st.get('exitstatus'))}, {st.get('n_records', '?')} records")]
    if cfg:
        rows.append(("config", f"backend={cfg.get('backend')} device={cfg.get('device')} sizes "
                               f"{_fmt_bytes(cfg.get('min_bytes'))}..{_fmt_bytes(cfg.get('max_bytes'))} x{cfg.get('step_factor')}"
                               f" dtypes={','.join(cfg.get('dtypes') or [])} iters={cfg.get('iters')} warmup="
                               f"{cfg.get('warmup_iters')} timing={cfg.get('timing_mode')}"))
    if su:
        rows.append(("world", f"{len(su.get('hostnames') or [])} ranks on {su.get('n_hosts')} host(s): "
                              f"{', '.join(sorted(set(su.get('hostnames') or [])))}"))
        v = su.get("versions") or {}
        rows.append(("versions", f"torch {v.get('torch')}, CUDA {v.get('cuda')}, NCCL {v.get('nccl')}, gloo "
                                 f"{v.get('gloo')}, mpi {v.get('mpi')}, ucc {v.get('ucc')}; python "
                                 f"{mi.get('python_version')}; torch threads {v.get('num_threads')}"))
        for name, h in (su.get("hosts") or {}).items():
            c = h.get("container") or {}
            rows.append((f"host {name}", f"ranks {h.get('ranks')}; {h.get('cpu_model')} x{h.get('cpu_count')} "
                                         f"(affinity {h.get('affinity_cpus')}), {_fmt_bytes(h.get('memory_bytes'))}"
                                         f" RAM, kernel {h.get('kernel')}; container={c.get('in_container')} "
                                         f"cgroup cpus={c.get('cgroup_cpus')} mem={_fmt_bytes(c.get('cgroup_memory_bytes'))}"
                                         f" /dev/shm={_fmt_bytes(c.get('dev_shm_bytes'))}"))
            env = h.get("env") or {}
            if env:
                rows.append((f"env {name}", " ".join(f"{k}={v}" for k, v in env.items())))
        gpus = (su.get("gpu") or {}).get("gpus") or []
        if gpus:
            rows.append(("GPUs", "; ".join(f"{g.get('index')}: {g.get('name')} ({_fmt_bytes(g.get('memory_bytes'))})"
                                           for g in gpus) + f"; driver {(su.get('gpu') or {}).get('driver')}"))
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
    return any(len({r["size_bytes"] for r in s if r["size_bytes"] > 0}) >= 2
               for rs in by_world.values() for s in _series(rs, varying_fields(rs)).values())


def _fit_series(recs: list[dict]):
    from suite.fit import fit_alpha_beta

    pts = [(r["size_bytes"], r["time_us"]) for r in recs if r["size_bytes"] > 0 and r.get("time_us", 0) > 0]
    if len(pts) < 2:
        return None
    return fit_alpha_beta([p[0] for p in pts], [p[1] for p in pts])


def _links(recs: list[dict], fits_by_group: dict) -> dict:
    """Per (backend, device, world_size): the link α, β the ring model is drawn with.

    Point-to-point records (``src``/``dst`` present) measure one link directly; if the run
    has them their fits are used (median over series). Otherwise the median of the link
    parameters implied by every collective's fit: the ring prediction is then the
    consensus of the ops, and an op far from it runs a different algorithm or a slower path.
    """
    from suite.fit import Link, implied_link

    out = {}
    p2p: dict = {}
    for r in recs:
        if _pair(r) and r["op"] == "send_recv" and r["size_bytes"] > 0:
            p2p.setdefault((r["backend"], r["device"], r["world_size"]), []).append(r)
    for key, rs in p2p.items():
        # ping-pong / pair-matrix records time one message on one link; prefer them
        direct = [r for r in rs if any(w in str(r.get(f, "")).lower() for f in ("table", "pattern", "variant")
                                       for w in ("ping", "pair"))]
        rs = direct or rs
        groups: OrderedDict = OrderedDict()
        for r in rs:
            groups.setdefault(_group_key(r), []).append(r)
        fs = [f for g in groups.values() for s in _series(g, varying_fields(g)).values()
              if (f := _fit_series(s)) and math.isfinite(f.beta_gbps)]
        if fs:
            out[key] = Link(alpha_us=statistics.median(f.alpha_us for f in fs),
                            beta_gbps=statistics.median(f.beta_gbps for f in fs),
                            source=f"median of {len(fs)} point-to-point fit(s)")
    implied: dict = {}
    # the collectives experiment runs the library's own algorithms; other experiments' sweeps
    # (hand-made algorithms, training steps) speak for the link only when it is absent
    prefer = [k for k in fits_by_group if k[0] == "collectives"] or list(fits_by_group)
    for (exp, gk, backend, device, n) in prefer:
        for op, f in fits_by_group[(exp, gk, backend, device, n)].values():
            if f is not None and math.isfinite(f.beta_gbps) and f.beta_gbps > 0:
                link = implied_link(op, n, f)
                if link is not None:
                    implied.setdefault((backend, device, n), []).append(link)
    for key, ls in implied.items():
        if key not in out:
            out[key] = Link(alpha_us=statistics.median(x.alpha_us for x in ls),
                            beta_gbps=statistics.median(x.beta_gbps for x in ls),
                            source=f"median of {len(ls)} fit(s) mapped through the ring model")
    return out


def build_report(run: dict, run_name: str = "") -> Report:
    """Analyse a loaded run: sections with plots and tables, α–β fits, ring-model comparison."""
    from suite import plots
    from suite.fit import configured_link_rate, ring_coefficients, ring_time_us

    recs = results.records(run)
    link_rate = configured_link_rate(run.get("machine_info") or {})
    # Sweeps and pair matrices are per world size; single-size groups (e.g. DDP scaling)
    # keep every world size in one chart, so that scaling reads off one figure.
    per_world: dict = {}
    for r in recs:
        k = (r["experiment"], _group_key(r), r["backend"], r["device"])
        per_world.setdefault(k, []).append(r)
    split_of = {k: is_pair_matrix(rs) or _is_sweep(rs) for k, rs in per_world.items()}
    by_exp: OrderedDict = OrderedDict()
    for r in recs:
        k = (r["experiment"], _group_key(r), r["backend"], r["device"])
        split = split_of[k]
        by_exp.setdefault(r["experiment"], OrderedDict()).setdefault(
            (_group_key(r), r["backend"], r["device"], r["world_size"] if split else None), []).append(r)
    if "collectives" in by_exp:  # collectives first, always
        by_exp.move_to_end("collectives", last=False)

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

    for exp, groups in by_exp.items():
        sec = Section(title=f"{exp}", anchor=_slug(exp))
        fmt = _formatter(exp)
        if fmt is not None and getattr(importlib.import_module(fmt.__module__), "__doc__", None):
            sec.notes.append(importlib.import_module(fmt.__module__).__doc__.strip())  # "how to read" of its tables
        for (gk, backend, device, n), rs in groups.items():
            worlds = sorted({r["world_size"] for r in rs})
            title = f"{exp}: {gk} ({backend}, {device}, {'/'.join(map(str, worlds))} ranks)"
            ops = {r["op"] for r in rs}
            op = rs[0]["op"] if len(ops) == 1 else None  # one op: the ring model is drawn with it
            if is_pair_matrix(rs):
                sec.plots.append(Plot(name=plot_name(exp, gk, backend, device, n, "pairs"), title=title,
                                      png=plots.pair_matrix_plot(title, rs)))
            elif (exp, gk, backend, device, n) in sweep_series:
                ser = sweep_series[(exp, gk, backend, device, n)]
                op_fits = {k: v for k, v in fits_by_group[(exp, gk, backend, device, n)].items() if v[1] is not None}
                fits = {k: f for k, (_, f) in op_fits.items()}
                link = links.get((backend, device, n))
                ring = None
                ring_label = "ring model"
                if link is not None and op is not None and ring_coefficients(op, n) is not None:
                    ring = (lambda xs, op=op, n=n, link=link: ring_time_us(op, n, link, xs))
                    ring_label = f"ring model ({link.alpha_us:.3g} µs, {link.beta_gbps:.3g} GB/s per link)"
                sec.plots.append(Plot(name=plot_name(exp, gk, backend, device, n), title=title,
                                      png=plots.sweep_plot(title, list(ser.items()), fits=fits, ring=ring,
                                                           ring_label=ring_label,
                                                           link_rate_gbps=link_rate[1] if link_rate else None,
                                                           link_rate_text=link_rate[0] if link_rate else "")))
                for lab, (sop, f) in op_fits.items():
                    srecs = [r for r in ser[lab] if r["size_bytes"] > 0]
                    smax = max(r["size_bytes"] for r in srecs)
                    tmax = next(r["time_us"] for r in srecs if r["size_bytes"] == smax)
                    c = ring_coefficients(sop, n)
                    link_beta = f.beta_gbps * c[1] if c and math.isfinite(f.beta_gbps) else None
                    rt = ring_time_us(sop, n, link, smax) if link is not None and c else None
                    fit_rows.append(FitRow(experiment=exp, op=sop, series=f"{gk} {lab}" if lab != gk else gk,
                                           backend=backend, device=device, world_size=n, fit=f,
                                           link_beta_gbps=link_beta,
                                           ring_ratio=float(tmax / rt) if rt else None,
                                           rate_ratio=(link_beta / link_rate[1]) if (link_beta and link_rate) else None))
            else:
                fields = varying_fields(rs) + (["world_size"] if len(worlds) > 1 else [])
                labels = [label_of(r, fields) for r in rs]
                panels = [("time (µs), p05–p95", [r["time_us"] for r in rs],
                           [(r.get("p05_us", r["time_us"]), r.get("p95_us", r["time_us"])) for r in rs])]
                for k in _extra_numeric_fields(rs, varying_only=True)[:4]:
                    panels.append((k, [r.get(k) for r in rs], None))
                sec.plots.append(Plot(name=plot_name(exp, gk, backend, device, *worlds), title=title,
                                      png=plots.bar_plot(title, labels, panels)))
            if fmt is None and exp != "collectives":
                sec.grids.append(_grid(title, rs))
        sec.text_tables.append(format_tables([r for rs in groups.values() for r in rs]))
        sections.append(sec)

    return Report(run_name=run_name, environment=environment_summary(run), sections=sections, fits=fit_rows,
                  links=links, link_rate=link_rate, n_records=len(recs))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _grid(title: str, rs: list[dict]) -> tuple[list[str], list[list[str]]]:
    """An HTML table of a generic group: varying identity fields, the shared measurements, added numbers."""
    ident = varying_fields(rs) + (["world_size"] if len({r["world_size"] for r in rs}) > 1 else [])
    extra = _extra_numeric_fields(rs)
    cols = ident + ["size_bytes", "time_us", "p05_us", "p95_us", "algbw_gbps", "busbw_gbps", "n_wrong"] + extra
    return [title] + cols, [[""] + [_fmt(r.get(c, "")) for c in cols] for r in rs]


def fit_table_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    head = ["experiment", "series", "backend", "ranks", "α (µs)", "β (GB/s)", "R²", "points",
            "link β = busbw∞ (GB/s)", "measured / ring at max size"]
    if rep.link_rate:
        head.append(f"link β / LINK_RATE ({rep.link_rate[0]})")
    rows = []
    for f in rep.fits:
        row = [f.experiment, f.series, f"{f.backend}/{f.device}", str(f.world_size), f"{f.fit.alpha_us:.1f}",
               "inf" if math.isinf(f.fit.beta_gbps) else f"{f.fit.beta_gbps:.4g}", f"{f.fit.r2:.3f}",
               str(f.fit.n_points), "-" if f.link_beta_gbps is None else f"{f.link_beta_gbps:.4g}",
               "-" if f.ring_ratio is None else f"{f.ring_ratio:.2f}"]
        if rep.link_rate:
            row.append("-" if f.rate_ratio is None else f"{f.rate_ratio:.2f}")
        rows.append(row)
    return head, rows


_FIT_NOTE = ("α–β fit: time(S) = α + S/β per series, weighted least squares on relative error; R² of log(time). "
             "Ring model: time = a(n)·α_link + f(n)·S/β_link with a(n) latency steps and f(n) the busbw factor "
             "(all_reduce 2(n−1), 2(n−1)/n; all_gather/reduce_scatter/all_to_all (n−1), (n−1)/n; broadcast/reduce "
             "(n−1), 1). 'link β' is the fit's β times f(n), i.e. the asymptotic busbw; "
             "'measured / ring' > 1 means the op is slower than a ring over the reference link would be.")


# --- writers ---------------------------------------------------------------------------------------

_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#f3f3f3}pre{background:#f7f7f7;padding:0.6em;overflow-x:auto;font-size:11px}
img{max-width:100%;border:1px solid #eee;margin:0.4em 0}.note{color:#555;font-size:13px}
#imgcheck{color:#888;font-size:11px}h2{border-bottom:1px solid #ddd}"""

# Marks the page once every image has decoded (and records script errors), so a
# headless browser can confirm the report renders (tests/test_report.py).
_CHECK_JS = """window.__errors=[];window.addEventListener('error',e=>window.__errors.push(String(e.message)));
window.addEventListener('load',()=>{const im=[...document.images];
const bad=im.filter(i=>!(i.complete&&i.naturalWidth>0)).map(i=>i.alt);const el=document.getElementById('imgcheck');
el.dataset.total=im.length;el.dataset.bad=bad.length;el.dataset.errors=window.__errors.length;
el.textContent=`images rendered: ${im.length-bad.length}/${im.length}`+(bad.length?' missing: '+bad.join(', '):'');});"""


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def render_html(rep: Report) -> str:
    e = html.escape
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>Report {e(rep.run_name)}</title>"
           f"<style>{_CSS}</style><script>{_CHECK_JS}</script></head><body>",
           f"<h1>Communication report: {e(rep.run_name)}</h1>",
           "<p><a href='#environment'>environment</a> · <a href='#fits'>α–β fits</a> · " +
           " · ".join(f"<a href='#{s.anchor}'>{e(s.title)}</a>" for s in rep.sections) + "</p>",
           "<h2 id='environment'>Environment</h2>",
           _html_table(["", ""], [[k, v] for k, v in rep.environment])]
    out.append("<h2 id='fits'>α–β fits and the ring model</h2>")
    out.append(f"<p class='note'>{e(_FIT_NOTE)}</p>")
    for (backend, device, n), link in rep.links.items():
        out.append(f"<p class='note'>Reference link for {e(backend)}/{e(device)}, {n} ranks: α = {link.alpha_us:.3g} µs,"
                   f" β = {link.beta_gbps:.4g} GB/s ({e(link.source)})"
                   + (f"; configured LINK_RATE {e(rep.link_rate[0])} = {rep.link_rate[1]:.4g} GB/s, "
                      f"ratio {link.beta_gbps / rep.link_rate[1]:.2f}" if rep.link_rate else "") + "</p>")
    if rep.fits:
        out.append(_html_table(*fit_table_rows(rep)))
    else:
        out.append("<p>No size sweeps to fit.</p>")
    for s in rep.sections:
        out.append(f"<h2 id='{s.anchor}'>{e(s.title)}</h2>")
        for note in s.notes:
            out.append(f"<pre class='note'>{e(note)}</pre>")
        for p in s.plots:
            b64 = base64.b64encode(p.png).decode()
            out.append(f"<h3>{e(p.title)}</h3><img alt='{e(p.name)}' src='data:image/png;base64,{b64}'>")
        for head, rows in s.grids:
            out.append(_html_table(head, rows))
        for t in s.text_tables:
            out.append(f"<details><summary>text tables</summary><pre>{e(t)}</pre></details>")
    out.append("<p id='imgcheck'></p></body></html>")
    return "\n".join(out)


def render_markdown(rep: Report) -> str:
    def md_table(head, rows):
        esc = (lambda c: str(c).replace("|", "\\|"))
        return "\n".join(["| " + " | ".join(map(esc, head)) + " |", "|" + "---|" * len(head)] +
                         ["| " + " | ".join(map(esc, r)) + " |" for r in rows])

    out = [f"# Communication report: {rep.run_name}", "", "## Environment", "",
           md_table(["", ""], rep.environment), "", "## α–β fits and the ring model", "", _FIT_NOTE, ""]
    for (backend, device, n), link in rep.links.items():
        out.append(f"- reference link {backend}/{device}, {n} ranks: α = {link.alpha_us:.3g} µs, "
                   f"β = {link.beta_gbps:.4g} GB/s ({link.source})")
    if rep.fits:
        out += ["", md_table(*fit_table_rows(rep))]
    for s in rep.sections:
        out += ["", f"## {s.title}", ""] + [n + "\n" for n in s.notes]
        out += [f"![{p.title}]({p.name}.png)" for p in s.plots]
        for t in s.text_tables:
            out += ["", "```", t.rstrip(), "```"]
    return "\n".join(out) + "\n"


CSV_FIRST = ("run_id",) + results.REQUIRED_FIELDS


def to_csv(run: dict) -> str:
    """One row per record; shared fields first, then every other field (lists/dicts as JSON);
    per-iteration samples are left out (they stay in bench.json)."""
    recs = results.records(run)
    run_id = (run.get("suite") or {}).get("run_id", "")
    extra: OrderedDict = OrderedDict()
    for r in recs:
        for k in r:
            if k not in CSV_FIRST and k != "samples_us":
                extra.setdefault(k, None)
    cols = list(CSV_FIRST) + sorted(extra)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in recs:
        row = []
        for c in cols:
            v = run_id if c == "run_id" else r.get(c, "")
            row.append(json.dumps(v) if isinstance(v, (list, dict)) else ("" if v is None else v))
        w.writerow(row)
    return buf.getvalue()


def _run_dir(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p.parent if p.is_file() else p


def write_report(run_path: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Write index.html, report.md, the PNGs and results.csv; return the HTML's path.

    Default location: ``<run dir>/report/``. Files are written through temp names and
    renamed, so a reader never sees a half-written report."""
    run = results.load_run(run_path)
    rd = _run_dir(run_path)
    out = Path(out_dir) if out_dir is not None else rd / "report"
    out.mkdir(parents=True, exist_ok=True)
    name = str((run.get("suite") or {}).get("run_id") or rd.resolve().name)
    rep = build_report(run, run_name=name)

    def put(fname: str, data: bytes) -> None:
        tmp = out / f".{fname}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, out / fname)

    for s in rep.sections:
        for p in s.plots:
            put(f"{p.name}.png", p.png)
    put("results.csv", to_csv(run).encode())
    put("report.md", render_markdown(rep).encode())
    put("index.html", render_html(rep).encode())
    return out / "index.html"


# --- command line ------------------------------------------------------------------------------------

def _load(path: str):
    try:
        return results.load_run(path)
    except (OSError, ValueError) as e:
        print(f"error: cannot read run {path}: {e}", file=sys.stderr)
        return None


def _cmd_tables(args) -> int:
    run = _load(args.run)
    if run is None:
        return 2
    sys.stdout.write(format_tables(results.records(run)))
    return 0


def _cmd_html(args) -> int:
    if _load(args.run) is None:
        return 2
    path = write_report(args.run, args.out)
    print(f"report: {path}")
    print(f"markdown: {path.parent / 'report.md'}")
    return 0


def _cmd_csv(args) -> int:
    run = _load(args.run)
    if run is None:
        return 2
    text = to_csv(run)
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"csv: {args.out}")
    return 0


def write_comparison(c, out_dir: str | os.PathLike, stem: str = "compare") -> Path:
    """``<stem>.html`` (self-contained) and ``<stem>.png`` of a comparison: per group, the
    new/base ratio vs size with its CI, and the table of cases."""
    from suite import plots
    from suite.compare import describe_key

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups: OrderedDict = OrderedDict()
    for r in c.cases:
        d = dict(r.key)
        name = f"{d.get('experiment')}: {_group_key(d) if 'op' in d else '?'} ({d.get('backend')}, " \
               f"{d.get('device')}, {d.get('world_size')} ranks)"
        groups.setdefault(name, []).append((int(d.get("size_bytes") or 0), r.ratio, r.ci_low, r.ci_high, r.verdict))
    png = plots.ratio_grid(f"{c.new_name} vs {c.base_name}: {c.overall} (geometric mean {c.geomean_ratio:.3f})",
                           list(groups.items()), c.tolerance)
    (out / f"{stem}.png").write_bytes(png)
    e = html.escape
    rows = [[describe_key(r.key), f"{r.base_median_us:.1f}", f"{r.new_median_us:.1f}", f"{r.ratio:.3f}",
             f"[{r.ci_low:.3f}, {r.ci_high:.3f}]", f"{r.p_adjusted:.3g}",
             r.verdict + (" (significant)" if r in c.regressions else "")] for r in c.cases]
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>compare</title><style>{_CSS}</style>"
            f"<script>{_CHECK_JS}</script></head><body><h1>Comparison</h1>"
            f"<p>base: {e(c.base_name)}<br>new: {e(c.new_name)}</p><pre>{e(format_comparison_summary(c))}</pre>"
            f"<img alt='{stem}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
            + _html_table(["case", "base (µs)", "new (µs)", "ratio", "95% CI", "p (Holm)", "verdict"], rows)
            + "<p id='imgcheck'></p></body></html>")
    (out / f"{stem}.html").write_text(page)
    return out / f"{stem}.html"


def format_comparison_summary(c) -> str:
    from suite.compare import format_comparison

    return "\n".join(ln for ln in format_comparison(c).splitlines() if ln.startswith("# ") and "case" not in ln[:8])


def _cmd_compare(args) -> int:
    from suite.compare import compare_records, format_comparison

    base = _load(args.base)
    if base is None:
        return 2
    failed = False
    for new_path in args.new:
        new = _load(new_path)
        if new is None:
            return 2
        c = compare_records(results.records(base), results.records(new), base_name=args.base, new_name=new_path,
                            tolerance=args.tolerance, alpha=args.alpha)
        if not c.cases:
            print(f"error: {args.base} and {new_path} have no case in common", file=sys.stderr)
            return 2
        sys.stdout.write(format_comparison(c, show=args.show))
        if args.out:
            stem = "compare" if len(args.new) == 1 else f"compare-{args.new.index(new_path) + 1}"
            print(f"comparison report: {write_comparison(c, args.out, stem)}")
        failed |= c.failed
    return 1 if failed else 0


SUBCOMMANDS = ("tables", "html", "csv", "compare")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        argv = ["tables", *argv]  # `python -m suite.report RUN` prints the tables, as before
    ap = argparse.ArgumentParser(prog="python -m suite.report", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:3]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("tables", help="print nccl-tests-style tables")
    p.add_argument("run", help="results directory (e.g. results/latest) or bench.json")
    p.set_defaults(fn=_cmd_tables)
    p = sub.add_parser("html", help="write the HTML + Markdown report with plots and fits")
    p.add_argument("run")
    p.add_argument("--out", default=None, help="output directory (default: RUN/report)")
    p.set_defaults(fn=_cmd_html)
    p = sub.add_parser("csv", help="export the run's records as CSV")
    p.add_argument("run")
    p.add_argument("--out", default=None, help="file (default: stdout)")
    p.set_defaults(fn=_cmd_csv)
    p = sub.add_parser("compare", help="compare runs case by case; exit 1 on a regression")
    p.add_argument("base")
    p.add_argument("new", nargs="+")
    p.add_argument("--tolerance", type=float, default=0.05, help="practical margin, fraction (default 0.05)")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise significance level (default 0.05)")
    p.add_argument("--show", choices=("all", "changed"), default="all", help="which cases to list")
    p.add_argument("--out", default=None, help="also write DIR/compare.html and compare.png")
    p.set_defaults(fn=_cmd_compare)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
