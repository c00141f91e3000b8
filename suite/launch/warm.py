"""torchrun started warm: its interpreter and ``import torch`` (about 2 s of CPU, the largest part of torchrun's own
start) run while the launcher's preflight runs, and no rank starts until the launcher says so.

``WarmTorchrun.start`` spawns ``python -m suite.launch.warm <fd>`` in a session of its own (as the launcher always
starts torchrun: suite/launch/supervise.py). That process imports ``torch.distributed.run`` and then waits on the
read end of a pipe. ``go`` hands it the job: torchrun's arguments, the environment the ranks get and the working
directory, and it calls torchrun's own ``main`` with them - the same function ``python -m torch.distributed.run``
calls, so the ranks, torchrun's output and its exit status are what they were. Until then it has joined no
rendezvous and started nothing. ``close`` ends it if the job never came (preflight refused the run, the input was
bad, the user interrupted); and if the launcher dies first, the pipe closes and it exits by itself.

The environment is handed over, not inherited, because the launcher settles it after preflight (OMP_NUM_THREADS,
TORCH_DISTRIBUTED_DEBUG, the flight recorder's variables). Variables read when torch is imported are the
launcher's own, unchanged. Runs under mpiexec (BACKEND=mpi) start no torchrun, so nothing is warmed for them.

Once it has imported torch it writes what torch says of devices and backends (``TorchFacts``) to a second pipe:
the launcher's preflight rules on those instead of importing torch beside it, a second ~2 s of CPU on every run
that the two cores of a small machine would share with this import.

The case selection (``-k`` / ``-m``) is collected here too (``collect``): a fork of this process, torch already
imported, runs pytest's collection and its exit status comes back on the second pipe (suite/launch/preflight.py
``SelectionCheck``). A collection in an interpreter of its own imported torch a third time (about 2 s of CPU on
every run given ``-k``). The fork is taken before torch is asked about devices, so it inherits no CUDA state.

The first pipe carries JSON lines: ``{"collect": ...}`` (a collection, or null: none) first, then ``{"job": ...}``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from suite.common.backends import TorchFacts

ROOT = Path(__file__).resolve().parents[2]


TORCHRUN_POPEN = {"start_new_session": True, "stderr": subprocess.PIPE, "text": True, "errors": "replace", "bufsize": 1}
"""How torchrun is started, warm or not: in a session of its own (the launcher forwards signals to it and ends its
whole tree: suite/launch/supervise.py), its stderr read line by line."""


class WarmTorchrun:
    """One torchrun process, started ahead of its job (``start``), asked to collect a case selection (``collect``),
    given its job once (``go``), or ended (``close``)."""

    def __init__(self, proc: subprocess.Popen, gate: int, facts: int):
        self.proc, self.handed = proc, False
        self._gate = os.fdopen(gate, "wb")
        self._reply = os.fdopen(facts, "rb")
        self._asked = False  # whether the collection message (a collection, or none) was sent
        self._facts: TorchFacts | None = None

    @classmethod
    def start(cls) -> WarmTorchrun:
        """Spawn the process; it imports torchrun, says what torch has (``facts``) and waits for its job."""
        read, write = os.pipe()
        facts_read, facts_write = os.pipe()
        try:
            cmd = [sys.executable, "-m", "suite.launch.warm", str(read), str(facts_write)]
            # ROOT: where suite imports
            proc = subprocess.Popen(cmd, cwd=ROOT, pass_fds=(read, facts_write), **TORCHRUN_POPEN)
        finally:
            os.close(read)
            os.close(facts_write)
        return cls(proc, write, facts_read)

    def _send(self, message: dict) -> None:
        try:
            self._gate.write(json.dumps(message).encode() + b"\n")
            self._gate.flush()
        except BrokenPipeError:
            pass  # it died: what it says next (nothing) and its exit status tell

    def _ask(self, collection: dict | None) -> None:
        if not self._asked:
            self._asked = True
            self._send({"collect": collection})

    def collect(self, argv: list[str], env: dict, cwd) -> None:
        """Have a fork of the process, torch imported, run ``pytest argv`` (a collection) in ``env`` and ``cwd``;
        ``collected`` gives its exit status. At most once, and before ``facts`` or ``go``."""
        if self._asked:
            raise RuntimeError("collect comes before facts and go, once")
        self._ask({"argv": argv, "env": env, "cwd": str(cwd)})

    def _line(self) -> bytes:
        try:
            return self._reply.readline()
        except ValueError:  # closed
            return b""

    def facts(self) -> TorchFacts:
        """What torch says of devices and backends, as the warm process read them once it had imported torch
        (waits for that); read here instead where it could not say (it died: the same import fails here too)."""
        if self._facts is None:
            self._ask(None)
            data = self._line()
            self._facts = TorchFacts.from_json(data.decode()) if data.strip() else TorchFacts.here()
        return self._facts

    def collected(self) -> int | None:
        """The exit status of the collection ``collect`` asked for (waits for it); None where the process could
        not say (it died)."""
        self.facts()
        data = self._line()
        return json.loads(data)["collected"] if data.strip() else None

    def go(self, cmd: list[str], env: dict, cwd) -> subprocess.Popen:
        """Hand over the job: ``cmd`` is torchrun's command line (``python -m torch.distributed.run ...``); returns
        the running process, as ``subprocess.Popen(cmd, ...)`` would have."""
        head = [sys.executable, "-m", "torch.distributed.run"]
        if cmd[: len(head)] != head:
            raise ValueError(f"not a torchrun command: {cmd[:3]}")
        self.handed = True
        self._ask(None)
        self._send({"job": {"args": cmd[len(head) :], "env": env, "cwd": str(cwd)}})
        self._close_pipes()
        return self.proc

    def _close_pipes(self) -> None:
        for fh in (self._gate, self._reply):
            try:
                fh.close()
            except BrokenPipeError:
                pass

    def close(self) -> None:
        """End the process if it never got its job (nothing of a run has started in it), and a collection it
        may still be running."""
        if self.handed:
            return
        self.handed = True
        self._close_pipes()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the collection's fork with it
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.proc.stderr.close()


def _serve(fd: int, facts_fd: int) -> int:
    """The warm process: import torchrun, collect the case selection if asked (in a fork), say what torch has, wait
    for the job, run it (torchrun's own exit status)."""
    import torch.distributed.run as torchrun

    gate = os.fdopen(fd, "rb")
    first = gate.readline()
    collection = json.loads(first).get("collect") if first.strip() else None
    pid = _fork_collection(collection, (fd, facts_fd)) if collection else None
    try:
        os.write(facts_fd, TorchFacts.here().to_json().encode() + b"\n")
        if pid is not None:
            status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            os.write(facts_fd, json.dumps({"collected": status}).encode() + b"\n")
    except BrokenPipeError:  # the launcher stopped before it asked: the job will not come either
        pass
    os.close(facts_fd)

    data = gate.readline()
    if not data.strip():  # closed without a job: the launcher stopped before any rank was to start
        return 0
    job = json.loads(data)["job"]
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    torchrun.main(job["args"])
    return 0


def _fork_collection(collection: dict, fds: tuple[int, ...]) -> int:
    """Fork; the child runs ``pytest`` on ``collection["argv"]`` in its environment and directory, its output
    discarded, and exits with pytest's status. The child's pid."""
    pid = os.fork()
    if pid:
        return pid
    status = 70  # EX_SOFTWARE: the collection itself failed to run
    try:
        for f in fds:
            os.close(f)  # the launcher's pipes: their ends stay the parent's alone
        null = os.open(os.devnull, os.O_RDWR)
        for f in (0, 1, 2):
            os.dup2(null, f)
        os.chdir(collection["cwd"])
        os.environ.clear()
        os.environ.update(collection["env"])
        import pytest

        status = int(pytest.main(collection["argv"]))
    finally:
        os._exit(status)


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1]), int(sys.argv[2])))
