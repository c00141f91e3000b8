"""The recovery experiment's elastic job across two torchrun agents, as the compose simulation runs it across its
nodes, here both on this machine: node 0's agent started by ``elastic.run``, node 1's by ``elastic.follow`` (what a
suite rank of node 1 runs), one rank each, meeting at one c10d rendezvous that node 0's agent hosts (pinned: both
agents' machine is the endpoint's, so torchrun alone would let the first agent up host it). The job trains a model of
your own, SHARDED_MODEL's worked example (examples/sharded_model.py:build, its 8 rows 4 a rank), as the user's run
would (the MLP's job is tests/e2e/test_recovery.py's). Rank 1 is killed at step 3; both agents restart their ranks in
the next rendezvous round, which restore the checkpoint of step 2, and the job must end bitwise equal to its
fault-free run (every rank's state at every restore, commit and end). The planted bugs are tested on one agent
(tests/e2e/test_recovery.py: the same checks of every rank's state). About 35 s on the 2-core development machine at
a load of 5."""

from __future__ import annotations

import socket
import threading
import pytest

from experiments.recovery import elastic, measure, user
from experiments.recovery.worker import digest
from experiments.recovery.plan import Fault, Plan

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_job_of_two_agents_survives_a_kill_bitwise(tmp_path):
    root = tmp_path / "recovery"
    root.mkdir()
    plan = Plan(
        steps=6,
        ckpt_every=2,
        world=2,
        timeout_s=5,
        workdir=str(root),
        faults=(Fault(kind="kill", rank=1, step=3),),
        nnodes=2,
        rdzv_endpoint=f"127.0.0.1:{_free_port()}",
        model="examples.sharded_model:build",
        batch_per_rank=4,
    )
    stop = threading.Event()
    node1 = threading.Thread(target=elastic.follow, args=(str(root), 1, stop), daemon=True)
    node1.start()
    try:
        out = elastic.run(plan)
    finally:
        stop.set()
        node1.join(60)
    assert out["exact"] is True and out["wrong_step"] is None, out["wrong"]
    restored = [e for e in measure.read_events(min(root.glob("ref-*"))) if e["kind"] == "restore"]
    assert {e["digest"] for e in restored} == {digest(user.Yours(plan.model, 2).module())}  # the factory's weights
    assert out["steps_redone"] == 1 and out["samples_dropped"] == 0  # killed at step 3, restored step 2
    assert [(f["rank"], f["step"], f["struck"]) for f in out["per_fault"]] == [(1, 3, "step")]
    run = min(root.glob("run-*"))  # the first run's folder (named by its start's time)
    logs = sorted(p.name for p in run.glob("torchrun*.log"))
    assert logs == ["torchrun.log", "torchrun.node1.log"]  # each node's agent ran the job
    assert len((run / "rounds").read_text().split()) == 2  # one rendezvous round, then one after the kill
