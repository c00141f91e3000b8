"""Results writing: a case's measurement stored as a pytest-benchmark entry, and rank 0's
``<results-dir>/bench.json`` rewritten atomically after every case (marked incomplete until the session
ends)."""

from __future__ import annotations

import json
import os
import time

import pytest

from suite.harness.pytest import bench_adapter
from suite.harness.pytest.run_state import RUN
from suite.common import fileio
from suite.system import cpu_load


def submit(request, benchmark, m, record: dict) -> None:
    """Store a case: pytest-benchmark stats from ``m``, ``record`` as extra_info.

    Fails the test (on every rank alike, since ``n_wrong`` is global) when any
    element was wrong.
    """
    bench_adapter.store_samples(
        benchmark, m.samples_s, m.ops_per_sample, group=f"{record['experiment']}:{record['op']}", extra=record
    )
    config = request.config
    st = config.stash[RUN]
    st.records.append(record)
    if st.rank == 0:
        with st.phases("write"):
            write_results(config, complete=False)
    if (record.get("n_wrong") or 0) > 0:
        found = record.get("wrong_found") or []
        pytest.fail(
            f"{record['n_wrong']} wrong element(s) in {record['op']} "
            f"({record.get('dtype')}, {record.get('size_bytes')} B)" + "".join(f"\n  {f}" for f in found),
            pytrace=False,
        )


def output_json(config, complete: bool, exitstatus: int | None) -> dict:
    bs = bench_adapter.session(config)
    st = config.stash[RUN]
    # The file is rewritten after every case; machine and commit info do not change during a
    # run, and generating them costs ~0.2 s (py-cpuinfo, git), so they are computed once.
    if st.commit_info is None:
        st.commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    if st.machine_info is None and st.machine:
        st.machine_info = bs.get_machine_info()
    if st.machine:  # rank 0's host, sampled as the file is written (machine_info["suite"] is st.machine)
        st.machine["load_avg_run"] = cpu_load.track_load(st.machine.get("load_avg_run"), cpu_load.load_average())
    out = config.hook.pytest_benchmark_generate_json(
        config=config,
        benchmarks=[],  # the entries: encoded_benchmarks, each encoded once
        include_data=True,
        machine_info=st.machine_info or bs.get_machine_info(),
        commit_info=st.commit_info,
    )
    out["suite"] = {
        "complete": complete,
        "exitstatus": exitstatus,
        "run_id": config.option.run_id,
        "config": st.cfg.as_dict(),
        "started_unix": st.started_unix,
        "n_records": len(st.records),
        "skipped": list(st.skipped),
        "failed": list(st.failed),
        # rank 0's seconds per phase of the session so far (suite/harness/phases.py says what each covers)
        "phase_seconds": st.phases.breakdown(time.time() - st.started_unix),
        # the same per experiment: its cases' phases and the rest of their wall time
        "phase_seconds_by_experiment": st.phases.breakdown_by_experiment(),
    }
    return out


def encoded_benchmarks(config) -> list[str]:
    """Each stored benchmark as pytest-benchmark's JSON entry (``as_dict(include_data=True)``, what its
    pytest_benchmark_generate_json lists), encoded once: bench.json is rewritten after every case, and
    encoding every entry each time made writing it the largest cost of a run (docs/reports.md)."""
    bs = bench_adapter.session(config)
    cache = config.stash[RUN].encoded
    out = []
    for bench in bs.benchmarks:
        if bench.has_error:
            continue
        hit = cache.get(id(bench))
        if hit is None or hit[0] is not bench:
            hit = cache[id(bench)] = (bench, json.dumps(bench.as_dict(include_data=True), indent=1, default=str))
        out.append(hit[1])
    return out


def write_results(config, complete: bool, exitstatus: int | None = None) -> None:
    d = config.option.results_dir
    if not d:
        return
    text = fileio.dumps_with_list(output_json(config, complete, exitstatus), "benchmarks", encoded_benchmarks(config))
    fileio.write_text_atomic(os.path.join(d, "bench.json"), text, durable=complete or exitstatus is not None)
