"""The sharded decomposition's pure parts: the exposed/hidden formulas, how an inventory row is replayed
through the op table, the table's decomposition block, the fake-backend adapter's version check."""

import pytest

from experiments.sharded import decompose, internals
from experiments.sharded.table import format_tables


def test_exposed_is_the_step_less_compute_and_hidden_the_replay_less_exposed():
    assert decompose.split(10.0, 6.0, 3.0) == {"exposed_comm_s": 4.0, "hidden_comm_s": 0.0, "step_compute_s": 7.0}
    s = decompose.split(10.0, 8.0, 5.0)  # 3 of 5 overlapped
    assert (s["exposed_comm_s"], s["hidden_comm_s"]) == (2.0, 3.0)
    assert decompose.split(5.0, 6.0, 2.0)["exposed_comm_s"] == 0.0  # floored at 0


def test_a_compute_alone_over_its_step_leaves_the_compute_the_step_did_to_step_less_replay():
    # tp on shared cores: the step on fake groups, measured apart, took longer than the whole step
    s = decompose.split(0.111, 0.150, 0.040)
    assert s["exposed_comm_s"] == 0.0 and s["hidden_comm_s"] == pytest.approx(0.040)
    assert s["step_compute_s"] == pytest.approx(0.071) and "step_compute_s" in decompose.PROVENANCE
    assert decompose.split(0.030, 0.010, 0.031)["step_compute_s"] == 0.0  # two medians: never below 0


def _row(op, dtype="float32", nbytes=4096, group="dp", count=1):
    return {"op": op, "dtype": dtype, "bytes": nbytes, "group": group, "phase": "forward", "count": count}


def test_replay_takes_the_functions_fsdp2_and_dtensor_call_and_checks_sums():
    coll, a = decompose.replay_args(_row("all_gather", "bfloat16", 4096), 2)
    assert (coll.op, a.variant, a.dtype, a.redop) == ("all_gather", "all_gather_into_tensor", "bfloat16", None)
    assert (a.count, a.size_bytes) == (2048, 4096)
    coll, a = decompose.replay_args(_row("reduce_scatter"), 4)
    assert (a.variant, a.redop, a.count) == ("reduce_scatter_tensor", "sum", 1024)
    _, a = decompose.replay_args(_row("all_reduce", nbytes=128), 3)
    assert (a.variant, a.count, a.size_bytes) == ("all_reduce", 32, 128)  # not chunked: no rounding


def test_a_chunked_replay_rounds_down_to_the_group_and_counts_what_it_moved():
    _, a = decompose.replay_args(_row("all_gather", nbytes=40), 3)  # 10 floats over 3 ranks
    assert a.count == 9 and a.size_bytes == 36
    rows = [_row("all_gather", nbytes=40, count=2), _row("all_reduce", nbytes=40, group="tp")]
    assert decompose.replay_bytes(rows, {"dp": 3, "tp": 2}) == 2 * 36 + 40


def test_an_op_the_replay_cannot_issue_fails_the_case_with_its_name():
    with pytest.raises(decompose.CaseFailed, match="'unknown'"):
        decompose.replay_args(_row("unknown"), 2)


def _step(strategy, p50_ms, peak_mib, **kw):
    return {
        "experiment": "sharded", "op": "train_step", "label": strategy, "strategy": strategy, "backend": "gloo",
        "device": "cpu", "world_size": 2, "timing_mode": "blocking", "iterations": 3, "p50_us": p50_ms * 1e3,
        "samples_us": [p50_ms * 1e3] * 3, "n_params": 100, "width": 4, "depth": 1, "seq": 2, "batch": 2,
        "n_wrong": 0, "checked": True, "check_rule": "exact", "peak_mem_bytes": peak_mib * 2**20, "inventory": [],
    } | kw  # fmt: skip


def _replay(strategy, step_ms, compute_ms, comm_ms, n_wrong=0):
    rec = _step(strategy, comm_ms, 0, op="comm_replay", label=f"replay-{strategy}", n_wrong=n_wrong)
    s = decompose.split(step_ms / 1e3, compute_ms / 1e3, comm_ms / 1e3)
    return rec | {"step_s": step_ms / 1e3, "compute_s": compute_ms / 1e3, "comm_replay_s": comm_ms / 1e3} | s


def test_table_shows_where_the_time_goes_and_memory_against_ddps():
    recs = [
        _step("ddp", 10.0, 200, compute_s=0.006),
        _replay("ddp", 10.0, 6.0, 3.0),
        _step("fsdp2", 20.0, 300, compute_s=0.021),
        _replay("fsdp2", 20.0, 21.0, 5.0),
    ]
    out = format_tables(recs)
    decomp = [ln.split() for ln in out.split("where the step's time goes")[1].splitlines()[2:4]]
    assert decomp[0] == ["ddp", "10.00", "6.00", "3.00", "4.00", "0.00", "0", "200", "1.00"]
    assert decomp[1] == ["fsdp2", "20.00", "21.00", "5.00", "0.00", "5.00~", "0", "300", "1.50"]  # compute > step
    assert "replay-" not in out  # the replays are columns, not rows
    assert "replayed collectives differing from their exact values, all ranks: 0 [OK]" in out


def test_table_fails_a_wrong_replay():
    out = format_tables([_step("tp", 5.0, 100), _replay("tp", 5.0, 4.0, 1.0, n_wrong=3)])
    assert "all ranks: 3 [FAILED]" in out


def test_fake_backend_refuses_an_older_torch_and_names_the_fix():
    with pytest.raises(
        internals.FakeBackendMissing, match=r"torch 2.5.1\+cpu is older than 2.13.*pip install torch>=2.13"
    ):
        internals.fake_backend("2.5.1+cpu")
    assert internals.fake_backend() == "fake"  # this torch (2.13) has it


def test_the_report_section_draws_the_split_from_stored_records():
    from experiments.sharded import SPEC, report

    recs = [_step("ddp", 10.0, 200, compute_s=0.006), _replay("ddp", 10.0, 6.0, 3.0), _step("tp", 5.0, 100)]
    run = {"benchmarks": [{"extra_info": r} for r in recs]}
    sec = SPEC.report_section(run, lambda *parts: "-".join(map(str, parts)), {})
    assert [p.name for p in sec.plots] == ["sharded-gloo-cpu-2"] and sec.plots[0].png.startswith(b"\x89PNG")
    assert "where the step's time goes" in sec.text_tables[0]
    assert report.decomposition_plot("t", [_step("tp", 5.0, 100)]) is None  # no replay: no figure


def test_identical_replayed_calls_carry_distinct_values_so_a_misrouted_one_is_wrong():
    """Two all_reduces (and two all_gathers) of one shape, as a TP step issues them: the suite's misroute fault
    (two outputs of one shape trade places) must be seen. With the same values in every call it
    was not: the replay of tp passed under SUITE_INJECT_CORRUPTION=misroute."""
    from suite.common.config import BenchConfig
    from suite.harness.plant.corruptions import misroute
    from tests.helpers.inprocess import lone_group

    rows = [_row("all_reduce", nbytes=64, count=2), _row("all_gather", nbytes=64, count=2, group="tp")]
    with lone_group(BenchConfig(iters=2, warmup_iters=1, heartbeat_timeout_s=0)) as ctx:
        for order in (rows, rows[::-1]):  # the all_reduces trade places; then the all_gathers do
            b = decompose.replay_buffers(order, ctx, lambda name: ctx.group)
            b.call(False)
            assert b.check() == 0
            misroute(list(b.outputs())[:2], ctx.world_size)  # the first two calls' outputs
            assert b.check() == 2 * 16, order[0]["op"]  # every element of the two swapped outputs
