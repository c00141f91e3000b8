"""What the GPU cases run on one rank: all_reduce by tensor home and backend, the D2H -> Gloo -> H2D staging,
and the copy bandwidth on rank 0 with the nominal peak it is compared to; the skip when a run has no CUDA."""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from suite.api import (
    Buffers,
    Case,
    CaseSkipped,
    DistContext,
    Session,
    groups,
    topology,
    verify,
)

from .workload import placement_of, summed


def gpu_skip_reason(ctx: DistContext) -> str | None:
    """Why the GPU cases cannot run in this run, or None."""
    if not torch.cuda.is_available():
        build = (
            f"torch {torch.__version__} is a CPU-only build"
            if torch.version.cuda is None
            else "no CUDA device is visible"
        )
        return f"GPU placement case: no CUDA ({build})"
    if ctx.device.type != "cuda":
        return "GPU placement case: this run uses CPU tensors (DEVICE=cpu); make bench-gpu runs it"
    return None


def _skip_without_gpu(ctx: DistContext) -> None:
    """Raise CaseSkipped on every rank unless every rank can run the GPU cases (collective)."""
    reason = gpu_skip_reason(ctx)
    if not ctx.agree_all(reason is None):
        raise CaseSkipped(reason or "GPU placement case: no CUDA on another rank")


def gpu_context(mode: str):
    def context(ctx: DistContext, session: Session) -> DistContext:
        p = placement_of(ctx, session)
        _skip_without_gpu(ctx)
        group, backend = {
            "cuda_tensor_nccl": (p.nccl, groups.NCCL),
            "cpu_tensor_moved_nccl": (p.nccl, groups.NCCL),
            "cuda_tensor_gloo": (p.gloo_cuda, groups.GLOO),
            "cpu_tensor_gloo": (p.gloo_cpu, groups.GLOO),
        }[mode]
        if group is None:
            raise CaseSkipped(f"{mode}: no NCCL group in this run (not built, or more ranks than GPUs on a node)")
        # The case runs (and the harness times and checks) on the mode's group; a CPU tensor on Gloo
        # is a CPU case. A CPU tensor moved for NCCL keeps the GPU context (NCCL's own collectives
        # need CUDA tensors); its record says tensor_home=cpu.
        device = torch.device("cpu") if mode == "cpu_tensor_gloo" else ctx.device
        return groups.with_group(ctx, group, backend=backend, device=device)

    return context


def gpu_build(mode: str, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:
        dev = ctx.device
        home = torch.device("cpu") if mode.startswith("cpu_tensor") else dev
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=home, seed=ctx.seed)
        if mode == "cpu_tensor_moved_nccl":

            def call(_a):
                d = t.to(dev)  # H2D every step: what a CPU tensor costs on a GPU backend
                dist.all_reduce(d, group=ctx.group)
                t.copy_(d)  # D2H into pageable memory: synchronous
                return None
        else:

            def call(a):
                return dist.all_reduce(t, group=ctx.group, async_op=a)

        return summed(ctx, t, call)

    return build


def staging_context(ctx: DistContext, session: Session) -> DistContext:
    p = placement_of(ctx, session)
    _skip_without_gpu(ctx)
    return groups.with_group(ctx, p.gloo_cpu, backend="gloo")


def staging_build(mem: str, non_blocking: bool, count: int, dtype: str):
    dt = verify.DTYPE_OF[dtype]

    def build(ctx: DistContext, session: Session) -> Buffers:  # ctx: Gloo on the GPU run's device
        dev = ctx.device
        d = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=dev, seed=ctx.seed)
        h = torch.empty(count, dtype=dt, pin_memory=(mem == "pinned"))

        def call(_a):
            h.copy_(d, non_blocking=non_blocking)
            if non_blocking:
                # D2H with non_blocking returns before the data lands in host memory;
                # Gloo reads the host buffer, so wait for the copy stream first.
                torch.cuda.current_stream(dev).synchronize()
            dist.all_reduce(h, group=ctx.group)
            d.copy_(h, non_blocking=non_blocking)
            return None

        return summed(ctx, d, call)

    return build


def copy_context(ctx: DistContext, session: Session) -> DistContext:
    _skip_without_gpu(ctx)
    # One copy at a time on one GPU: the link's own bandwidth, on rank 0 alone (a one-rank group).
    group = groups.one_rank_group(ctx, session)
    if ctx.rank != 0:
        raise CaseSkipped(f"copy bandwidth is measured on rank 0 alone: rank {ctx.rank} sits this case out")
    return groups.sub_context(ctx, [0], group)


def _copy_peak(direction: str, ctx: DistContext, session: Session) -> tuple[float | None, str]:
    if direction == "d2d":
        return session.once(("memory_peak", ctx.device.index), lambda: topology.memory_peak_gbps(ctx.device))
    return session.once(("pcie_peak", ctx.device.index), lambda: topology.pcie_peak_gbps(ctx.device.index))


def copy_build(direction: str, mem: str, count: int):
    dt = torch.float32
    moved = 2 if direction == "d2d" else 1  # a device copy reads and writes every byte
    pin = mem == "pinned"
    non_blocking = pin  # a pageable copy is synchronous whatever the flag says

    def build(ctx: DistContext, session: Session) -> Buffers:
        dev = ctx.device
        src_dev = "cpu" if direction == "h2d" else dev
        dst_dev = "cpu" if direction == "d2h" else dev
        src = verify.pattern(0, count, dt, device=src_dev, seed=ctx.seed)
        if direction == "h2d" and pin:
            src = src.pin_memory()
        dst = torch.empty(count, dtype=dt, device=dst_dev, pin_memory=pin and direction == "d2h")

        def call(_a):
            dst.copy_(src, non_blocking=non_blocking)  # blocking mode: the harness syncs the device after it
            return None

        def derive(m, around, session) -> dict:
            peak, _ = _copy_peak(direction, ctx, session)
            return {"pct_of_peak": 100 * count * 4 * moved / m.median_s / 1e9 / peak if peak else None}

        return Buffers(
            call=call, check=lambda: verify.count_wrong(dst.cpu(), src.cpu()), outputs=lambda: [dst], derive=derive
        )

    return build


def resolve_copy(case: Case, direction: str, ctx: DistContext, session: Session) -> Case:
    peak, link = _copy_peak(direction, ctx, session)
    return dataclasses.replace(case, fields={**case.fields, "nominal_peak_gbps": peak, "link": link})
