"""The closing line of a compose run (docker/first-failure.sh, what docker/compose-run.sh prints once its
nodes have stopped), run here on stored results without Docker: the doctor's finding (status 8 from
node0) is said as the doctor's finding, naming the weak node, not as node0 failing; a real failure keeps
its node, status and cause. tests/docker/test_doctor_compose.py checks the same line end to end."""

from __future__ import annotations

import json
import subprocess

from experiments.doctor import verdict as doctor
from suite.common.failures import EXIT_FINDING, EXIT_PEER_FAILURE
from tests.conftest import ROOT
from tests.helpers.doctor_runs import THREE_NODES, doctor_run

SCRIPT = ROOT / "docker" / "first-failure.sh"


def _closing(run_dir, node: str, status: int) -> str:
    p = subprocess.run(["bash", str(SCRIPT), str(run_dir), node, str(status)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return p.stdout


def test_a_doctor_finding_is_said_as_the_doctors_not_as_a_node_failure(tmp_path):
    # node2's egress at a quarter of the others' (the compose test's LINK_RATES=node2=50mbit)
    slow = lambda p, a, b, k: 4.0 if p == "bandwidth" and a in (4, 5) and b < 4 else 1.0  # noqa: E731
    d = doctor.diagnose(doctor_run(THREE_NODES, slow=slow))
    assert d.exit_status == EXIT_FINDING
    doctor.write(tmp_path, d)
    out = _closing(tmp_path, "node0", EXIT_FINDING)
    assert "first failure" not in out, out
    assert out.startswith("# doctor: weak node node2 (ranks 4, 5): outgoing bandwidth: "), out
    assert out.endswith(f"(node0 exited with the doctor's status 8; {tmp_path}/doctor.json)\n"), out
    assert json.loads((tmp_path / "doctor.json").read_text())["headline"] in out


def test_the_doctors_text_comes_back_whole(tmp_path):
    """A straggler's times are in µs or ms: JSON writes µ as an escape, and the line gives it back."""
    (tmp_path / "doctor.json").write_text(json.dumps({"verdict": "findings", "headline": "straggler rank 2: 3 µs"}))
    assert _closing(tmp_path, "node0", EXIT_FINDING).startswith("# doctor: straggler rank 2: 3 µs (node0 exited")


def test_a_node_failure_is_still_the_first_failure_with_its_cause(tmp_path):
    (tmp_path / "failures").mkdir()
    note = {"rank": 3, "host": "node1", "cause": "rank 2 on node1 stopped answering"}
    (tmp_path / "failures" / "rank3.json").write_text(json.dumps(note, indent=1))
    out = _closing(tmp_path, "node1", EXIT_PEER_FAILURE)
    assert out == "# first failure: node1 exited with status 5: rank 2 on node1 stopped answering\n"
    # a status 8 with no diagnosis stored is not dressed up as one
    assert _closing(tmp_path / "none", "node0", EXIT_FINDING) == "# first failure: node0 exited with status 8\n"


def test_the_first_node_to_stop_is_named_with_the_verdict_of_the_node_that_saw_the_frozen_one(tmp_path):
    """docker pause node2: node1's heartbeat check names rank 4 and ends node1's ranks; node0's ranks, in a
    collective with node1's, note the closed socket and node0 stops first. The line names the frozen node, and
    which rank said so, not node0's socket error (CI, 2026-12-07)."""
    (tmp_path / "failures").mkdir()
    gloo = "RuntimeError in c.py::t: Connection closed by peer [172.18.0.3]:4711 (a remote worker crashing)"
    verdict = "rank 4 (host node2) stopped responding: no heartbeat for more than 8 s"
    for r, host, cause, extra in ((0, "node0", gloo, {}), (2, "node1", verdict, {"lost_ranks": [4]})):
        note = {"rank": r, "host": host, "cause": cause, "kind": "peer_failure", **extra}
        (tmp_path / "failures" / f"rank{r}.json").write_text(json.dumps(note))
    out = _closing(tmp_path, "node0", EXIT_PEER_FAILURE)
    assert out == f"# first failure: node0 exited with status 5: rank 2 on node1: {verdict}\n", out
    # a rank's own error outranks every loss of a peer, on whichever node; on the first node's own, no node named
    own = {"rank": 1, "host": "node0", "cause": "ValueError in c.py::t: boom", "kind": "rank_error"}
    (tmp_path / "failures" / "rank1.json").write_text(json.dumps(own))
    assert _closing(tmp_path, "node0", EXIT_PEER_FAILURE) == "# first failure: node0 exited with status 5: " + (
        "ValueError in c.py::t: boom\n"
    )
