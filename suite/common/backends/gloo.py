"""Gloo: torch's CPU (and CUDA-tensor) backend, BACKEND=auto's choice on a CPU host."""

from __future__ import annotations

from suite.common.backends.record import Backend


def available() -> bool:
    import torch.distributed as dist

    return dist.is_gloo_available()


BACKEND = Backend(
    name="gloo",
    order=1,
    lane_order=2,
    label="Gloo",
    devices=("cuda", "cpu"),
    auto_for=("cpu",),
    available=available,
    version=available,
    plants_faults=True,
    cannot={
        # ProcessGroupGloo::send/recv hand the tensor's raw pointer to the TCP transport without a device check
        "p2p_cuda": "Gloo point-to-point takes CPU tensors only; run p2p with DEVICE=cpu or BACKEND=nccl",
        # PowerSGD chains all_reduces per bucket in future callbacks; on Gloo the callbacks of different buckets
        # issue them in a different order on each rank, a collective mismatch that aborts the process (gloo
        # "Received data size doesn't match"; pytorch/pytorch#58467)
        "powersgd_buckets": "PowerSGD on Gloo needs the model in one DDP bucket",
    },
    model_choice="suite.model.backend_choice:gloo_choice",
    model_reference="suite.model.backend_choice:GLOO",
)
