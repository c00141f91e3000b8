"""The sharded experiment's pipeline schedules through the launcher users run (real Gloo groups): each rank's
stage trains what one process trains, the step's point-to-point traffic is what the stage boundaries
predict, a schedule that does not scale its micro-batches' gradients exits 6, and a micro-batch count that
does not divide the batch exits 2 before any rank starts."""

import collections
import json
import subprocess
import sys

import pytest

from tests.conftest import load_bench, run_suite, shown

pytestmark = pytest.mark.slow

SMALL = {"SHARDED_WIDTH": "16", "SHARDED_DEPTH": "3", "SHARDED_SEQ": "4", "SHARDED_BATCH": "8"}
RUN = ("--experiments", "sharded", "--iters", "3", "--warmup", "1")
M = 4  # SHARDED_MICROBATCHES' default
A = 4 * (8 // M) * 4 * 16  # bytes of one micro-batch's float32 activation


def _records(tmp_path) -> dict[str, dict]:
    return {b["extra_info"]["strategy"]: b["extra_info"] for b in load_bench(tmp_path)["benchmarks"]}


def _sent(rec: dict, rank: int, phase: str) -> dict[int, int]:
    """peer -> messages ``rank`` sent in ``phase`` (the inventory)."""
    out: dict[int, int] = {}
    for r in rec["inventory"]:
        if (r["rank"], r["op"], r["phase"]) == (rank, "send", phase):
            assert r["bytes"] == A and r["dtype"] == "float32", r
            out[r["peer"]] = out.get(r["peer"], 0) + r["count"]
    return out


def _trains_and_moves_what_the_boundaries_say(rec: dict, world: int, stages: int) -> None:
    s = rec["strategy"]
    assert rec["checked"] and rec["n_wrong"] == 0 and rec["check_rule"] == "exact", (s, rec.get("check_max_abs_diff"))
    assert rec["check_max_abs_diff"] == 0.0, s  # m = 4: the micro-batch scaling is exact
    assert rec["inventory_matches_theory"], (s, rec["inventory"], rec["theory"])
    messages = 2 * (stages - 1) * M  # an activation forward and a gradient backward per boundary and micro-batch
    assert rec["inventory_ops"] == messages and rec["inventory_bytes"] == messages * A == rec["size_bytes"], s
    assert rec["p2p_ops_dispatched"] == rec["p2p_ops_scheduled"] == 2 * messages, s  # a send and its recv
    for st in range(stages - 1):  # stage st on rank st mod world sends forward to the next stage's rank
        assert _sent(rec, st % world, "forward").get((st + 1) % world, 0) >= M, (s, st)
        assert _sent(rec, (st + 1) % world, "backward").get(st % world, 0) >= M, (s, st)
    assert sum(sum(_sent(rec, r, p).values()) for r in range(world) for p in ("forward", "backward")) == messages
    assert rec["mesh"] == f"{world} (pp)" and rec["stages"] == stages and rec["microbatches"] == M


def test_gpipe_and_interleaved_at_2_ranks_train_like_one_process(tmp_path):
    env = dict(SMALL, SHARDED_STRATEGIES="pp_gpipe,pp_interleaved")  # pp_1f1b: at 4 ranks, below
    proc = run_suite(tmp_path, *RUN, nproc=2, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _records(tmp_path)
    assert set(recs) == {"pp_gpipe", "pp_interleaved"}
    _trains_and_moves_what_the_boundaries_say(recs["pp_gpipe"], 2, 2)
    assert recs["pp_gpipe"]["bubble_fraction"] == pytest.approx(1 / 5)
    _trains_and_moves_what_the_boundaries_say(recs["pp_interleaved"], 2, 4)
    assert recs["pp_interleaved"]["bubble_fraction"] == pytest.approx(1 / 9)
    assert "pp_interleaved: ScheduleInterleaved1F1B, 4 stages (2 per rank)" in shown(proc)


def test_1f1b_and_the_interleaved_schedule_at_4_ranks_train_like_one_process(tmp_path):
    """At 4 ranks the stages' p2p traffic differs between ranks (1F1B: the middle ranks have two neighbours, the end
    ones one; its steady state sends and receives in one batch): the after-case check still finds the ranks in step.
    Profiled (PROFILE=1), so its steps are also replayed (``make what-if``): every send and its recv matched
    across the 4 ranks on their process group and sequence number, stage 3's send to stage 4 on rank 0 included."""
    env = dict(SMALL, SHARDED_DEPTH="7", SHARDED_STRATEGIES="pp_1f1b,pp_interleaved", SUITE_PROFILE="1")
    proc = run_suite(tmp_path, *RUN, nproc=4, env=env, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _records(tmp_path)
    _trains_and_moves_what_the_boundaries_say(recs["pp_1f1b"], 4, 4)
    assert recs["pp_1f1b"]["bubble_fraction"] == pytest.approx(3 / 7)
    _trains_and_moves_what_the_boundaries_say(recs["pp_interleaved"], 4, 8)
    run = tmp_path / "results" / "run"
    r = subprocess.run([sys.executable, "-m", "suite.postmortem.replay", str(run)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cases = {c["case"]: c for c in json.loads((run / "what-if.json").read_text())["cases"]}
    links = {  # 1F1B: a line of 4 stages; interleaved: each neighbour on the ring, both ways
        "pp_1f1b": {f"p2p {a}->{a + 1}" for a in range(3)} | {f"p2p {a + 1}->{a}" for a in range(3)},
        "pp_interleaved": {f"p2p {a}->{b}" for a in range(4) for b in ((a + 1) % 4, (a - 1) % 4)},
    }
    assert set(cases) == {f"test_sharded[{s}]" for s in links}, set(cases)
    for s, want in links.items():
        case = cases[f"test_sharded[{s}]"]
        assert case["steps"] == 3 and case["steps_skipped"] == 0, (s, case)
        assert case["ops_matched_on"] == "process group and sequence number", (s, case["ops_matched_on"])
        assert set(case["slowdown_by_op_type"]) == want | {"compute"}, (s, case["slowdown_by_op_type"])
        assert set(case["M_S_pct"]) == {"0", "1", "2", "3"}  # a pipeline: a stage per rank
    assert not (run / "failures").exists()  # a profiled run that did not fail leaves no failures/ folder
    # each journaled op at its own c10d number (a hang names the op by it), a batch's sends and recvs included
    events = json.loads((run / "trace.json").read_text())["traceEvents"]
    ops = [(e["tid"], e["args"]["group"], e["args"]["seq"]) for e in events if e.get("cat") == "op"]
    numbered = collections.Counter(op for op in ops if op[2] is not None)
    assert len(numbered) > 200 and max(numbered.values()) == 1, [op for op, n in numbered.items() if n > 1][:8]


def test_unscaled_or_misrouted_micro_batches_fail_the_check_and_exit_6(tmp_path):
    """Two planted schedule bugs: gradients not divided by the micro-batches (pp_unscaled), and the last stage's
    targets one micro-batch out of step with the first stage's inputs (pp_misrouted)."""
    strategies = "pp_gpipe,pp_unscaled,pp_misrouted,pp_interleaved"  # a failing run keeps its tail
    env = dict(SMALL, SHARDED_DEPTH="2", SHARDED_STRATEGIES=strategies)
    proc = run_suite(tmp_path, *RUN, nproc=2, env=env, timeout=300)
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]  # EXIT_WRONG_RESULT
    recs = _records(tmp_path)
    assert recs["pp_gpipe"]["n_wrong"] == 0
    for planted in ("pp_unscaled", "pp_misrouted"):
        bad = recs[planted]
        assert bad["n_wrong"] > bad["n_params"], (planted, bad["n_wrong"])  # most elements, both ranks, twice
        assert bad["check_max_abs_diff"] > 100 * max(bad["check_tol"], 1e-6), planted
        assert bad["planted"].startswith("wrong on purpose") and planted in proc.stderr
    assert "produced wrong elements" in proc.stderr
    # 3 layers cannot make 4 stages: the interleaved case takes the 3 blocks it needs, and says so
    assert recs["pp_interleaved"]["depth"] == 3 and recs["pp_interleaved"]["depth_raised_from"] == 2
    assert recs["pp_interleaved"]["n_wrong"] == 0 and recs["pp_gpipe"]["depth"] == 2
    assert "pp_interleaved: ScheduleInterleaved1F1B, 4 stages (2 per rank)" in shown(proc)
    assert "depth 3, " in shown(proc) and "(SHARDED_DEPTH=2 gives too few layers)" in shown(proc)


@pytest.mark.parametrize(
    "env, words",
    [
        ({"SHARDED_MICROBATCHES": "3"}, "SHARDED_MICROBATCHES=3 does not divide SHARDED_BATCH=8"),
        ({"SHARDED_MICROBATCHES": "four"}, "SHARDED_MICROBATCHES"),
    ],
)
def test_a_bad_micro_batch_count_exits_2_before_any_rank_starts(tmp_path, env, words):
    proc = run_suite(tmp_path, *RUN, nproc=2, env=dict(SMALL, **env), timeout=120)
    assert proc.returncode == 2 and words in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line
    assert not (tmp_path / "results" / "run" / "bench.json").exists()
