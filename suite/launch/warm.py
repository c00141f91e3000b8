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
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from suite.common.backends import TorchFacts

ROOT = Path(__file__).resolve().parents[2]


TORCHRUN_POPEN = {"start_new_session": True, "stderr": subprocess.PIPE, "text": True, "errors": "replace", "bufsize": 1}
"""How torchrun is started, warm or not: in a session of its own (the launcher forwards signals to it and ends its
whole tree: suite/launch/supervise.py), its stderr read line by line."""


class WarmTorchrun:
    """One torchrun process, started ahead of its job (``start``), given it once (``go``), or ended (``close``)."""

    def __init__(self, proc: subprocess.Popen, gate: int, facts: int):
        self.proc, self._gate, self.handed = proc, gate, False
        self._facts_fd: int | None = facts
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

    def facts(self) -> TorchFacts:
        """What torch says of devices and backends, as the warm process read them once it had imported torch
        (waits for that); read here instead where it could not say (it died: the same import fails here too)."""
        if self._facts is None:
            data = b""
            if self._facts_fd is not None:
                with os.fdopen(self._facts_fd, "rb") as fh:
                    data = fh.read()
                self._facts_fd = None
            self._facts = TorchFacts.from_json(data.decode()) if data else TorchFacts.here()
        return self._facts

    def go(self, cmd: list[str], env: dict, cwd) -> subprocess.Popen:
        """Hand over the job: ``cmd`` is torchrun's command line (``python -m torch.distributed.run ...``); returns
        the running process, as ``subprocess.Popen(cmd, ...)`` would have."""
        head = [sys.executable, "-m", "torch.distributed.run"]
        if cmd[: len(head)] != head:
            raise ValueError(f"not a torchrun command: {cmd[:3]}")
        job = json.dumps({"args": cmd[len(head) :], "env": env, "cwd": str(cwd)}).encode()
        self.handed = True
        try:
            with os.fdopen(self._gate, "wb") as fh:
                fh.write(job)
        except BrokenPipeError:
            pass  # it died before its job came: its exit status and stderr say why, as a failed torchrun's would
        return self.proc

    def close(self) -> None:
        """End the process if it never got its job (nothing of a run has started in it)."""
        if self._facts_fd is not None:
            os.close(self._facts_fd)
            self._facts_fd = None
        if self.handed:
            return
        self.handed = True
        os.close(self._gate)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stderr.close()


def _serve(fd: int, facts_fd: int) -> int:
    """The warm process: import torchrun, say what torch has, wait for the job, run it (torchrun's own exit
    status)."""
    import torch.distributed.run as torchrun

    try:
        with os.fdopen(facts_fd, "w") as fh:
            fh.write(TorchFacts.here().to_json())
    except BrokenPipeError:  # the launcher stopped before it asked: the job will not come either
        pass

    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    if not data:  # closed without a job: the launcher stopped before any rank was to start
        return 0
    job = json.loads(data)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    torchrun.main(job["args"])
    return 0


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1]), int(sys.argv[2])))
