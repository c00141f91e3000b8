"""What the rank controller (controller.py) and the compose host's (host.py) share: the truth written as it goes,
a wait that gives up when the run ends, and one effect applied at its onset for its stretch, always reverted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from suite.common import timed_start

from . import truth

POLL_S = 0.05
"""How often a controller looks at the clock and at whether the run still goes on, seconds."""


class Stint:
    """A controller's state: ``record`` (the plan, what it did and when) written to its truth file, under
    ``host`` where that is not this host's own; ``alive`` says whether the run still goes on."""

    host: str | None = None

    def __init__(self, run_dir: Path, record: dict) -> None:
        self.run_dir, self.record = run_dir, record
        self.effect, self.stopping = None, False

    def alive(self) -> bool:
        raise NotImplementedError

    def note(self, **fields) -> None:
        self.record.update(fields)
        truth.write(self.run_dir, self.record, self.host)

    def wait_until(self, t: float) -> bool:
        while time.time() < t:
            if not self.alive():
                return False
            time.sleep(POLL_S)
        return True

    def anchored(self, rank: int, onset_s: float) -> float | None:
        """The time (Unix) the onset counts from: when ``rank``'s first timed sample began (its
        suite/common/timed_start.py file appeared); for an onset of 0, when its session started (its journal's ring
        file: the whole run slowed, whether it has timed samples or not). None: the run ended first."""
        hang = self.run_dir / "hang"
        wanted = hang / f"rank{rank}.ring" if onset_s == 0 else timed_start.path(self.run_dir, rank)
        while not wanted.exists():
            if not self.alive():
                return None
            time.sleep(POLL_S)
        return time.time()

    def apply(self, anchor: float, onset_s: float, duration_s: float | None, start: Callable, **where) -> None:
        """From ``anchor`` (Unix time), ``start()`` the effect at the onset and revert it after its stretch (or when
        the run ends); ``where``: what the truth keeps of the target."""
        self.note(here=True, anchor_unix=anchor, **where)
        if not self.wait_until(anchor + onset_s):
            return
        called = time.time()
        self.effect = start()
        done = time.time()
        how = getattr(self.effect, "how", None)  # the mechanism, where a class has several (cpu, the node classes)
        # the onset: when the effect began, which a node's class (docker update, docker exec tc: seconds on a loaded
        # host) says itself (its ``began_unix``, just before the call that changes the node); else its start's call
        began = getattr(self.effect, "began_unix", called)
        self.note(
            applied=True,
            applied_unix=began,
            apply_s=round(done - began, 3),
            **({"how": how} if how is not None else {}),
        )
        self.wait_until(float("inf") if duration_s is None else anchor + onset_s + duration_s)
        self.revert()

    def revert(self) -> None:
        if self.effect is not None:
            effect, self.effect = self.effect, None
            effect.stop()
            self.note(reverted_unix=time.time())
