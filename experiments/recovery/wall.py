"""The runner's side of a wall-clock fault schedule (``poisson:<mtbf>s``): at each fault's time from the job's
start, SIGKILL the target rank's worker process, whatever it is doing then, and log what the fault struck:

- ``step``: the rank was training (its attempt had restored and no rank of it had seen a failure yet);
- ``restart``: the rank was starting again (its process not yet restored, or its group being torn down), or had
  no process at all: then the fault waits for the rank's next process and kills it as it starts.

The workers are the torchrun agent's children; each one's ``RANK`` and ``TORCHELASTIC_RESTART_COUNT`` (its
attempt) are read from its environment. The fault's event goes to ``<workdir>/events/host.jsonl``, in the
workers' event format, so that measure.py reads it with theirs.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil

from . import measure
from .plan import Fault

POLL_S = 0.01


def workers(agent_pid: int) -> dict[int, tuple[int, int]]:
    """rank -> (pid, attempt) of the agent's live worker processes (the newest attempt's, when two overlap)."""
    out: dict[int, tuple[int, int]] = {}
    try:
        children = psutil.Process(agent_pid).children()
    except psutil.NoSuchProcess:
        return out
    for p in children:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            env = p.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "RANK" in env:
            rank, attempt = int(env["RANK"]), int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
            if rank not in out or out[rank][1] <= attempt:
                out[rank] = (p.pid, attempt)
    return out


def struck(events: list[dict], rank: int, attempt: int) -> tuple[str, int]:
    """What a fault on ``rank``'s process of ``attempt`` strikes, and the last step that rank committed."""
    mine = [e for e in events if e["attempt"] == attempt]
    restored = any(e["kind"] == "restore" and e["rank"] == rank for e in mine)
    seen = any(e["kind"] == "detect" for e in mine)
    steps = [e["step"] for e in mine if e["rank"] == rank and e["kind"] in ("restore", "commit")]
    return ("step" if restored and not seen else "restart"), max(steps, default=0)


def _strike_one(f: Fault, agent_pid: int, workdir: Path, done: threading.Event, killed: set[int]) -> dict | None:
    """Kill ``f.rank``'s process (waiting for one not killed yet); its event, or None when the job ended first."""
    waited = False
    while not done.is_set():
        events = measure.read_events(workdir)
        if any(e["kind"] == "done" for e in events):
            return None
        pid, attempt = workers(agent_pid).get(f.rank, (None, -1))
        if pid is not None and pid not in killed:
            what, step = struck(events, f.rank, attempt)
            t = time.time()
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.add(pid)
            what = "restart" if waited else what
            return {
                "rank": f.rank,
                "attempt": attempt,
                "pid": pid,
                "kind": "fault",
                "t": t,
                "step": step,
                "fault": f.kind,
                "at_s": f.at_s,
                "struck": what,
            }
        waited = True
        done.wait(POLL_S)
    return None


def strike_all(faults: tuple[Fault, ...], agent_pid: int, workdir: Path, t0: float, done: threading.Event) -> None:
    """The schedule's wall-clock faults, each at ``t0 + at_s`` (or as soon after as the rank has a process), until
    the job is done; each struck fault's event is appended to ``events/host.jsonl``."""
    killed: set[int] = set()
    log = Path(workdir) / "events" / "host.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    for f in (f for f in faults if f.at_s is not None and f.kind == "kill"):  # a disconnect is the host's
        if done.wait(max(0.0, t0 + f.at_s - time.time())):
            return
        event = _strike_one(f, agent_pid, workdir, done, killed)
        if event is None:
            return
        with open(log, "a") as out:
            out.write(json.dumps(event) + "\n")
