"""The environment summary of a stored run: (name, value) rows of its id, date, status, config, world,
versions, hosts, GPUs and commit, from its machine_info and suite metadata."""

from __future__ import annotations

from suite import results
from suite.system import cpu_load


def fmt_bytes(n) -> str:
    if not n:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:z.1f} {unit}"
    return f"{n} B"


def _iters_text(cfg: dict, recs: list[dict]) -> str:
    """``iters=N`` as asked, or the iterations that ran where the sample budget or the precision loop
    decided the count (the range over the cases, with what was asked)."""
    counts = sorted({r["iterations"] for r in recs if isinstance(r.get("iterations"), int)})
    decided = any(r.get("stopped_by_budget") or "precision_reached" in r for r in recs)
    if not counts or not decided or counts == [cfg.get("iters")]:
        return f"iters={cfg.get('iters')}"
    ran = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else str(counts[0])
    by = "PRECISION" if any("precision_reached" in r for r in recs) else "BUDGET_S"
    return f"iters={ran} ran (ITERS={cfg.get('iters')} asked, {by} decided)"


def _cpu_text(h: dict, su: dict, name: str) -> str:
    """A host's usable cores for its ranks and its load average (1/5/15 min) at the start, and for rank 0's
    host its 1-minute peak and the end through the run; empty for a run stored before they were recorded."""
    out = ""
    share = h.get("cpu_share") or {}
    if share.get("usable_cpus"):
        on = cpu_load.cores(share["usable_cpus"], "usable ")
        out += f"; {share['ranks']} ranks x {share.get('threads_per_rank')} intra-op thread(s) on {on}"
        out += f" (CPUs {h['cpus_allowed']})" if h.get("cpus_allowed") else ""
    start = h.get("load_avg_start")
    if start:
        out += f"; load average (1/5/15 min) {_loads(start)} at the start"
    during = su.get("load_avg_run") or {}
    if start and name == (su.get("hostnames") or [None])[0] and during.get("end"):
        out += f", 1-min peak {during['peak_1min']:z.2f}, {_loads(during['end'])} at the end"
    return out


def _loads(xs: list[float]) -> str:
    return "/".join(f"{x:z.2f}" for x in xs)


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
                f"{fmt_bytes(cfg.get('min_bytes'))}..{fmt_bytes(cfg.get('max_bytes'))} x{cfg.get('step_factor')}"
                f" dtypes={','.join(cfg.get('dtypes') or [])} {_iters_text(cfg, results.records(run))} warmup="
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
                    f"(affinity {h.get('affinity_cpus')}), {fmt_bytes(h.get('memory_bytes'))}"
                    f" RAM, kernel {h.get('kernel')}; container={c.get('in_container')} "
                    f"cgroup cpus={c.get('cgroup_cpus')} mem={fmt_bytes(c.get('cgroup_memory_bytes'))}"
                    f" /dev/shm={fmt_bytes(c.get('dev_shm_bytes'))}" + _cpu_text(h, su, name),
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
                    "; ".join(f"{g.get('index')}: {g.get('name')} ({fmt_bytes(g.get('memory_bytes'))})" for g in gpus)
                    + f"; driver {(su.get('gpu') or {}).get('driver')}",
                )
            )
        rows.append(("suite commit", str(su.get("suite_commit"))))
    ci = run.get("commit_info") or {}
    if ci.get("id"):
        rows.append(("git", f"{ci.get('branch')} {ci.get('id', '')[:12]}{' (dirty)' if ci.get('dirty') else ''}"))
    return rows
