"""What a backend is to the suite: one ``Backend`` record, bound as ``BACKEND`` in one file of this package (found
by registry.py). Everything the launcher, its preflight, the ranks, the backends experiment and the model decide
about a backend they read from its record; no module outside this package compares a backend's name
(tests/unit/test_backend_records.py). Torch-free: behaviour that needs torch (the probe, a c10d group of the
suite's own) is a function imported when called, so the launcher reads the records without importing torch."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping

TORCHRUN = "torchrun"
MPIEXEC = "mpiexec"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Backend:
    """One backend. The defaults are a plain c10d backend that torch ships, started by torchrun."""

    name: str
    """BACKEND=<name>, and the records' ``backend``."""
    order: int = 100
    """Its place in the registry (BACKENDS' order, the machine info's): the lower, the earlier."""
    lane_order: int = 100
    """Its lanes' place among the backends experiment's lanes (the records' ``lanes_missing``): the lower, the
    earlier."""
    label: str = ""
    """How messages spell it (NCCL, Gloo, MPI); the name when empty."""
    devices: tuple[str, ...] = ("cpu", "cuda")
    """The tensor devices it runs on, in the order of its lanes in the backends experiment."""
    auto_for: tuple[str, ...] = ()
    """The devices for which BACKEND=auto picks it."""
    available: Callable[[], bool] = lambda: False
    """Whether this torch (and host) has it; imports torch when called (a rank, or the warm torchrun)."""
    version: Callable[[], object] = lambda: None
    """What a run's machine info records under its name (suite/system/sysinfo.py); imports torch when called."""
    c10d: str = ""
    """``module:function`` registering the suite's own c10d group for it (called on a rank before
    ``init_process_group``; returns the name c10d knows it by); empty: c10d knows it by ``name``."""
    launcher: str = TORCHRUN
    """What starts the ranks: torchrun, or mpiexec (srun in a Slurm allocation: suite/launch/mpi.py)."""
    launch_problem: str = ""
    """``module:function`` (layout) -> why this host cannot start its ranks, or None; the launcher's preflight."""
    run_env: str = ""
    """``module:function`` (env, run_dir, torch_version) -> the variables the launcher adds for its ranks."""
    one_gpu_per_rank: bool = False
    """On CUDA it needs a GPU of its own per rank, bound at init (``device_id``, a barrier's ``device_ids``)."""
    cuda_graphs: bool = False
    """Its work can be captured in a CUDA graph (TIMING=cuda_graph)."""
    plants_faults: bool = False
    """The planted faults (SUITE_INJECT_BACKEND: suite/harness/plant/backend.py) wrap its CPU group."""
    cannot: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """What it cannot run, each with why: ``functional_collectives`` (DTensor's, dispatched in C++),
    ``p2p_cuda`` (point-to-point on CUDA tensors), ``powersgd_buckets`` (PowerSGD over several DDP buckets)."""
    bare_lane: str = ""
    """The lane key of its bare reference beside its own lane in the backends experiment (its library called
    directly, no torch); empty: none."""
    lane_tuning: tuple[str, ...] = ()
    """Environment variables its lanes' records in the backends experiment carry (``default`` when unset)."""
    model_choice: str = ""
    """``module:function`` (op, size_bytes, recs, debug_text, check) -> the algorithm it runs (suite/model/);
    empty: the model has no algorithm table for it."""
    model_reference: str = ""
    """``module:name`` of its documented algorithm per op ({op: (algorithm, source)}) the run model compares with;
    empty: ring."""

    @property
    def shown(self) -> str:
        return self.label or self.name

    @property
    def torchrun(self) -> bool:
        return self.launcher == TORCHRUN

    def call(self, field: str, *args):
        """The ``module:function`` named by ``field``, called with ``args``; None where the field is empty."""
        ref = getattr(self, field)
        return None if not ref else resolve(ref)(*args)


def resolve(ref: str):
    """The object ``module:attribute`` names, imported now."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
