"""The backends, one record each in a file of this package (``record.py`` says what a record holds), and which
backend and device a run uses: the rules the launcher's preflight applies before any rank starts and a rank's
init applies again (suite/harness/dist.py), and the error both raise (exit 3).

A file here that binds ``BACKEND = Backend(...)`` is registered when this package is imported
(registry.py)."""

from __future__ import annotations

import dataclasses
import json

from suite.common.backends.record import Backend, resolve
from suite.common.backends.registry import backend_records, names, record_of, records

__all__ = ["Backend", "backend_records", "names", "record_of", "records", "resolve"]


def c10d_name(backend: str) -> str:
    """The name c10d knows ``backend`` by: for a backend that is a c10d group of the suite's own (MPI), the name
    its registration returns (registered then, on a rank: imports torch), else ``backend`` itself."""
    return record_of(backend).call("c10d") or backend


class PreflightError(RuntimeError):
    """The environment cannot run the requested configuration (no group was started)."""


@dataclasses.dataclass(frozen=True)
class TorchFacts:
    """What the device and backend rules ask of torch: its version, the CUDA devices it sees, the backends it has.
    Read where torch is imported anyway: the launcher gets them from the warm torchrun (suite/launch/warm.py), so
    its preflight does not import torch a second time beside it (about 2 s of CPU on every run); a rank reads them
    itself (``here``)."""

    version: str
    cuda_devices: int  # 0: no CUDA device visible
    available: tuple[str, ...]  # the registered backends it has

    @classmethod
    def here(cls) -> TorchFacts:
        import torch

        cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return cls(torch.__version__, cuda, tuple(b.name for b in records() if b.available()))

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
    backend = requested if requested != "auto" else auto_backend(device)
    if backend not in facts.available:
        raise PreflightError(
            f"backend {backend!r} is not built into this torch {facts.version} "
            f"(available: {', '.join(facts.available) or 'none'})"
        )
    record = record_of(backend)
    if device not in record.devices:
        host = "a CPU host" if device == "cpu" else "a GPU"
        raise PreflightError(
            f"backend {backend} needs {' or '.join(d.upper() for d in record.devices)} tensors"
            f"{' and a GPU' if 'cuda' in record.devices else ''}; use BACKEND={auto_backend(device)} on {host}"
        )
    return backend


def auto_backend(device: str) -> str:
    """The backend BACKEND=auto picks for ``device``."""
    return next((b.name for b in records() if device in b.auto_for), "gloo")


def check_planted_backend(backend: str, device: str, env=None) -> None:
    """SUITE_INJECT_BACKEND plants its faults over Gloo on CPU (suite/harness/plant/backend.py): elsewhere it would
    plant nothing, and a run that a test reads as the fault's outcome would be a clean one."""
    from suite.common.switches import switch

    if switch("SUITE_INJECT_BACKEND", env) is not None and (device != "cpu" or not record_of(backend).plants_faults):
        raise PreflightError(
            "the planted faults (SUITE_INJECT_BACKEND) run over Gloo on CPU: run it with BACKEND=gloo DEVICE=cpu"
        )
