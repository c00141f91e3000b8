"""BACKEND=mpi: the collectives and p2p ops on the suite's MPI process group (mpi4py, ranks started by mpiexec),
through the launcher users run, checked exactly as on Gloo."""

import pytest

from suite.ops.collectives import REGISTRY
from tests.conftest import TINY_SIZE, all_correct, load_bench, run_suite

pytestmark = pytest.mark.slow


def test_mpi_runs_every_collective_exactly(tmp_path):
    # bfloat16: no MPI type (its data moves as int16, its reductions in float32); int64: integer avg
    args = ["--backend", "mpi", "--experiments", "collectives", *TINY_SIZE, "--iters", "3", "--warmup", "1"]
    proc = run_suite(tmp_path, *args, "--dtypes", "bfloat16,int64", timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert {r["backend"] for r in recs} == {"mpi"}
    assert all_correct(recs) and all(r["n_wrong_timed"] in (0, None) for r in recs)
    assert {r["variant"] for r in recs} == {c.variant for c in REGISTRY}, "a collective did not run on MPI"
    assert {r["redop"] for r in recs if r["variant"] == "all_reduce"} >= {"sum", "avg", "product", "min", "max"}
    assert "SKIPPED" not in proc.stdout
