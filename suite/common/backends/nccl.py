"""NCCL: torch's GPU backend, one GPU per rank, BACKEND=auto's choice where a GPU is visible."""

from __future__ import annotations

from suite.common.backends.record import Backend


def available() -> bool:
    import torch.distributed as dist

    return dist.is_nccl_available()


def version() -> str | None:
    """NCCL's version where this build has it and a GPU can load it, else None."""
    import torch
    import torch.distributed as dist

    if not (dist.is_nccl_available() and torch.cuda.is_available()):
        return None
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # a build without a loadable libnccl
        return None


BACKEND = Backend(
    name="nccl",
    order=2,
    lane_order=1,
    label="NCCL",
    devices=("cuda",),
    auto_for=("cuda",),
    available=available,
    version=version,
    run_env="suite.common.flight_recorder:flight_recorder_env",
    one_gpu_per_rank=True,
    cuda_graphs=True,
    lane_tuning=("NCCL_ALGO", "NCCL_PROTO"),
    model_choice="suite.model.backend_choice:nccl_choice",
)
