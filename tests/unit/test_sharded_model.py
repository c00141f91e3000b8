"""The sharded step predicted at scale (issue 26): the torch-free shapes (theory and the mesh at several
world sizes, which sizes a strategy can take), the step model against hand-computed values (the groups'
topologies of a 2-D mesh, the compute models, the hidden share), its validation rows and summary per
strategy (`make predict` on a real stored run: tests/e2e/test_predict_sharded.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from experiments.sharded import model, shapes
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
        shapes._row("all_reduce", "float32", 4 * batch * seq * d, "tp", ph, depth) for ph in ("forward", "backward")
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


def test_a_user_models_decomposed_records_are_not_predicted():
    # SHARDED_MODEL's records carry compute_s and a replay like the built-in model's, but no width, depth, seq
    # or batch: its communication at another world size has no theory to come from
    built_in = _rec("tp", 2, time_us=1e4, compute_s=0.01)
    user = [{k: v for k, v in r.items() if k not in ("width", "depth", "seq", "batch")} | {"model": "m:build"}
            for r in _rec("fsdp2", 2, time_us=1e4, compute_s=0.01)]  # fmt: skip
    assert list(model.step_records(built_in + user)) == [("tp", 16, 2, 4, 8)]
    assert [d["strategy"] for d in model.predict_at(_model(built_in + user), Topology(8, 1))] == ["tp"]


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
