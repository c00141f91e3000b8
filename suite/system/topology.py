"""Where this rank runs: NUMA nodes and their CPUs, the GPU's PCI address and NUMA node, and the
nominal PCIe and device-memory peaks (from sysfs, nvidia-smi and the device properties; ``nvidia-smi
topo -m`` is sysinfo's). Reads only; starts no group."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import torch

from suite.system.sysinfo import read_text


def parse_cpulist(text: str) -> list[int]:
    """Kernel cpulist format ("0-3,8,10-11") to a list of CPU numbers."""
    out: list[int] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def numa_nodes() -> dict[int, list[int]]:
    """NUMA node -> CPUs, from sysfs (empty where the kernel does not expose it)."""
    out = {}
    for d in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        cpus = read_text(os.path.join(d, "cpulist"))
        if cpus is not None:
            out[int(os.path.basename(d)[4:])] = parse_cpulist(cpus)
    return out


def gpu_numa(device: torch.device) -> dict | None:
    if device.type != "cuda":
        return None
    p = torch.cuda.get_device_properties(device)
    dom, bus, dev = (getattr(p, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
    info = {"index": device.index, "name": p.name}
    if None not in (dom, bus, dev):
        addr = f"{dom:04x}:{bus:02x}:{dev:02x}.0"
        info["pci"] = addr
        node = read_text(f"/sys/bus/pci/devices/{addr}/numa_node")
        info["numa_node"] = int(node) if node not in (None, "") else None
    return info


def local_topology(device: torch.device) -> dict:
    """This process's CPU affinity and the NUMA nodes it spans, torch's threads, and ``device``'s PCI address and
    NUMA node (None on CPU); the caller adds which rank it is."""
    aff = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    numa = numa_nodes()
    return {
        "affinity": aff,
        "numa_nodes_of_affinity": sorted(n for n, cpus in numa.items() if aff and set(cpus) & set(aff)),
        "numa_nodes": len(numa),
        "torch_threads": torch.get_num_threads(),
        "gpu": gpu_numa(device),
    }


# PCIe payload bandwidth per lane and direction, GB/s, after line encoding
# (PCI-SIG: 2.5/5 GT/s 8b/10b, 8/16/32 GT/s 128b/130b, 64 GT/s PAM4/FLIT ~ 7.56).
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_peak_gbps(device_index: int) -> tuple[float | None, str]:
    """Nominal PCIe bandwidth per direction from nvidia-smi's max link generation and width."""
    if not shutil.which("nvidia-smi"):
        return None, "nvidia-smi not found"
    try:
        r = subprocess.run(
            [
                "nvidia-smi",
                "-i",
                str(device_index),
                "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
        gen, width = (int(x) for x in r.stdout.strip().splitlines()[0].split(","))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None, "nvidia-smi gave no PCIe link information"
    per_lane = PCIE_GBPS_PER_LANE.get(gen)
    if per_lane is None:
        return None, f"unknown PCIe generation {gen}"
    return per_lane * width, f"PCIe gen{gen} x{width}"


def memory_peak_gbps(device: torch.device) -> tuple[float | None, str]:
    """Nominal device memory bandwidth: 2 (double data rate) x memory clock x bus width."""
    p = torch.cuda.get_device_properties(device)
    clock_khz, bus_bits = getattr(p, "memory_clock_rate", 0), getattr(p, "memory_bus_width", 0)
    if not clock_khz or not bus_bits:
        return None, "memory clock/bus width not reported"
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9, f"{bus_bits}-bit at {clock_khz / 1e6:z.2f} GHz"
