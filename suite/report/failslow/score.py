"""Scores a fail-slow detector on seeded trials whose truth it never saw.

A trial is one short training run with one injection or none. Its truth (class, target, onset, severity, and
the step slowdown the injection caused, measured from the run's own step times) is read only here, after the
run. A detector's answer is its list of flags, each naming a target, when it was raised and the onset it
estimated. The rules, per trial:

- an injection that slowed the step by less than ``THRESHOLD`` (10%, the ByteDance cut-off) counts neither as
  missed nor as found: it goes to the sensitivity rows, whether it was found or not (found there: its first flag
  after the onset names the right target; a flag on another target is no sign of a slowdown this small);
- otherwise the trial is a positive: found (TP) when a flag was raised at or after the onset, missed (FN) when
  none was;
- a flag raised on a clean trial, or before the onset on an injected one, is a false alarm: a clean trial with
  one is a false positive, and every such flag counts toward false alarms per hour of clean training (the
  clean stretch of every trial: a clean trial's whole run, an injected one's time before its onset);
- except, on a clean trial only, a flag the watch classed ``foreign load`` (suite/watch/foreign.py: raised while
  processes outside the run used a quarter or more of its host's CPU since its onset): a neighbour of the run's,
  not a fault of it and not what the bench injected, the rank genuinely slower. It is counted apart
  (``foreign_load_trials``: clean trials with such a flag), neither a false alarm nor found. The watch classes a flag
  without the truth (an injector's processes are outside the run as any neighbour is), so an injected trial is
  scored as ever: its flag after the onset is found whatever its class (a ``noisy`` neighbour's named target is
  found), and one before the onset is a false alarm;
- localisation: of the found trials, the share whose first flag after the onset names the right target.
  A node is named right by the node or by one of its ranks; a rank by itself (or by its node where the node has
  no other rank); a link by itself, either way.

Precision = TP / (TP + FP) over positives and clean trials; recall = TP / (TP + FN); F1 their harmonic mean.
Each comes with its interval (``intervals``); F1's from a seeded bootstrap over the trials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from suite.report.failslow.intervals import Estimate, bootstrap, median_interval, poisson_rate, wilson

THRESHOLD = 0.10
"""An injection that slows the step by less than this fraction is reported apart, as sensitivity."""

KINDS = ("node", "rank", "link")


@dataclass(frozen=True)
class Target:
    """What a fault hit or a flag names: ``kind`` in KINDS, ``name`` as the run names it (node1, 2, 0->1)."""

    kind: str
    name: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"a target is a node, a rank or a link, got {self.kind!r}")

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Flag:
    """One flag of a detector: its target, when it was raised and the onset it estimated (run seconds)."""

    target: Target
    raised_s: float
    onset_s: float | None = None
    foreign: bool = False
    """Classed ``foreign load`` by the watch (module docstring)."""


@dataclass(frozen=True)
class Truth:
    """What was injected: read by the scorer only."""

    cls: str
    target: Target
    onset_s: float
    severity: float
    step_slowdown: float
    """The step's slowdown it caused: (mean step after onset) / (mean step before) − 1, measured."""


@dataclass(frozen=True)
class Trial:
    truth: Truth | None
    """None: a clean trial."""
    flags: tuple[Flag, ...]
    run_s: float
    """The trial's training time, in seconds."""
    node_of: Mapping[str, str] = field(default_factory=dict)
    """Rank name -> its node's name: a rank flag localises a fault on its node."""

    @property
    def clean_s(self) -> float:
        return self.run_s if self.truth is None else min(self.run_s, max(0.0, self.truth.onset_s))

    def false_alarms(self) -> list[Flag]:
        if self.truth is None:
            return [f for f in self.flags if not f.foreign]
        return [f for f in self.flags if f.raised_s < self.truth.onset_s]

    def foreign_load(self) -> list[Flag]:
        """A clean trial's flags classed ``foreign load``: counted apart, not false alarms (module docstring)."""
        return [f for f in self.flags if f.foreign] if self.truth is None else []

    def first_after_onset(self) -> Flag | None:
        after = [f for f in self.flags if self.truth is not None and f.raised_s >= self.truth.onset_s]
        return min(after, key=lambda f: f.raised_s, default=None)

    def localised(self) -> bool:
        first = self.first_after_onset()
        return first is not None and names(first.target, self.truth.target, self.node_of)

    @property
    def sensitivity_only(self) -> bool:
        return self.truth is not None and self.truth.step_slowdown < THRESHOLD


def names(flagged: Target, true: Target, node_of: Mapping[str, str]) -> bool:
    """Whether a flag naming ``flagged`` names the fault on ``true`` (module docstring)."""
    if true.kind == "link" and flagged.kind == "link":
        return set(flagged.name.split("->")) == set(true.name.split("->"))
    if true.kind == "node" and flagged.kind == "rank":
        return node_of.get(flagged.name) == true.name
    if true.kind == "rank" and flagged.kind == "node":  # a node of that one rank (the watch names it so)
        return [r for r, n in node_of.items() if n == flagged.name] == [true.name]
    return flagged == true


@dataclass(frozen=True)
class Score:
    """One detector's scores over a set of trials (all of them, or one class and severity)."""

    trials: int
    positives: int
    found: int
    clean: int
    false_positive_trials: int
    foreign_load_trials: int
    """Clean trials with a flag classed ``foreign load`` (neither false positives nor found)."""
    precision: Estimate
    recall: Estimate
    f1: Estimate
    localisation: Estimate
    time_to_detect_s: Estimate
    false_alarms_per_hour: Estimate
    sensitivity: Estimate
    """Of the injections below THRESHOLD, the share found and named right (reported apart)."""

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if not isinstance(v, Estimate)}
        out.update({k: v.as_dict() for k, v in self.__dict__.items() if isinstance(v, Estimate)})
        return out


def _counts(trials: Sequence[Trial]) -> tuple[int, int, int]:
    """(TP, FP, FN) over trials: positives found or missed, clean trials with a false alarm."""
    pos = [t for t in trials if t.truth is not None and not t.sensitivity_only]
    tp = sum(t.first_after_onset() is not None for t in pos)
    fp = sum(bool(t.false_alarms()) for t in trials if t.truth is None)
    return tp, fp, len(pos) - tp


def _f1(trials: Sequence[Trial]) -> float | None:
    tp, fp, fn = _counts(trials)
    return None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def score(trials: Sequence[Trial], *, seed: int = 0) -> Score:
    """The scores of one detector over ``trials`` (module docstring); ``seed`` drives F1's bootstrap."""
    tp, fp, fn = _counts(trials)
    found = [t for t in trials if t.truth is not None and not t.sensitivity_only and t.first_after_onset()]
    weak = [t for t in trials if t.sensitivity_only]
    delays = [t.first_after_onset().raised_s - t.truth.onset_s for t in found]
    alarms = sum(len(t.false_alarms()) for t in trials)
    return Score(
        trials=len(trials),
        positives=tp + fn,
        found=tp,
        clean=sum(t.truth is None for t in trials),
        false_positive_trials=fp,
        foreign_load_trials=sum(bool(t.foreign_load()) for t in trials),
        precision=wilson(tp, tp + fp),
        recall=wilson(tp, tp + fn),
        f1=bootstrap(list(trials), _f1, seed=seed),
        localisation=wilson(sum(t.localised() for t in found), len(found)),
        time_to_detect_s=median_interval(delays),
        false_alarms_per_hour=poisson_rate(alarms, sum(t.clean_s for t in trials) / 3600),
        sensitivity=wilson(sum(t.localised() for t in weak), len(weak)),
    )


def by_class(trials: Sequence[Trial], *, seed: int = 0) -> dict[tuple[str, float], Score]:
    """A score per (class, severity) of the injected trials, each scored with every clean trial beside it."""
    clean = [t for t in trials if t.truth is None]
    keys = sorted({(t.truth.cls, t.truth.severity) for t in trials if t.truth is not None})
    return {
        key: score([t for t in trials if t.truth and (t.truth.cls, t.truth.severity) == key] + clean, seed=seed)
        for key in keys
    }


def confusion(trials: Sequence[Trial]) -> dict[str, dict[str, int]]:
    """True target -> named target -> trials: the first flag after the onset ("nothing" if none); clean
    trials are the row "clean", their first false alarm, else "foreign load" where a flag was classed so, else
    "nothing"."""
    out: dict[str, dict[str, int]] = {}
    for t in trials:
        if t.truth is None:
            row, first = "clean", min(t.false_alarms(), key=lambda f: f.raised_s, default=None)
            col = "foreign load" if first is None and t.foreign_load() else None
        else:
            row, first, col = str(t.truth.target), t.first_after_onset(), None
        col = col or ("nothing" if first is None else str(first.target))
        out.setdefault(row, {}).setdefault(col, 0)
        out[row][col] += 1
    return out
