"""Which backend and device a run uses: the rules the launcher's preflight applies before any rank starts and a
rank's init applies again (suite/harness/dist.py), and the error both raise (exit 3)."""

from __future__ import annotations

import importlib.util


class PreflightError(RuntimeError):
    """The environment cannot run the requested configuration (no group was started)."""


def resolve_device(requested: str) -> str:
    """auto -> cuda when a GPU is visible, else cpu; cuda without a GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise PreflightError(
            "DEVICE=cuda but no CUDA device is visible to this process "
            "(check CUDA_VISIBLE_DEVICES / the container's GPU reservation), or use DEVICE=cpu"
        )
    return requested


def backend_available(backend: str) -> bool:
    import torch.distributed as dist

    return {
        "gloo": dist.is_gloo_available,
        "nccl": dist.is_nccl_available,
        # torch's own MPI, else the suite's over mpi4py (suite/harness/mpi_backend.py)
        "mpi": lambda: dist.is_mpi_available() or importlib.util.find_spec("mpi4py") is not None,
        "ucc": lambda: getattr(dist, "is_ucc_available", lambda: False)(),
    }[backend]()


def resolve_backend(requested: str, device: str) -> str:
    """auto -> nccl for cuda, gloo for cpu; reject what the build or device cannot do."""
    import torch

    backend = requested
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    if not backend_available(backend):
        have = [b for b in ("gloo", "nccl", "mpi", "ucc") if backend_available(b)]
        raise PreflightError(
            f"backend {backend!r} is not built into this torch {torch.__version__} "
            f"(available: {', '.join(have) or 'none'})"
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
