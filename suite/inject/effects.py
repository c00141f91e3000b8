"""The two mechanisms the local classes share: a rank stopped and resumed on a duty cycle (SIGSTOP/SIGCONT, from a
thread scheduled ahead of the host's other work where it may be), and busy processes started beside it, pinned to
chosen cores.

Both undo themselves completely on ``stop``: a stopped rank is always sent SIGCONT, and every process started
is killed and reaped. The processes started also end on their own when the controller that started them is
gone (they watch their parent), so that no hog outlives a controller killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from suite.system.cgroup import asleep


POLL_S = 0.001
"""How often a duty cycle that stops its process only while it runs (``running``) reads the process's state."""


class DutyCycle:
    """``pid`` alternately left to run ``run_s`` and stopped ``stop_s``, in a thread, until ``stop``. ``running``:
    each stop waits for the process's main thread to run (not ``cgroup.asleep``): a stop-the-world pause (a garbage
    collector's) comes as the program allocates, never while it sleeps in a wait for its peers."""

    def __init__(self, pid: int, run_s: float, stop_s: float, running: bool = False) -> None:
        self.pid, self.run_s, self.stop_s, self.while_running = pid, run_s, stop_s, running
        self.done = threading.Event()
        self.lock = threading.Lock()  # a stop never interleaves with the thread's own SIGSTOP
        self.thread = threading.Thread(target=self._loop, name=f"inject-duty-{pid}", daemon=True)
        self.thread.start()

    def _signal(self, sig: int) -> bool:
        try:
            os.kill(self.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def _loop(self) -> None:
        _promptly()
        while not self.done.wait(self.run_s):
            while self.while_running and asleep(self.pid) and not self.done.wait(POLL_S):
                pass  # until its main thread runs
            with self.lock:
                if self.done.is_set() or not self._signal(signal.SIGSTOP):
                    break
            self.done.wait(self.stop_s)
            self._signal(signal.SIGCONT)

    def stop(self) -> None:
        with self.lock:
            self.done.set()
        self.thread.join(timeout=max(self.stop_s, self.run_s) + 5)
        self._signal(signal.SIGCONT)


def _promptly() -> None:
    """The calling thread scheduled ahead of the host's other work where it may be (real-time FIFO, else the
    highest nice): on a loaded host a thread of normal priority wakes tens of ms late, and a duty cycle's run of a few
    ms then lasts that long (the rank slowed far less than its severity). It sleeps between its signals, so it takes
    next to no CPU from anything. Without the privilege, as it was."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # 0: this thread (Linux)
    except (AttributeError, OSError):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -20)  # this thread's nice (Linux)
        except (AttributeError, OSError):
            pass


HOG = """
import os, sys
parent = int(sys.argv[3])  # the pid that started it: os.getppid() here would be 1 where it died meanwhile
cores = [int(c) for c in sys.argv[1].split(",") if c]
if cores and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, cores)
size = int(sys.argv[2])
src, dst = bytearray(size or 1), bytearray(size or 1)
n = 0
while True:
    if size:
        dst[:] = src  # a memory copy: reads and writes the whole buffer
    n += 1
    if n % 64 == 0 and os.getppid() != parent:
        break
"""
"""A busy process: spins on its cores (``size`` 0), or copies a buffer of ``size`` bytes over and over (memory
bandwidth); ends when its parent is gone."""


class Hogs:
    """``count`` busy processes pinned to ``cores`` (all cores where empty), each copying ``size`` bytes per
    round (0: spinning only), until ``stop``."""

    def __init__(self, count: int, cores: frozenset[int], size: int = 0) -> None:
        arg = ",".join(str(c) for c in sorted(cores))
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", HOG, arg, str(size), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(count)
        ]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def docker(*args: str) -> str:
    """``docker ARGS``' output (the host's controller's node effects: suite/inject/host.py); RuntimeError with its
    message where it fails."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout
