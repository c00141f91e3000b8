"""Which backend and device a run uses: the rules the launcher's preflight applies before any rank starts and a
rank's init applies again (suite/harness/dist.py), and the error both raise (exit 3)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json


class PreflightError(RuntimeError):
    """The environment cannot run the requested configuration (no group was started)."""


BACKENDS = ("gloo", "nccl", "mpi", "ucc")


@dataclasses.dataclass(frozen=True)
class TorchFacts:
    """What the device and backend rules ask of torch: its version, the CUDA devices it sees, the backends it has.
    Read where torch is imported anyway: the launcher gets them from the warm torchrun (suite/launch/warm.py), so
    its preflight does not import torch a second time beside it (about 2 s of CPU on every run); a rank reads them
    itself (``here``)."""

    version: str
    cuda_devices: int  # 0: no CUDA device visible
    available: tuple[str, ...]  # the backends it has, of BACKENDS

    @classmethod
    def here(cls) -> TorchFacts:
        import torch
        import torch.distributed as dist

        have = {
            "gloo": dist.is_gloo_available,
            "nccl": dist.is_nccl_available,
            # torch's own MPI, else the suite's over mpi4py (suite/harness/mpi_backend.py)
            "mpi": lambda: dist.is_mpi_available() or importlib.util.find_spec("mpi4py") is not None,
            "ucc": lambda: getattr(dist, "is_ucc_available", lambda: False)(),
        }
        cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return cls(torch.__version__, cuda, tuple(b for b in BACKENDS if have[b]()))

    @classmethod
    def from_json(cls, text: str) -> TorchFacts:
        d = json.loads(text)
        return cls(d["version"], int(d["cuda_devices"]), tuple(d["available"]))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def resolve_device(requested: str, facts: TorchFacts | None = None) -> str:
    """auto -> cuda when a GPU is visible, else cpu; cuda without a GPU is an error."""
    facts = facts or TorchFacts.here()
    if requested == "auto":
        return "cuda" if facts.cuda_devices else "cpu"
    if requested == "cuda" and not facts.cuda_devices:
        raise PreflightError(
            "DEVICE=cuda but no CUDA device is visible to this process "
            "(check CUDA_VISIBLE_DEVICES / the container's GPU reservation), or use DEVICE=cpu"
        )
    return requested


def backend_available(backend: str, facts: TorchFacts | None = None) -> bool:
    return backend in (facts or TorchFacts.here()).available


def resolve_backend(requested: str, device: str, facts: TorchFacts | None = None) -> str:
    """auto -> nccl for cuda, gloo for cpu; reject what the build or device cannot do."""
    facts = facts or TorchFacts.here()
    backend = requested
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    if backend not in facts.available:
        raise PreflightError(
            f"backend {backend!r} is not built into this torch {facts.version} "
            f"(available: {', '.join(facts.available) or 'none'})"
        )
    if backend == "nccl" and device != "cuda":
        raise PreflightError("backend nccl needs CUDA tensors and a GPU; use BACKEND=gloo on a CPU host")
    return backend


def check_planted_backend(backend: str, device: str, env=None) -> None:
    """SUITE_INJECT_BACKEND plants its faults over Gloo on CPU (suite/harness/faulty_backend.py): elsewhere it would
    plant nothing, and a run that a test reads as the fault's outcome would be a clean one."""
    from suite.common.switches import switch

    if switch("SUITE_INJECT_BACKEND", env) is not None and (backend, device) != ("gloo", "cpu"):
        raise PreflightError(
            "the planted faults (SUITE_INJECT_BACKEND) run over Gloo on CPU: run it with BACKEND=gloo DEVICE=cpu"
        )
