"""The injection plan of a run: ``INJECT``, ``SEED`` and ``INJECT_RUN_S`` read into one ``Plan`` (or none),
checked before any rank starts.

``INJECT=<class>[:<target>[:<onset>[:<severity>[:<duration>]]]]`` or ``INJECT=random``:

- ``class``: a class of suite/inject/classes/ (``random``: one of the local classes, drawn);
- ``target``: the rank it acts on, 0 .. world size - 1;
- ``onset``: seconds after the target's first timed sample began (a training case's first timed step: torch's
  import, the rendezvous and the case's set-up and warm-up, whose time varies with the host's load, do not
  count); 0: from the target's session start, the whole run; it must fall before ``INJECT_RUN_S``, the run's
  expected length;
- ``severity``: a number in the class's range (its file says what it means);
- ``duration``: seconds, or ``rest`` (to the run's end).

A field left out or empty (``pause::5``) is drawn from ``SEED``: the same text and seed always give the same
plan, whatever fields are given. Only the launcher reads these knobs; the ranks never see them (the plan is the
truth a run is scored against: suite/inject/truth.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from suite.errors import ConfigError

from . import registry

RUN_S_DEFAULT = 60.0
"""INJECT_RUN_S when not given: the run's expected length, seconds."""
ONSET_DRAWN = (0.2, 0.5)
"""Where a drawn onset falls, as fractions of INJECT_RUN_S."""
DURATION_DRAWN = (0.2, 0.4)
"""A drawn stretch's length, as fractions of INJECT_RUN_S (half the drawn plans last to the run's end)."""


@dataclass(frozen=True)
class Plan:
    """One injection: what, where, when, how hard and how long."""

    cls: str
    target: int
    onset_s: float
    severity: float
    duration_s: float | None
    """None: to the run's end."""
    seed: int
    text: str
    """INJECT as given."""

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        how_long = "to the end" if self.duration_s is None else f"for {self.duration_s:z.3g} s"
        return f"{self.cls} on rank {self.target} at {self.onset_s:z.3g} s, severity {self.severity:z.3g}, {how_long}"


COMPOSE_FLAG = "COMPOSE_SIM"
"""Set to 1 in every node of the compose simulation (docker-compose.yml) and for the host's controller: the node
classes are taken."""


def _number(text: str, what: str, inject: str) -> float:
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise ConfigError(f"INJECT={inject}: {what} {text!r} is not a number of seconds >= 0")
    return value


def parse(inject: str, seed: int, world_size: int, run_s: float = RUN_S_DEFAULT, compose: bool = False) -> Plan | None:
    """The plan INJECT names (None for none); ConfigError naming the field to change. ``compose``: a run of the
    compose simulation, where the classes that act on a node (from the host) are taken too."""
    text = inject.strip()
    if text in ("", "none"):
        return None
    classes = registry.discover()
    local = [c for c in classes.values() if c.local]
    fields = text.split(":")
    if len(fields) > 5:
        raise ConfigError(f"INJECT={text}: at most 5 fields: <class>[:<target>[:<onset>[:<severity>[:<duration>]]]]")
    fields += [""] * (5 - len(fields))
    rng = random.Random(seed)
    # every field is drawn, in one order, whether given or not: a given field never changes another's draw
    drawn = {
        "cls": rng.choice(local).name,
        "target": rng.randrange(world_size),
        "onset": rng.uniform(*ONSET_DRAWN) * run_s,
        "unit": rng.random(),
        "duration": rng.uniform(*DURATION_DRAWN) * run_s if rng.random() < 0.5 else None,
    }
    name = drawn["cls"] if fields[0] == "random" else fields[0]
    if name not in classes:
        raise ConfigError(f"INJECT={text}: unknown class {name!r}; choose from {', '.join(classes)} or random")
    cls = classes[name]
    if not (cls.local or compose):
        raise ConfigError(
            f"INJECT={text}: {name} acts on a node of the compose simulation (make compose-up); "
            f"a local run takes {', '.join(c.name for c in local)}"
        )
    if fields[0] == "random" and any(fields[1:]):
        raise ConfigError(f"INJECT={text}: random takes no other field (name a class to set them)")
    target = drawn["target"]
    if fields[1]:
        if not fields[1].isdigit() or int(fields[1]) >= world_size:
            raise ConfigError(
                f"INJECT={text}: target rank {fields[1]!r} does not exist (the run has ranks 0-{world_size - 1})"
            )
        target = int(fields[1])
    if not run_s > 0:
        raise ConfigError(f"INJECT_RUN_S={run_s:zg}: the run's expected length must be > 0 seconds")
    onset = _number(fields[2], "onset", text) if fields[2] else drawn["onset"]
    if onset >= run_s:
        raise ConfigError(f"INJECT={text}: onset {onset:zg} s is past the run's end (INJECT_RUN_S={run_s:zg})")
    lo, hi = cls.limits
    if fields[3]:
        severity = _number(fields[3], "severity", text)
        if not lo <= severity <= hi or (cls.integer and severity != int(severity)):
            kind = "a whole number" if cls.integer else "a number"
            raise ConfigError(
                f"INJECT={text}: severity {fields[3]} of {name} is out of range: {kind} in [{lo:zg}, {hi:zg}] "
                f"({cls.severity})"
            )
    else:
        a, b = cls.drawn
        severity = a + drawn["unit"] * (b - a)
        severity = float(round(severity)) if cls.integer else round(severity, 3)
    if fields[4] in ("", "rest"):
        duration = None if fields[4] == "rest" else drawn["duration"]
    else:
        duration = _number(fields[4], "duration", text)
        if duration == 0:
            raise ConfigError(f"INJECT={text}: duration 0; give seconds > 0, or rest (to the run's end)")
    return Plan(name, target, round(onset, 3), severity, None if duration is None else round(duration, 3), seed, text)


def from_env(env: Mapping[str, str], world_size: int) -> Plan | None:
    """The plan of INJECT, SEED and INJECT_RUN_S in ``env``; ConfigError naming the knob to change."""
    raw_seed = str(env.get("SEED", "") or "0").strip()
    if not raw_seed.isdigit():
        raise ConfigError(f"SEED={raw_seed!r}: a whole number >= 0")
    raw_run = str(env.get("INJECT_RUN_S", "") or RUN_S_DEFAULT).strip()
    try:
        run_s = float(raw_run)
    except ValueError:
        raise ConfigError(f"INJECT_RUN_S={raw_run!r}: the run's expected length, seconds > 0") from None
    compose = env.get(COMPOSE_FLAG) == "1"
    return parse(str(env.get("INJECT", "") or ""), int(raw_seed), world_size, run_s, compose)
