"""The suite's switches: every SUITE_* environment variable that changes how the suite runs or reports (not
what it measures), declared once in SWITCHES with its default and validator, read only through ``switch``,
and checked all at once by the launcher (``check_switches``) before any rank starts."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from suite.common import faults
from suite.errors import ConfigError


def _flag(text: str, world_size: int | None = None) -> bool:
    """On or off: 1/true/yes/on or 0/false/no/off (any case)."""
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError("choose 1 (on) or 0 (off)")


def _progress_mode(text: str, world_size: int | None = None) -> str:
    low = text.lower()
    if low not in ("auto", "plain", "off"):
        raise ValueError("choose auto (a live line on a terminal), plain or off")
    return low


def _seconds(text: str, world_size: int | None = None) -> float:
    try:
        s = float(text)
    except ValueError:
        s = -1.0
    if not 0 <= s < float("inf"):
        raise ValueError("seconds between progress lines, a number >= 0")
    return s


def _profile(text: str, world_size: int | None = None) -> bool | str:
    """False (off), True (every case) or the text a case's test id must contain."""
    low = text.lower()
    if low in ("0", "false", "no", "off"):
        return False
    if low in ("1", "true", "yes", "on", "all"):
        return True
    if any(c.isspace() for c in text):
        raise ValueError("1 (every case), 0, or one word a case's test id contains (no spaces)")
    return text


def _commit(text: str, world_size: int | None = None) -> str:
    if any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError("one word, the commit's id (no spaces)")
    return text


def _injection(env: str):
    """The validator of a fault switch: its one grammar, in suite/common/faults.py."""
    return lambda text, world_size=None: faults.parse(env, text, world_size)


@dataclass(frozen=True)
class Switch:
    """A suite switch: an environment variable that changes how the suite runs or reports, not what it
    measures (that is a knob: KNOBS, or an experiment's settings)."""

    env: str
    default: str
    """What an unset or empty variable means, as docs/switches.md spells it."""
    meaning: str
    parse: Callable[..., object]
    """``parse(text, world_size=None)``: the value of a non-empty, stripped text; ValueError with one line
    saying what is wrong (given ``world_size``, a rank the run does not have)."""
    value_if_unset: object = None


SWITCHES: dict[str, Switch] = {
    s.env: s
    for s in (
        Switch(
            "SUITE_PROGRESS",
            "auto",
            "rank 0's progress: auto (live line on a terminal), plain or off",
            _progress_mode,
            "auto",
        ),
        Switch("SUITE_PROGRESS_S", "30", "seconds between plain progress lines", _seconds, 30.0),
        Switch(
            "SUITE_PROFILE",
            "0",
            "torch.profiler trace of every case (1) or of the cases matching a word",
            _profile,
            False,
        ),
        Switch("SUITE_REPORT", "1", "0: no HTML/Markdown report after the run", _flag, True),
        Switch("SUITE_ALL_RANKS_OUTPUT", "0", "1: every rank prints pytest's output, not rank 0 alone", _flag, False),
        Switch("SUITE_KEEP_RANK_SAMPLES", "0", "1: records keep every rank x iteration time", _flag, False),
        Switch(
            "SUITE_GIT_COMMIT",
            "the GIT_COMMIT file",
            "the suite's commit recorded when `git rev-parse HEAD` cannot tell (the image has no .git)",
            _commit,
        ),
        *(
            Switch(env, "off", f"fault injection: {env}={s.usage()} (suite/common/faults.py)", _injection(env))
            for env, s in faults.INJECTIONS.items()
        ),
    )
}
"""Every suite switch, spelled once, with its validator (rule R6). Read only through ``switch``; the launcher
checks them all before any rank starts (``check_switches``); docs/switches.md and ``make help`` list them
(a test checks both against this table). Experiment knobs set in the environment are not switches: they
are their settings' fields (ENV_KNOBS)."""


def switch(name: str, env=None):
    """The value of switch ``name`` in ``env`` (default os.environ): ``Switch.value_if_unset`` when unset or
    empty, else what its validator makes of the text; ValueError (one line naming it) for a bad value."""
    import os

    sw = SWITCHES[name]
    env = os.environ if env is None else env
    text = str(env.get(name, "") or "").strip()
    if not text:
        return sw.value_if_unset
    try:
        return sw.parse(text)
    except ValueError as e:
        raise ValueError(_switch_message(name, env.get(name), e)) from None


def _switch_message(name: str, raw, e: ValueError) -> str:
    msg = str(e)
    return msg if msg.startswith(f"{name}=") else f"{name}={raw!r}: {msg}"


def check_switches(env, world_size: int | None = None) -> None:
    """Every switch set in ``env``: ConfigError with one line for the first bad one (before any rank starts:
    a typo would otherwise run a clean benchmark that a test reads as the switch's effect)."""
    for name, sw in SWITCHES.items():
        text = str(env.get(name, "") or "").strip()
        if text:
            try:
                sw.parse(text, world_size)
            except ValueError as e:
                raise ConfigError(_switch_message(name, env.get(name), e)) from None
