"""The sharded experiment's pure parts: the check rule, the theory of each strategy's collectives, the
inventory's summary and byte arithmetic, the knobs (no torch.distributed)."""

import pytest
import torch

from experiments.sharded import check, inventory, workload
from experiments.sharded.settings import PLANTED, STRATEGIES, ShardedSettings
from suite.errors import ConfigError
from tests.user_models import built_in_reference, built_in_rule
from suite.harness import sgd_rule


def test_exact_rule_where_two_terms_average_and_tolerance_elsewhere():
    for s in ("ddp", "fsdp2", "fsdp2_keep", "fsdp2_bf16", "fsdp2_scaled"):
        assert built_in_rule(s, 2, 2, 32).exact and built_in_rule(s, 1, 2, 32).exact
        assert not built_in_rule(s, 4, 2, 32).exact
    for s in ("tp", "sp", "2d", "tp_wrong_shard"):
        assert not built_in_rule(s, 2, 2, 32).exact
    assert built_in_rule("ddp", 2, 2, 32).tols(5, [1.0, 2.0], [1.0, 1.0]) == [0.0, 0.0]
    assert built_in_rule("ddp", 2, 2, 32).describe(5, 0.0) == "exact"


def test_tolerance_follows_the_formula_per_parameter():
    rule = built_in_rule("tp", 2, 2, 32)
    assert rule.terms == 2 + 4 * 32 // 2  # the world + each rank's partial dot product in `down`
    g, p = [0.5, 0.01], [1.0, 0.25]
    e = [workload.LR * 2 * rule.terms * sgd_rule.U32 * gi + 2 * sgd_rule.U32 * pi for gi, pi in zip(g, p)]
    s = 3
    assert rule.tols(s, g, p) == pytest.approx([2 * s * ei + s * (s - 1) * max(e) for ei in e], rel=1e-12)
    assert rule.tols(1, g, p) == pytest.approx([2 * ei for ei in e], rel=1e-12)  # no coupling after one step
    bf16 = built_in_rule("fsdp2_bf16", 4, 3, 32)
    assert bf16.u == 2.0**-8 and bf16.terms == 4 + 2 * 3 + 1
    assert built_in_rule("fsdp2", 4, 3, 32).terms == 4
    assert "tol per parameter" in rule.describe(3, 1e-6)


def test_tolerance_grows_with_steps_and_the_dtype():
    g, p = [0.1, 0.3], [0.5, 0.5]
    rule = built_in_rule("ddp", 4, 2, 32)
    a, b = rule.tols(2, g, p), rule.tols(10, g, p)
    assert all(x < y for x, y in zip(a, b))
    assert max(built_in_rule("fsdp2_bf16", 4, 2, 32).tols(2, g, p)) > 100 * max(a)


def test_no_tensor_is_compared_under_a_bound_that_passes_a_doubled_gradient():
    # bfloat16 at 4 ranks, the experiment's default model: the reference, and a strategy whose gradients are
    # doubled (SGD at twice the rate: the same update). After the check step every tensor is compared and
    # each one catches it; after 25 steps the bound has outgrown most tensors' updates, and those are left
    # out (the rule says how many) instead of passing the fault by construction.
    s = ShardedSettings()
    ref = built_in_reference(s.width, s.depth, s.seq, s.batch, 4, bf16=True)
    doubled = built_in_reference(s.width, s.depth, s.seq, s.batch, 4, bf16=True)
    doubled.opt.param_groups[0]["lr"] = 2 * workload.LR
    rule = built_in_rule("fsdp2_bf16", 4, s.depth, s.width)
    left_out, ratio = {}, {}
    for steps in (1, 2, 5, 25):
        good, g, p = ref.at(steps)
        bad = doubled.at(steps)[0]
        tols = rule.tols(steps, g, p)
        use = rule.comparable(ref.moved(steps), tols)
        ratio[steps] = max(t / m for t, m in zip(tols, ref.moved(steps)))
        caught = [check.compare([b], [a], [t])[0] > 0 for a, b, t in zip(good, bad, tols)]
        assert all(c for c, u in zip(caught, use) if u), steps  # every tensor compared catches the fault
        left_out[steps] = (len(use) - sum(use), len(use))
        if steps == 1:
            assert all(use)
        else:
            assert not all(caught) and sum(use) < len(use) / 2  # the bound passes it: those are not compared
            said = rule.describe(steps, max(tols), sum(use), len(use))
            assert f"{len(use) - sum(use)} of {len(use)} parameter tensors not compared" in said
    # what experiments/sharded/README.md quotes: 8 of the 14 tensors after 2 steps, all 14 from 5 on; the bound
    # up to 0.14 of how far the reference moved a tensor after the check step, 5.4 after 5 steps, 53 after 25.
    # After 2 steps blocks.1.down.weight's bound is 0.4998 of its move (a 0.04% margin): one bfloat16 ulp of a
    # gradient behind that move is 0.3% of it, so a CPU whose bfloat16 kernels round one the other way leaves 9 out
    assert left_out == {1: (0, 14), 2: left_out[2], 5: (14, 14), 25: (14, 14)} and left_out[2] in ((8, 14), (9, 14))
    assert [ratio[k] for k in (1, 5, 25)] == pytest.approx([0.14, 5.4, 53], rel=0.02)
    fp32 = built_in_rule("ddp", 4, s.depth, s.width)
    d = built_in_reference(s.width, s.depth, s.seq, s.batch, 4)
    _, g, p = d.at(25)
    tols = fp32.tols(25, g, p)
    assert all(fp32.comparable(d.moved(25), tols))  # float32's bound stays far below the update
    assert max(t / m for t, m in zip(tols, d.moved(25))) < 0.03  # check.py's docstring: under 3% of it


def test_compare_counts_elements_beyond_each_tensors_tolerance_and_nan():
    ref = [torch.zeros(4), torch.zeros(2)]
    mine = [torch.tensor([0.0, 1e-3, 2e-3, float("nan")]), torch.tensor([1e-3, 0.0])]
    wrong, worst, per = check.compare(mine, ref, [1.5e-3, 0.0])
    assert wrong == 2 + 1  # 2e-3 and NaN over 1.5e-3; 1e-3 over the exact second tensor
    assert per[1] == pytest.approx(1e-3, rel=1e-6) and worst == float("inf")


def _ops(*items):
    return [inventory.Collective(*i) for i in items]


def test_summarise_counts_identical_collectives_and_totals_ignore_the_split():
    ops = _ops(
        ("all_gather", "float32", 100, "dp", "forward"),
        ("all_gather", "float32", 100, "dp", "forward"),
        ("reduce_scatter", "float32", 100, "dp", "backward"),
        ("all_gather", "float32", 40, "dp", "forward"),
    )
    rows = inventory.summarise(ops)
    assert {(r["bytes"], r["count"]) for r in rows if r["op"] == "all_gather"} == {(100, 2), (40, 1)}
    assert inventory.totals(rows) == {
        ("all_gather", "float32", "dp", "forward"): (3, 240),
        ("reduce_scatter", "float32", "dp", "backward"): (1, 100),
    }


def test_c10d_counts_per_dimension_and_what_the_inventory_missed():
    labels = {"g0": "world", "g1": "dp", "g2": "tp"}
    c10d = inventory.issued({"g0": 3, "g1": 10, "g2": 4}, {"g0": 3, "g1": 18, "g2": 9}, labels)
    assert c10d == {"world": 0, "dp": 8, "tp": 5}
    assert inventory.issued({"g0": None, "g1": 1, "g2": 1}, {"g0": 1, "g1": 2, "g2": 2}, labels) is None
    rows = [
        {"op": "all_gather", "group": "dp", "count": 5},
        {"op": "reduce_scatter", "group": "dp", "count": 3},
        {"op": "all_reduce", "group": "tp", "count": 4},
    ]
    assert inventory.unseen(rows, c10d) == ["tp: c10d issued 5, the inventory saw 4"]  # one op off its thread
    assert inventory.unseen(rows, c10d | {"tp": 4}) == []
    assert inventory.unseen(rows[:2], {"dp": 8}) == []
    assert inventory.unseen(rows, {"dp": 8}) == ["tp: c10d issued 0, the inventory saw 4"]  # a group c10d lacks
    assert inventory.unseen(rows, None) == []  # this torch cannot say: nothing to compare with
    # a pipeline's p2p ops: c10d counting fewer is NCCL leaving p2p out, counting more an op the inventory missed
    p2p = [{"group": "pp", "count": 8}]
    assert inventory.unseen(p2p, {"pp": 0}, at_most=True) == [] and inventory.unseen(p2p, {"pp": 8}, at_most=True) == []
    assert inventory.unseen(p2p, {"pp": 9}, at_most=True) == ["pp: c10d issued 9, the inventory saw 8"]


def test_bus_bytes_use_nccl_tests_factors_and_glooss_reduce_scatter():
    rows = [
        {"op": "all_reduce", "dtype": "float32", "bytes": 1000, "group": "dp", "phase": "backward", "count": 1},
        {"op": "reduce_scatter", "dtype": "float32", "bytes": 1000, "group": "dp", "phase": "backward", "count": 2},
        {"op": "all_gather", "dtype": "float32", "bytes": 1000, "group": "tp", "phase": "forward", "count": 1},
    ]
    sizes = {"dp": 4, "tp": 2}
    assert inventory.bus_bytes(rows, sizes, gloo=False) == round(1000 * 1.5 + 2 * 1000 * 0.75 + 1000 * 0.5)
    assert inventory.bus_bytes(rows, sizes, gloo=True) == round(1000 * 1.5 + 2 * 1000 * 1.5 + 1000 * 0.5)


def test_size_bytes_of_each_collective_kind():
    t = lambda n: torch.zeros(n)  # noqa: E731
    assert inventory.size_bytes("all_reduce", [t(10), t(6)], []) == 64  # a coalesced list: one buffer
    assert inventory.size_bytes("all_gather", [t(40), t(10)], []) == 160  # c10d: output and input
    assert inventory.size_bytes("all_gather", [t(10)], [4]) == 160  # functional: input x group size
    assert inventory.size_bytes("reduce_scatter", [t(10), t(40)], []) == 160


def test_op_names_from_torch():
    assert inventory.op_name("c10d._allgather_base_") == "all_gather"
    assert inventory.op_name("c10d._reduce_scatter_base_") == "reduce_scatter"
    assert inventory.op_name("c10d.allreduce_") == "all_reduce"
    assert inventory.op_name("c10d_functional.all_gather_into_tensor") == "all_gather"
    assert inventory.op_name("c10d_functional.reduce_scatter_tensor") == "reduce_scatter"
    assert inventory.op_name("c10d.broadcast_") == "broadcast"


def test_n_params_is_the_models():
    for d, depth in ((8, 1), (32, 2), (12, 3)):
        net = workload.build_net(d, depth)
        assert inventory.n_params(d, depth) == sum(p.numel() for p in net.parameters())
        assert inventory.n_params(d, depth) == depth * (8 * d * d + 7 * d) + d * d + d


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_theory_counts_follow_depth(depth):
    d, seq, batch, n = 16, 4, 8, 2
    count = lambda s, **k: sum(  # noqa: E731
        r["count"] for r in inventory.theory(s, d, depth, seq, batch, n) if all(r[a] == b for a, b in k.items())
    )
    assert count("fsdp2", op="all_gather", phase="forward") == depth + 1  # the root and every block
    assert count("fsdp2", op="all_gather", phase="backward") == depth  # blocks resharded, the root kept
    assert count("fsdp2_keep", op="all_gather", phase="backward") == 0
    assert count("fsdp2", op="reduce_scatter") == depth + 1
    assert count("tp", op="all_reduce", phase="forward") == depth == count("tp", op="all_reduce", phase="backward")
    assert count("sp", op="all_gather", phase="forward") == depth + 1  # and the gather before the head
    assert count("sp", op="reduce_scatter") == 2 * depth
    assert count("sp", op="all_reduce", phase="optimizer") == 2 * depth  # LayerNorm weight and bias
    assert count("2d", op="all_reduce", group="tp") == 2 * depth


def test_fsdp2_moves_one_and_a_half_times_ddps_bus_bytes():
    d, depth, seq, batch, n = 64, 4, 4, 8, 4  # no padding: every dim 0 divides by 4
    ddp = inventory.bus_bytes(inventory.theory("ddp", d, depth, seq, batch, n), {"dp": n}, gloo=False)
    fsdp = inventory.bus_bytes(inventory.theory("fsdp2", d, depth, seq, batch, n), {"dp": n}, gloo=False)
    keep = inventory.bus_bytes(inventory.theory("fsdp2_keep", d, depth, seq, batch, n), {"dp": n}, gloo=False)
    p = inventory.n_params(d, depth)
    assert ddp == round(2 * (n - 1) / n * 4 * p) and keep == ddp  # gather + reduce_scatter = all_reduce
    head = 4 * (d * d + d) * (n - 1) / n  # the root is not gathered again in backward
    assert fsdp == pytest.approx(1.5 * ddp - head, abs=1)
    bf16 = inventory.theory("fsdp2_bf16", d, depth, seq, batch, n)
    assert {r["dtype"] for r in bf16 if r["op"] == "all_gather"} == {"bfloat16"}
    assert {r["dtype"] for r in bf16 if r["op"] == "reduce_scatter"} == {"float32"}


def test_fsdp2_theory_pads_dim_0_to_the_shard_count():
    exact = inventory.theory("fsdp2_keep", 8, 1, 2, 4, 2)
    padded = inventory.theory("fsdp2_keep", 9, 1, 2, 3, 2)  # 9 rows over 2 ranks: gathered as 10
    root = lambda rows: next(r["bytes"] for r in rows if r["op"] == "all_gather" and r["count"] == 1)  # noqa: E731
    assert root(exact) == 4 * (8 * 8 + 8)
    assert root(padded) == 4 * (10 * 9 + 10)


def test_matches_needs_counts_and_bytes_except_ddps_buckets():
    th = inventory.theory("ddp", 16, 2, 4, 8, 2)
    split = [dict(th[0], bytes=th[0]["bytes"] // 2, count=2)]  # two buckets of half the gradient
    assert inventory.matches(split, th, bucketed=True) and not inventory.matches(split, th)
    fewer = [dict(r) for r in inventory.theory("tp", 16, 2, 4, 8, 2)]
    fewer[0]["count"] -= 1
    assert not inventory.matches(fewer, inventory.theory("tp", 16, 2, 4, 8, 2))


def test_cannot_run_says_why():
    assert "4 ranks" in workload.cannot_run("2d", 2, 32, 8, 8)
    assert workload.cannot_run("2d", 4, 32, 8, 8) is None
    assert "SHARDED_BATCH" in workload.cannot_run("fsdp2", 4, 32, 8, 6)
    assert "SHARDED_SEQ" in workload.cannot_run("sp", 2, 32, 7, 8)
    assert "SHARDED_WIDTH" in workload.cannot_run("tp", 4, 30, 8, 8)
    assert all(workload.cannot_run(s, 2, 32, 8, 8) is None for s in STRATEGIES + PLANTED if s != "2d")


def test_settings_reject_bad_values_naming_the_knob():
    ShardedSettings().validate()
    ShardedSettings(strategies=("ddp", "fsdp2_scaled")).validate()
    with pytest.raises(ConfigError, match="SHARDED_STRATEGIES"):
        ShardedSettings(strategies=("fsdp3",)).validate()
    with pytest.raises(ConfigError, match="SHARDED_WIDTH"):
        ShardedSettings(width=0).validate()
    assert set(PLANTED).isdisjoint(ShardedSettings().strategies)  # wrong on purpose: never by default


def _record(strategy, **kw):
    rec = {
        "experiment": "sharded", "op": "train_step", "label": strategy, "strategy": strategy, "backend": "gloo",
        "device": "cpu", "world_size": 2, "timing_mode": "blocking", "iterations": 3, "p50_us": 2500.0,
        "samples_us": [2400.0, 2500.0, 2600.0], "n_params": 100, "width": 4, "depth": 1, "seq": 2, "batch": 2,
        "inventory_bytes": 2048, "theory_bytes": 2048, "inventory_matches_theory": True, "bus_bytes": 1024,
        "bus_vs_ddp": 1.5, "inventory_ops": 3, "n_wrong": 0, "checked": True, "check_rule": "exact",
        "inventory": [{"op": "all_gather", "dtype": "float32", "bytes": 512, "group": "dp", "phase": "forward",
                       "count": 2}],
    }  # fmt: skip
    return rec | kw


def test_table_states_theory_agreement_the_rule_and_a_failure():
    from experiments.sharded.table import format_tables

    ok = format_tables([_record("fsdp2"), _record("tp", check_rule="tol per parameter", check_tol=8.1e-5)])
    assert "2.0=" in ok and "exact" in ok and "tol 8.1e-05" in ok and "[OK]" in ok
    assert "fsdp2: 2 x all_gather float32 512 B on dp in forward" in ok
    bad = format_tables([_record("fsdp2_scaled", n_wrong=7, inventory_matches_theory=False)])
    assert "2.0!" in bad and "7 [FAILED]" in bad
    assert format_tables([]) == ""


def test_the_inventorys_harmless_torch_warnings_are_filtered_and_said_once():
    """Torch's two warnings about CommDebugMode's backward hooks (experiments/sharded/quiet.py) are filtered by
    message and category and named; any other warning in the same block passes on as raised, a user's -W error
    included; under the table one line says what was filtered and which check shows it harmless."""
    import warnings

    from experiments.sharded import quiet
    from experiments.sharded.table import format_tables

    seen: set[str] = set()
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        with quiet.filtered(seen):
            hook = quiet.BACKWARD_HOOK.message
            warnings.warn(hook + " since no inputs require gradients.", UserWarning, stacklevel=1)
            warnings.warn("FSDP2-wrapped module (FSDPNet) returned a view tensor.", UserWarning, stacklevel=1)
            warnings.warn("something else", UserWarning, stacklevel=1)
            warnings.warn(hook, DeprecationWarning, stacklevel=1)  # the same text, another category
    assert seen == {"backward_hook", "fsdp2_view"}
    assert [(str(w.message), w.category) for w in outside] == [
        ("something else", UserWarning),
        (quiet.BACKWARD_HOOK.message, DeprecationWarning),
    ]
    assert outside[0].filename == __file__  # passed on from where it was raised
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match="something else"), quiet.filtered(set()):
            warnings.warn("something else", UserWarning, stacklevel=1)
        with quiet.filtered(set()):  # the filtered one raises nothing under -W error
            warnings.warn("FSDP2-wrapped module (FSDPNet) returned a view tensor.", UserWarning, stacklevel=1)

    marked = ["backward_hook", "fsdp2_view"]
    out = format_tables([_record(s, torch_warnings_filtered=marked) for s in ("fsdp2", "tp")])
    said = [ln for ln in out.splitlines() if ln.startswith("# filtered")]
    assert len(said) == 1 and "Full backward hook is firing" in said[0] and "FSDP2-wrapped module" in said[0]
    assert said[0].endswith("match theory's (=)")  # the check that shows them harmless
    user = format_tables([_record("fsdp2", torch_warnings_filtered=marked, inventory_matches_theory=None)])
    assert "Not checked against theory" in user
    differs = format_tables([_record("fsdp2", torch_warnings_filtered=marked, inventory_matches_theory=False)])
    assert "NOT shown harmless: the inventory differs from theory in fsdp2" in differs
    assert "# filtered" not in format_tables([_record("fsdp2")])
