"""The Slurm batch script against a real single-machine Slurm (slurmctld + slurmd).

CI installs and starts Slurm with .ci/setup.d/30-slurm.sh; run as root, these
tests (re)start the daemons through the same script when they are down, and
skip with the reason when Slurm is not installed. The suite runs with Gloo on
CPU at tiny sizes; the job is submitted with ``sbatch`` exactly as a
user would (scripts/slurm/suite.sbatch), and its bench.json is checked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from tests.conftest import ROOT, all_correct, small_run

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "scripts" / "slurm" / "suite.sbatch"
SETUP = ROOT / ".ci" / "setup.d" / "30-slurm.sh"
TINY = [
    "--experiments",
    "collectives",
    "--min-bytes",
    "96",
    "--max-bytes",
    "384",
    "--step-factor",
    "4",
    "--iters",
    "3",
    "--warmup",
    "1",
    "--redops",
    "sum",
    "--dtypes",
    "float32",
    "--backend",
    "gloo",
    "--device",
    "cpu",
]
JOB_TIMEOUT_S = 90


def _node_state() -> str:
    r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=15)
    return r.stdout.split()[0] if r.returncode == 0 and r.stdout.split() else ""


@pytest.fixture(scope="module")
def slurm():
    """A Slurm cluster with an idle node, or a skip that says why there is none."""
    if shutil.which("sbatch") is None or shutil.which("slurmctld") is None:
        assert os.environ.get("REQUIRE_SLURM") != "1", "REQUIRE_SLURM=1 but Slurm is not installed"
        pytest.skip(
            "Slurm is not installed; as root run .ci/setup.d/30-slurm.sh (CI does) to install "
            "and start a single-node cluster"
        )
    if _node_state() not in ("idle", "mix"):
        if os.geteuid() != 0:
            pytest.skip("no idle Slurm node and not root to start one; run sudo .ci/setup.d/30-slurm.sh")
        r = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{SETUP.name} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}"


@dataclass(frozen=True)
class Job:
    job_id: str
    state: str
    """Slurm's final JobState (COMPLETED, FAILED, ...)."""
    exit_code: str
    """Slurm's ExitCode, "status:signal"."""
    output: str
    """The job's stdout/stderr file."""


_FINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)


def _sbatch(tmp_path, sbatch_args: list[str], suite_args: list[str], env: dict) -> Job:
    """Submit the suite's batch script as a user would and wait for the job to end.

    ``sbatch --wait`` polls with a back-off that adds up to ~30 s per job, so the
    test submits with ``--parsable`` and watches the job itself.
    """
    out = tmp_path / "slurm-%j.out"
    cmd = ["sbatch", "--parsable", f"--output={out}", "--time=5", *sbatch_args, str(SCRIPT), *suite_args]
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    e.setdefault("SUITE_REPORT", "0")  # the HTML report costs seconds a job; no test here reads it
    e.update(PYTHON=sys.executable, **env)
    sub = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30, env=e)
    assert sub.returncode == 0, f"sbatch failed: {sub.stderr}"
    job_id = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    fields: dict = {}
    while time.monotonic() < deadline:
        r = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=15)
        fields = dict(kv.split("=", 1) for kv in r.stdout.split() if "=" in kv)
        if fields.get("JobState") in _FINAL:
            break
        time.sleep(0.5)
    else:
        subprocess.run(["scancel", job_id], timeout=15)
        pytest.fail(f"job {job_id} did not finish within {JOB_TIMEOUT_S} s (state {fields.get('JobState')})")
    p = tmp_path / f"slurm-{job_id}.out"
    return Job(
        job_id=job_id,
        state=fields["JobState"],
        exit_code=fields.get("ExitCode", "?"),
        output=p.read_text() if p.exists() else "",
    )


def _records(tmp_path, run_id: str = "run") -> tuple[dict, list[dict]]:
    with open(tmp_path / "results" / run_id / "bench.json") as fh:
        run = json.load(fh)
    return run, [b["extra_info"] for b in run["benchmarks"]]


def test_batch_job_runs_the_suite_on_one_node(slurm, tmp_path):
    """One node, one launcher with NPROC=2 ranks: the plain single-node job."""
    job = _sbatch(
        tmp_path,
        ["--nodes=1"],
        [*TINY, "--results-root", str(tmp_path / "results"), "--run-id", "run", "--", "-k", "all_reduce"],
        env={"NPROC": "2"},
    )
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.output[-4000:]
    run, recs = _records(tmp_path)
    assert run["suite"]["complete"] is True
    assert recs and {r["variant"] for r in recs} >= {"all_reduce"}
    assert all(r["world_size"] == 2 and r["n_wrong"] == 0 and r["backend"] == "gloo" for r in recs)
    mi = run["machine_info"]["suite"]
    assert len(mi["hostnames"]) == 2
    # the ranks ran inside this Slurm job (the environment capture records SLURM_*)
    envs = [h["env"] for h in mi["hosts"].values()]
    assert any(e.get("SLURM_JOB_ID") == job.job_id for e in envs), envs
    assert "1 launcher(s)" in job.output and "2 rank(s) each, gloo on cpu" in job.output


def test_the_mpi_lane_starts_its_ranks_with_srun_and_pmi(slurm, tmp_path):
    """BACKEND=mpi: one launcher in the batch step, which starts the 3 ranks with srun --mpi=pmi2 (hydra's mpiexec
    cannot start inside a job step); every case exact on the MPI process group."""
    mpi_tiny = [a for i, a in enumerate(TINY) if a not in ("--backend", "--device") and TINY[i - 1] not in (
        "--backend", "--device")]  # fmt: skip
    job = _sbatch(
        tmp_path,
        ["--nodes=1"],
        [*mpi_tiny, "--results-root", str(tmp_path / "results"), "--run-id", "run", "--", "-k", "all_reduce"],
        env={"NPROC": "3", "BACKEND": "mpi"},
    )
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.output[-4000:]
    run, recs = _records(tmp_path)
    assert run["suite"]["complete"] is True and recs
    assert all(r["world_size"] == 3 and r["backend"] == "mpi" for r in recs) and all_correct(recs)
    assert job.output.count("# run run: 1 node(s) x 3 rank(s)") == 1, job.output[-3000:]  # one launcher
    envs = [h["env"] for h in run["machine_info"]["suite"]["hosts"].values()]
    assert any(e.get("SLURM_JOB_ID") == job.job_id for e in envs), envs


def test_script_refuses_to_run_outside_slurm(tmp_path):
    """Run by hand (no job), the script says how to use it and exits 2."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    r = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "not inside a Slurm job" in r.stderr
    r = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "not the suite's repository" in r.stderr


def test_failed_ranks_fail_the_job(slurm, tmp_path):
    """A wrong result on one rank must end the Slurm job as FAILED, not COMPLETED."""
    job = _sbatch(
        tmp_path,
        ["--nodes=1"],
        [
            *TINY,
            "--max-bytes",
            "96",
            "--results-root",
            str(tmp_path / "results"),
            "--run-id",
            "run",
            "--",
            "-k",
            "all_reduce",
        ],
        env={"NPROC": "2", "SUITE_INJECT_CORRUPTION": "all_reduce"},
    )
    # exit 6: wrong results (docs/failures.md, exit statuses)
    assert job.state == "FAILED" and job.exit_code == "6:0", (job.state, job.exit_code, job.output[-3000:])
    assert "wrong element" in job.output
    _, recs = _records(tmp_path)
    assert recs and all(r["n_wrong"] >= 1 for r in recs)


def test_doctor_under_slurm_names_a_delayed_rank(slurm, tmp_path):
    """The batch script with the doctor selected, two tasks as two nodes: the verdict is the job's
    exit status (8: a finding) and doctor.json is written next to the results."""
    job = _sbatch(
        tmp_path,
        ["--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--overcommit"],
        [
            "--experiments",
            "doctor",
            "--iters",
            "10",
            "--warmup",
            "2",
            "--results-root",
            str(tmp_path / "results"),
            "--run-id",
            "run",
        ],
        env={"NPROC": "2", "SUITE_INJECT_DELAY": "3:0.004", "DOCTOR_COMPUTE_MS": "5"},
    )
    assert job.state == "FAILED" and job.exit_code == "8:0", (job.state, job.exit_code, job.output[-3000:])
    d = json.loads((tmp_path / "results" / "run" / "doctor.json").read_text())
    assert [s["rank"] for s in d["stragglers"]] == [3] and [f["kind"] for f in d["findings"]] == ["straggler"]
    assert "straggler  rank 3" in job.output
    # the job's closing line is the doctor's verdict, not a failure (status 8 is a finding)
    assert "# doctor: straggler" in job.output and "first failure" not in job.output, job.output[-2000:]


def test_a_frozen_rank_ends_the_job_within_heartbeat_and_kill_wait(slurm, tmp_path):
    """Issue "no run waits on a dead node", under Slurm: one rank of the second task freezes (SIGSTOP).
    The other ranks name it within HEARTBEAT_S and exit 5; srun --kill-on-bad-exit then ends the frozen
    task (SIGKILL after the cluster's KillWait, whatever its state). The job must end within heartbeat +
    grace, not at the collective timeout (TIMEOUT_S is 60 s here, the job limit 5 minutes)."""
    t0 = time.monotonic()
    job = _sbatch(
        tmp_path,
        ["--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--overcommit"],
        [
            *TINY,
            "--iters",
            "3",
            "--warmup",
            "1",
            "--heartbeat-timeout-s",
            "5",
            "--timeout-s",
            "60",
            "--results-root",
            str(tmp_path / "results"),
            "--run-id",
            "run",
        ],
        env={"NPROC": "2", "SUITE_INJECT_FAULT": "stop:3:2"},
    )
    elapsed = time.monotonic() - t0
    assert job.state == "FAILED" and job.exit_code == "5:0", (job.state, job.exit_code, job.output[-3000:])
    assert "rank 3" in job.output and "stopped responding" in job.output, job.output[-3000:]
    # start-up (~10 s) + heartbeat 5 s + the launchers' teardown + KillWait 5 s, well under TIMEOUT_S
    assert elapsed < 55, f"the job outlived its first failure: {elapsed:.0f} s"
    # the closing line names the node that failed first and its ranks' cause (the run dir chosen by the arguments)
    assert re.search(r"^# first failure: \S+ exited with status 5: rank 3 ", job.output, re.M), job.output[-2000:]
    # the tasks' status notes lived beside the runs and are gone; the run itself holds only the run
    assert not list((tmp_path / "results").glob(".tasks-*")) and not (tmp_path / "results" / "run" / "tasks").exists()


def test_two_tasks_rendezvous_like_two_nodes_and_a_planted_divergence_is_named_with_its_node(slurm, tmp_path):
    """Two srun tasks as two nodes, one rank each: the multi-node path (static rendezvous on MASTER_ADDR:
    MASTER_PORT, NODE_RANK from the task) on a single machine, which the first case, measured exact at 2 ranks,
    shows. Then rank 1 (task 1) sleeps in its own code inside the second case while rank 0 waits in the
    all_reduce. The job fails with status 9 (a divergence, not a lost peer) and its output and failures/ on
    the shared results directory name rank 1 and its node (Slurm's node name: on this one-machine cluster both
    tasks share it, so the per-rank lines carry it). Kept cheap: two small cases, TIMEOUT_S=5."""
    job = _sbatch(
        tmp_path,
        ["--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--overcommit"],
        small_run(
            "all_reduce-sum",
            backend="gloo",
            device="cpu",
            timeout_s=5,
            results_root=tmp_path / "results",
            run_id="run",
        ),
        env={"NPROC": "1", "SUITE_INJECT_DIVERGE": "sleep:1:9"},  # the 2nd timed call of the 2nd case
    )
    assert job.state == "FAILED" and job.exit_code == "9:0", (job.state, job.exit_code, job.output[-3000:])
    assert "2 launcher(s)" in job.output
    # both launchers reported a 2-node layout (each prints its own header)
    assert job.output.count("2 node(s) x 1 rank(s)") == 2, job.output[-3000:]
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True, timeout=15).stdout.strip()
    verdict = (
        r"rank 0 waits in all_reduce #\d+ \(case [^)]+\); rank 1 never entered it: "
        r"rank 1 at suite/harness/runner\.py:\d+"
    )
    assert re.search("# hang diagnosis: " + verdict, job.output), job.output[-3000:]
    failures = tmp_path / "results" / "run" / "failures"
    diag = json.loads((failures / "hang.json").read_text())
    assert diag["kind"] == "divergence" and re.search(verdict, diag["verdict"]), diag
    assert [(r["rank"], r["host"]) for r in diag["table"]] == [(0, node), (1, node)], (diag, node)
    assert f"#   rank 1 ({node}): " in (failures / "hang.txt").read_text()
    run, recs = _records(tmp_path)
    assert run["suite"]["hang_diagnosis"]["verdict"] == diag["verdict"]
    assert len(recs) == 1 and all_correct(recs), "the case measured before the divergence was lost"
    assert recs[0]["world_size"] == 2
