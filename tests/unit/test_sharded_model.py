"""The sharded step predicted at scale (issue 26): the torch-free shapes (theory and the mesh at several
world sizes, which sizes a strategy can take), the step model against hand-computed values (the groups'
topologies of a 2-D mesh, the compute models, the hidden share), its validation rows and summary per
strategy (`make predict` on a real stored run: tests/e2e/test_predict_sharded.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from experiments.sharded import model, shapes, theory
from suite.model import step
from suite.model.links import ClassLink, Topology
from suite.model.run_model import RunModel
from tests.conftest import ROOT

INTRA = ClassLink(link_class="intra", alpha_us=0.0, beta_gbps=10.0)  # 1e6 B in 100 µs
INTER = ClassLink(link_class="inter", alpha_us=0.0, beta_gbps=1.0)  # 1e6 B in 1000 µs


# --- shapes ---------------------------------------------------------------------------------------------


def test_shapes_imports_no_torch():
    code = "import sys; import experiments.sharded.shapes; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False", r.stderr


@pytest.mark.parametrize("world", [2, 4, 8])
def test_theory_at_several_world_sizes(world):
    d, depth, seq, batch = 16, 2, 4, 8
    p = shapes.n_params(d, depth)
    fsdp = shapes.theory("fsdp2", d, depth, seq, batch, world)
    # 16 and 64 rows divide 2, 4 and 8: nothing padded; forward + backward all_gather, one reduce_scatter
    assert {r["group"] for r in fsdp} == {"dp"}
    assert sum(r["count"] * r["bytes"] for r in fsdp if r["op"] == "reduce_scatter") == 4 * p
    block = 4 * (8 * d * d + 7 * d)
    assert sum(r["count"] * r["bytes"] for r in fsdp if r["op"] == "all_gather") == 4 * p + depth * block
    tp = shapes.theory("tp", d, depth, seq, batch, world)  # every rank the whole batch: A does not shrink
    assert tp == [
        theory._row("all_reduce", "float32", 4 * batch * seq * d, "tp", ph, depth) for ph in ("forward", "backward")
    ]
    if world >= 4:
        two = shapes.theory("2d", d, depth, seq, batch, world)
        ar = [r for r in two if r["op"] == "all_reduce"]
        assert {r["group"] for r in ar} == {"tp"} and ar[0]["bytes"] == 4 * (batch // 2) * seq * d
        # each tp rank's FSDP2 shards: the blocks' up/down split world/2 ways
        gathered = next(r for r in two if r["op"] == "all_gather" and r["phase"] == "forward" and r["count"] == depth)
        assert gathered["bytes"] == 4 * (2 * d + 2 * (4 * d // (world // 2)) * d + 4 * d // (world // 2) + d)
        assert shapes.mesh_shape("2d", world) == ((2, world // 2), ("dp", "tp"))


@pytest.mark.parametrize(
    "strategy, world, says",
    [
        ("fsdp2", 3, "SHARDED_BATCH=8 does not split into 3"),
        ("tp", 3, "SHARDED_WIDTH=16 does not split over 3"),
        ("2d", 2, "2d needs an even world"),
        ("2d", 6, "SHARDED_WIDTH=16 does not split over 3"),
        ("sp", 8, "SHARDED_SEQ=4 does not split over 8"),
        ("fsdp2", 8, None),
        ("tp", 8, None),
        ("2d", 4, None),
    ],
)
def test_cannot_run_says_which_knob_does_not_divide(strategy, world, says):
    reason = shapes.cannot_run(strategy, world, 16, 4, 8)
    assert (reason is None) if says is None else (says in reason), reason


# --- the step model, by hand ----------------------------------------------------------------------------


def test_group_topology_tp_contiguous_dp_strided():
    # a (2, 4) mesh on 8 ranks, 4 per node: a tp group is one node, a dp group spans two
    assert model.group_topology(Topology(8, 4), "2d", "tp") == Topology(4, 4)
    assert model.group_topology(Topology(8, 4), "2d", "dp") == Topology(2, 1)
    assert model.group_topology(Topology(8, 8), "2d", "dp") == Topology(2, 2)  # one node: all intra
    assert model.group_topology(Topology(8, 2), "2d", "tp") == Topology(4, 2)
    assert model.group_topology(Topology(6, 2), "2d", "tp") == Topology(3, 1)  # ranks 0,1 | 2: uneven
    assert model.group_topology(Topology(8, 4), "fsdp2", "dp") == Topology(8, 4)  # 1-D: the world


def _rec(
    strategy, world, *, time_us, compute_s, hidden_s=0.0, replay_s=0.01, width=16, depth=2, seq=4, batch=8, device="cpu"
):
    """The train_step record and its replay's, with the fields a run writes (the real run's:
    tests/fixtures/sharded-gloo-2, read by tests/e2e/test_predict_sharded.py)."""
    common = {
        "experiment": "sharded",
        "backend": "gloo",
        "device": device,
        "world_size": world,
        "hosts": world,
        "strategy": strategy,
        "width": width,
        "depth": depth,
        "seq": seq,
        "batch": batch,
        "n_wrong": 0,
    }
    steprec = common | {"op": "train_step", "label": strategy, "time_us": time_us, "compute_s": compute_s}
    replay = common | {
        "op": "comm_replay",
        "label": f"replay-{strategy}",
        "time_us": replay_s * 1e6,
        "comm_replay_s": replay_s,
        "hidden_comm_s": hidden_s,
        "compute_s": compute_s,
    }
    return [steprec, replay]


def _model(records):
    return RunModel(
        topo=Topology(2, 1),
        backend="gloo",
        p2p={},
        op_links={},
        default_links={"intra": INTRA, "inter": INTER},
        checks={},
        points=[],
        records=records,
    )


def test_tp_step_at_4_ranks_by_hand():
    recs = _rec("tp", 2, time_us=12_000.0, compute_s=0.010, hidden_s=0.0025, replay_s=0.010, device="cuda")
    (d,) = model.predict_at(_model(recs), Topology(4, 1))
    act = 4 * 8 * 4 * 16  # 4 x rows x seq x d
    comm = 2 * 2 * (2 * 3 / 4) * act / 1e3  # 2 x depth ring all_reduces over 1 GB/s (1e3 B/µs)
    assert d["comm_us"] == pytest.approx(comm)
    assert d["compute_us"] == pytest.approx(10_000 * 2 / 4)  # per-rank work from 2 ranks
    assert d["hidden_fraction"] == 0.25 and d["step_us"] == pytest.approx(5000 + 0.75 * comm)
    assert d["mesh"] == "4 (tp)" and d["compute_model"] == "per-rank work from 2 ranks"
    assert d["measured_ranks"] == 2 and d["measured_step_us"] == 12_000.0 and d["measured_comm_replay_us"] == 1e4
    # on CPU every collective is synchronous: nothing hidden, whatever the medians' noise said
    (cpu,) = model.predict_at(_model([r | {"device": "cpu"} for r in recs]), Topology(4, 1))
    assert cpu["hidden_fraction"] == 0.0 and cpu["measured_hidden_fraction"] == 0.25
    assert cpu["step_us"] == pytest.approx(5000 + comm) and cpu["hidden_model"] == model.CPU_HIDDEN


def test_2d_prices_tp_on_the_node_and_dp_across_nodes():
    m = _model(_rec("2d", 4, time_us=1.0, compute_s=0.0))
    (d,) = model.predict_at(m, Topology(8, 4))
    links = {"intra": INTRA, "inter": INTER}
    want = 0.0
    for r in shapes.theory("2d", 16, 2, 4, 8, 8):  # dp: 2 ranks on 2 nodes; tp: 4 ranks on one node
        n, lk = (2, links["inter"]) if r["group"] == "dp" else (4, links["intra"])
        factor = {"all_gather": (n - 1) / n, "reduce_scatter": 2 * (n - 1) / n, "all_reduce": 2 * (n - 1) / n}
        want += r["count"] * factor[r["op"]] * r["bytes"] / (lk.beta_gbps * 1e3)  # Gloo: reduce_scatter = all_reduce
    assert d["comm_us"] == pytest.approx(want)


def test_compute_model_one_and_several_world_sizes():
    one = {2: {"step": {"compute_s": 0.010}}}
    assert model.compute_model(one)[:2] == (0.0, pytest.approx(20_000.0))
    two = {2: {"step": {"compute_s": 0.010}}, 3: {"step": {"compute_s": 0.007}}}
    a, b, how = model.compute_model(two)  # 10 ms = a + b/2, 7 ms = a + b/3: b = 18 ms, a = 1 ms
    assert (a, b) == (pytest.approx(1000.0), pytest.approx(18_000.0)) and how == "a + b/N on 2/3 ranks"
    rising = {2: {"step": {"compute_s": 0.007}}, 3: {"step": {"compute_s": 0.010}}}
    assert model.compute_model(rising)[:2] == (pytest.approx(8500.0), 0.0)
    steep = {2: {"step": {"compute_s": 0.010}}, 4: {"step": {"compute_s": 0.002}}}  # a + b/N gives a < 0
    a, b, how = model.compute_model(steep)
    assert a == 0.0 and b > 0 and "a = 0" in how


def test_strategies_that_cannot_run_get_no_entry_and_a_reason():
    recs = _rec("tp", 2, time_us=1e4, compute_s=0.01) + _rec("fsdp2", 2, time_us=1e4, compute_s=0.01)
    recs.append({"experiment": "sharded", "op": "train_step", "strategy": "pp_gpipe", "world_size": 2, "time_us": 1.0})
    m = _model(recs)
    assert [d["strategy"] for d in model.predict_at(m, Topology(8, 1))] == ["fsdp2", "tp"]
    assert model.predict_at(m, Topology(3, 1)) == []
    notes = model.notes_at(m, Topology(3, 1))
    assert any("(fsdp2): not predicted at 3 ranks: SHARDED_BATCH=8 does not split into 3" in n for n in notes)
    assert any("(tp): not predicted at 3 ranks: SHARDED_WIDTH=16 does not split over 3" in n for n in notes)
    assert any("(pp_gpipe): not predicted" in n for n in notes), notes


def _user(strategy, world, inventory, splits, **kw):
    """A user model's (SHARDED_MODEL) step and replay records: no width, depth, seq or batch; its measured
    inventory and what must divide (user_model.splits)."""
    recs = [
        {k: v for k, v in r.items() if k not in ("width", "depth", "seq", "batch")} | {"model": "m:build"}
        for r in _rec(strategy, world, **kw)
    ]
    recs[0] |= {"inventory": inventory, "splits": splits}
    return recs


def _inv(op, nbytes, group, count, phase="forward"):
    return {"op": op, "dtype": "float32", "bytes": nbytes, "group": group, "phase": phase, "count": count}


def test_a_user_models_step_is_priced_from_its_measured_inventory():
    """A user model has no theory: its step at N prices the collectives its record measured, each with the
    same S bytes at N (USER_COMM_MODEL); what must divide at N comes from its record's splits."""
    rows = {"rows": 8, "positions": None, "seq_dim": 1, "sharded": []}
    fsdp = [_inv("all_gather", 4096, "dp", 2), _inv("all_gather", 4096, "dp", 2, "backward")]
    fsdp.append(_inv("reduce_scatter", 4096, "dp", 2, "backward"))
    recs = _rec("tp", 2, time_us=1e4, compute_s=0.01) + _user("fsdp2", 2, fsdp, rows, time_us=1e4, compute_s=0.01)
    assert sorted(model.step_records(recs), key=str) == [
        ("fsdp2", None, None, None, None, "m:build", None),  # a real record carries n_params there
        ("tp", 16, 2, 4, 8, None, None),
    ]
    d = next(d for d in model.predict_at(_model(recs), Topology(4, 1)) if d["model"] == "m:build")
    ag, rs = 3 / 4 * 4096 / 1e3, 2 * 3 / 4 * 4096 / 1e3  # ring over 1 GB/s; Gloo's reduce_scatter an all_reduce
    assert d["comm_us"] == pytest.approx(4 * ag + 2 * rs) and d["comm_model"] == model.USER_COMM_MODEL
    assert d["strategy"] == "fsdp2" and d["mesh"] == "4 (dp)" and d["compute_us"] == pytest.approx(10_000 * 2 / 4)
    line = model.step_line(d, 4)
    assert line.startswith("sharded step (fsdp2 of m:build, mesh 4 (dp)): compute "), line
    # at 3 ranks the model's 8 rows do not split; a tp plan's 6 features do not split over 4 ranks
    tp = _user("tp", 2, [_inv("all_reduce", 512, "tp", 2)], rows | {"sharded": [["l.inp", "colwise", 6]]},
               time_us=1e4, compute_s=0.01)  # fmt: skip
    two_d = _user("2d", 4, [_inv("all_reduce", 256, "tp", 2)], rows, time_us=1e4, compute_s=0.01)
    old = _user("ddp", 2, [_inv("all_reduce", 4096, "world", 1)], None, time_us=1e4, compute_s=0.01)
    m = _model(recs + tp + two_d + old)
    notes = model.notes_at(m, Topology(3, 1)) + model.notes_at(m, Topology(4, 1))
    says = (
        "(fsdp2 of m:build): not predicted at 3 ranks: fsdp2: the model's batch has 8 rows, which do not split into 3"
    )
    assert any(says in n for n in notes), notes
    says = "(tp of m:build): not predicted at 4 ranks: tp: tp_plan shards l.inp (colwise, out_features=6)"
    assert any(says in n for n in notes), notes
    assert any("(2d of m:build): not predicted at 4 ranks: 2d on a user model" in n for n in notes), notes
    assert any("(ddp of m:build): not predicted at 4 ranks: its record has no splits" in n for n in notes), notes
    # at 6 ranks only the user's tp: its 6 features split (the built-in width 16 does not, nor 8 rows 6 ways)
    assert [(d["strategy"], d["model"]) for d in model.predict_at(m, Topology(6, 1))] == [("tp", "m:build")]


def test_a_user_models_one_rank_inventory_is_never_priced():
    """A 1-rank step issues no collective (FSDP2 and DTensor skip them): its empty inventory would price the step's
    communication at 0, so the nearest world size of at least 2 ranks is priced, and with none there is no entry.
    Two models of one factory name (sized differently: n_params) are two keys, never one fit."""
    rows = {"rows": 8, "positions": None, "seq_dim": 1, "sharded": []}
    one = _user("fsdp2", 1, [], rows, time_us=1e4, compute_s=0.01)
    four = _user("fsdp2", 4, [_inv("all_gather", 4096, "dp", 2)], rows, time_us=1e4, compute_s=0.003)
    (d,) = model.predict_at(_model(one + four), Topology(2, 1))  # world 1 is nearer, world 4's inventory priced
    assert d["comm_us"] == pytest.approx(2 * 1 / 2 * 4096 / 1e3) and d["measured_ranks"] == 1
    assert model.predict_at(_model(one), Topology(2, 1)) == []
    assert any("measured at 1 rank only" in n for n in model.notes_at(_model(one), Topology(2, 1)))
    other = [r | {"n_params": 99} for r in _user("fsdp2", 2, [], rows, time_us=1e4, compute_s=0.01)]
    assert len(model.step_records([r | {"n_params": 42} for r in four] + other)) == 2


@pytest.mark.parametrize(
    ("strategy", "ranks"), [("ddp", 4), ("ddp", 8), ("fsdp2", 4), ("fsdp2", 8), ("tp", 4), ("tp", 8), ("sp", 4)]
)
def test_a_user_models_inventory_prices_as_theory_where_theorys_bytes_do_not_depend_on_n(strategy, ranks):
    """The built-in model run as your own model (its inventory = its theory at 2 ranks, which the experiment checks on
    every run): priced at 4 and 8 ranks it gives theory's prediction, because no S of these steps depends on N
    (16 and 64 rows split 2, 4 and 8 ways: no FSDP2 padding; sp's 4 positions split 4 ways). Measured on the
    compose simulation with tests.user_models:built_in_twin: the same (docs/reports.md)."""
    theory = shapes.theory(strategy, 16, 2, 4, 8, 2)
    built_in = _rec(strategy, 2, time_us=1e4, compute_s=0.01)
    rows = {"rows": 8, "positions": 4 if strategy == "sp" else None, "seq_dim": 1, "sharded": []}
    user = _user(strategy, 2, theory, rows, time_us=1e4, compute_s=0.01)
    got = {d["model"]: d for d in model.predict_at(_model(built_in + user), Topology(ranks, 2))}
    assert got["m:build"]["comm_us"] == pytest.approx(got[None]["comm_us"]) and got[None]["comm_us"] > 0
    assert got["m:build"]["step_us"] == pytest.approx(got[None]["step_us"])


def test_the_validation_twin_is_the_built_in_model_at_validate_predicts_shape():
    from experiments.sharded import workload
    from tests import user_models

    twin, net = user_models.built_in_twin(), workload.build_net(60, 2)
    assert all(torch.equal(a, b) for a, b in zip(twin.module.state_dict().values(), net.state_dict().values()))
    assert all(torch.equal(a, b) for a, b in zip(twin.batch(3), workload.batch(3, 60, 4, 60, "cpu")))


def test_validation_rows_and_a_geomean_per_strategy():
    fit = _rec("tp", 2, time_us=1.0, compute_s=0.010) + _rec("tp", 3, time_us=1.0, compute_s=0.007)
    fit += _rec("fsdp2", 2, time_us=1.0, compute_s=0.010)
    m = _model(fit)
    pt = model.predict_at(m, Topology(4, 1))
    want = {d["strategy"]: d["step_us"] for d in pt}
    assert want["tp"] == pytest.approx(1000 + 18_000 / 4 + next(d for d in pt if d["strategy"] == "tp")["comm_us"])
    recs = _rec("tp", 4, time_us=want["tp"] * 1.1, compute_s=0.004) + _rec(
        "fsdp2", 4, time_us=want["fsdp2"] / 1.2, compute_s=0.004
    )
    check = {
        "benchmarks": [{"extra_info": r} for r in recs],
        "machine_info": {"suite": {"hostnames": ["n0", "n1", "n2", "n3"]}},
    }
    v = step.validation(m, [check])
    rows = {r["strategy"]: r for r in v["sharded"]}
    assert rows["tp"]["error"] == pytest.approx(1 / 1.1 - 1) and rows["tp"]["fit_ranks"] == [2, 3]
    assert rows["fsdp2"]["error"] == pytest.approx(0.2) and rows["fsdp2"]["compute_model"].startswith("per-rank")
    by = v["sharded_summary"]["by"]
    assert by["tp"]["geomean_abs_error"] == pytest.approx(1 - 1 / 1.1) and by["fsdp2"]["n"] == 1
    lines = step.validation_lines(v)
    assert any(ln.startswith("sharded step (tp) at 4 ranks: predicted") for ln in lines)
    assert "sharded step (fsdp2): geomean |err| 20.0% over 1 scales" in lines
