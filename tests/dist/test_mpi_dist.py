"""BACKEND=mpi: the collectives and p2p ops on the suite's MPI process group (mpi4py, ranks started by mpiexec),
through the launcher users run, checked exactly as on Gloo; DDP and FSDP2 training on it; and the backends
experiment's three lanes side by side (Gloo, MPI through torch, bare mpi4py)."""

import re

import pytest

from experiments.backends import cases as backends
from suite.ops.collectives import REGISTRY
from tests.conftest import TINY_SIZE, all_correct, load_bench, run_suite, tables_of
from tests.helpers.misrouting import ONE_ELEMENT

pytestmark = pytest.mark.slow


SHARDED_SMALL = {"SHARDED_WIDTH": "16", "SHARDED_DEPTH": "2", "SHARDED_SEQ": "4", "SHARDED_BATCH": "4"}


def test_mpi_runs_every_collective_exactly_and_trains_ddp_fsdp2_and_model_parallel(tmp_path):
    # bfloat16: no MPI type (its data moves as int16, its reductions in float32); int64: integer avg
    experiments = "collectives,sharded,model_parallel"
    args = ["--backend", "mpi", "--experiments", experiments, *TINY_SIZE, "--iters", "3", "--warmup", "1"]
    env = dict(SHARDED_SMALL, SHARDED_STRATEGIES="ddp,fsdp2,tp", MP_IN="64", MP_OUT="64", MP_BATCH="8")
    proc = run_suite(tmp_path, *args, "--dtypes", "bfloat16,int64", timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert {r["backend"] for r in recs} == {"mpi"}
    assert all_correct(recs) and all(r["n_wrong_timed"] in (0, None) for r in recs)
    colls = [r for r in recs if r["experiment"] == "collectives"]
    assert {r["variant"] for r in colls} == {c.variant for c in REGISTRY}, "a collective did not run on MPI"
    assert {r["redop"] for r in colls if r["variant"] == "all_reduce"} >= {"sum", "avg", "product", "min", "max"}
    # DDP and FSDP2 train on MPI, each step checked against one process, every collective in the inventory
    steps = {r["strategy"]: r for r in recs if r["experiment"] == "sharded" and r["op"] == "train_step"}
    assert set(steps) == {"ddp", "fsdp2"}
    assert all(r["check_steps"] >= 1 and r["inventory_matches_theory"] for r in steps.values())
    # the model_parallel experiment's tensor-parallel and pipeline steps, checked as on Gloo
    mp = [r for r in recs if r["experiment"] == "model_parallel"]
    assert {r["op"] for r in mp} >= {"mp_train_step", "mp_forward_all_gather", "pipeline_overlap"}, mp
    # tensor parallelism needs DTensor's functional collectives: a skip with the reason, the only one
    skipped = re.findall(r"SKIPPED \[(\d+)\] \S+: (.*)", proc.stdout)
    assert [(n, why.split(" needs ")[0]) for n, why in skipped] == [("2", "tp")], skipped  # its step and replay
    assert "functional collectives" in skipped[0][1] and "runs on Gloo" in skipped[0][1]


LANES = ("gloo/cpu", "mpi/cpu", "mpi4py/numpy")


def test_backends_runs_gloo_mpi_and_bare_mpi_side_by_side_with_ratios(tmp_path):
    args = ["--backend", "mpi", "--experiments", "backends", *TINY_SIZE, "--iters", "5", "--warmup", "1"]
    proc = run_suite(tmp_path, *args, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert all_correct(recs) and all(r["n_wrong_timed"] in (0, None) for r in recs)
    compare = [r for r in recs if r.get("table") == "compare"]
    by_row: dict = {}
    for r in compare:
        by_row.setdefault((r["variant"], r["dtype"], r["size_bytes"]), {})[r["lane"]] = r
    assert {v for v, _, _ in by_row} == set(backends.COMPARED_VARIANTS) | {"send_recv"}
    for row, lanes in by_row.items():
        assert tuple(lanes) == LANES, row  # every op and size on all three lanes, in this order
        for i, lane in enumerate(LANES):
            got = {x["over"]: x for x in lanes[lane]["ratios"]}
            assert set(got) == set(LANES[:i]), (row, lane)  # over each lane timed before it
            for x in got.values():
                assert x["ci_low"] <= x["ratio"] <= x["ci_high"] and x["confidence"] == 0.95
                assert x["ratio"] == pytest.approx(lanes[lane]["time_us"] / lanes[x["over"]]["time_us"], rel=1e-6)
    bare = [r for r in compare if r["lane"] == "mpi4py/numpy"]
    assert all(r["mpi_wheel"].startswith("mpich ") and "not this machine's floor" in r["floor_note"] for r in bare)
    assert all(r["mpi_library"].startswith("MPICH Version:") for r in bare)
    assert "the MPI process group's own cost" in tables_of(proc)


def test_the_mpi_lane_s_checks_catch_misrouted_data(tmp_path):
    """The suite's own misroute fault (SUITE_INJECT_CORRUPTION=misroute:all, as tests/dist/test_misrouting_dist.py
    plants it on Gloo) on the MPI process group: every collective and p2p case that can hold a misplaced value fails
    its check, and the run exits 6."""
    args = ["--backend", "mpi", "--experiments", "collectives,p2p", "--min-bytes", "256", "--max-bytes", "256"]
    args += ["--iters", "2", "--warmup", "1", "--dtypes", "float32", "--", "-k", "not exchange"]
    proc = run_suite(tmp_path, *args, timeout=300, env={"SUITE_INJECT_CORRUPTION": "misroute:all"})
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    recs = [b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]]
    assert {r["backend"] for r in recs} == {"mpi"}
    missed = [r["label"] for r in recs if r["checked"] and not r["n_wrong"] and r["label"] not in ONE_ELEMENT]
    assert not missed, f"misrouted data passed the check on MPI: {missed}"
    assert {r["experiment"] for r in recs} == {"collectives", "p2p"} and len(recs) > 40
