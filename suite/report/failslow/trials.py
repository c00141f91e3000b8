"""The trials of a fail-slow benchmark: drawn from one seed before any runs (``draw``), each read back after its
run into what the scorer takes (``read``): the watch's flags from the run's records first, its truth after.

A trial's injection is an ``INJECT`` text the injector's own parser resolves (suite/inject/plan.py): the bench
picks a class spec (``pause``, ``slow:1``, ``slow::::rest``: the fields given are kept, the others drawn) and a
seed for it; the plan the launcher will read is resolved here first and passed whole (every field written), so
that a trial says what it injected and bad input is refused before the first run starts.

Times: every trial's clock starts at its training case's timed phase (the run's timeline, rank 0's track), so a
clean trial's and an injected one's training time are the same thing. An injection whose onset falls outside the
timed phase is void: it is kept in the stored trials and counted, but scored neither way.
"""

from __future__ import annotations

import functools
import json
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from suite.errors import ConfigError
from suite.inject import plan as inject_plan
from suite.inject import registry
from suite.inject import truth

from .score import KINDS, Flag, Target, Trial, Truth


@dataclass(frozen=True)
class Planned:
    """One trial before its run: its number, seed, and the INJECT text of its plan (None: a clean trial)."""

    index: int
    seed: int
    inject: str | None
    cls: str | None = None
    target: int | None = None
    onset_s: float | None = None
    severity: float | None = None
    duration_s: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


NONE = "none"
"""A class spec that names a clean trial (``FAILSLOW_CYCLE=1``: the trials take the specs in turn)."""


def resolve(spec: str, seed: int, world_size: int, run_s: float, compose: bool = False) -> inject_plan.Plan | None:
    """The plan a class spec and a seed give (None: ``none``, a clean trial; ``compose``: the node classes are
    taken too); ConfigError: one line naming what to change."""
    try:
        return inject_plan.parse(spec, seed, world_size, run_s, compose=compose)
    except ConfigError as e:
        raise ConfigError(f"FAILSLOW_CLASSES: {e}") from None


def draw(
    trials: int,
    seed: int,
    specs: Sequence[str],
    clean_share: float,
    world_size: int,
    run_s: float,
    *,
    cycle=False,
    compose=False,
):
    """``trials`` Planned, from ``seed`` alone. Drawn (``cycle`` false): each clean with probability
    ``clean_share`` (at least one clean trial where there are two or more trials and the share is > 0), else one
    of ``specs``; ``cycle``: trial i takes ``specs[i % len(specs)]``, clean where that is ``none``."""
    if trials <= 0:
        raise ConfigError(f"TRIALS={trials}: the number of trials must be a whole number > 0")
    if not specs:
        raise ConfigError("FAILSLOW_CLASSES is empty: name at least one class (pause,slow)")
    if not 0 <= clean_share <= 1:
        raise ConfigError(f"FAILSLOW_CLEAN={clean_share:zg}: the share of clean trials is a number in [0, 1]")
    for spec in specs:  # every spec checked before anything runs, drawn or not
        resolve(spec, seed, world_size, run_s, compose)
    rng = random.Random(seed)
    clean = [not cycle and rng.random() < clean_share for _ in range(trials)]
    if not cycle and trials >= 2 and clean_share > 0 and not any(clean):
        clean[rng.randrange(trials)] = True
    out = []
    for i in range(trials):
        trial_seed = rng.randrange(2**31)
        spec = specs[i % len(specs)] if cycle else specs[rng.randrange(len(specs))]
        p = None if clean[i] else resolve(spec, trial_seed, world_size, run_s, compose)
        if p is None:
            out.append(Planned(i, trial_seed, None))
            continue
        how_long = "rest" if p.duration_s is None else f"{p.duration_s:zg}"
        text = f"{p.cls}:{p.target}:{p.onset_s:zg}:{p.severity:zg}:{how_long}"
        out.append(Planned(i, trial_seed, text, p.cls, p.target, p.onset_s, p.severity, p.duration_s))
    return out


def _record(run: Path) -> dict:
    """The run's watched training record: the one whose fields hold ``slowdowns``."""
    bench = json.loads((run / "bench.json").read_text())
    watched = [b["extra_info"] for b in bench["benchmarks"] if "slowdowns" in b.get("extra_info", {})]
    if not watched:
        raise ValueError(f"{run}: no record holds the watch's slowdowns (is the case a watched training case?)")
    return watched[0]


def _timed(run: Path) -> tuple[float, float]:
    """(start, end) of rank 0's timed phase, Unix seconds, from the run's timeline: from its first round of samples
    to its last (under a sample budget, a first few samples set how many the rest are)."""
    trace = json.loads((run / "trace.json").read_text())
    epoch = trace["otherData"]["epoch_unix_s"]
    spans = [
        (epoch + e["ts"] / 1e6, epoch + (e["ts"] + e["dur"]) / 1e6)
        for e in trace["traceEvents"]
        if e.get("tid") == 1 and e.get("name") == "timed" and e.get("ph") == "X"
    ]
    if not spans:
        raise ValueError(f"{run}: its timeline holds no timed phase")
    return min(a for a, _ in spans), max(b for _, b in spans)


def step_times(samples_us: Sequence[float], start: float, end: float) -> list[tuple[float, float]]:
    """Each timed step as (its end, its time in s), the steps laid end to end over the timed phase [start, end]
    (the record keeps every step's time but not its clock: the gaps between steps are spread in proportion)."""
    total = sum(samples_us)
    if total <= 0:
        return []
    out, acc = [], 0.0
    for s in samples_us:
        acc += s
        out.append((start + (end - start) * acc / total, s / 1e6))
    return out


def slowdown(steps: Sequence[tuple[float, float]], on: float, off: float | None) -> float | None:
    """The step's slowdown an injection caused: the mean step ending in [on, off] over the mean ending before on,
    less 1 (None: no step on one side). Means, not medians: the job's time is their sum, and a pause holds up one
    step in many (the median step would not see it)."""
    before = [s for t, s in steps if t < on]
    during = [s for t, s in steps if t >= on and (off is None or t <= off)]
    if not before or not during:
        return None
    return statistics.fmean(during) / statistics.fmean(before) - 1


def _samples(rec: dict) -> list[float]:
    raw = rec["samples_us"]
    return json.loads(raw) if isinstance(raw, str) else list(raw)


def flag_target(entry: dict) -> str:
    """What a ``slowdowns`` entry names, kind first (``rank 1``, ``node node1``): the watch writes a node's flag
    as its name alone (``node1``) beside its ``kind``."""
    text, kind = str(entry["target"]), entry.get("kind")
    return text if not kind or text.startswith(f"{kind} ") else f"{kind} {text}"


def read(run: Path, planned: Planned) -> dict:
    """A finished trial as stored: its flags from the record, then (only then) its truth; ``void`` says why a
    trial is scored neither way (None: scored)."""
    rec = _record(run)
    start, end = _timed(run)
    world, hosts = int(rec.get("world_size", 0)), max(int(rec.get("hosts", 1)), 1)
    stored = {
        **planned.as_dict(),
        "run": run.name,
        "run_s": round(end - start, 3),
        "flags": [
            {
                "target": flag_target(f),
                "raised_s": round(f["detected_unix"] - start, 3),
                **({"class": f["class"]} if "class" in f else {}),  # the watch's class (foreign load: score.py)
            }
            for f in rec["slowdowns"]
        ],
        "foreign_cpu_pct": rec.get("watch_foreign_cpu_pct"),
        "nodes": {str(r): f"node{r * hosts // world}" for r in range(world)},
        "watch_cost_pct": rec.get("watch_cost_pct"),
        "void": None,
    }
    if planned.inject is None:
        return stored
    told = next((t for t in truth.read(run) if t.get("here")), None)  # after the flags: read only to score them
    if told is None or not told.get("applied"):
        return {**stored, "void": "the injection was never applied"}
    on = told["applied_unix"]
    ratio = slowdown(step_times(_samples(rec), start, end), on, told.get("reverted_unix"))
    stored |= {"onset_s": round(on - start, 3), "step_slowdown": None if ratio is None else round(ratio, 4)}
    if not start < on < end or ratio is None:
        return {**stored, "void": "its onset fell outside the training's timed phase"}
    return stored


def _target(text: str) -> Target:
    kind, _, name = text.partition(" ")
    return Target(kind, name) if kind in KINDS and name else Target("rank", text)


@functools.cache
def acts_on_node(cls: str) -> bool:
    """Whether an injection class acts on the target rank's whole node (from the host: egress, nodecpu); looked up
    once per class (the registry lists its folder at each call, and scoring asks per trial and per band)."""
    found = registry.discover().get(cls)
    return found is not None and found.node is not None


def from_stored(stored: dict) -> Trial | None:
    """The scorer's Trial of a stored trial (None: void): a bench's scores again from its file alone."""
    if stored.get("void"):
        return None
    flags = tuple(
        Flag(_target(f["target"]), f["raised_s"], foreign=f.get("class") == "foreign load") for f in stored["flags"]
    )
    t = None
    if stored.get("inject"):
        rank = str(stored["target"])
        node = stored.get("nodes", {}).get(rank)  # a node's class hits every rank of the target rank's node
        where = Target("node", node) if node and acts_on_node(stored["cls"]) else Target("rank", rank)
        t = Truth(stored["cls"], where, stored["onset_s"], stored["severity"], stored["step_slowdown"])
    return Trial(t, flags, stored["run_s"], stored.get("nodes", {}))


def _doctor_target(finding: dict) -> str:
    """What a doctor finding names, as the watch names it: ``rank 1``, ``link 0->1``, ``node <host>``."""
    d = finding.get("detail") or {}
    if finding["kind"] == "straggler" and "rank" in d:
        return f"rank {d['rank']}"
    if finding["kind"] == "slow_link" and "src" in d:
        return f"link {d['src']}->{d['dst']}"
    return f"node {d.get('host', finding.get('where', '?'))}"


DOCTOR_HEALTHY, DOCTOR_FINDING = 0, 8
"""The doctor run's statuses that hold a verdict (suite/common/failures.py: EXIT_FINDING)."""


def read_doctor(run: Path, planned: Planned, rc: int, took_s: float, watched: dict) -> dict:
    """A doctor run with the trial's injection active from its start, as stored: each finding one flag raised at
    the run's end; the step slowdown the injection causes is the watch trial's (the same injection)."""
    stored = {**planned.as_dict(), "run": run.name, "run_s": round(took_s, 3), "flags": [], "void": None}
    if rc not in (DOCTOR_HEALTHY, DOCTOR_FINDING):
        return {**stored, "void": f"the doctor exited {rc} (its log: {run.name}.log)"}
    try:
        findings = json.loads((run / "doctor.json").read_text())["findings"]
    except (OSError, ValueError, KeyError) as e:
        return {**stored, "void": f"its doctor.json could not be read: {e}"}
    stored["flags"] = [{"target": _doctor_target(f), "raised_s": round(took_s, 3)} for f in findings]
    if planned.inject is None:
        return stored
    if watched.get("void") or watched.get("step_slowdown") is None:
        return {**stored, "void": "its watch trial measured no step slowdown"}
    return {**stored, "onset_s": 0.0, "step_slowdown": watched["step_slowdown"]}
