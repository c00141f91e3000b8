"""The checks proven against every fault class: each class of the planted faults (suite/harness/plant/backend.py,
SUITE_INJECT_BACKEND) against every collective, every p2p pattern and the all_reduce algorithms built from p2p
(experiments/backends) it applies to, at 2 and 3 Gloo ranks, and on groups whose ranks are not the global ones at 4,
through the harness as a run uses it. Each case must come out wrong, with the class's symptom in the record's
``wrong_found`` (the words the failure message and a run with status 6 carry); with no fault armed, every case is right.

The same for the DDP experiment's cases and every sharded strategy's training step at 2 ranks, and at 4 those whose
check 4 ranks change (``WORLD_KINDS``, ``_strategies``: what 3 ranks add is the collectives'). One launch per world
size, one plain Gloo group (faulty only where the harness arms a case) that runs the collectives, then the DDP and
sharded steps; the classes that cannot apply to a case are listed in ``NOT_APPLICABLE``, ``DDP_NOT_APPLICABLE`` and
``SHARDED_NOT_APPLICABLE`` with why (docs/metrics.md has the tables).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import re
from pathlib import Path

import pytest
import torch.multiprocessing as mp

from suite.case import CaseSkipped
from suite.common import faults
from suite.harness.runner import Harness
from suite.common.config import BenchConfig
from suite.ops import p2p, sweep
from suite.ops.p2p import exchange
from suite.ops.p2p.pattern import Spec
from experiments.backends import cases as backends
from experiments.ddp.cases import ddp_cases
from experiments.ddp.settings import DdpSettings
from experiments.sharded.cases import sharded_cases
from experiments.sharded.check import check_rule
from experiments.sharded.settings import STRATEGIES, ShardedSettings
from tests.dist.local_group import gloo_rank

pytestmark = pytest.mark.slow

CFG = BenchConfig(
    iters=1, warmup_iters=0, min_bytes=256, max_bytes=256, redops=("sum",), heartbeat_timeout_s=0, timeout_s=60
)
"""Each case once in its check run and once timed: their checks name every class (a warm-up call per case, 23% of the
collectives' time and 12% of the DDP cases' at 2 ranks, caught no class the two miss; the sharded steps keep theirs:
``_sharded_cfg``)."""

SYMPTOM = {
    "drop": "poison left",
    "stale": "holds the check run's result again",
    "misroute": "belong elsewhere",
    "duplicate": "belong elsewhere",
    "overrun": "guard band after the output overwritten",
    "reorder": "belong elsewhere",
    "partial": "poison left",
    "wrong_reduction": "wrong value",
    "aliasing": "changed by the call",
    "group_rank": "belong elsewhere",
}
"""What the check names for each class (a phrase of a ``wrong_found`` line)."""

ALGORITHMS = "gloo-cpu-(all_reduce|ring_p2p|reduce_broadcast)-"
"""The backends experiment's all_reduce algorithms on the Gloo lane (in place, like all_reduce)."""
IN_PLACE = rf"^(all_reduce|reduce)-|^reduce_scatter_tensor-.*inplace|^{ALGORITHMS}"
"""Ops whose output is their input: a part never written holds this rank's own input, not poison."""
OTHER_SYMPTOM = {
    ("drop", IN_PLACE): "wrong value",
    ("partial", IN_PLACE): "wrong value",
    # a stale message also sits where other messages of the window were expected: misplaced, seen in the check run
    (
        "stale",
        r"^(window|ring|pair_matrix|barrier_cost|batching-(send|isend|batch)|producer-(isend_each_same|broadcast|scatter)"
        r"|exchange|gloo-cpu-(ring_p2p|p2p_step|send_recv))",
    ): "",
    # the ring sums what it receives: misrouted or swapped chunks are folded into wrong sums
    ("misroute", "^gloo-cpu-ring_p2p"): "wrong value",
    ("reorder", "^gloo-cpu-ring_p2p"): "",
    # the ring's send buffers are its result: a send that writes into its buffer spoils the result itself
    ("aliasing", "^gloo-cpu-ring_p2p"): "belong elsewhere",
    ("stale", r"^(all_reduce|reduce|broadcast|all_gather|gather|scatter|reduce_scatter)"): "",
}
"""(class, case pattern) -> the symptom the check names there instead ("": the case fails, its first line may be
another kind)."""

NOT_APPLICABLE = {
    "group_rank": (
        r"^(?!.*-interleaved$)",
        "the world's group ranks are its global ranks: nothing to confuse (the collectives on the interleaved "
        "groups show it, at 4 ranks: halves of 2)",
    ),
    "reorder": (
        r"^(?!window|barrier_cost|batching-(send|isend|batch)|gloo-cpu-ring_p2p)",
        "one message per peer per call: nothing to swap",
    ),
    "wrong_reduction": (
        r"^(?!all_reduce|reduce|gloo-cpu-(all_reduce|reduce_broadcast))",
        "the op reduces nothing (the ring on p2p reduces on the rank, not in the backend)",
    ),
    "aliasing": (
        r"^(all_reduce|reduce|broadcast|all_gather_into_tensor-.*inplace|reduce_scatter_tensor-.*inplace"
        r"|producer-broadcast|batching-coalesced|control|gloo-cpu-(all_reduce|reduce_broadcast))",
        "in place (the input is the output), a packed copy is what is sent, or a one-element signal",
    ),
    "misroute": (r"^control-", "one one-element message: no other place to deliver it"),
    "duplicate": (r"^control-", "one one-element message: no second chunk"),
    "partial": (r"^control-", "a one-element message has no prefix"),
}
"""class -> (case labels it cannot apply to, why)."""


DDP_CFG = dataclasses.replace(
    CFG,
    ddp=DdpSettings(params=2000, batch_per_rank=4, accum=2, bucket_fractions=(0.125,), hooks=("fp16_compress",)),
)
"""The DDP experiment at its smallest: a 2,000-parameter MLP, 4 samples per rank, 2 micro-batches, one bucket cap
(a step of several buckets) and one compressing hook (a step checked within a tolerance)."""
DDP_CASES = r"^mlp-(grad_all_reduce_only|ddp|manual_all_reduce|manual_coalesced|ddp_hook_fp16_compress"
DDP_CASES += r"|ddp_bucket_cap=.*|accum_x2_no_sync|init_broadcast_per_tensor|init_DDP_constructor)$"
"""Every kind of the DDP experiment's checked cases once (the source model's are the same kinds)."""
ONE_MESSAGE_PER_PEER = "collectives only: one message per peer per call, nothing to swap"
WORLD_GROUP = "on the world's group, whose ranks are the global ones: nothing to confuse"
"""Why reorder and group_rank cannot apply to the DDP and sharded steps they name."""
DDP_FAULTS = faults.BACKEND_FAULTS
_CONSTRUCTOR = (
    "^mlp-init_DDP_constructor$",
    "DDP's constructor first all-gathers every parameter's shape across the ranks and raises on a difference: "
    "the corrupted shapes make one rank raise while the other waits in the broadcast that follows (the group "
    "breaks, a lost peer in a run, before any check)",
)
DDP_NOT_APPLICABLE = {
    **{f: _CONSTRUCTOR for f in ("drop", "misroute")},
    "duplicate": (
        "^mlp-(init_DDP_constructor|ddp.*|accum_x2_no_sync)$",
        "DDP's own syncs of its layout (the constructor's shapes, the first backward's rebuilt buckets, broadcast "
        "from rank 0) duplicated give the ranks different sizes: the next all_reduce is a size mismatch that "
        "breaks the group (Gloo aborts, a lost peer in a run) before any check",
    ),
    "overrun": (
        "",
        "every output DDP's ops write is a storage of its own (a bucket, a gradient, a compressed copy, a "
        "parameter): no bytes of it lie past the output",
    ),
    "reorder": ("", ONE_MESSAGE_PER_PEER),
    "wrong_reduction": ("^mlp-init_", "the initial-state syncs broadcast: they reduce nothing"),
    "aliasing": (
        "",
        "in place: the gradient all_reduce reduces each bucket, gradient or compressed copy into itself, and a "
        "broadcast writes the tensor it sends",
    ),
    "group_rank": ("", WORLD_GROUP),
}
"""class -> (DDP case labels it cannot apply to, why)."""
DDP_SYMPTOM = {
    ("drop", ""): "wrong value",
    ("stale", ""): "wrong value",
    ("misroute", "fp16_compress"): "wrong value",  # checked within a tolerance: no exact value to find elsewhere
    ("misroute", ""): "belong elsewhere",
    ("duplicate", ""): "belong elsewhere",
    ("partial", "^mlp-(grad_all_reduce_only|init_)"): "belong elsewhere",  # the unwritten part: this rank's input
    ("partial", ""): "wrong value",
    ("wrong_reduction", "^mlp-grad_all_reduce_only$"): "belong elsewhere",  # the max of the ranks' values
    ("wrong_reduction", ""): "wrong value",
}
"""(class, case pattern) -> what the DDP check names (the first pattern that matches)."""
DDP_SYMPTOM_WITHIN_TOL = {(f, "^mlp-(?!grad_all_reduce_only|init_)"): "wrong value" for f in ("misroute", "duplicate")}
"""What the steps' check names instead at 3 and 4 ranks, where it is a tolerance (an average of more than two
terms depends on their order): the gradient holds no exact value to find elsewhere."""


SHARDED_CANNOT = {
    2: {"2d": "needs an even world of at least 4 ranks"},
    3: {"2d": "needs an even world of at least 4 ranks"},
    4: {},
}
"""The product strategies a launch of each world size cannot run (every other runs at the catalogue's settings:
``_sharded_cfg``), with a phrase of why (the strategy's record: experiments/sharded/strategies/)."""
SHARDED_FAULTS = faults.BACKEND_FAULTS
_IN_PLACE_FSDP2 = (
    "in place (FSDP2's all-gather into its own buffer, tensor parallel's all_reduce, DDP's buckets reduced into "
    "themselves), or an input the step never reads again (FSDP2's reduce-scatter of the flat gradients, a "
    "stage's sent activations and gradients)"
)
SHARDED_NOT_APPLICABLE = {
    "overrun": (
        "",
        "every output a step's ops write is a storage of its own (FSDP2's all-gather buffers, the functional "
        "collectives' new outputs, DDP's buckets, a stage's receive buffers): no bytes of it lie past the output",
    ),
    "reorder": (
        "",
        "collectives only, one message per peer per call (ddp, fsdp2*, tp, sp, 2d); a pipeline stage waits for each "
        "receive and consumes it before it posts the next from that peer: no two messages in flight to swap (the "
        "planted swap wrote into an activation its autograd graph held: backward raised)",
    ),
    "wrong_reduction": ("^pp_", "sends and receives reduce nothing"),
    "aliasing": ("^(ddp|fsdp2.*|tp|2d|pp_.*)$", _IN_PLACE_FSDP2),
    "group_rank": ("^(?!2d$)", WORLD_GROUP),
    "duplicate": ("^ddp$", DDP_NOT_APPLICABLE["duplicate"][1]),
    "misroute": (
        "^ddp$",
        "at 3 ranks: DDP rebuilds its buckets after the first backward from the layout rank 0 broadcasts; "
        "misrouted, another rank's reducer indexes past its parameters and the process dies (SIGSEGV, a lost "
        "peer in a run) before any check (at 2 and 4 ranks the misrouted layout still fits, and the step fails)",
        (3,),
    ),
}
"""class -> (sharded strategies it cannot apply to, why[, the world sizes where, if not all])."""


def _checked_exactly(strategy: str, world: int) -> bool:
    """Whether the step's check is exact at ``world`` ranks (the catalogue's model: width 12, ``world``
    micro-batches)."""
    return check_rule(strategy, world, contraction=4 * 12, microbatches=world).exact


def _strategies(world: int) -> tuple[str, ...]:
    """The product strategies a launch of ``world`` ranks runs: every one at 2 ranks; at 4 the ones 2 ranks cannot
    run (the 2-D mesh) and those checked exactly at 2 and within a tolerance at 4 (DDP, FSDP2), where a fault
    must stand out of the tolerance. The others meet nothing new at 4: the pipelines are exact at both (4
    micro-batches scale exactly) and tensor and sequence parallel's tolerance counts fewer terms at 4 than at 2 (a
    quarter of the row-parallel dot products per rank, not half)."""
    if world != 4:
        return STRATEGIES
    return tuple(
        s for s in STRATEGIES if s in SHARDED_CANNOT[2] or (_checked_exactly(s, 2) and not _checked_exactly(s, 4))
    )


def _sharded_cfg(world: int) -> BenchConfig:
    """The sharded experiment at its smallest: a width-12 model (its 4d hidden and d split over 2, 3 and 4
    tensor-parallel ranks) of 2 blocks (a pipeline takes the blocks its stages need), one sample of ``world``
    tokens (a sequence that splits over the ranks) per rank and per micro-batch (``world`` of them: 1F1B needs
    as many as stages); the product strategies ``_strategies`` gives, their training steps only (their replays
    are collectives, proven above)."""
    s = ShardedSettings(width=12, depth=2, seq=world, batch=world, microbatches=world, strategies=_strategies(world))
    # one warm-up step: without it a stale all_reduce of the ddp strategy's step passed the checks (at 2 ranks)
    return dataclasses.replace(CFG, sharded=s, warmup_iters=1)


SHARDED_SYMPTOM = "wrong value(s) in the parameters"
"""What the sharded step's check names: every rank's whole parameters against single-process training (the
parameter tensor first off, by how much, and the rule)."""


def applies(fault: str, label: str, not_applicable: dict | None = None, world: int | None = None) -> bool:
    entry = (NOT_APPLICABLE if not_applicable is None else not_applicable).get(fault)
    if entry is None or (len(entry) > 2 and world not in entry[2]):
        return True
    return not re.search(entry[0], label)


def expected_symptom(fault: str, label: str, kind: str = "collectives", world: int = 2) -> str:
    if kind == "sharded":
        return SHARDED_SYMPTOM
    if kind == "ddp":
        table = ({} if world <= 2 else DDP_SYMPTOM_WITHIN_TOL) | DDP_SYMPTOM
        return next(said for (f, pat), said in table.items() if f == fault and re.search(pat, label))
    for (f, pat), said in OTHER_SYMPTOM.items():
        if f == fault and re.search(pat, label):
            return said
    return SYMPTOM[fault]


def _ddp_cases(world: int):
    return [c for c in ddp_cases(DDP_CFG, world) if re.search(DDP_CASES, c.label)]


def _exchange(case):
    """The exchange case at the catalogue's size: in a run its size comes from the deadlock probe (an isolated pair
    of child processes on plain Gloo, minutes), but its orderings are timed and checked in the run's group."""
    if not case.label.startswith("exchange"):
        return case
    s = Spec(pattern="exchange", variant=case.identity["variant"], size_bytes=0, dtype=case.bytes.dtype, src=0, dst=1)
    return exchange.at_size(case, s, CFG.max_bytes)


def _cases(world: int):
    """Every collective in each form, every variant of every p2p pattern once (its first pair of ranks and
    message count: a form, not a pair, is what a fault class meets differently), and the backends experiment's
    all_reduce algorithms and ring send_recv."""
    cases = sweep.collective_cases(CFG, world, experiment="collectives")
    cases += [_exchange(c) for c in p2p.cases(CFG, world, experiment="p2p")]
    cases += backends.algorithm_cases(CFG, world) + backends.send_recv_cases(CFG, world)
    seen, out = set(), []
    for c in cases:
        form = (c.experiment, *(c.identity.get(k) for k in ("variant", "pattern", "in_place")))
        if form not in seen:
            seen.add(form)
            out.append(c)
    return out


def _halves(world: int):
    """Every collective form on the even and the odd ranks at once (the collectives experiment's interleaved
    groups), at 4 ranks: halves of 2 ranks whose group ranks are not their global ranks."""
    if world != 4:
        return []
    parts = ("interleaved", [[0, 2], [1, 3]])
    return sweep.collective_cases(CFG, world, experiment="collectives", partition=parts)


WORLD_GROUP_FORMS = (2, 3)
"""The world sizes whose launch runs the collective and p2p forms on the world's group: a power of two and an odd
world. At 4 the collectives run on the halves only (``_halves``), where the group ranks are not the global ones:
the one thing 2 and 3 ranks cannot show (the faults are planted above the backend, so Gloo's own algorithm at 4
ranks is not what they meet)."""


def _of(kind: str, world: int, fault: str | None) -> list:
    """The cases a launch of ``kind`` runs under ``fault``."""
    if kind == "ddp":
        return _ddp_cases(world)
    if kind == "sharded":
        return [c for c in sharded_cases(_sharded_cfg(world), world) if c.op == "train_step"]
    forms = _cases(world) if world in WORLD_GROUP_FORMS else []
    return forms + (_halves(world) if fault in (None, "group_rank") else [])


KINDS = {
    "collectives": (CFG, faults.BACKEND_FAULTS, NOT_APPLICABLE),
    "ddp": (DDP_CFG, DDP_FAULTS, DDP_NOT_APPLICABLE),
    "sharded": (None, SHARDED_FAULTS, SHARDED_NOT_APPLICABLE),
}
"""kind -> (its config, None: ``_sharded_cfg``; its classes; where they cannot apply); one launch of each world size
runs the kinds ``WORLD_KINDS`` gives it, in one group (``catalogue``)."""
WORLD_KINDS = {2: tuple(KINDS), 3: ("collectives",), 4: tuple(KINDS)}
"""The kinds each world size runs. 3 ranks, an odd world, is where the collective and p2p forms meet what 2 and 4 do
not: chunks and messages from two other ranks that a power of two does not split. The DDP and sharded steps at 3
ranks meet nothing 4 does not (checked within a tolerance, neighbours that differ, the catalogue's model splitting
evenly: width 12), and cost two thirds of that launch (the sharded steps most)."""


def _rank(rank: int, world: int, store: str, out: str, kinds: tuple[str, ...]) -> None:
    got: dict = {}
    with gloo_rank(rank, world, store) as ctx:  # plain Gloo: the harness plants the faults (SUITE_INJECT_BACKEND)
        # what the imports and the group made is never garbage: the harness's gc.collect before a case that
        # measures its peak memory (the steps) walks only what the cases make (0.3 s a case otherwise)
        gc.freeze()
        for kind in kinds:
            got[kind] = _kind(ctx, world, kind)
    if rank == 0:
        Path(out).write_text(json.dumps(got))


def _kind(ctx, world: int, kind: str) -> dict:
    """Every case of ``kind`` clean and under each class that applies to it: its rows (fault, label, n_wrong,
    wrong_found, planted_fault) and the labels skipped, with why."""
    cfg, classes, not_applicable = KINDS[kind]
    harness = Harness(ctx, cfg or _sharded_cfg(world))  # one per kind: its support probes run once
    rows, skipped = [], {}
    for fault in (None, *classes):
        harness.env = {"SUITE_INJECT_BACKEND": fault} if fault else {}
        for case in _of(kind, world, fault):
            if case.unchecked or (fault and not applies(fault, case.label, not_applicable, world)):
                continue
            try:
                _, rec = harness.run(case)
            except CaseSkipped as e:
                skipped[case.label] = str(e)
                continue
            except Exception as e:
                raise RuntimeError(f"{case.label} under {fault} at {world} ranks raised") from e
            # the inventory step after the timed steps is not armed: what it saw is the step's own
            assert kind != "sharded" or rec["inventory_matches_theory"], (fault, case.label, rec["inventory"])
            rows.append([fault, case.label, rec["n_wrong"], rec.get("wrong_found", []), rec.get("planted_fault")])
    return {"rows": rows, "skipped": skipped}


@pytest.fixture(scope="module")
def catalogue(request, tmp_path_factory) -> tuple[int, dict]:
    """One launch of ``world`` ranks (the param) that runs its kinds (``WORLD_KINDS``), collectives and steps, for
    both tests below: the ranks are spawned, and each imports torch and the experiments, once per world size."""
    world = request.param
    return world, _run(tmp_path_factory.mktemp(f"catalogue{world}"), world, WORLD_KINDS[world])


@pytest.mark.parametrize("catalogue", sorted(WORLD_KINDS), indirect=True)
def test_every_fault_class_fails_every_case_it_applies_to(catalogue):
    world, got = catalogue
    got = got["collectives"]["rows"]
    _assert_caught(got, world)
    ran = {fault for fault, *_ in got if fault}
    every = set(faults.BACKEND_FAULTS) - {"group_rank"} if world in WORLD_GROUP_FORMS else set()
    assert ran == every | ({"group_rank"} if _halves(world) else set())  # every class applied somewhere


@pytest.mark.parametrize("catalogue", [w for w, kinds in WORLD_KINDS.items() if "ddp" in kinds], indirect=True)
def test_the_ddp_and_sharded_steps_fail_each_fault_class_with_its_symptom(catalogue):
    """The DDP experiment's gradient all_reduce, its steps (DDP with a bucket cap and a compressing hook, manual,
    coalesced, accumulation) and its initial-state syncs (a stale result passed the all_reduce of ones and a
    constructor from a fixed seed; the steps named nothing, and a drop was called stale); and the sharded
    experiment's training steps, every product strategy that runs at ``world`` ranks (SHARDED_CANNOT): DDP's
    buckets, FSDP2's all-gathers and reduce-scatters (resharded, kept, bfloat16), tensor and sequence parallel's
    functional collectives, the 2-D mesh's (on groups whose ranks are not the global ones) and the pipelines'
    sends and receives between stages (one and two stages per rank). Every class that applies makes every case
    wrong, named; DDP_NOT_APPLICABLE and SHARDED_NOT_APPLICABLE say where a class cannot apply, and why."""
    world, got = catalogue
    ddp, sharded = got["ddp"]["rows"], got["sharded"]["rows"]
    _assert_caught(ddp, world, "ddp")
    _assert_caught(sharded, world, "sharded")
    assert not got["ddp"]["skipped"]
    assert {(f, label) for f, label, *_ in ddp if f} == {
        (f, c.label) for f in DDP_FAULTS for c in _ddp_cases(world) if applies(f, c.label, DDP_NOT_APPLICABLE, world)
    }
    cannot = got["sharded"]["skipped"]
    assert cannot.keys() == SHARDED_CANNOT[world].keys(), cannot
    assert all(why in cannot[s] for s, why in SHARDED_CANNOT[world].items()), cannot
    assert {(f, label) for f, label, *_ in sharded} == {
        (f, s)
        for f in (None, *SHARDED_FAULTS)
        for s in _strategies(world)
        if s not in cannot and (f is None or applies(f, s, SHARDED_NOT_APPLICABLE, world))
    }


def _run(tmp_path, world: int, kinds: tuple[str, ...]) -> dict:
    out = tmp_path / "got.json"
    mp.spawn(_rank, args=(world, str(tmp_path / "store"), str(out), kinds), nprocs=world, join=True)
    return json.loads(out.read_text())


def _assert_caught(got: list, world: int, kind: str = "collectives") -> None:
    """Every case right without a fault, and wrong under each, with the class's symptom and no other named stale."""
    clean = [(label, found) for fault, label, n, found, _ in got if fault is None and n]
    assert not clean, f"wrong without a fault at {world} ranks: {clean}"
    assert all(planted is None for fault, *_, planted in got if fault is None)
    missed, unnamed, misnamed = [], [], []
    for fault, label, n, found, planted in got:
        if fault is None:
            continue
        assert planted == f"backend {fault}", (fault, label, planted)
        said = expected_symptom(fault, label, kind, world)
        if not n:
            missed.append((fault, label))
        elif said and not any(said in line for line in found):
            unnamed.append((fault, label, said, found))
        if fault != "stale" and any(SYMPTOM["stale"] in line for line in found):
            misnamed.append((fault, label, found))  # the timed buffers were made from the check run's inputs
    assert not missed, f"a planted fault passed the checks at {world} ranks: {missed}"
    assert not unnamed, f"the check did not name the symptom at {world} ranks: {unnamed}"
    assert not misnamed, f"a fault named stale at {world} ranks: {misnamed}"
