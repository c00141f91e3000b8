"""The sharded step at N ranks from a stored run (issue 26, "Predicted at scale"): the step model
(suite.model.step) behind the spec's ``step_model`` hook, what each strategy's step adds to predict.json
("sharded"), to the validation ("sharded", "sharded_summary"), to make predict's output and to the report's
notes. Offline: it reads stored records, imports no torch, and takes the shapes from shapes.py.

Per strategy (the run's ``train_step`` records with the decomposition, experiments/sharded/decompose.py):

    step(N) = compute(N) + comm(N) x (1 - hidden)

- **comm(N)** (``COMM_MODEL``): every collective theory says one step issues at N ranks (shapes.theory:
  op, S bytes, group by mesh dimension, count), each priced by the run's link fit of that op (suite.model:
  the backend's algorithm over the op's calibrated α–β link) on its group's topology. The mesh at N is the
  experiment's own (shapes.mesh_shape: ``tp`` and ``sp`` over the whole world, ``2d`` a (2, N/2) mesh, the
  data-parallel strategies one dp dimension over the world); a mesh (dp, tp) is row-major over ranks that
  are node-contiguous (as torchrun and the compose nodes place them), so a tp group is tp contiguous ranks
  and a dp group dp ranks strided by tp (``group_topology``).
- **hidden** (``HIDDEN_MODEL``): the share of the replayed communication the measured step hid,
  hidden_comm_s / comm_replay_s of the strategy's replay record at the world size nearest N, clamped to
  [0, 1]. On CPU (``CPU_HIDDEN``) it is 0: FSDP2 and DTensor issue every collective synchronously there and
  DDP's bucket (one at these sizes) is all-reduced after backward, so what the decomposition shows as
  hidden is the noise of three medians (measured on the compose simulation: 0 to 1 between runs); the
  measured share stays in the entry (``measured_hidden_fraction``).
- **compute(N)**: with one measured world size n, ``per-rank work`` (``WORK_MODEL``): the global batch is
  fixed and each rank does 1/N of the step's arithmetic (its rows for ddp and FSDP2, its shard of the
  blocks' matmuls for tp), so compute(N) = compute_s(n) x n / N; with several, ``a + b/N`` (``FIT_MODEL``)
  fitted to compute_s by least squares over the world sizes (b = 0 when compute did not fall with N, a = 0
  when the fit's start-up came out negative). Where the ranks at N outnumber the cores they share (the compose
  simulation's N containers on one machine, an oversubscribed host) and the compute was measured at N on all N
  ranks at once (a probe, ``probe_at``: in the validation the check run's step minus its replay on CPU, where
  nothing overlaps, else its ``compute_s``), the compute is that probe (suite.model.contention: contention is not
  extrapolated); the entry keeps it as ``compute_probe_us``.

Your own model (``SHARDED_MODEL``, a record with ``model``): no theory, so comm(N) prices the collectives its
step record measured (``inventory``) at the world size nearest N, each with the same S bytes at N
(``USER_COMM_MODEL``): on one mesh dimension over the world, FSDP2 gathers and reduce-scatters whole units, DDP
all-reduces whole buckets and tensor or sequence parallelism all-reduces or gathers whole activations, none of
which depends on N (FSDP2's padding of each parameter to a multiple of N aside). What must divide at N is the
record's ``splits`` (user_model.split_problem). ``2d`` on a user model is not predicted (``USER_2D``).

Strategies that cannot run at N (shapes.cannot_run: the mesh or the batch does not divide) and the pipeline
schedules (point-to-point, not collectives: not modelled) get no entry; make predict says why (``notes_at``).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import Counter
from collections.abc import Sequence

from suite.model import contention
from suite.model.links import Topology
from suite.model.prediction import predict
from suite.model.run_model import RunModel
from suite.model.runs import record_topology, run_topology, usable
from suite.model.step import StepModel, of_module, measured_text, row_text, split_text
from suite.model.units import fmt_time

from . import shapes, user_model
from .strategies import find

EXPERIMENT = "sharded"

COMM_MODEL = (
    "theory's collectives at N (shapes.theory) priced by the run's per-op link fits on each group's topology "
    "(tp groups contiguous ranks, dp groups strided by the tp size)"
)
HIDDEN_MODEL = "measured share hidden_comm_s / comm_replay_s of the replay at the world size nearest N, in [0, 1]"
CPU_HIDDEN = "0 on CPU: every collective of these steps is synchronous there (the measured share is noise)"
USER_COMM_MODEL = (
    "the collectives the step record measured (its inventory) at the world size nearest N, the same S bytes at N "
    "(whole FSDP2 units, DDP buckets, TP/SP activations; FSDP2's padding to a multiple of N not modelled), priced by "
    "the run's per-op link fits on each group's topology"
)
USER_2D = (
    "2d on a user model: its FSDP2 collectives carry the tp shards of its parameters, whose size at another tp "
    "size its inventory does not tell (not modelled)"
)
WORK_MODEL = "per-rank work: compute_s(n) x n / N (global batch fixed, each rank 1/N of the step's arithmetic)"
FIT_MODEL = "a + b/N fitted to compute_s over the runs' world sizes"


def _key(rec: dict) -> tuple:
    return (
        rec.get("strategy") or rec.get("label"),
        rec.get("width"),
        rec.get("depth"),
        rec.get("seq"),
        rec.get("batch"),
        rec.get("model"),
        rec.get("n_params") if rec.get("model") else None,  # one factory's name may size models differently
    )


def step_records(records: Sequence[dict]) -> dict[tuple, dict[int, dict]]:
    """(strategy, width, depth, seq, batch, model) -> world size -> {"step": train_step record, "replay": its
    replay record}: the strategies measured with their decomposition (checked, not planted: the pipelines have no
    compute_s and no replay); ``model`` is None for the built-in model, else SHARDED_MODEL (its width, depth, seq
    and batch None)."""
    out: dict[tuple, dict[int, dict]] = {}
    for r in records:
        if r.get("experiment") != EXPERIMENT or not usable(r) or r.get("planted"):
            continue
        if r.get("op") == "train_step" and r.get("compute_s") is not None:
            out.setdefault(_key(r), {}).setdefault(int(r["world_size"]), {})["step"] = r
        elif r.get("op") == "comm_replay" and r.get("comm_replay_s"):
            out.setdefault(_key(r), {}).setdefault(int(r["world_size"]), {})["replay"] = r
    kept = {k: {n: v for n, v in by.items() if "step" in v} for k, by in out.items()}
    return {k: by for k, by in kept.items() if by}


def group_topology(topo: Topology, strategy: str, group: str) -> Topology:
    """The topology of one ``group`` (mesh dimension) of ``strategy``'s mesh at ``topo``: its first group's
    ranks (row-major mesh: the last dimension contiguous, the others strided) counted per node; a group
    spread unevenly over nodes counts the gcd of its size and its most ranks on one node."""
    shape, names = shapes.mesh_shape(strategy, topo.ranks)
    if group not in names or len(names) == 1:
        return topo
    i = names.index(group)
    stride = math.prod(shape[i + 1 :])
    ranks = [k * stride for k in range(shape[i])]
    most = max(Counter(r // topo.ranks_per_node for r in ranks).values())
    return Topology(shape[i], math.gcd(shape[i], most))


def _nearest(by_world: dict[int, dict], ranks: int) -> int:
    """The measured world size nearest ``ranks`` (the larger on a tie)."""
    return min(by_world, key=lambda n: (abs(n - ranks), -n))


def _inventoried(by_world: dict[int, dict], ranks: int) -> int | None:
    """The measured world size of at least 2 ranks nearest ``ranks`` (a 1-rank step issues no collective: FSDP2
    and DTensor skip them, so its inventory is empty), or None."""
    many = {n: v for n, v in by_world.items() if n >= 2}
    return _nearest(many, ranks) if many else None


def collectives_at(key: tuple, by_world: dict[int, dict], ranks: int) -> list[dict]:
    """The collectives of one step at ``ranks``: theory's (the built-in model), or a user model's measured
    inventory at the world size of at least 2 ranks nearest ``ranks`` (USER_COMM_MODEL; why_not: there is one)."""
    strategy, width, depth, seq, batch, name, _ = key
    if name is None:
        return shapes.theory(strategy, width, depth, seq, batch, ranks)
    return by_world[_inventoried(by_world, ranks)]["step"].get("inventory") or []


def comm_us(strategy: str, rows: list[dict], topo: Topology, model: RunModel) -> float | None:
    """``rows`` (collectives_at) priced at ``topo`` (None where the link model has no algorithm for an op at its
    group)."""
    total = 0.0
    for row in rows:
        t = group_topology(topo, strategy, row["group"])
        if t.ranks < 2:
            continue
        alg = model.choice(row["op"], row["bytes"]).algorithm or "ring"
        pr = predict(row["op"], alg, t, model.links_for(row["op"]), row["bytes"])
        if pr is None:
            return None
        total += row["count"] * pr.time_us
    return total


def compute_model(by_world: dict[int, dict]) -> tuple[float, float, str]:
    """(a µs, b µs·rank, name): compute(N) = a + b/N from the measured compute_s per world size."""
    pts = sorted((n, v["step"]["compute_s"] * 1e6) for n, v in by_world.items())
    if len(pts) == 1:
        n, c = pts[0]
        return 0.0, c * n, f"per-rank work from {n} ranks"
    xs, ys = [1 / n for n, _ in pts], [c for _, c in pts]
    where = "/".join(str(n) for n, _ in pts)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    if b < 0:
        return my, 0.0, f"a + b/N on {where} ranks (b = 0: compute did not fall with N)"
    if a < 0:
        b = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
        return 0.0, b, f"a + b/N on {where} ranks (a = 0: the fit's a was negative)"
    return a, b, f"a + b/N on {where} ranks"


def hidden_fraction(by_world: dict[int, dict], ranks: int) -> tuple[float, float | None, str]:
    """(the model's share, the measured one, which model): HIDDEN_MODEL from the replay record of the world
    size nearest ``ranks`` (the larger on a tie), CPU_HIDDEN for a run on CPU; 0 without a replay."""
    have = {n: v for n, v in by_world.items() if "replay" in v}
    if not have:
        return 0.0, None, "no replay record: 0"
    rec = have[_nearest(have, ranks)]["replay"]
    measured = min(max((rec.get("hidden_comm_s") or 0.0) / rec["comm_replay_s"], 0.0), 1.0)
    if rec.get("device") == "cpu":
        return 0.0, measured, CPU_HIDDEN
    return measured, measured, HIDDEN_MODEL


def why_not(key: tuple, by_world: dict[int, dict], ranks: int) -> str | None:
    """Why the strategy of ``key`` has no prediction at ``ranks``, or None (a user model: its record's splits)."""
    strategy, width, _, seq, batch, name, _ = key
    if name is None:
        return shapes.cannot_run(strategy, ranks, width, seq, batch)
    if (st := find(strategy)) is not None and st.two_d:
        return USER_2D
    if (near := _inventoried(by_world, ranks)) is None:
        return "measured at 1 rank only, whose step issues no collective: its inventory has nothing to price at N"
    split = by_world[near]["step"].get("splits")
    if split is None:
        return "its record has no splits (a run before they were recorded): what divides at N is unknown"
    return shapes.mesh_cannot(strategy, ranks) or user_model.split_problem(strategy, ranks, split)


def predict_step(
    key: tuple,
    by_world: dict[int, dict],
    topo: Topology,
    model: RunModel,
    sharing: tuple[int, float | None] = (0, None),
    probe_us: float | None = None,
    probe_what: str = contention.ALONE,
) -> dict | None:
    """The strategy's step at ``topo`` (module docstring), with the model at the nearest measured world.
    ``sharing``: (ranks, the cores they share) at ``topo`` where known, ``probe_us``: the compute alone measured
    there on all ranks at once; where the ranks outnumber the cores the compute is the probe
    (suite.model.contention)."""
    strategy = key[0]
    comm = comm_us(strategy, collectives_at(key, by_world, topo.ranks), topo, model)
    if comm is None:
        return None
    a, b, how = compute_model(by_world)
    frac, measured_frac, hidden_how = hidden_fraction(by_world, topo.ranks)
    compute, how, probe_used = contention.priced(a + b / topo.ranks, how, topo.ranks, sharing, probe_us, probe_what)
    near = _nearest(by_world, topo.ranks)
    rec = by_world[near]["step"]
    comm0 = comm_us(strategy, collectives_at(key, by_world, near), record_topology(rec), model)
    shape, names = shapes.mesh_shape(strategy, topo.ranks)
    return {
        "strategy": strategy,
        "width": key[1],
        "depth": key[2],
        "seq": key[3],
        "batch": key[4],
        "model": key[5],
        "ranks": topo.ranks,
        "ranks_per_node": topo.ranks_per_node,
        "mesh": "x".join(map(str, shape)) + " (" + ",".join(names) + ")",
        "mesh_rule": "the experiment's own mesh at N (shapes.mesh_shape)",
        "compute_us": compute,
        "compute_model": how,
        "compute_probe_us": probe_used,
        "comm_us": comm,
        "comm_model": COMM_MODEL if key[5] is None else USER_COMM_MODEL,
        "hidden_fraction": frac,
        "hidden_model": hidden_how,
        "measured_hidden_fraction": measured_frac,
        "hidden_us": frac * comm,
        "step_us": compute + comm * (1 - frac),
        "measured_ranks": near,
        "measured_step_us": rec["time_us"],
        "measured_comm_replay_us": replay["comm_replay_s"] * 1e6 if (replay := by_world[near].get("replay")) else None,
        "model_comm_at_measured_us": comm0,
        "model_step_at_measured_us": a + b / near + (comm0 or 0.0) * (1 - frac),
    }


PROVENANCE = {
    "sharded.step_us": "modelled: compute_us + comm_us − hidden_us",
    "sharded.compute_us": f"modelled: the entry's compute_model: 'per-rank work' {WORK_MODEL}; 'a + b/N' {FIT_MODEL}; "
    f"'the probe' where the ranks outnumber their cores: compute_probe_us as measured",
    "sharded.compute_probe_us": "measured: the step's compute at N, on all N ranks at once (the entry's "
    "compute_model says which: the step minus its replay on CPU, else the train_step record's compute_s); null "
    "where the compute is extrapolated",
    "sharded.comm_us": f"modelled: the entry's comm_model: {COMM_MODEL}; a user model's (model set) {USER_COMM_MODEL}",
    "sharded.hidden_us": f"modelled: comm_us x hidden_fraction ({HIDDEN_MODEL})",
    "sharded.hidden_fraction": f"the entry's hidden_model: {CPU_HIDDEN}; else measured: {HIDDEN_MODEL}",
    "sharded.measured_hidden_fraction": f"measured: {HIDDEN_MODEL}",
    "sharded.measured_step_us": "measured: the train_step record's time_us at measured_ranks",
    "sharded.measured_comm_replay_us": "measured: the replay record's comm_replay_s at measured_ranks",
    "sharded.model_comm_at_measured_us": "modelled: the entry's comm_model, at measured_ranks",
    "sharded.model_step_at_measured_us": "modelled: the same step model at measured_ranks",
}
"""predict.json's provenance of the numbers of its "sharded" entries."""


def predict_at(model: RunModel, topo: Topology) -> list[dict]:
    """predict.json's "sharded": the step of each strategy the run's sharded records hold, at ``topo``."""
    out = []
    for key, by_world in sorted(step_records(model.records).items(), key=lambda kv: str(kv[0])):
        if why_not(key, by_world, topo.ranks) is None and (d := predict_step(key, by_world, topo, model)) is not None:
            out.append(d)
    return out


def notes_at(model: RunModel, topo: Topology) -> list[str]:
    """make predict's lines for the strategies the run holds that get no prediction at ``topo``."""
    out = []
    pp = sorted(
        {
            str(r.get("strategy"))
            for r in model.records
            if r.get("experiment") == EXPERIMENT and getattr(find(r.get("strategy")), "pipeline", None) is not None
        }
    )
    if pp:
        out.append(f"sharded step ({', '.join(pp)}): not predicted: pipelines are point-to-point, not modelled")
    for key, by_world in sorted(step_records(model.records).items(), key=lambda kv: str(kv[0])):
        reason = why_not(key, by_world, topo.ranks)
        if reason is None and predict_step(key, by_world, topo, model) is None:
            reason = "the link model has no algorithm for one of its collectives at this topology"
        if reason:
            out.append(f"sharded step ({_who(key[0], key[5])}): not predicted at {topo.ranks} ranks: {reason}")
    return out


def probe_at(v: dict) -> tuple[float, str]:
    """(µs, what) the compute a check run's step did on all its ranks at once (``v``: step_records' entry): on
    CPU with a replay, its step minus the replay (contention.IN_STEP); else its compute alone (compute_s)."""
    step, replay = v["step"], v.get("replay")
    if replay is not None and step.get("device") == "cpu":
        return contention.in_step(step["time_us"], replay["comm_replay_s"] * 1e6), contention.IN_STEP
    return step["compute_s"] * 1e6, contention.ALONE


def validation_rows(model: RunModel, check: Sequence[dict]) -> list[dict]:
    """The validation's "sharded": each check run's step per strategy predicted from the fit runs (their
    compute, hidden share and link fits) at the check run's topology."""
    from suite.api import records

    fit = step_records(model.records)
    rows = []
    for run in check:
        t, sharing = run_topology(run), contention.run_cores(run, model.one_machine)
        for key, by_world in sorted(step_records(records(run)).items(), key=lambda kv: str(kv[0])):
            if key not in fit or t.ranks not in by_world or why_not(key, fit[key], t.ranks):
                continue
            pr = predict_step(key, fit[key], t, model, sharing, *probe_at(by_world[t.ranks]))
            if pr is None:
                continue
            measured = by_world[t.ranks]["step"]["time_us"]
            rows.append(
                {
                    "strategy": _who(key[0], key[5]),  # a user model's rows apart from the built-in's
                    "ranks": t.ranks,
                    "fit_ranks": sorted(fit[key]),
                    "predicted_us": pr["step_us"],
                    "compute_us": pr["compute_us"],
                    "compute_model": pr["compute_model"],
                    "compute_probe_us": pr["compute_probe_us"],
                    "predicted_comm_us": pr["comm_us"],
                    "predicted_hidden_us": pr["hidden_us"],
                    "measured_us": measured,
                    "measured_compute_us": by_world[t.ranks]["step"]["compute_s"] * 1e6,
                    "error": (pr["step_us"] - measured) / measured,
                }
            )
    return rows


def _who(strategy: str, name: str | None) -> str:
    """The strategy, and the user model's name where there is one."""
    return strategy if name is None else f"{strategy} of {name}"


def _title(d: dict) -> str:
    return f"step ({_who(d['strategy'], d.get('model'))}, mesh {d['mesh']})"


def step_line(d: dict, ranks: int) -> str:
    """make predict's line of one predict.json "sharded" entry."""
    tail = f"({measured_text(d)}; compute: {d['compute_model']})"
    return f"sharded {_title(d)}: {split_text(d)} at {ranks} ranks {tail}"


def report_note(d: dict, ranks: int) -> str:
    """The report's note of one predict.json "sharded" entry."""
    return f"Sharded {_title(d)} at {ranks} ranks: {fmt_time(d['step_us'])} ({measured_text(d, ' ')})"


def row_line(r: dict) -> str:
    """The validation table's line of one "sharded" row."""
    source = f"from the {'/'.join(map(str, r['fit_ranks']))}-rank runs"
    alone = f"(compute alone {fmt_time(r['measured_compute_us'])})"
    if r.get("compute_probe_us") is not None:
        alone = f"(compute: the probe, {fmt_time(r['compute_probe_us'])} on all {r['ranks']} ranks at once)"
    return f"sharded step ({r['strategy']}) {row_text(r, 'comm', source)} {alone}, error {100 * r['error']:+z.1f}%"


def step_model() -> StepModel:
    """The spec's ``step_model`` hook."""
    return of_module(sys.modules[__name__], notes_at=notes_at, row_group="strategy")
