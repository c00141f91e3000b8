"""This rank's part of the run's timeline: the ops the journal saw and the harness's spans around them.

What a rank keeps, on its own ``time.perf_counter`` (the clock every rank of a host shares):

- every op the journal (suite/harness/journal/__init__.py) saw, with when its call began and returned: at most
  ``OPS_PER_CASE`` per case and ``OPS_MAX`` in all (the ops past them are counted, per case, not kept);
- spans (at most ``SPANS_MAX``): each case (pytest's whole protocol of it), each phase of it
  (suite/harness/phases.py: check run, warm-up, the timed samples, barriers' gather, the sequence
  check, ...) and each timed sample on the host clock (at most ``SAMPLES_PER_CASE`` per case), named
  ``step`` where the case's time includes more than its ops (``Bytes.time_includes``: a DDP or sharded
  training step, a pipeline's matmuls).

``write_part`` writes it to ``<run>/trace/rank<r>.json`` at the end of the session, and whenever the journal
dumps (the rank failed, or the launcher asked where it is: suite/harness/journal/dump.py); an op still
running then has no end. The launcher merges the parts, with the journal's dumps, into ``<run>/trace.json``
(suite/postmortem/trace.py), and removes them once it holds every rank's. Recording costs one clock read and one
list append per op (the journal's hot path: no I/O, no lock) and one append per span; nothing is written before
the end or a dump.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

OPS_PER_CASE = 200
"""Ops kept per case: a case's first ones (its probe, check run, warm-up and first timed samples; a collective's
case of the default run issues about 50, a p2p pattern's up to 3,000)."""
OPS_MAX = 40_000
"""Ops kept per rank in all (the default ``make bench-cpu`` journals fewer: docs/reports.md)."""
SPANS_MAX = 40_000
"""Cases, phases and timed samples kept per rank."""
SAMPLES_PER_CASE = 100
"""Timed samples kept as spans per case."""
OP_FIELDS = ("op", "group", "seq", "shape", "dtype", "peer", "case", "state", "clock", "end_clock", "bytes")
"""The columns of a part's ``ops`` (an op's ``clock`` and ``end_clock``: when its call began and returned)."""


class Timeline:
    """This rank's spans, and what was dropped; the ops themselves are the journal's ``ops``."""

    def __init__(self, journal) -> None:
        self.journal = journal
        self.spans: list[tuple] = []  # (category, name, start, end, args or None)
        self.dropped_spans = 0
        self.cut: dict[str, int] = {}  # case -> its ops past OPS_PER_CASE / OPS_MAX, not kept
        self.samples = 0  # sample spans of the current case
        self.steps: str | None = None  # what the current case's samples include besides its ops (a training step)
        self.console = None  # writes a line on the terminal past pytest's capture (suite/watch/console.py sets it)

    def span(self, cat: str, name: str, start: float, end: float, args: dict | None = None) -> None:
        if len(self.spans) < SPANS_MAX:
            self.spans.append((cat, name, start, end, args))
        else:
            self.dropped_spans += 1

    def marker(self, name: str, clock: float, args: dict) -> None:
        """An instant at ``clock`` (e.g. the training watch's flag of a slow rank: suite/watch/)."""
        self.span("marker", name, clock, clock, args)

    def sample(self, start: float, end: float) -> None:
        """One timed sample of the current case (``time.perf_counter`` at its start and its end)."""
        self.samples += 1
        if self.samples <= SAMPLES_PER_CASE:
            self.span("sample", "step" if self.steps else "sample", start, end)
        else:
            self.dropped_spans += 1

    def case_ended(self, case: str, dropped_ops: int) -> None:
        """The journal moves on from ``case``, whose ops past the bound were ``dropped_ops``."""
        if dropped_ops:
            self.cut[case] = dropped_ops
        self.samples, self.steps = 0, None

    def part(self, reason: str) -> dict:
        from suite.harness.journal.dump import entry_json

        j = self.journal
        kept = j.issued(list(j.ops))
        cut = {case: {"ops": n, "after_clock": None} for case, n in self.cut.items()}
        if j.dropped:
            cut[j.case] = {"ops": j.dropped, "after_clock": None}
        for e in kept:  # where each cut case's ops stop: after its last op kept
            if e[6] in cut:
                cut[e[6]]["after_clock"] = e[9] if e[9] is not None else e[8]
        # the last ops (the journal's ring) also where the bound dropped them: a run's end is what a failure shows
        ids = {id(e) for e in kept}
        tail = [e for e in j.issued(list(j.entries)) if id(e) not in ids]
        for e in tail:
            if e[6] in cut:
                cut[e[6]]["ops"] -= 1
        cut = {case: c for case, c in cut.items() if c["ops"] > 0}
        ops = [entry_json(e, j.unix_minus_clock) for e in kept + tail]
        import torch.distributed as dist

        return {
            "rank": j.rank,
            # the group may be gone (a failed run's end of session): torchrun's WORLD_SIZE still says
            "world_size": dist.get_world_size()
            if dist.is_initialized()
            else int(os.environ.get("WORLD_SIZE", 0)) or None,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "reason": reason,
            "clock": "time.perf_counter",
            "unix_minus_clock": j.unix_minus_clock,
            "written_clock": time.perf_counter(),
            "bounds": {
                "ops_per_case": OPS_PER_CASE,
                "ops_max": OPS_MAX,
                "spans_max": SPANS_MAX,
                "samples_per_case": SAMPLES_PER_CASE,
            },
            "dropped_ops": sum(c["ops"] for c in cut.values()),
            "dropped_ops_by_case": cut,
            "dropped_spans": self.dropped_spans,
            "op_fields": list(OP_FIELDS),
            "ops": [[o[k] for k in OP_FIELDS] for o in ops],
            "spans": [list(s) for s in list(self.spans)],
        }

    def write_part(self, reason: str) -> Path | None:
        """``<run>/trace/rank<r>.json`` (atomically; never raises: a failing rank calls it); None without a run."""
        from suite.common.fileio import write_text_atomic

        j = self.journal
        if not j.run_dir:
            return None
        path = Path(j.run_dir) / "trace" / f"rank{j.rank}.json"
        try:
            text = json.dumps(self.part(reason), separators=(",", ":"), default=str)
            write_text_atomic(path, text, durable=False)
        except Exception:  # noqa: BLE001 - a rank's timeline must never fail it
            return None
        return path
