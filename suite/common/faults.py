"""The suite's own fault injection: every ``SUITE_INJECT_*`` switch, its one grammar and its validator.

A fault switch is ``:``-separated fields in a fixed order, an optional ``@<when>`` suffix, and a
field of names is a ``,``-list, each name matched by ``Case.answers_to`` (an experiment, op, label,
identity value, or ``all``). Optional fields are filled left to right by the fields given beyond the
required ones. The six switches (``INJECTIONS``; what each does is in docs/failures.md):

- ``SUITE_INJECT_CORRUPTION=[<fault>:]<name>[,<name>...][@timed]`` (suite/harness/runner.py; plant/corruptions.py)
- ``SUITE_INJECT_DELAY=<rank>:<seconds>[:<name>[,<name>...]][@after|@before]`` (suite/harness/runner.py)
- ``SUITE_INJECT_MISMATCH=<name>[,<name>...]`` (suite/harness/runner.py)
- ``SUITE_INJECT_DIVERGE=<action>:<rank>:<k>[:<name>[,<name>...]][@below]`` (suite/harness/runner.py, plant/below.py)
- ``SUITE_INJECT_FAULT=<action>:<rank>:<n>`` (suite/harness/pytest/plugin.py: a real process event before a test)
- ``SUITE_INJECT_BACKEND=<fault>[:<name>[,<name>...]]`` (suite/harness/plant/backend.py: the ops of the
  cases it names, on plain Gloo, return results wrong as ``<fault>`` makes them)

``check(env, world_size)`` parses every switch that is set before any rank starts
(suite/launch/preflight.py): a typo would otherwise run a clean benchmark that a test reads as the fault's
outcome, and a rank the run does not have would plant nothing. Pure: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace

CORRUPTION_FAULTS = ("flip", "misroute")
"""``flip`` adds 1 to an output's first element; ``misroute`` puts the right values in the wrong place."""
DIVERGE_ACTIONS = ("skip", "other", "size", "sleep", "recv", "stray", "extra")
"""What a diverging rank's k-th call does instead (suite/harness/runner.py ``Harness._diverging``; with ``@below``,
suite/harness/plant/below.py ``Below``)."""
BACKEND_FAULTS = (
    "drop",
    "stale",
    "misroute",
    "duplicate",
    "overrun",
    "reorder",
    "partial",
    "wrong_reduction",
    "aliasing",
    "group_rank",
)
"""The classes of wrong result the planted faults make (suite/harness/plant/backend.py)."""
PROCESS_FAULTS = ("kill", "term", "stop", "exit", "raise")
"""What a rank does to itself before its n-th test (suite/harness/pytest/plugin.py ``_inject_fault``)."""


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    """``choice`` (one of ``choices``), ``rank``, ``count`` (an integer >= ``minimum``), ``seconds`` or ``names``."""
    choices: tuple[str, ...] = ()
    optional: bool = False
    default: object = None
    minimum: int = 0

    def usage(self) -> str:
        return f"<{self.name}>[,<{self.name}>...]" if self.kind == "names" else f"<{self.name}>"


@dataclass(frozen=True)
class Switch:
    env: str
    fields: tuple[Field, ...]
    when: tuple[str, ...] = ()
    """The ``@`` suffixes it takes; the first is the default (``""``: none given)."""

    def usage(self) -> str:
        """``[<fault>:]<name>[,<name>...][@timed]``: how the docs and the error messages spell it."""
        text = ""
        for i, f in enumerate(self.fields):
            if i == 0:
                text = f"[{f.usage()}:]" if f.optional else f.usage()
            else:
                sep = "" if self.fields[0].optional and i == 1 else ":"
                text += f"[{sep}{f.usage()}]" if f.optional else sep + f.usage()
        whens = [f"@{w}" for w in self.when if w]
        return text + (f"[{'|'.join(whens)}]" if whens else "")


_NAMES = Field("name", "names")
INJECTIONS = {
    s.env: s
    for s in (
        Switch(
            "SUITE_INJECT_CORRUPTION",
            (Field("fault", "choice", CORRUPTION_FAULTS, optional=True, default="flip"), _NAMES),
            when=("", "timed"),
        ),
        Switch(
            "SUITE_INJECT_DELAY",
            (Field("rank", "rank"), Field("seconds", "seconds"), Field("name", "names", optional=True, default=())),
            when=("after", "before"),
        ),
        Switch("SUITE_INJECT_MISMATCH", (_NAMES,)),
        Switch(
            "SUITE_INJECT_DIVERGE",
            (
                Field("action", "choice", DIVERGE_ACTIONS),
                Field("rank", "rank"),
                Field("k", "count", minimum=1),
                Field("name", "names", optional=True, default=()),
            ),
            when=("", "below"),
        ),
        Switch(
            "SUITE_INJECT_FAULT",
            (Field("action", "choice", PROCESS_FAULTS), Field("rank", "rank"), Field("n", "count", minimum=0)),
        ),
        Switch(
            "SUITE_INJECT_BACKEND",
            (Field("fault", "choice", BACKEND_FAULTS), Field("name", "names", optional=True, default=())),
        ),
    )
}


def parse(env: str, value: str, world_size: int | None = None) -> SimpleNamespace:
    """``value`` of switch ``env`` as a namespace of its fields (a names field as a tuple) and ``when``;
    ValueError with one line saying what is wrong (given ``world_size``, a rank the run does not have)."""
    switch = INJECTIONS[env]
    try:
        return _parse(switch, value, world_size)
    except ValueError as e:
        raise ValueError(f"{env}={value!r}: {e}; expected {switch.usage()}") from None


def _parse(switch: Switch, value: str, world_size: int | None) -> SimpleNamespace:
    body, at, when = value.partition("@")
    if at and (not when or when not in switch.when):
        raise ValueError(f"unknown phase @{when}")
    tokens = body.split(":")
    required = sum(not f.optional for f in switch.fields)
    extra = len(tokens) - required
    if extra < 0 or extra > len(switch.fields) - required:
        most = len(switch.fields)
        raise ValueError(f"{len(tokens)} field(s), not {required}" + (f" to {most}" if most > required else ""))
    out = {"when": when if at else (switch.when[0] if switch.when else "")}
    it = iter(tokens)
    for f in switch.fields:
        if f.optional and extra == 0:
            out[f.name] = f.default
            continue
        extra -= f.optional
        out[f.name] = _value(f, next(it), world_size)
    return SimpleNamespace(**out)


def _value(f: Field, token: str, world_size: int | None):
    if f.kind == "choice":
        if token not in f.choices:
            raise ValueError(f"unknown {f.name} {token!r} (choose from {', '.join(f.choices)})")
        return token
    if f.kind == "names":
        names = tuple(n.strip() for n in token.split(",") if n.strip())
        if not names:
            raise ValueError("names no case")
        return names
    if f.kind == "seconds":
        try:
            seconds = float(token)
        except ValueError:
            raise ValueError(f"{f.name} {token!r} is not a number") from None
        if not 0 <= seconds < math.inf:
            raise ValueError(f"{f.name} must be finite and >= 0, not {token}")
        return seconds
    try:
        n = int(token)
    except ValueError:
        raise ValueError(f"{f.name} {token!r} is not an integer") from None
    if f.kind == "rank":
        if n < 0 or (world_size is not None and n >= world_size):
            ranks = f"0..{world_size - 1}" if world_size else ">= 0"
            raise ValueError(f"rank {n} is not a rank of this run ({ranks})")
    elif n < f.minimum:
        raise ValueError(f"{f.name} must be >= {f.minimum}, not {n}")
    return n


def check(env: Mapping[str, str], world_size: int | None = None) -> None:
    """Parse every fault switch set in ``env``; ValueError with one line for the first bad one."""
    for name in INJECTIONS:
        if env.get(name):
            parse(name, env[name], world_size)


def targets(names: tuple[str, ...], case) -> bool:
    """Whether a switch's names pick ``case`` (no names: every case)."""
    return not names or any(case.answers_to(n) for n in names)
