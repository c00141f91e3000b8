"""The deadlock demonstration: an isolated pair of processes that both call blocking ``send`` first.

Two child processes (``python -m suite.deadlock --deadlock-child ...``), with their own
store on a loopback port, first run the correct orderings (``ORDERINGS``: parity,
``isend``/``irecv``, ``batch_isend_irecv``) at the largest probe size, then the naive
one (both ranks send first) at ascending sizes. Each step must be reported by both
processes within ``hang_bound_s``; the first that is not is where the backend blocks,
and the pair is killed. ``run_deadlock_probe`` never blocks its caller for more than
``total_limit_s`` (+ kill time).

The p2p experiment (experiments/p2p.py, pattern ``exchange``) runs the probe once per
session on rank 0 and times the correct orderings in the suite's own group at the size
where the naive one blocked. This module imports neither pytest nor the harness.
"""

from __future__ import annotations

import datetime
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from suite import verify
from suite.algorithms import ORDERINGS, exchange
from suite.dist import _free_port

ROOT = Path(__file__).resolve().parent.parent





@dataclass(frozen=True, kw_only=True)
class DeadlockProbe:
    """Bounds of the isolated both-send-first demonstration."""

    sizes: tuple[int, ...] = tuple(4 << (2 * i) for i in range(12))
    """Probe sizes, bytes, ascending: 4 B .. 16 MiB (x4)."""
    hang_bound_s: float = 3.0
    """A step that makes no progress for this long is declared hung."""
    start_limit_s: float = 30.0
    """Time allowed for the pair to start (import torch, rendezvous) on a loaded host."""
    total_limit_s: float = 45.0
    """Hard cap on the whole probe, start included."""


PROBE = DeadlockProbe()


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """What the isolated both-send-first pair showed."""

    backend: str
    device: str
    sizes_probed: tuple[int, ...]
    """Sizes the naive ordering was tried at, ascending, bytes (the last one hung, if any did)."""
    completed_bytes: tuple[int, ...]
    """Sizes at which both-send-first completed (the backend buffered the message)."""
    blocked_from_bytes: int | None
    """Smallest probed size at which both-send-first made no progress; None: none blocked."""
    detected_after_s: float | None
    """Seconds without progress before the hang was declared (>= hang_bound_s)."""
    hang_bound_s: float
    correct_orderings: dict
    """Ordering -> 'completed' / 'hung' / 'not run', at ``correct_orderings_bytes``."""
    correct_orderings_bytes: int
    n_wrong: int
    """Wrong elements the pair counted in every exchange that completed."""
    elapsed_s: float
    """Wall time of the whole probe, start-up included."""
    killed: bool
    """Whether the pair had to be killed (it hung)."""
    error: str | None = None
    naive_ordering: str = "both ranks: blocking send to the other, then recv"


_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                  "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS")
_TAG = "P2P-PROBE"


def _child_env() -> dict:
    # The pair must not join the suite's rendezvous: drop torchrun's variables (with
    # TORCHELASTIC_USE_AGENT_STORE set, c10d would connect to the agent's store).
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARS and not k.startswith("TORCHELASTIC")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_deadlock_probe(backend: str = "gloo", device: str = "cpu", probe: DeadlockProbe = PROBE) -> ProbeResult:
    """Start two processes that both call blocking ``send`` first; find where they block.

    The pair first runs the correct orderings at the largest probe size, then the
    naive one at ascending sizes. Each step must be reported by both processes
    within ``hang_bound_s``; the first that is not is the hang, and both processes
    are killed. Never blocks the caller for more than ``total_limit_s`` (+ kill time).
    A pair that dies before it is up (the free port was taken meanwhile) is started
    once more, within the same cap.
    """
    start = time.monotonic()
    res = _probe_once(backend, device, probe, start)
    if res.error and res.error.startswith(_START_FAILED) and time.monotonic() - start < probe.total_limit_s / 2:
        res = _probe_once(backend, device, probe, start)
    return res


_START_FAILED = "the probe pair did not come up"


def _probe_once(backend: str, device: str, probe: DeadlockProbe, start: float) -> ProbeResult:
    port = _free_port()
    big = probe.sizes[-1]
    sizes_arg = ",".join(str(s) for s in probe.sizes)
    # The pair's own group timeout outlives our bound, so a hang is ours to detect, and
    # ends an orphaned pair on its own if this process dies.
    pg_timeout = probe.total_limit_s + 15
    procs = [subprocess.Popen([sys.executable, "-m", "suite.deadlock", "--deadlock-child", str(r), str(port),
                               backend, device, str(big), sizes_arg, str(pg_timeout)],
                              cwd=ROOT, env=_child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    events: queue.Queue = queue.Queue()
    tails: list[list[str]] = [[], []]

    def reader(r: int, stream) -> None:
        for line in stream:
            line = line.strip()
            if line.startswith(_TAG):
                events.put((r, line[len(_TAG):].split()))
            elif line:
                tails[r] = (tails[r] + [line])[-5:]
        events.put((r, ["eof"]))

    threads = [threading.Thread(target=reader, args=(r, p.stdout), daemon=True) for r, p in enumerate(procs)]
    for t in threads:
        t.start()

    # The steps both processes must report, in order.
    steps = [("ready", 0)] + [(o, big) for o in ORDERINGS] + [("naive", s) for s in probe.sizes] + \
        [("done", 0)]
    seen: dict = {}
    step, n_wrong, error = 0, 0, None
    hung_step, stalled_s = None, None
    last_progress = time.monotonic()
    while step < len(steps):
        now = time.monotonic()
        limit = probe.start_limit_s if step == 0 else probe.hang_bound_s
        if now - start > probe.total_limit_s:
            error = f"probe exceeded its {probe.total_limit_s:.0f} s cap"
            hung_step = step if step > 0 else None
            break
        try:
            r, words = events.get(timeout=max(0.05, min(0.25, limit - (now - last_progress))))
        except queue.Empty:
            if time.monotonic() - last_progress >= limit:
                if step == 0:
                    error = f"the probe pair did not start within {limit:.0f} s"
                else:
                    hung_step, stalled_s = step, time.monotonic() - last_progress
                break
            continue
        if words == ["eof"]:
            if r in seen.get(("done", 0), ()):
                continue  # finished normally; the other one may still be reporting
            code = procs[r].poll()
            error = (f"{_START_FAILED}: " if step == 0 else "") + \
                f"probe process {r} exited early (status {code}): " + " | ".join(tails[r])[-400:]
            break
        name, size = words[0], int(words[1]) if len(words) > 1 else 0
        n_wrong += int(words[2]) if len(words) > 2 else 0
        seen.setdefault((name, size), set()).add(r)
        while step < len(steps) and seen.get(steps[step]) == {0, 1}:
            step += 1
            last_progress = time.monotonic()

    killed = False
    for p in procs:
        if p.poll() is None:
            p.kill()  # our own children, by handle
            killed = True
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for t in threads:
        t.join(timeout=2)

    done = {s for s in probe.sizes if seen.get(("naive", s)) == {0, 1}}
    probed = tuple(s for s in probe.sizes if s in done or (hung_step is not None and steps[hung_step] == ("naive", s)))
    orderings = {}
    for i, o in enumerate(ORDERINGS, start=1):
        if seen.get((o, big)) == {0, 1}:
            orderings[o] = "completed"
        elif hung_step == i:
            orderings[o] = "hung"
        else:
            orderings[o] = "not run"
    blocked = steps[hung_step][1] if hung_step is not None and steps[hung_step][0] == "naive" else None
    if hung_step is not None and steps[hung_step][0] != "naive" and error is None:
        error = f"correct ordering {steps[hung_step][0]} did not complete within {probe.hang_bound_s} s"
    return ProbeResult(backend=backend, device=device, sizes_probed=probed, completed_bytes=tuple(sorted(done)),
                       blocked_from_bytes=blocked, detected_after_s=stalled_s if blocked else None,
                       hang_bound_s=probe.hang_bound_s, correct_orderings=orderings, correct_orderings_bytes=big,
                       n_wrong=n_wrong, elapsed_s=time.monotonic() - start, killed=killed, error=error)


def _probe_child(rank: int, port: int, backend: str, device: str, big: int, sizes: list[int],
                 timeout_s: float) -> None:
    """One process of the probe pair (``python -m suite.deadlock --deadlock-child ...``)."""
    dev = torch.device("cuda", rank) if device == "cuda" else torch.device("cpu")
    kw = {"device_id": dev} if backend == "nccl" else {}
    if device == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=timeout_s), **kw)
    peer, dt = 1 - rank, torch.float32

    def say(*words) -> None:
        print(_TAG, *words, flush=True)

    def pat(r: int, count: int) -> torch.Tensor:
        return verify.pattern(r, count, dt, redop="max", device=dev)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)  # NCCL's send/recv block the stream, not the CPU

    say("ready")
    count = big // 4
    for ordering in ORDERINGS:
        s, r = pat(rank, count), torch.full((count,), -1, dtype=dt, device=dev)
        exchange(s, r, peer, peer, ordering=ordering)
        sync()
        say(ordering, big, verify.count_wrong(r, pat(peer, count)))
    for size in sizes:
        count = max(1, size // 4)
        s, r = pat(rank, count), torch.full((count,), -1, dtype=dt, device=dev)
        dist.send(s, peer)  # both ranks send first: the deadlock under test
        dist.recv(r, peer)
        sync()
        say("naive", size, verify.count_wrong(r, pat(peer, count)))
    say("done")
    dist.destroy_process_group()


def _main(argv: list[str]) -> int:
    if len(argv) == 8 and argv[0] == "--deadlock-child":
        _, rank, port, backend, device, big, sizes, timeout_s = argv
        _probe_child(int(rank), int(port), backend, device, int(big), [int(s) for s in sizes.split(",")],
                     float(timeout_s))
        return 0
    print("usage: python -m suite.deadlock --deadlock-child RANK PORT BACKEND DEVICE BIG SIZES TIMEOUT_S\n"
          "(internal: one process of the deadlock probe pair; run the experiment with suite.launch)",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
