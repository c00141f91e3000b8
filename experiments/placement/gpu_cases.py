"""The GPU cases' declarations (they skip, saying why, without CUDA): all_reduce by tensor home and backend,
the D2H -> Gloo -> H2D staging, and the copy bandwidth on rank 0 against the nominal peak. Their builders are in
gpu.py; cases.py turns them into tests."""

from __future__ import annotations

import dataclasses

from suite.api import BenchConfig, Bytes, Case, Timing, collectives

from .declare import EXPERIMENT, all_reduce_case, count_of
from .gpu import copy_build, copy_context, gpu_build, gpu_context, resolve_copy, staging_build, staging_context


GPU_MODES = ("cuda_tensor_nccl", "cpu_tensor_moved_nccl", "cuda_tensor_gloo", "cpu_tensor_gloo")


def gpu_placement_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """all_reduce by tensor home (CUDA, CPU) and backend (NCCL, Gloo)."""
    dtype = cfg.dtypes[0]
    out = []
    for mode in GPU_MODES:
        for s, count in collectives.counts(cfg.compared_sizes(), dtype):
            out.append(
                all_reduce_case(
                    f"{mode}-{s}B",
                    {"placement": mode},
                    count,
                    dtype,
                    build=gpu_build(mode, count, dtype),
                    context=gpu_context(mode),
                    fields={
                        "table": "gpu_placement",
                        "tensor_home": "cpu" if mode.startswith("cpu_tensor") else "cuda",
                    },
                )
            )
    return out


def gpu_staging_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """D2H -> Gloo all_reduce on host -> H2D, pinned vs pageable host memory, non_blocking on/off."""
    dtype = cfg.dtypes[0]
    out = []
    for s in cfg.compared_sizes():
        count = count_of(s, dtype)
        for mem in ("pinned", "pageable"):
            for nb in (False, True):
                out.append(
                    all_reduce_case(
                        f"{mem}-{'non_blocking' if nb else 'blocking'}-{s}B",
                        {"host_memory": mem, "non_blocking": nb},
                        count,
                        dtype,
                        build=staging_build(mem, nb, count, dtype),
                        context=staging_context,
                        timing=Timing(mode="blocking"),
                        fields={"table": "gpu_staging", "pipeline": "D2H -> Gloo all_reduce on host -> H2D"},
                    )
                )
    return out


COPY_KINDS = (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable"), ("d2d", "device"))


def copy_bandwidth_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
    """Standalone H2D, D2H (pinned, pageable) and D2D copies on rank 0's GPU vs the nominal peak."""
    out = []
    for direction, mem in COPY_KINDS:
        for s in cfg.sizes():
            if s <= 0:
                continue
            count = s // 4
            moved = 2 if direction == "d2d" else 1  # a device copy reads and writes every byte
            case = Case(
                experiment=EXPERIMENT,
                op="copy",
                label=f"{direction}-{mem}-{s}B",
                identity={"direction": direction, "host_memory": mem},
                bytes=Bytes(
                    size_bytes=count * 4,
                    count=count,
                    dtype="float32",
                    bw_op=None,
                    definition="bytes copied (a copy has no bus factor: algbw is the copy rate)",
                ),
                build=copy_build(direction, mem, count),
                context=copy_context,
                timing=Timing(mode="blocking"),
                skip=None if count else (lambda ctx, cfg, s=s: f"{s} B is smaller than one float32 element"),
                fields={"table": "copy", "non_blocking": mem == "pinned", "bytes_moved_factor": moved, "copy_rank": 0},
                provenance={
                    "nominal_peak_gbps": "modelled: 2 x memory clock x bus width (DDR), from the device properties"
                    if direction == "d2d"
                    else "modelled: PCIe payload GB/s per lane (PCI-SIG, after line encoding) x link width, "
                    "from nvidia-smi's max link generation and width",
                    "pct_of_peak": "derived: 100 x size_bytes x bytes_moved_factor / time_us / nominal_peak_gbps",
                },
            )
            out.append(
                dataclasses.replace(
                    case,
                    resolve=lambda case, ctx, cfg, session, direction=direction: resolve_copy(
                        case, direction, ctx, session
                    ),
                )
            )
    return out
