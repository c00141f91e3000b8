"""Process-group lifecycle: one ``init_distributed`` for every experiment.

Reads the launcher's environment (torchrun and docker compose set RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR /
MASTER_PORT; Slurm's srun sets SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID), picks the device and backend, validates
them against the build *before* init, sets the CUDA device before init (and passes it as ``device_id`` so NCCL binds
eagerly), always uses an explicit timeout, and destroys the group at exit."""

from __future__ import annotations

import atexit
import gc
import datetime
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from suite.common.config import BenchConfig, ConfigError
from suite.common.failures import EXIT_PEER_FAILURE, record_failure
from suite.harness.plant import backend as faulty_backend
from suite.harness.mpi.rank import slurm_tasks_on_node
from suite.common.backends import PreflightError, TorchFacts, record_of, resolve_backend, resolve_device


@dataclass(frozen=True, kw_only=True)
class LaunchEnv:
    """Rank layout as told by the launcher."""

    rank: int
    """Global rank of this process."""
    world_size: int
    """Number of processes in the job."""
    local_rank: int
    """Rank within this node."""
    local_world_size: int
    """Processes on this node."""
    launcher: str
    """Who set the variables: torchrun, slurm or none (a single process)."""


def read_launch_env(env: dict | None = None) -> LaunchEnv:
    """Read rank/world from torchrun (or compose, which runs torchrun) or Slurm."""
    env = os.environ if env is None else env

    def as_int(name: str) -> int:
        try:
            return int(env[name])
        except ValueError:
            raise PreflightError(f"environment variable {name}={env[name]!r} is not an integer") from None

    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = as_int("RANK"), as_int("WORLD_SIZE")
        local_rank = as_int("LOCAL_RANK") if "LOCAL_RANK" in env else rank
        local_world = as_int("LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else world
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world = as_int("SLURM_PROCID"), as_int("SLURM_NTASKS")
        local_rank = as_int("SLURM_LOCALID") if "SLURM_LOCALID" in env else 0
        local_world, launcher = slurm_tasks_on_node(env), "slurm"
    else:
        rank, world, local_rank, local_world, launcher = 0, 1, 0, 1, "none"
    if world < 1:
        raise PreflightError(f"WORLD_SIZE must be >= 1, got {world}")
    if not 0 <= rank < world:
        raise PreflightError(f"RANK {rank} is outside the world of {world} ranks")
    if not 0 <= local_rank < max(local_world, 1):
        raise PreflightError(f"LOCAL_RANK {local_rank} is outside LOCAL_WORLD_SIZE {local_world}")
    return LaunchEnv(
        rank=rank, world_size=world, local_rank=local_rank, local_world_size=local_world, launcher=launcher
    )


@dataclass(kw_only=True)
class DistContext:
    """Everything an experiment needs to know about the running group."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str
    device: torch.device
    group: object
    """The default process group (pass explicitly; no hidden globals)."""
    timeout_s: float
    hostnames: list[str] = field(default_factory=list)
    """Hostname of every rank, indexed by global rank."""
    seed: int = 0  # of the patterns a case's buffers are made of (verify.pattern): new each check repetition
    check_run: bool = False  # while the harness builds a case's check run (its one untimed op)
    watchdog: Watchdog | None = field(default=None, repr=False, compare=False)
    """This rank's heartbeat (None when off or alone); ``destroy_distributed(ctx)`` stops it."""
    whole: DistContext | None = field(default=None, repr=False, compare=False)
    """The world's, where this is one part of a partition running a case at once (groups.partition_context)."""

    @property
    def device_type(self) -> str:
        return self.device.type

    def node_of(self, rank: int) -> int:
        """Index of the host rank ``rank`` runs on (order of first appearance)."""
        order: list[str] = []
        for h in self.hostnames:
            if h not in order:
                order.append(h)
        return order.index(self.hostnames[rank])

    def sync_device(self) -> None:
        """Wait for queued device work (CUDA streams); a no-op on CPU."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def agree_all(self, ok: bool) -> bool:
        """True only if ``ok`` is true on every rank (a MIN all_reduce)."""
        t = torch.tensor([1 if ok else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.group)
        return bool(t.item())


def _reduced(ctx: DistContext, values, op) -> list[float]:
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=op, group=ctx.group)
    return t.cpu().tolist()


def dist_max(ctx: DistContext, values) -> list[float]:
    """Element-wise maximum of ``values`` over the ranks of ``ctx.group`` (float64), the same list on
    every rank. Collective: every rank of the group calls it with as many values."""
    return _reduced(ctx, values, dist.ReduceOp.MAX)


def dist_min(ctx: DistContext, values) -> list[float]:
    """Element-wise minimum of ``values`` over the ranks of ``ctx.group`` (float64), like ``dist_max``."""
    return _reduced(ctx, values, dist.ReduceOp.MIN)


class Watchdog:
    """Names a dead, frozen or partitioned rank and ends this rank within a bounded time.

    Gloo notices a killed peer in about a second (its sockets close), but a frozen
    or partitioned peer produces no error at all until the process-group timeout.
    Each rank therefore bumps a counter in the launcher's TCPStore every second
    (a thread, so it keeps beating while the main thread waits in a collective)
    and watches everyone else's counter. Counters, not timestamps: hosts' clocks
    may disagree. A rank whose counter has not moved for ``timeout_s`` (and that
    has not announced a clean exit) is reported by rank, host and cause, and this
    rank exits with EXIT_PEER_FAILURE instead of waiting for the group timeout.
    """

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        hostnames: list[str],
        timeout_s: float,
        results_dir: str | None,
        interval_s: float = 1.0,
    ):
        self.rank, self.world_size, self.hostnames = rank, world_size, hostnames
        self.timeout_s, self.interval_s, self.results_dir = timeout_s, interval_s, results_dir
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        self.where = f"{addr}:{port}"
        # A separate client: the default group's store must not be shared across threads.
        base = dist.TCPStore(
            addr,
            port,
            world_size,
            is_master=False,
            timeout=datetime.timedelta(seconds=max(5.0, timeout_s)),
            wait_for_workers=False,
        )
        self.store = dist.PrefixStore("suite/watchdog", base)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="suite-watchdog", daemon=True)

    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    def stop(self, clean: bool = True) -> None:
        """Stop beating; ``clean`` tells the others this rank is leaving on purpose.

        The beating thread is joined first (bounded): one TCPStore client must not be used by two
        threads at once, and no thread may still be inside a store call when the process exits."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=max(2.0, 2 * self.interval_s))
        if clean:
            try:
                self.store.set(f"done/{self.rank}", "1")
            except Exception:
                pass

    def _run(self) -> None:
        last_seen = {r: (None, time.monotonic()) for r in range(self.world_size) if r != self.rank}
        store_down_since = None
        while not self._stop.wait(self.interval_s):
            now = time.monotonic()
            try:
                self.store.add(f"beat/{self.rank}", 1)
                done = set()
                for r in last_seen:
                    if self.store.check([f"done/{r}"]):
                        done.add(r)
                        continue
                    count = self.store.add(f"beat/{r}", 0)
                    prev, since = last_seen[r]
                    if count != prev:
                        last_seen[r] = (count, now)
                store_down_since = None
            except Exception as e:  # the store's host (node 0) is gone
                store_down_since = store_down_since or now
                if now - store_down_since > self.timeout_s:
                    self._abort(
                        f"lost the rendezvous store at {self.where} (node 0 or its launcher is gone): {e}", lost=[0]
                    )
                continue
            lost = [r for r, (_, since) in last_seen.items() if r not in done and now - since > self.timeout_s]
            if lost and not self._stop.is_set():
                names = ", ".join(f"rank {r} (host {self.hostnames[r]})" for r in lost)
                self._abort(
                    f"{names} stopped responding: no heartbeat for more than {self.timeout_s:z.0f} s "
                    "(the process is frozen, partitioned from the network, or died)",
                    lost=lost,
                )

    def _abort(self, cause: str, lost: list[int]) -> None:
        msg = f"[rank {self.rank}] peer failure: {cause}; ending this rank (exit {EXIT_PEER_FAILURE})"
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
        record_failure(self.results_dir, self.rank, cause, lost_ranks=lost, kind="peer_failure")
        os._exit(EXIT_PEER_FAILURE)


class EndOfRun:
    """No rank leaves before rank 0 has written the run, when every rank ran its cases to the end.

    torchrun ends the whole job at the first rank that exits non-zero, and a run in which a case failed
    exits 1 on every rank: the ranks with nothing left to write would end rank 0 while it writes bench.json
    and prints the tables. So rank 0 says ``ending`` when its cases are over (before its last write) and
    ``done`` when it has written everything (the plugin's last hook); every other rank that ran all its
    cases ``wait``s, first ``grace_s`` for rank 0 to be ending, then ``wait_s`` for it to be done. A rank 0
    that is not ending within the grace (stuck in an op a failed rank left) is ended by torchrun as before.

    Through the launcher's store, a fresh client (the group is gone by then). The keys carry the launcher's
    run id: the same on every node, new for every run. Polls, so that a signal ends a waiting rank at once;
    a store that is gone costs a rank at most ``connect_s`` (and a few retries) at its exit."""

    GRACE_S = 10.0
    WAIT_S = 120.0

    def __init__(
        self, rank: int, run_id: str | None, env: dict | None = None, *, poll_s: float = 0.05, connect_s: float = 2.0
    ):
        env = os.environ if env is None else env
        self.rank, self.poll_s, self.connect_s = rank, poll_s, connect_s
        self.key = f"suite/end/{run_id}"
        self.where = None
        if int(env.get("WORLD_SIZE", "1")) > 1 and env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
            self.where = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
        self._store = None

    def _client(self):
        if self._store is None and self.where is not None:
            self._store = dist.TCPStore(
                *self.where, is_master=False, timeout=datetime.timedelta(seconds=self.connect_s), wait_for_workers=False
            )
        return self._store

    def _say(self, what: str) -> bool:
        try:
            store = self._client()
            if store is None:
                return False
            store.set(f"{self.key}/{what}", "1")
            return True
        except Exception:  # the store's host is gone (node 0 or its launcher ended): nobody to tell
            return False

    def ending(self) -> bool:
        """Rank 0: its cases are over; its last write follows."""
        return self.rank == 0 and self._say("ending")

    def done(self) -> bool:
        """Rank 0: everything is written and printed."""
        return self.rank == 0 and self._say("done")

    def wait(self, grace_s: float = GRACE_S, wait_s: float = WAIT_S) -> bool:
        """Any other rank: until rank 0 is done (True), or not ending within ``grace_s``, not done within
        ``wait_s``, or the store is gone (False)."""
        if self.rank == 0:
            return False
        try:
            store = self._client()
            if store is None:
                return False
            return self._poll(store, "ending", grace_s) and self._poll(store, "done", wait_s)
        except Exception:
            return False

    def _poll(self, store, what: str, within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while not store.check([f"{self.key}/{what}"]):
            if time.monotonic() > deadline:
                return False
            time.sleep(self.poll_s)
        return True


def init_distributed(
    cfg: BenchConfig,
    env: dict | None = None,
    *,
    results_dir: str | None = None,
    heartbeat_timeout_s: float | None = None,
) -> DistContext:
    """Start this process's group as configured and return its context, which the caller owns (the
    plugin's session fixture) and ends with ``destroy_distributed(ctx)``; nothing is kept here.

    Validation happens before ``init_process_group``: a bad backend or device
    raises PreflightError/ConfigError and no group is started. A second call while a group is up is
    a RuntimeError: one group per process, passed on explicitly.
    """
    if dist.is_available() and dist.is_initialized():
        raise RuntimeError("a process group is already started in this process; pass on the DistContext it returned")
    le = read_launch_env(env)
    device_type = resolve_device(cfg.device, facts := TorchFacts.here())  # read once for both rules
    backend = resolve_backend(cfg.backend, device_type, facts)
    if cfg.root >= le.world_size:
        raise ConfigError(f"ROOT {cfg.root} does not exist in a world of {le.world_size} ranks")
    if device_type == "cuda":
        n_gpu = torch.cuda.device_count()
        if record_of(backend).one_gpu_per_rank and le.local_world_size > n_gpu:
            raise PreflightError(
                f"{le.local_world_size} ranks on this node but only {n_gpu} GPU(s): "
                f"{record_of(backend).shown} needs one GPU per rank; lower NPROC"
            )
        device = torch.device("cuda", le.local_rank % max(n_gpu, 1))
        torch.cuda.set_device(device)  # before init, so NCCL binds the right GPU
    else:
        device = torch.device("cpu")
    if le.launcher == "none":
        # A lone process (tests, notebooks): a private store on a free port.
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
    kwargs = dict(rank=le.rank, world_size=le.world_size, timeout=datetime.timedelta(seconds=cfg.timeout_s))
    if record_of(backend).one_gpu_per_rank:
        kwargs["device_id"] = device
    dist.init_process_group(faulty_backend.backend_for(backend, device_type, env), **kwargs)  # planted faults: Gloo
    group = dist.group.WORLD
    hostnames: list = [None] * le.world_size
    dist.all_gather_object(hostnames, socket.gethostname(), group=group)
    ctx = DistContext(
        rank=le.rank,
        world_size=le.world_size,
        local_rank=le.local_rank,
        local_world_size=le.local_world_size,
        backend=backend,
        device=device,
        group=group,
        timeout_s=cfg.timeout_s,
        hostnames=list(hostnames),
    )
    hb = min(cfg.timeout_s, 15.0) if heartbeat_timeout_s is None else heartbeat_timeout_s
    if le.world_size > 1 and hb > 0:
        ctx.watchdog = Watchdog(
            rank=le.rank, world_size=le.world_size, hostnames=list(hostnames), timeout_s=hb, results_dir=results_dir
        ).start()
    atexit.register(destroy_distributed, ctx)  # a script that never calls it still ends its group in order
    return ctx


def destroy_distributed(ctx: DistContext, clean: bool = True) -> None:
    """Stop ``ctx``'s watchdog and destroy the group if one is up; safe to call twice."""
    atexit.unregister(destroy_distributed)
    if ctx.watchdog is not None:
        ctx.watchdog.stop(clean=clean)
        ctx.watchdog = None
    if dist.is_available() and dist.is_initialized():
        # Unreachable DDP modules still hold the group (their reducer); collected now, their Gloo
        # group is destroyed while the interpreter is alive, not by a Gloo worker thread during
        # interpreter shutdown (std::terminate; see examples/ddp_source_example.py --teardown).
        gc.collect()
        try:
            dist.destroy_process_group()
        except Exception:  # teardown after a failed peer must not mask the real error
            pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
