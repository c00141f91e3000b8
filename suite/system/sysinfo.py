"""Environment capture: what a result needs to be reproducible and comparable.

``collect_local`` gathers facts about this process's host; the plugin gathers
them from every rank once per session (all ranks take part in the same
collective) and rank 0 stores them in pytest-benchmark's ``machine_info``.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path

from suite.system import cpu_load, cpuidle

ENV_PREFIXES = (
    "NCCL_",
    "GLOO_",
    "TORCH_",
    "MASTER_",
    "OMP_",
    "MKL_",
    "CUDA_",
    "SLURM_",
    "LINK_",
    "NNODES",
    "NODE_RANK",
    "NPROC",
)
# Never record secrets that happen to share a prefix.
_SECRET = re.compile(r"(TOKEN|SECRET|PASSWORD|KEY)", re.I)


def relevant_env(env: dict | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES) and not _SECRET.search(k)}


def read_text(path: str) -> str | None:
    """A small text file's stripped content (/proc, /sys, cgroup files), None where it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    text = read_text("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def memory_bytes() -> int | None:
    import psutil

    return psutil.virtual_memory().total


def container_limits() -> dict:
    """cgroup v2/v1 CPU and memory limits and the /dev/shm size."""
    out: dict = {}
    cpu_max = read_text("/sys/fs/cgroup/cpu.max")  # v2: "quota period" or "max period"
    if cpu_max:
        quota, period = cpu_max.split()[:2]
        out["cgroup_cpus"] = None if quota == "max" else int(quota) / int(period)
    else:
        quota, period = (
            read_text("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
            read_text("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
        )
        if quota and period and int(quota) > 0:
            out["cgroup_cpus"] = int(quota) / int(period)
        else:
            out["cgroup_cpus"] = None
    mem = read_text("/sys/fs/cgroup/memory.max") or read_text("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    out["cgroup_memory_bytes"] = None if not mem or mem == "max" or int(mem) >= 1 << 60 else int(mem)
    try:
        out["dev_shm_bytes"] = shutil.disk_usage("/dev/shm").total
    except OSError:
        out["dev_shm_bytes"] = None
    out["in_container"] = Path("/.dockerenv").exists() or "docker" in (read_text("/proc/1/cgroup") or "")
    return out


def git_commit(repo: Path | None = None) -> str | None:
    repo = repo or Path(__file__).resolve().parents[2]  # the checkout: suite/system/ is two levels down
    try:
        r = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        r = None
    if r is not None and r.returncode == 0:
        return r.stdout.strip()
    # Inside the image there is no .git; the build records the commit instead.
    from suite.common.switches import switch  # the switch table (here only where git cannot tell)

    return switch("SUITE_GIT_COMMIT") or read_text(str(repo / "GIT_COMMIT"))


def torch_versions() -> dict:
    import torch

    from suite.common import backends

    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        **{b.name: b.version() for b in backends.records()},  # each backend's record says what it records
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
    }
    return info


def nccl_conf_files() -> dict[str, str]:
    """NCCL settings that do not come from the environment: KEY=VALUE lines in
    /etc/nccl.conf (system-wide) and the user's file, ~/.nccl.conf up to NCCL 2.22,
    $NCCL_CONF_FILE since 2.23 (NCCL docs, "Environment Variables")."""
    paths = [os.environ.get("NCCL_CONF_FILE") or os.path.expanduser("~/.nccl.conf"), "/etc/nccl.conf"]
    return {p: text for p in paths if p and (text := read_text(p)) is not None}


def nvidia_topology() -> str | None:
    """``nvidia-smi topo -m`` (the GPU/NIC/CPU affinity matrix), None without nvidia-smi or on error."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        r = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def gpu_info() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"gpus": []}
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append({"index": i, "name": p.name, "memory_bytes": p.total_memory, "capability": f"{p.major}.{p.minor}"})
    out: dict = {"gpus": gpus, "nccl_conf": nccl_conf_files()}
    if shutil.which("nvidia-smi"):
        for key, args in (("driver", ["--query-gpu=driver_version", "--format=csv,noheader"]),):
            try:
                r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=10)
                out[key] = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else None
            except (OSError, subprocess.TimeoutExpired):
                out[key] = None
        out["topology"] = nvidia_topology()
    return out


def collect_local() -> dict:
    """Facts about this host and process (cheap; no collectives)."""
    import torch

    allowed = cpu_load.allowed_cpus()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(allowed) if allowed else None,
        "cpus_allowed": cpu_load.cpu_list(allowed) if allowed else None,
        "torch_threads": torch.get_num_threads(),
        "load_avg_start": cpu_load.load_average(),
        "memory_bytes": memory_bytes(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "container": container_limits(),
        "cpuidle": cpuidle.idle_states(),
        "env": relevant_env(),
    }


def _host_share(h: dict, infos: list[dict]) -> None:
    """A host's ranks against its cores (``cpu_load.cpu_share``), in ``h["cpu_share"]``: the CPUs any of
    its ranks may run on (they compete for the union), bounded by the cgroup quota, and the most intra-op
    threads of a rank."""
    lists = [i.get("cpus_allowed") for i in infos]
    union = set().union(*(cpu_load.parse_cpu_list(x) for x in lists if x)) if all(lists) else set()
    if union:
        h["cpus_allowed"], h["affinity_cpus"] = cpu_load.cpu_list(union), len(union)
    threads = [i["torch_threads"] for i in infos if i.get("torch_threads")]
    usable = cpu_load.usable_cpus(len(union) or None, (h.get("container") or {}).get("cgroup_cpus"))
    h["cpu_share"] = cpu_load.cpu_share(len(infos), max(threads) if threads else None, usable)


def collect_global(per_rank: list[dict]) -> dict:
    """Combine every rank's ``collect_local`` into the run's machine_info entry."""
    hosts: dict[str, dict] = {}
    for rank, info in enumerate(per_rank):
        h = hosts.setdefault(info["hostname"], {k: v for k, v in info.items() if k != "hostname"} | {"ranks": []})
        h["ranks"].append(rank)
    for h in hosts.values():
        _host_share(h, [per_rank[r] for r in h["ranks"]])
    return {
        "hostnames": [i["hostname"] for i in per_rank],
        "n_hosts": len(hosts),
        "hosts": hosts,
        "versions": torch_versions(),
        "gpu": gpu_info(),
        "suite_commit": git_commit(),
    }
