"""Records carry the schema fields; JSON is written atomically; env capture is sane."""

import dataclasses
import json
import os
from pathlib import Path

import pytest

from suite import results
from suite.system import sysinfo
from suite.case import Bytes
from suite.measurement import Measurement


def _m(samples):
    return Measurement(
        samples_s=samples, timing_mode="blocking", ops_per_sample=1, warmup_iters=2, precision_reached=None
    )


CHECKED = results.CheckOutcome(wrong=(0, 0), buffer_sets=1)
UNCHECKED = results.CheckOutcome(wrong=None, unchecked_reason="no data")


def _case(**kw) -> results.RecordCase:
    """A 3-rank all_gather on Gloo (``kw`` overrides)."""
    return results.RecordCase(**(dict(experiment="collectives", op="all_gather", backend="gloo", device="cpu",
                                      world_size=3) | kw))  # fmt: skip


def _size(size_bytes: int = 3000, count: int = 750, **kw) -> Bytes:
    """``size_bytes`` of float32 with all_gather's bus factor (``kw`` overrides)."""
    return Bytes(**(dict(size_bytes=size_bytes, count=count, dtype="float32", bw_op="all_gather") | kw))


def _rec(m, case=None, size=None, check=CHECKED, **fields) -> dict:
    """A record of ``m`` for a 3-rank all_gather of 3000 B, checked (the arguments override)."""
    return results.make_record(case=case or _case(), size=size or _size(), m=m, check=check, fields=fields)


def test_record_has_every_field_and_consistent_bandwidth():
    rec = _rec(
        _m([1e-3, 2e-3, 3e-3]),
        _case(op="all_reduce", world_size=4, in_place=True),
        _size(4_000_000, 1_000_000, bw_op="all_reduce"),
    )
    for f in results.REQUIRED_FIELDS:
        assert f in rec, f
    assert rec["time_us"] == pytest.approx(2000.0)
    assert rec["algbw_gbps"] == pytest.approx(2.0)
    assert rec["busbw_gbps"] == pytest.approx(3.0)  # 2 * (4-1)/4 = 1.5
    assert rec["iterations"] == 3 and len(rec["samples_us"]) == 3


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "d" / "bench.json"
    results.write_json_atomic(p, {"a": 1})
    results.write_json_atomic(p, {"a": 2})
    assert json.loads(p.read_text()) == {"a": 2}
    assert os.listdir(p.parent) == ["bench.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # as readable as any file, not mkstemp's 0600


def test_atomic_write_failure_keeps_previous_file(tmp_path):
    p = tmp_path / "bench.json"
    results.write_json_atomic(p, {"ok": True})

    class Unprintable:
        def __str__(self):
            raise RuntimeError("serialisation fails half-way through the file")

    with pytest.raises(RuntimeError):
        results.write_json_atomic(p, {"first": list(range(1000)), "bad": Unprintable()})
    assert json.loads(p.read_text()) == {"ok": True}
    assert os.listdir(tmp_path) == ["bench.json"]


def test_env_capture_filters_and_hides_secrets():
    env = {
        "NCCL_DEBUG": "INFO",
        "GLOO_SOCKET_IFNAME": "eth0",
        "HOME": "/root",
        "TORCH_API_TOKEN": "x",
        "MASTER_ADDR": "node0",
    }
    got = sysinfo.relevant_env(env)
    assert got == {"GLOO_SOCKET_IFNAME": "eth0", "MASTER_ADDR": "node0", "NCCL_DEBUG": "INFO"}


def test_collect_local_and_global():
    info = sysinfo.collect_local()
    for k in ("hostname", "cpu_model", "cpu_count", "memory_bytes", "container", "env"):
        assert k in info
    assert "dev_shm_bytes" in info["container"]
    g = sysinfo.collect_global([info, dict(info, hostname="other")])
    assert g["hostnames"] == [info["hostname"], "other"] and g["n_hosts"] == 2
    assert g["versions"]["torch"]
    assert g["hosts"]["other"]["ranks"] == [1]


def test_git_commit_asks_the_checkout_root(monkeypatch):
    # inside the image there is no git: the commit then comes from SUITE_GIT_COMMIT or the GIT_COMMIT file
    # the build writes at the checkout root, so the default folder must be the root, not suite/system/
    asked = []

    def no_git(args, **kw):
        asked.append(args)
        raise OSError("no git here")

    monkeypatch.setattr(sysinfo.subprocess, "run", no_git)
    monkeypatch.setenv("SUITE_GIT_COMMIT", "abc123")
    assert sysinfo.git_commit() == "abc123"
    root = Path(__file__).resolve().parents[2]
    assert asked and asked[0][:3] == ["git", "-C", str(root)]


def test_record_says_how_every_number_was_obtained():
    m = Measurement(
        samples_s=[1e-3, 4e-3, 2e-3],
        timing_mode="pipelined",
        ops_per_sample=2,
        warmup_iters=1,
        precision_reached=None,
        budget_s=1.0,
        iters_requested=20,
        warmup_requested=5,
        last_done_rank=[2, 2, 0],
        rank_median_s=[1e-3, 1.5e-3, 2e-3],
        late_arrival_rank=[1, 1, 1],
        late_arrival_by_s=[3e-3, 2e-3, 4e-3],
        rank_arrival_median_s=[1e-6, 3e-3, 2e-6],
        buffer_sets=2,
    )
    rec = _rec(m)
    numeric = [
        k
        for k, v in rec.items()
        if isinstance(v, (int, float))
        and not isinstance(v, bool)
        and k
        not in (
            "world_size",
            "size_bytes",
            "count",
            "iterations",
            "ops_per_sample",
            "warmup_iters",
            "buffer_sets",
            "buffer_sets_checked",
            "budget_s",
            "iters_requested",
            "warmup_requested",
        )
    ]
    assert set(numeric) <= set(rec["provenance"]), set(numeric) - set(rec["provenance"])
    assert all(v.split(":")[0] in ("measured", "derived", "modelled") for v in rec["provenance"].values())
    assert rec["provenance"]["busbw_factor"].startswith("modelled: nccl-tests bus factor of all_gather")
    # per-rank: medians, who finished last and who entered the op last how often, the spread
    assert rec["rank_median_us"] == pytest.approx([1000.0, 1500.0, 2000.0])
    assert rec["last_done_rank"] == [2, 2, 0] and rec["last_done_rank_hist"] == [1, 0, 2]
    assert rec["late_arrival_rank"] == [1, 1, 1] and rec["late_arrival_rank_hist"] == [0, 3, 0]
    assert rec["late_arrival_by_us"] == pytest.approx([3000.0, 2000.0, 4000.0])
    assert rec["rank_arrival_us"] == pytest.approx([1.0, 3000.0, 2.0])
    assert "slowest_rank" not in rec  # it named whoever finished last, not who held the others back
    assert rec["rank_spread_us"] == pytest.approx({"min": 1000.0, "median": 1500.0, "max": 2000.0})
    assert rec["checked"] is True and rec["buffer_sets"] == 2 and "rank_samples_us" not in rec


def test_one_timed_rank_has_no_rank_to_name():
    # e.g. ping-pong's per-rank fields: the initiator's clock alone; "last" / "late" of one rank say nothing
    m = dataclasses.replace(
        _m([1e-3, 2e-3]),
        last_done_rank=[0, 0],
        rank_median_s=[1.5e-3],
        late_arrival_rank=[0, 0],
        late_arrival_by_s=[0.0, 0.0],
        rank_arrival_median_s=[2e-6],
    )
    rec = _rec(m, _case(experiment="p2p", op="send_recv"), _size(64, 16))
    assert rec["rank_median_us"] == pytest.approx([1500.0]) and rec["rank_arrival_us"] == pytest.approx([2.0])
    assert not {"last_done_rank", "last_done_rank_hist", "late_arrival_rank", "late_arrival_by_us"} & set(rec)


def test_unchecked_record_has_no_count_and_a_reason():
    rec = _rec(_m([1e-4]), _case(op="barrier", world_size=2), _size(0, 0, dtype="none", bw_op="barrier"), UNCHECKED)
    assert rec["checked"] is False and rec["n_wrong"] is None and rec["unchecked_reason"] == "no data"
    assert rec["busbw_factor"] == 0.0 and rec["algbw_gbps"] == 0.0


def test_an_op_without_a_bus_factor_has_no_bus_bandwidth():
    rec = _rec(_m([1e-3]), _case(op="step", world_size=2), _size(100, 25, bw_op=None))
    assert rec["busbw_gbps"] is None and rec["busbw_factor"] is None and rec["algbw_gbps"] == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="no bus-bandwidth factor for op 'step'"):
        _rec(_m([1e-3]), _case(op="step", world_size=2), _size(100, 25, bw_op="step"))


def test_provenance_names_the_divisions_and_claims_nothing_absent():
    m = Measurement(samples_s=[2e-3], timing_mode="pipelined", ops_per_sample=4, warmup_iters=1, precision_reached=None)
    rec = _rec(
        m,
        _case(experiment="p2p", op="send_recv", world_size=2),
        _size(64, 16, bw_op=None),
        UNCHECKED,
        time_divisor=2,
        time_normalisation="round trip / 2",
    )
    t = rec["provenance"]["time_us"]
    assert "divided by the 4 ops of a sample" in t and "divided by 2 (round trip / 2)" in t
    assert not {"busbw_gbps", "busbw_factor", "n_wrong"} & set(rec["provenance"])


def test_tail_percentiles_are_null_with_too_few_samples_and_say_how_many():
    kw = dict(case=_case(op="all_reduce", world_size=2, in_place=True), size=_size(4, 1, bw_op="all_reduce"))
    few = _rec(_m([1e-3] * 5), **kw)
    assert few["p95_us"] is None and few["p99_us"] is None and few["p05_us"] is None and few["iterations"] == 5
    assert "from 5 sample(s): a p95 needs >= 20" in few["provenance"]["p95_us"]
    assert "a p99 needs >= 100" in few["provenance"]["p99_us"]
    enough = _rec(_m([1e-3] * 20), **kw)
    assert enough["p95_us"] == pytest.approx(1000.0) and enough["p99_us"] is None
    assert "over 20 samples; reported with >= 20" in enough["provenance"]["p95_us"]
    # records stored before the rule carry a p95 of 5 samples: readers leave it out all the same
    old = dict(few, p95_us=1000.0)
    assert results.tail_us(old, "p95_us") is None and results.tail_us(enough, "p95_us") == pytest.approx(1000.0)
    assert results.band_us(old) == (pytest.approx(1000.0), pytest.approx(1000.0))  # min-max


def test_a_record_whose_time_includes_compute_has_no_nccl_tests_busbw():
    rec = _rec(
        _m([1e-3, 2e-3, 3e-3]),
        _case(experiment="ddp", op="train_step", world_size=4),
        _size(4_000_000, 1_000_000, bw_op="all_reduce", time_includes="forward, backward and the optimizer step"),
    )
    assert rec["busbw_gbps"] is None and rec["busbw_factor"] is None
    assert rec["algbw_gbps"] == pytest.approx(2.0) and rec["effective_busbw_gbps"] == pytest.approx(3.0)
    assert rec["time_includes"] == "forward, backward and the optimizer step"
    prov = rec["provenance"]
    assert "busbw_gbps" not in prov
    assert not any("nccl-tests busbw" in v and "not nccl-tests" not in v for v in prov.values())
    assert "includes forward, backward" in prov["effective_busbw_gbps"] and "an effective rate" in prov["algbw_gbps"]


def test_n_wrong_says_tolerance_where_the_check_allowed_one():
    kw = dict(case=_case(op="train_step", world_size=4), size=_size(0, 0, bw_op=None))
    exact = _rec(_m([1e-3]), check_rule="exact", **kw)["provenance"]["n_wrong"]
    assert exact.startswith("measured: elements that differ from the exact expected result")
    for extra in ({"check_rule": "tol 1.7e-04 per element"}, {"check_exact": False}):
        prov = _rec(_m([1e-3]), **extra, **kw)["provenance"]["n_wrong"]
        assert prov == results.N_WRONG_TOLERANCE and "exact" not in prov and "stated tolerance" in prov


def test_table_title_shows_the_sample_range_when_the_budget_cut_some_cases():
    from suite.report.tables import iters_label

    full = {"iterations": 20, "budget_s": 1.0, "stopped_by_budget": False}
    cut = {"iterations": 11, "budget_s": 1.0, "stopped_by_budget": True}
    assert iters_label([full, full]) == "20 iters"
    assert iters_label([full, cut]) == "11-20 iters, BUDGET_S 1 s"
    assert iters_label([full, {"iterations": 7}]) == "7-20 iters"  # an older run's records: no budget fields


def test_a_record_is_built_from_named_groups_none_of_which_a_caller_can_swap():
    import inspect

    params = inspect.signature(results.make_record).parameters
    assert list(params) == ["case", "size", "m", "check", "provenance", "fields"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    for positional in (
        lambda: results.make_record(_case(), _size(), _m([1e-3]), CHECKED),
        lambda: results.RecordCase("collectives", "all_reduce", "gloo", "cpu", 2),
        lambda: results.CheckOutcome((0, 0), 1),
    ):
        with pytest.raises(TypeError):
            positional()
    rec = _rec(_m([1e-3]), check=results.CheckOutcome(wrong=(1, 2), buffer_sets=3))
    assert (rec["checked"], rec["n_wrong"], rec["n_wrong_check"], rec["n_wrong_timed"]) == (True, 3, 1, 2)
    assert rec["buffer_sets_checked"] == 3 and "unchecked_reason" not in rec
