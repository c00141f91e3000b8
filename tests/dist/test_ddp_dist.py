"""DDP, model parallelism and the source example on real Gloo groups (world 2 and 4).

- tests/ddp_checks.py under torchrun: training equivalence, identical parameters,
  DistributedSampler properties, manual all_reduce SGD vs DDP, split layer vs unsplit;
- the ddp and model_parallel experiments through the launcher users run, with a
  profiler trace per rank (SUITE_PROFILE);
- the article's example as-is through torchrun and torch.multiprocessing.spawn, its final
  parameters identical on every rank and equal to single-process training with batch N·b.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from experiments.ddp import models as training
from tests.conftest import ROOT, all_correct, load_bench, run_suite, shown, tables_of

pytestmark = pytest.mark.slow

EXAMPLE = "examples/ddp_source_example.py"


def _torchrun(nproc: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_training_checks(tmp_path, world):
    proc = _torchrun(world, "-m", "tests.ddp_checks", "--out", str(tmp_path), "--samples", "2048", "--epochs", "2")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for r in range(world):
        res = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert res["world_size"] == world
        failed = {k: v for k, v in res.items() if isinstance(v, dict) and not v["ok"]}
        assert not failed, f"rank {r}: {failed}"
        assert {
            "ddp_params_identical",
            "ddp_matches_single_process",
            "sampler_set_epoch_changes_order",
            "manual_matches_ddp",
            "model_parallel_all_gather_equals_unsplit",
        } <= set(res)


def test_experiments_through_launcher_with_profile(tmp_path):
    env = {
        "DDP_PARAMS": "300K",
        "DDP_BUCKETS_MB": "0.25",
        "DDP_BUCKET_FRACTIONS": "0.125,2",  # the two ends of the default sweep (0.125, 0.5, 1, 2)
        "DDP_ACCUM": "2",
        "MP_IN": "256",
        "MP_OUT": "256",
        "MP_BATCH": "16",
        "MP_STAGE_FEATURES": "128",
        "MP_MICROBATCH_ROWS": "16",
        "SUITE_PROFILE": "source-ddp]",
    }
    proc = _run_ddp(tmp_path, "--experiments", "ddp,model_parallel", nproc=2, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    assert run["suite"]["complete"] is True
    recs = [b["extra_info"] for b in run["benchmarks"]]
    assert all_correct(recs)
    ddp = [r for r in recs if r["experiment"] == "ddp"]
    # a training step (or DDP's constructor) times more than its all_reduce: an effective rate, never
    # an nccl-tests busbw; the bare all_reduce and the initial broadcast time communication alone
    for r in ddp:
        if not r["size_bytes"]:
            continue
        if r["op"] in ("all_reduce", "broadcast"):
            assert "time_includes" not in r and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"]), r["label"]
        else:
            assert r["busbw_gbps"] is None and "busbw_gbps" not in r["provenance"], r["label"]
            assert r["effective_busbw_gbps"] == pytest.approx(r["algbw_gbps"]) and r["time_includes"], r["label"]
    ops = {(r["model"], r["op"]) for r in ddp}
    for model in ("source", "mlp"):
        for op in (
            "solo_step",
            "local_step",
            "all_reduce",
            "ddp_step",
            "manual_allreduce_step",
            "manual_coalesced_step",
            "broadcast",
            "ddp_init",
        ):
            assert (model, op) in ops, (model, op)
    assert ("mlp", "ddp_accum_step") in ops
    mlp_ddp = next(r for r in ddp if r["variant"] == "mlp-ddp")
    assert 250_000 < mlp_ddp["n_params"] < 350_000 and mlp_ddp["size_bytes"] == 4 * mlp_ddp["n_params"]
    # every derived number is its formula over the measured ones, the baselines are those cases' own medians
    base = {
        k: next(r for r in ddp if r["model"] == "mlp" and sel(r))
        for k, sel in (
            ("solo", lambda r: r["op"] == "solo_step"),
            ("local", lambda r: r["op"] == "local_step"),
            ("noop", lambda r: r.get("hook") == "noop"),
            ("all_reduce", lambda r: r["op"] == "all_reduce"),
        )
    }
    t_ms = mlp_ddp["time_us"] / 1e3
    approx = lambda v: pytest.approx(v, rel=1e-9)  # noqa: E731
    assert mlp_ddp["samples_per_step"] == 2 * mlp_ddp["batch_per_rank"] and mlp_ddp["micro_batches"] == 1
    assert mlp_ddp["samples_per_s"] == approx(mlp_ddp["samples_per_step"] / (t_ms / 1e3))
    assert mlp_ddp["solo_step_ms"] == approx(base["solo"]["time_us"] / 1e3)
    assert mlp_ddp["scaling_efficiency"] == approx(mlp_ddp["solo_step_ms"] / t_ms)
    assert mlp_ddp["local_step_ms"] == approx(base["local"]["time_us"] / 1e3)
    assert mlp_ddp["comm_exposed_ms"] == approx(t_ms - mlp_ddp["local_step_ms"])
    noop, ar = base["noop"]["time_us"] / 1e3, base["all_reduce"]["time_us"] / 1e3
    assert (mlp_ddp["noop_step_ms"], mlp_ddp["allreduce_ms"]) == (approx(noop), approx(ar))
    assert mlp_ddp["comm_added_ms"] == approx(t_ms - noop) and mlp_ddp["overlap_saved_ms"] == approx(noop + ar - t_ms)
    assert mlp_ddp["overlap_saved_pct"] == approx(100 * (noop + ar - t_ms) / ar)
    # DDP's logger: 3 timed steps but the last; its intervals lie inside a step, the overlap inside the comm
    comm, ovl = mlp_ddp["ddp_logger_comm_ms"], mlp_ddp["ddp_logger_overlap_ms"]
    assert mlp_ddp["ddp_logger_steps"] == 2 and 0 < comm <= mlp_ddp["max_us"] / 1e3 and 0 <= ovl <= comm
    assert mlp_ddp["ddp_logger_overlap_pct"] == approx(100 * ovl / comm)
    assert mlp_ddp["peak_mem_bytes"] >= 4 * mlp_ddp["n_params"]  # the parameters alone are that much
    for k in ("bucket_sizes", "bucket_cap_bytes", "ddp_logger_steps", "check_steps", "n_buckets"):
        assert k in mlp_ddp and mlp_ddp["provenance"][k].startswith("measured:"), k
    assert sum(mlp_ddp["bucket_sizes"]) == mlp_ddp["grad_bytes"]
    assert len(mlp_ddp["bucket_sizes"]) == mlp_ddp["n_buckets"]
    assert "exact expected result" in mlp_ddp["provenance"]["n_wrong"]  # 2 ranks, float32: exact
    # every synchronised case is compared with single-process training: 2 ranks, float32 -> exact
    for r in ddp:
        if r["op"] in ("ddp_step", "manual_allreduce_step", "manual_coalesced_step", "ddp_accum_step") and r.get(
            "hook"
        ) not in ("noop", "powerSGD", "fp16_compress", "bf16_compress"):
            assert r["checked"] and r["n_wrong"] == 0 and r["check_rule"] == "exact", r["label"]
            assert r["check_max_abs_diff"] == 0 and r["check_steps"] == 5, r["label"]  # 2 warm-up + 3 timed
            if r["model"] == "mlp":  # and every rank's BatchNorm buffers, exactly (the source model has none)
                assert r["check_buffers"].startswith("exact") and r["check_buffer_max_abs_diff"] == 0, r["label"]
        if r["op"] in ("solo_step", "local_step") or r.get("hook") in ("noop", "powerSGD"):
            assert r["checked"] is False and r["n_wrong"] is None and r["unchecked_reason"], r["label"]
    fp16 = next(r for r in ddp if r["variant"] == "mlp-ddp_hook_fp16_compress")
    assert fp16["check_rule"].startswith("tol ") and 0 < fp16["check_max_abs_diff"] <= fp16["check_tol"]
    assert "stated tolerance" in fp16["provenance"]["n_wrong"] and "exact" not in fp16["provenance"]["n_wrong"]
    # accumulation without no_sync all-reduces the gradient once per micro-batch
    each = next(r for r in ddp if r["label"] == "accum x2 sync each")
    assert each["size_bytes"] == 2 * mlp_ddp["size_bytes"] and each["allreduces_per_step"] == 2
    # bucket caps relative to the gradient: the smallest cap cuts it into more buckets than the largest
    buckets = {r["bucket_fraction"]: r["n_buckets"] for r in ddp if "bucket_fraction" in r}
    assert sorted(buckets) == [0.125, 2.0] and buckets[0.125] > buckets[2.0] == 1, buckets
    labels = {r["label"] for r in ddp}
    assert {
        "ddp bucket_cap_mb=0.25",
        "ddp static_graph",
        "ddp gradient_as_bucket_view",
        "ddp broadcast_buffers=False",
        "ddp hook fp16_compress",
        "accum x2 no_sync",
    } <= labels
    # PowerSGD runs on the one-bucket source model; bf16 compression is skipped on Gloo/CPU with its reason
    assert any(r["variant"] == "source-ddp_hook_powerSGD" for r in ddp)
    assert "bf16_compress" in shown(proc) and "PowerSGD on Gloo needs the model in one DDP bucket" in shown(proc)
    mp = {r["op"] for r in recs if r["experiment"] == "model_parallel"}
    assert mp == {
        "scatter",
        "mp_forward_all_gather",
        "mp_forward_gather",
        "mp_train_step",
        "dp_train_step",
        "pipeline_compute",
        "pipeline_transfer",
        "pipeline_blocking",
        "pipeline_overlap",
    }
    # rank 0 wrote the comparison tables
    assert "# ddp: mlp model" in tables_of(proc) and "# model_parallel:" in tables_of(proc)
    assert "initial-state broadcast" in tables_of(proc)
    # one Chrome trace per rank for the selected case, with the gradient all_reduce in it
    prof = tmp_path / "results" / "run" / "profiles"
    traces = sorted(p.name for p in prof.glob("*.json"))
    assert traces == ["test_ddp_source-ddp.rank0.json", "test_ddp_source-ddp.rank1.json"], traces
    trace = json.loads((prof / traces[1]).read_text())
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert any("all_reduce" in n or "allreduce" in n for n in names), sorted(names)[:50]


PLANTED = {
    # world -> (DDP_HOOKS, -k): the hooks wrong on purpose and their honest twins, one launch per world
    # size that every test below reads (each asserts on its own variants).
    2: (
        "allreduce,sum,fp16_compress,bn_skew",
        "hook_allreduce or hook_sum or hook_fp16 or accum or (mlp and (hook or broadcast_buffers or manual))",
    ),
    4: (
        "allreduce,sum,fp16_compress,fp16_scaled,bn_skew",
        "hook_allreduce or hook_sum or hook_fp16 or accum or (mlp and (hook_bn_skew or broadcast_buffers))",
    ),
}


def _run_ddp(tmp_path, *args: str, nproc: int, env: dict) -> subprocess.CompletedProcess:
    """The experiments through the launcher users run, 2 warm-up and 3 timed steps (5 checked)."""
    return run_suite(tmp_path, *args, "--iters", "3", "--warmup", "2", nproc=nproc, env=env, timeout=400)


@pytest.fixture(scope="module")
def planted(request, tmp_path_factory):
    """(launcher output, records by variant) of the ddp experiment with PLANTED[world]'s hooks."""
    world = request.param
    hooks, k = PLANTED[world]
    tmp = tmp_path_factory.mktemp(f"planted{world}")
    env = {"DDP_PARAMS": "20K", "DDP_ACCUM": "2", "DDP_HOOKS": hooks}
    proc = _run_ddp(tmp, "--experiments", "ddp", "--", "-k", k, nproc=world, env=env)
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    return proc, {r["variant"]: r for r in (b["extra_info"] for b in load_bench(tmp)["benchmarks"])}


@pytest.mark.parametrize("planted", [2, 4], indirect=True)
def test_a_hook_that_sums_instead_of_averaging_fails_the_reference_check(planted):
    # 2 ranks: the exact rule; 4 ranks: the float32 tolerance (the sum is 4x the average, far outside it)
    proc, recs = planted
    world = recs["mlp-ddp_hook_sum"]["world_size"]
    rule = "exact" if world == 2 else "tol"
    for model in ("source", "mlp"):
        wrong = recs[f"{model}-ddp_hook_sum"]
        # most elements on every rank, after the check step and after the timed steps (a dead unit's are 0 anyway)
        assert wrong["checked"] and wrong["n_wrong"] > wrong["count"] * world, wrong["n_wrong"]
        assert wrong["check_rule"].split()[0] == rule
        right = recs[f"{model}-ddp_hook_allreduce"]
        assert right["n_wrong"] == 0 and right["check_rule"].split()[0] == rule
        assert right["check_max_abs_diff"] <= right["check_tol"] < wrong["check_max_abs_diff"] / 100
        if model == "mlp":  # buffers: exact where the parameters are, else after the one-step check only
            assert right["check_buffers"].startswith("exact (" if world == 2 else "exact after the one-step check")
        assert recs[f"{model}-ddp_hook_fp16_compress"]["n_wrong"] == 0
    for accum in ("mlp-accum_x2_no_sync", "mlp-accum_x2_sync_each"):
        assert recs[accum]["n_wrong"] == 0 and recs[accum]["checked"]
    assert "produced wrong elements" in proc.stderr and "ddp_hook_sum" in proc.stderr


@pytest.mark.parametrize("planted", [4], indirect=True)
def test_an_fp16_average_1_01_too_large_fails_the_per_element_tolerance(planted):
    """4 ranks, fp16 wire: the tolerance is per element (each parameter's own max|g| and max|p|), so a hook
    whose average is 1.01 times too large fails while the honest fp16 hook passes. (One scalar for every
    parameter, the largest, let it through: tests/unit/test_ddp.py shows it on the reference.)"""
    proc, recs = planted
    for model in ("source", "mlp"):
        honest, scaled = recs[f"{model}-ddp_hook_fp16_compress"], recs[f"{model}-ddp_hook_fp16_scaled"]
        assert honest["checked"] and honest["n_wrong"] == 0 and honest["check_rule"].startswith("tol per element")
        assert scaled["checked"] and scaled["n_wrong"] > 0, scaled["n_wrong"]
        assert scaled["check_max_abs_diff"] > honest["check_max_abs_diff"]
    assert "produced wrong elements" in proc.stderr and "ddp_hook_fp16_scaled" in proc.stderr


@pytest.mark.parametrize("planted", [2, 4], indirect=True)
def test_buffers_off_by_2_pow_minus_10_fail_and_every_buffer_mode_passes(planted):
    """Every rank's BatchNorm buffers are compared with what the reference says that rank holds (rank 0's
    broadcast before each forward, or, with broadcast_buffers=False and in the manual cases, the rank's own
    running stats): at 2 ranks (exact rule) after every check, at 4 (tol) exactly after the one-step check,
    whose forwards all ran on the initial parameters, and after the timed steps within the bound the
    parameters' tolerance gives them (experiments/ddp/buffer_bound.py). A hook that averages correctly but
    moves running_mean by 2^-10 fails on the buffers alone (exit 6) at both, after the timed steps too; the
    honest cases, each rank's buffers its own, pass."""
    proc, recs = planted
    skew = recs["mlp-ddp_hook_bn_skew"]
    world = skew["world_size"]
    assert skew["checked"] and skew["n_wrong"] > 0, skew
    if world == 2:  # the parameters are right; the record's buffer difference is the timed steps' (exact rule)
        assert skew["check_max_abs_diff"] == 0 and skew["check_buffer_max_abs_diff"] >= 2**-10, skew
    else:  # the parameters within their tolerance, the buffers beyond theirs after the timed steps too
        assert skew["check_max_abs_diff"] <= skew["check_tol"] and skew["n_wrong_timed"] > 0, skew
        assert skew["check_buffer_tol"] > 0, skew  # the largest bound, a running var's: each element has its own
    honest = [
        "mlp-ddp_hook_allreduce",
        "mlp-ddp_broadcast_buffers=False",
        "mlp-manual_all_reduce",
        "mlp-manual_coalesced",
        "mlp-accum_x2_no_sync",
        "mlp-accum_x2_sync_each",
    ]
    for v in honest[:2] if world == 4 else honest:
        r = recs[v]
        assert r["checked"] and r["n_wrong"] == 0, (v, r.get("n_wrong"))
        assert r["check_buffers"].startswith("exact"), v
        if world == 2:
            assert r["check_buffer_max_abs_diff"] == r["check_buffer_tol"] == 0, v
        else:
            assert r["check_buffer_max_abs_diff"] <= r["check_buffer_tol"], v
            assert "after the timed steps within a bound per element" in r["check_buffers"], v
    assert "rank 0's" in recs["mlp-ddp_hook_allreduce"]["check_buffers"]
    own = recs["mlp-ddp_broadcast_buffers=False"]["check_buffers"]
    assert own == "exact (the rank's own batches)" if world == 2 else own.startswith("exact after the one-step")
    assert "produced wrong elements" in proc.stderr and "ddp_hook_bn_skew" in proc.stderr


def _load(path):
    return training.flat_params_from_state(torch.load(path))


def _single_process_reference(world: int, epochs: int, samples: int) -> torch.Tensor:
    model = training.source_model(seed=0)  # the example's torch.manual_seed(0); nn.Linear(1024, 10)
    training.train_single_process_equivalent(
        model,
        training.make_dataset(samples),
        world_size=world,
        batch_per_rank=training.SOURCE.batch_per_rank,
        epochs=epochs,
        lr=training.SOURCE.lr,
    )
    return training.flat_params(model)


TEARDOWN_ABORT = "terminate called without an active exception"
"""What the article's teardown prints when a Gloo worker thread releases DDP's last work object during
interpreter shutdown (examples/ddp_source_example.py, "Teardown"; README, DDP)."""


def _run_example(tmp_path, launcher: str, *extra: str) -> subprocess.CompletedProcess:
    # Reduced run (2 epochs over 2,000 samples instead of 5 over 10,000) to stay within the test budget.
    args = [EXAMPLE, "--epochs", "2", "--samples", "2000", "--out", str(tmp_path), *extra]
    if launcher == "torchrun":
        return _torchrun(2, *args)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    return subprocess.run(
        [sys.executable, *args, "--nprocs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(env, OMP_NUM_THREADS="1"),
    )


def _trained_identically(tmp_path, proc) -> None:
    assert "epoch 1: mean loss" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    p0, p1 = _load(tmp_path / "rank0.pt"), _load(tmp_path / "rank1.pt")
    assert torch.equal(p0, p1)
    ref = _single_process_reference(2, 2, 2000)
    assert (p0 - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_source_example_runs_as_is(tmp_path, launcher):
    """The article's code, unchanged: training completes identically on both ranks and equals one
    process. Its exit is not guaranteed: at a measured rate (README) a rank aborts in teardown with
    Gloo, after training; that abort, and only that one, is accepted here."""
    proc = _run_example(tmp_path, launcher)
    if proc.returncode != 0:
        assert TEARDOWN_ABORT in proc.stderr, proc.stdout[-2000:] + proc.stderr[-3000:]
    _trained_identically(tmp_path, proc)


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_source_example_with_corrected_teardown_exits_0(tmp_path, launcher):
    """The corrected pattern (release DDP, then destroy the group): the same training, and exit 0."""
    proc = _run_example(tmp_path, launcher, "--teardown", "corrected")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert TEARDOWN_ABORT not in proc.stderr
    _trained_identically(tmp_path, proc)
