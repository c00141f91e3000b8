"""Placement: where ranks and tensors live, and what it costs.

CPU cases (run everywhere; multi-node under compose or Slurm):

- *topology*: per rank its host, node, CPU affinity and NUMA node(s); GPU
  hosts add each GPU's NUMA node and ``nvidia-smi topo -m``. One record
  (op ``topology``; its time fields are a world barrier's latency).
- *pairs*: send/recv (both directions at once) between rank 0 and a rank on
  the same node vs a rank on another node; *groups*: all_reduce inside a group
  of ranks on one node vs a group of the same size spread over nodes. Nodes
  come from the ranks' hostnames (``DistContext.node_of``); on one host every
  pair is intra-node and the inter-node cases skip saying so.
- *hierarchical vs flat all_reduce* (``suite.algorithms``): intra-node reduce,
  all_reduce among node leaders, intra-node broadcast vs one flat all_reduce,
  results exact and equal. ``SUITE_FAKE_NODES=k`` splits the ranks into k
  contiguous blocks *for grouping only* (hostnames and traffic stay real) to
  exercise the two-level path on one host.
- *affinity and threads*: all_reduce with every thread of each rank pinned to
  one core (``os.sched_setaffinity`` per thread; rank by local rank) vs the
  inherited mask, with ``torch.set_num_threads`` 1 vs all cores; the state is
  restored after each case.
- *contiguity*: a transposed (non-contiguous) view through ``all_reduce``
  (Gloo copies it to a contiguous buffer and back: a hidden copy) and through
  send/recv (Gloo rejects non-contiguous tensors, so the case copies
  explicitly, as user code must), vs contiguous tensors.

GPU cases (skip with the reason on a host or run without CUDA):

- all_reduce of a CUDA tensor on NCCL vs a CPU tensor moved to the GPU and
  back every step (NCCL) vs a CUDA tensor on Gloo vs a CPU tensor on Gloo;
- explicit staging device -> host -> Gloo -> device with pinned vs pageable
  host buffers and ``non_blocking`` on/off (non_blocking D2H needs a stream
  sync before Gloo reads the buffer; the exact check would catch a missing one);
- standalone H2D, D2H (pinned, pageable) and D2D copy bandwidth vs size on
  rank 0, against the nominal peak: PCIe generation x width from nvidia-smi
  for host copies, 2 x memory clock x bus width for D2D (a copy reads and
  writes, so it is compared as 2*S/t).
"""

from __future__ import annotations

import datetime
import glob
import math
import os
import shutil
import subprocess
from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist

from experiments.backends import maybe_corrupt
from suite import algorithms, verify
from suite.config import BenchConfig
from suite.dist import DistContext
from suite.plugin import submit
from suite.results import make_record
from suite.timing import measure

EXPERIMENT = "placement"
N_SIZES = 3
"""Pair, group, hierarchy and contiguity cases run at the largest N_SIZES sizes of the sweep."""
FAKE_NODES_ENV = "SUITE_FAKE_NODES"

# PCIe payload bandwidth per lane and direction, GB/s, after line encoding
# (PCI-SIG: 2.5/5 GT/s 8b/10b, 8/16/32 GT/s 128b/130b, 64 GT/s PAM4/FLIT ~ 7.56).
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def fake_nodes_from_env(env=None) -> int:
    """SUITE_FAKE_NODES as an int (0 = off); a bad value is an error, not a silent default."""
    env = os.environ if env is None else env
    raw = env.get(FAKE_NODES_ENV, "").strip()
    if not raw:
        return 0
    try:
        k = int(raw)
    except ValueError:
        raise ValueError(f"{FAKE_NODES_ENV}={raw!r} is not an integer") from None
    if k < 0:
        raise ValueError(f"{FAKE_NODES_ENV} must be >= 0, got {k}")
    return k


def compared_sizes(cfg: BenchConfig) -> list[int]:
    return [s for s in cfg.sizes() if s > 0][-N_SIZES:]


def _elsize(dtype: str) -> int:
    return torch.empty((), dtype=verify.DTYPE_OF[dtype]).element_size()


def _count(size: int, dtype: str) -> int:
    return size // _elsize(dtype)


# --- groups: created once per session, on every rank, in the same order ---------------------

@dataclass
class Placement:
    real_layout: tuple[int, ...]
    """Node of every rank from its hostname."""
    pairs: dict
    """intra/inter -> (rank a, rank b) or None."""
    groups: dict
    """intra/inter -> (ranks, process group or NON_GROUP_MEMBER) or None."""
    hierarchy: algorithms.Hierarchy
    fake_nodes: int
    gloo_cpu: object | None = None
    """GPU runs: a Gloo group for CPU tensors (staging, CPU baselines)."""
    gloo_cuda: object | None = None
    """GPU runs: a Gloo group used with CUDA tensors."""
    nccl: object | None = None


def plan_pairs_and_groups(layout: tuple[int, ...]) -> tuple[dict, dict]:
    """Rank pairs and equal-sized groups on one node vs across nodes (pure)."""
    nodes = algorithms.ranks_by_node(layout)
    node0 = nodes[0]
    pairs = {"intra": (node0[0], node0[1]) if len(node0) > 1 else None,
             "inter": (node0[0], nodes[1][0]) if len(nodes) > 1 else None}
    if len(nodes) > 1:
        m = min(len(node0), len(nodes))
        intra = node0[:m] if m > 1 else None
        inter = tuple(n[0] for n in nodes[:m]) if m > 1 else None
    else:
        intra, inter = (node0 if len(node0) > 1 else None), None
    return pairs, {"intra": intra, "inter": inter}


@pytest.fixture(scope="session")
def placement(dist_ctx: DistContext) -> Placement:
    ctx = dist_ctx
    timeout = datetime.timedelta(seconds=ctx.timeout_s)
    try:
        fake = fake_nodes_from_env()
        grouping = algorithms.node_layout(ctx.hostnames, fake)
    except ValueError as e:  # same env on every rank: every rank fails alike
        pytest.fail(str(e), pytrace=False)
    real = algorithms.node_layout(ctx.hostnames)
    pairs, granks = plan_pairs_and_groups(real)
    groups = {}
    for kind in ("intra", "inter"):
        ranks = granks[kind]
        groups[kind] = (ranks, dist.new_group(list(ranks), timeout=timeout)) if ranks else None
    hierarchy = algorithms.build_hierarchy(grouping, ctx.rank, timeout=timeout)
    p = Placement(real_layout=real, pairs=pairs, groups=groups, hierarchy=hierarchy, fake_nodes=fake)
    if ctx.device.type == "cuda":
        p.gloo_cuda = ctx.group if ctx.backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
        p.gloo_cpu = dist.new_group(backend="gloo", timeout=timeout)
        if ctx.backend == "nccl":
            p.nccl = ctx.group
        elif dist.is_nccl_available() and ctx.local_world_size <= torch.cuda.device_count():
            # (NCCL refuses two ranks on one GPU: Gloo-on-CUDA runs with several ranks per GPU skip NCCL modes)
            p.nccl = dist.new_group(backend="nccl", timeout=timeout)
    return p


# --- parametrization ------------------------------------------------------------------------

def pytest_generate_tests(metafunc):
    cfg = metafunc.config._suite_cfg
    sizes = compared_sizes(cfg)
    fx = metafunc.fixturenames
    dtype = cfg.dtypes[0]

    def sized(name, kinds):
        cases = [(k, s) for k in kinds for s in sizes if _count(s, dtype)]
        metafunc.parametrize(name, cases, ids=[f"{k}-{s}B" for k, s in cases])

    if "pair_case" in fx:
        sized("pair_case", ("intra", "inter"))
    if "group_case" in fx:
        sized("group_case", ("intra", "inter"))
    if "hier_case" in fx:
        cases = [(a, d, s) for d in cfg.dtypes for s in sizes for a in ("flat", "hierarchical") if _count(s, d)]
        metafunc.parametrize("hier_case", cases, ids=[f"{a}-{d}-{s}B" for a, d, s in cases])
    if "affinity_case" in fx:
        cases = [(p, t) for t in ("1", "all") for p in ("unpinned", "pinned")]
        metafunc.parametrize("affinity_case", cases, ids=[f"{p}-threads_{t}" for p, t in cases])
    if "contig_case" in fx:
        cases = [(op, lay, s) for op in ("all_reduce", "send_recv") for s in sizes for lay in ("contiguous", "transposed")
                 if _count(s, dtype)]
        metafunc.parametrize("contig_case", cases, ids=[f"{o}-{l}-{s}B" for o, l, s in cases])
    if "gpu_case" in fx:
        sized("gpu_case", ("cuda_tensor_nccl", "cpu_tensor_moved_nccl", "cuda_tensor_gloo", "cpu_tensor_gloo"))
    if "staging_case" in fx:
        cases = [(mem, nb, s) for s in sizes for mem in ("pinned", "pageable") for nb in (False, True)]
        metafunc.parametrize("staging_case", cases,
                             ids=[f"{m}-{'non_blocking' if nb else 'blocking'}-{s}B" for m, nb, s in cases])
    if "copy_case" in fx:
        kinds = [("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable"), ("d2d", "device")]
        cases = [(d, m, s) for d, m in kinds for s in cfg.sizes() if s > 0]
        metafunc.parametrize("copy_case", cases, ids=[f"{d}-{m}-{s}B" for d, m, s in cases])


# --- topology -------------------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


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
        cpus = _read(os.path.join(d, "cpulist"))
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
        node = _read(f"/sys/bus/pci/devices/{addr}/numa_node")
        info["numa_node"] = int(node) if node not in (None, "") else None
    return info


def local_topology(ctx: DistContext) -> dict:
    aff = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    numa = numa_nodes()
    return {"rank": ctx.rank, "hostname": ctx.hostnames[ctx.rank], "local_rank": ctx.local_rank,
            "affinity": aff, "numa_nodes_of_affinity": sorted(n for n, cpus in numa.items()
                                                              if aff and set(cpus) & set(aff)),
            "numa_nodes": len(numa), "torch_threads": torch.get_num_threads(), "gpu": gpu_numa(ctx.device)}


def nvidia_topology() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        r = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _barrier_fn(ctx: DistContext):
    kw = {"device_ids": [ctx.device.index]} if ctx.backend == "nccl" else {}
    return lambda a: dist.barrier(group=ctx.group, async_op=a, **kw)


def test_topology(dist_ctx: DistContext, placement: Placement, bench_cfg: BenchConfig, benchmark, request):
    ctx = dist_ctx
    per_rank: list = [None] * ctx.world_size
    dist.all_gather_object(per_rank, local_topology(ctx), group=ctx.group)
    m = measure(ctx, bench_cfg, _barrier_fn(ctx), iters=min(bench_cfg.iters, 5), warmup_iters=1)
    rec = make_record(experiment=EXPERIMENT, op="topology", backend=ctx.backend, device=ctx.device.type,
                      dtype="none", world_size=ctx.world_size, size_bytes=0, count=0, in_place=False, m=m,
                      n_wrong=0, table="topology", timed="barrier", ranks=per_rank,
                      nodes=list(placement.real_layout), hosts=len(set(ctx.hostnames)),
                      grouping_nodes=list(algorithms.node_layout(ctx.hostnames, placement.fake_nodes)),
                      fake_nodes=placement.fake_nodes,
                      nvidia_smi_topo=nvidia_topology() if ctx.rank == 0 else None)
    submit(request, benchmark, m, rec)


# --- intra- vs inter-node pairs and groups ----------------------------------------------------

def _one_host_reason(ctx: DistContext, what: str) -> str:
    return (f"all {ctx.world_size} ranks run on one host ({ctx.hostnames[0]}): every {what} is intra-node; "
            "a multi-node run (docker compose, Slurm) shows inter-node")


def test_pair(pair_case, dist_ctx: DistContext, placement: Placement, bench_cfg: BenchConfig, benchmark, request):
    kind, size = pair_case
    ctx = dist_ctx
    pair = placement.pairs[kind]
    if pair is None:
        pytest.skip(_one_host_reason(ctx, "pair") if kind == "inter" else "node 0 has a single rank: no intra-node pair")
    dtype = bench_cfg.dtypes[0]
    dt, count = verify.DTYPE_OF[dtype], _count(size, dtype)
    a, b = pair
    me = ctx.rank
    peer = b if me == a else a if me == b else None

    def buffers():
        if peer is None:
            return None, None, None
        send = verify.pattern(me, count, dt, world_size=ctx.world_size, device=ctx.device)
        recv = torch.full((count,), -1, dtype=dt, device=ctx.device)
        ops = [dist.P2POp(dist.isend, send, peer=peer, group=ctx.group),
               dist.P2POp(dist.irecv, recv, peer=peer, group=ctx.group)]
        return ops, recv, verify.pattern(peer, count, dt, world_size=ctx.world_size, device=ctx.device)

    ops, recv, want = buffers()
    if ops:
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    ctx.sync_device()
    n_wrong = verify.global_wrong(verify.count_wrong(recv, want) if ops else 0, ctx.group, ctx.device)
    timed, _, _ = buffers()
    m = measure(ctx, bench_cfg, lambda _a: dist.batch_isend_irecv(timed) if timed else None)
    rec = make_record(experiment=EXPERIMENT, op="send_recv", backend=ctx.backend, device=ctx.device.type,
                      dtype=dtype, world_size=ctx.world_size, size_bytes=count * dt.itemsize, count=count,
                      in_place=False, m=m, n_wrong=n_wrong, table="pairs", placement=kind, ranks=list(pair),
                      nodes=[placement.real_layout[a], placement.real_layout[b]],
                      pattern="both directions at once (batch_isend_irecv); size is per direction")
    submit(request, benchmark, m, rec)


def test_group(group_case, dist_ctx: DistContext, placement: Placement, bench_cfg: BenchConfig, benchmark, request):
    kind, size = group_case
    ctx = dist_ctx
    entry = placement.groups[kind]
    if entry is None:
        pytest.skip(_one_host_reason(ctx, "group") if kind == "inter" else "node 0 has a single rank: no intra-node group")
    ranks, group = entry
    dtype = bench_cfg.dtypes[0]
    dt, count = verify.DTYPE_OF[dtype], _count(size, dtype)
    member = ctx.rank in ranks
    gsize = len(ranks)

    def fresh():
        return verify.pattern(ranks.index(ctx.rank), count, dt, world_size=gsize, device=ctx.device) if member else None

    t = fresh()
    if member:
        dist.all_reduce(t, group=group)
    ctx.sync_device()
    local = verify.count_wrong(t, verify.reduce_expected("sum", gsize, count, dt, device=ctx.device)) if member else 0
    n_wrong = verify.global_wrong(local, ctx.group, ctx.device)
    timed = fresh()
    m = measure(ctx, bench_cfg, lambda a: dist.all_reduce(timed, group=group, async_op=a) if member else None)
    rec = make_record(experiment=EXPERIMENT, op="all_reduce", backend=ctx.backend, device=ctx.device.type,
                      dtype=dtype, world_size=gsize, size_bytes=count * dt.itemsize, count=count, in_place=True,
                      m=m, n_wrong=n_wrong, redop="sum", table="groups", placement=kind, ranks=list(ranks),
                      nodes=[placement.real_layout[r] for r in ranks], job_world_size=ctx.world_size)
    submit(request, benchmark, m, rec)


# --- hierarchical vs flat all_reduce -------------------------------------------------------------

def test_hierarchical(hier_case, dist_ctx: DistContext, placement: Placement, bench_cfg: BenchConfig, benchmark,
                      request):
    algo, dtype, size = hier_case
    ctx = dist_ctx
    h = placement.hierarchy
    dt, count = verify.DTYPE_OF[dtype], _count(size, dtype)
    n = ctx.world_size

    def fresh():
        return verify.pattern(ctx.rank, count, dt, world_size=n, device=ctx.device)

    def run(t):
        if algo == "flat":
            dist.all_reduce(t, group=ctx.group)
        else:
            algorithms.hierarchical_all_reduce(t, h)

    flat = fresh()
    dist.all_reduce(flat, group=ctx.group)
    out = fresh()
    run(out)
    ctx.sync_device()
    maybe_corrupt(ctx, algo, out)
    expected = verify.reduce_expected("sum", n, count, dt, device=ctx.device)
    n_wrong = verify.global_wrong(verify.count_wrong(out, expected) + verify.count_wrong(out, flat),
                                  ctx.group, ctx.device)
    timed = fresh()
    m = measure(ctx, bench_cfg, lambda a: run(timed), mode="blocking")
    rec = make_record(experiment=EXPERIMENT, op="all_reduce", variant=f"all_reduce:{algo}", backend=ctx.backend,
                      device=ctx.device.type, dtype=dtype, world_size=n, size_bytes=count * dt.itemsize, count=count,
                      in_place=True, m=m, n_wrong=n_wrong, redop="sum", table="hierarchical", algorithm=algo,
                      grouping_nodes=[list(r) for r in h.nodes], fake_nodes=placement.fake_nodes,
                      hosts=len(set(ctx.hostnames)))
    submit(request, benchmark, m, rec)


# --- affinity and thread count ------------------------------------------------------------------

def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


@dataclass(frozen=True)
class _SavedPlacement:
    masks: dict
    """thread id -> CPU mask before pinning (empty: nothing was pinned)."""
    default_mask: frozenset
    """The process's mask, for threads started while pinned."""
    threads: int


def _pin_process(cpu: int) -> _SavedPlacement:
    """Pin every thread of this process (Gloo's workers included) to ``cpu``."""
    masks, default = {}, frozenset(os.sched_getaffinity(0))
    for tid in _thread_ids():
        try:
            masks[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {cpu})
        except OSError:  # a thread that exited meanwhile
            pass
    return _SavedPlacement(masks=masks, default_mask=default, threads=torch.get_num_threads())


def _restore(saved: _SavedPlacement) -> None:
    if saved.masks:
        for tid in _thread_ids():  # threads started while pinned get the process's old mask
            try:
                os.sched_setaffinity(tid, saved.masks.get(tid, saved.default_mask))
            except OSError:
                pass
    torch.set_num_threads(saved.threads)


def test_affinity(affinity_case, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    pinning, threads = affinity_case
    ctx = dist_ctx
    ok = hasattr(os, "sched_setaffinity")
    if not ctx.agree_all(ok):
        pytest.skip("os.sched_setaffinity is not available on this platform")
    sizes = compared_sizes(bench_cfg)
    if not sizes:
        pytest.skip("no non-zero size in the sweep")
    dtype = bench_cfg.dtypes[0]
    dt, count = verify.DTYPE_OF[dtype], _count(sizes[-1], dtype)
    cpus = sorted(os.sched_getaffinity(0))
    n_threads = 1 if threads == "1" else len(cpus)
    core = cpus[ctx.local_rank % len(cpus)]
    saved = _pin_process(core) if pinning == "pinned" else _SavedPlacement(
        masks={}, default_mask=frozenset(cpus), threads=torch.get_num_threads())
    torch.set_num_threads(n_threads)
    try:
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device)
        dist.all_reduce(t, group=ctx.group)
        ctx.sync_device()
        n_wrong = verify.global_wrong(
            verify.count_wrong(t, verify.reduce_expected("sum", ctx.world_size, count, dt, device=ctx.device)),
            ctx.group, ctx.device)
        timed = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size, device=ctx.device)
        m = measure(ctx, bench_cfg, lambda a: dist.all_reduce(timed, group=ctx.group, async_op=a))
    finally:
        _restore(saved)
    # The next case must find the process as this one did (all threads' masks, thread count).
    leaked = sorted(os.sched_getaffinity(0)) != cpus or torch.get_num_threads() != saved.threads
    if not ctx.agree_all(not leaked):
        pytest.fail("affinity or thread count was not restored after the case", pytrace=False)
    rec = make_record(experiment=EXPERIMENT, op="all_reduce", backend=ctx.backend, device=ctx.device.type,
                      dtype=dtype, world_size=ctx.world_size, size_bytes=count * dt.itemsize, count=count,
                      in_place=True, m=m, n_wrong=n_wrong, redop="sum", table="affinity", pinning=pinning,
                      torch_threads=n_threads, cpus_available=len(cpus),
                      pinned_core=core if pinning == "pinned" else None,
                      ranks_per_core=math.ceil(ctx.local_world_size / len(cpus)) if pinning == "pinned" else None)
    submit(request, benchmark, m, rec)


# --- contiguous vs non-contiguous -------------------------------------------------------------

def matrix_shape(count: int) -> tuple[int, int]:
    """(rows, cols) with rows a power of two near sqrt(count) dividing count; (1, count) if none."""
    rows = 1 << max(0, int(math.log2(max(count, 1))) // 2)
    while rows > 1 and count % rows:
        rows //= 2
    return rows, count // rows


def _probe_noncontiguous_send(ctx: DistContext) -> str | None:
    """Whether send accepts a non-contiguous tensor (rank 0 -> 1); None if it does."""
    if ctx.world_size < 2:
        return None
    reason, work = None, None
    base = torch.zeros(2, 2, device=ctx.device)
    if ctx.rank == 0:
        try:
            work = dist.isend(base.t(), dst=1, group=ctx.group)
        except Exception as e:
            reason = f"{ctx.backend} send rejects a non-contiguous tensor: {str(e).strip().splitlines()[0][:120]}"
    flag = torch.tensor([0 if reason else 1], device=ctx.device)
    dist.broadcast(flag, src=0, group=ctx.group)
    if flag.item() and ctx.rank == 1:  # it was accepted: match it
        dist.recv(torch.zeros(4, device=ctx.device), src=0, group=ctx.group)
    if work is not None:
        work.wait()
    if not flag.item() and reason is None:
        reason = f"{ctx.backend} send rejects a non-contiguous tensor (on rank 0)"
    return reason


def test_contiguity(contig_case, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    op, layout, size = contig_case
    ctx = dist_ctx
    if op == "send_recv" and ctx.world_size < 2:
        pytest.skip("send_recv needs at least 2 ranks")
    dtype = bench_cfg.dtypes[0]
    dt, count = verify.DTYPE_OF[dtype], _count(size, dtype)
    rows, cols = matrix_shape(count)
    if layout == "transposed" and (rows == 1 or cols == 1):
        pytest.skip(f"{count} elements have no 2-D shape whose transpose is non-contiguous")
    n, me = ctx.world_size, ctx.rank
    extra = {}

    def view_of(base):
        # The tensor handed to torch.distributed: a (cols, rows) transposed view, or the contiguous base.
        return base.view(rows, cols).t() if layout == "transposed" else base

    if op == "all_reduce":
        def setup():
            base = verify.pattern(me, count, dt, world_size=n, device=ctx.device)
            return base, view_of(base)

        def run(v, a):
            return dist.all_reduce(v, group=ctx.group, async_op=a)

        base, v = setup()
        run(v, False)
        ctx.sync_device()
        wrong = verify.count_wrong(base, verify.reduce_expected("sum", n, count, dt, device=ctx.device))
        _, tv = setup()
        fn = lambda a: run(tv, a)  # noqa: E731
        extra["hidden_copy"] = ("the backend copies a non-contiguous input to a contiguous buffer and back"
                                if layout == "transposed" else "none")
    else:
        reject = _probe_noncontiguous_send(ctx)
        extra["send_accepts_noncontiguous"] = reject is None
        extra["send_noncontiguous_error"] = reject or ""
        peer = me ^ 1 if (me ^ 1) < n else None  # pairs (0,1), (2,3), ...; a last odd rank sits out

        def setup():
            src = view_of(verify.pattern(me, count, dt, world_size=n, device=ctx.device))
            dst_base = torch.full((count,), -1, dtype=dt, device=ctx.device)
            return src, dst_base, view_of(dst_base)

        def run(src, dst_view, a):
            if peer is None:
                return None
            # Non-contiguous: copy out before sending and into the view after receiving,
            # which is what code handing a view to send/recv has to do (explicit copies).
            s = src if src.is_contiguous() else src.contiguous()
            r = dst_view if dst_view.is_contiguous() else torch.empty_like(dst_view, memory_format=torch.contiguous_format)
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, peer=peer, group=ctx.group),
                                            dist.P2POp(dist.irecv, r, peer=peer, group=ctx.group)])
            for w in works:
                w.wait()
            if r is not dst_view:
                dst_view.copy_(r)
            return None

        src, dst_base, dst_view = setup()
        run(src, dst_view, False)
        ctx.sync_device()
        wrong = 0 if peer is None else verify.count_wrong(
            dst_base, verify.pattern(peer, count, dt, world_size=n, device=ctx.device))
        s2, _, d2 = setup()
        fn = lambda a: run(s2, d2, a)  # noqa: E731
        extra["hidden_copy"] = "explicit .contiguous() before send and copy_ into the view after recv" \
            if layout == "transposed" else "none"
    n_wrong = verify.global_wrong(wrong, ctx.group, ctx.device)
    m = measure(ctx, bench_cfg, fn, mode="blocking" if op == "send_recv" else None)
    rec = make_record(experiment=EXPERIMENT, op=op, backend=ctx.backend, device=ctx.device.type, dtype=dtype,
                      world_size=n, size_bytes=count * dt.itemsize, count=count, in_place=op == "all_reduce", m=m,
                      n_wrong=n_wrong, table="contiguity", layout=layout, shape=[cols, rows] if layout == "transposed"
                      else [count], **extra)
    submit(request, benchmark, m, rec)


# --- GPU placement ----------------------------------------------------------------------------

def gpu_skip_reason(ctx: DistContext) -> str | None:
    """Why the GPU cases cannot run in this run, or None."""
    if not torch.cuda.is_available():
        build = f"torch {torch.__version__} is a CPU-only build" if torch.version.cuda is None \
            else "no CUDA device is visible"
        return f"GPU placement case: no CUDA ({build})"
    if ctx.device.type != "cuda":
        return "GPU placement case: this run uses CPU tensors (DEVICE=cpu); make bench-gpu runs it"
    return None


def _skip_without_gpu(ctx: DistContext) -> None:
    reason = gpu_skip_reason(ctx)
    if not ctx.agree_all(reason is None):
        pytest.skip(reason or "GPU placement case: no CUDA on another rank")


def test_gpu_placement(gpu_case, dist_ctx: DistContext, placement: Placement, bench_cfg: BenchConfig, benchmark,
                       request):
    ctx = dist_ctx
    _skip_without_gpu(ctx)
    mode, size = gpu_case
    dtype = bench_cfg.dtypes[0]
    dt, count = verify.DTYPE_OF[dtype], _count(size, dtype)
    n, dev = ctx.world_size, ctx.device
    group = {"cuda_tensor_nccl": placement.nccl, "cpu_tensor_moved_nccl": placement.nccl,
             "cuda_tensor_gloo": placement.gloo_cuda, "cpu_tensor_gloo": placement.gloo_cpu}[mode]
    if group is None:
        pytest.skip(f"{mode}: no NCCL group in this run (not built, or more ranks than GPUs on a node)")
    home = torch.device("cpu") if mode.startswith("cpu_tensor") else dev

    def fresh():
        return verify.pattern(ctx.rank, count, dt, world_size=n, device=home)

    if mode == "cpu_tensor_moved_nccl":
        def run(t, a):
            d = t.to(dev)  # H2D every step: what a CPU tensor costs on a GPU backend
            dist.all_reduce(d, group=group)
            t.copy_(d)  # D2H into pageable memory: synchronous
            return None
    else:
        def run(t, a):
            return dist.all_reduce(t, group=group, async_op=a)

    t = fresh()
    w = run(t, False)
    if w is not None:
        w.wait()
    torch.cuda.synchronize(dev)
    wrong = verify.count_wrong(t, verify.reduce_expected("sum", n, count, dt, device=home))
    n_wrong = verify.global_wrong(wrong, ctx.group, ctx.device)
    timed = fresh()
    m = measure(ctx, bench_cfg, lambda a: run(timed, a))
    rec = make_record(experiment=EXPERIMENT, op="all_reduce", backend="gloo" if "gloo" in mode else "nccl",
                      device="cuda" if home.type == "cuda" else "cpu", dtype=dtype, world_size=n,
                      size_bytes=count * dt.itemsize, count=count, in_place=True, m=m, n_wrong=n_wrong, redop="sum",
                      table="gpu_placement", placement=mode)
    submit(request, benchmark, m, rec)


def test_gpu_staging(staging_case, dist_ctx: DistContext, placement: Placement, bench_cfg: BenchConfig, benchmark,
                     request):
    ctx = dist_ctx
    _skip_without_gpu(ctx)
    mem, non_blocking, size = staging_case
    dtype = bench_cfg.dtypes[0]
    dt, count = verify.DTYPE_OF[dtype], _count(size, dtype)
    n, dev = ctx.world_size, ctx.device
    group = placement.gloo_cpu

    def setup():
        d = verify.pattern(ctx.rank, count, dt, world_size=n, device=dev)
        h = torch.empty(count, dtype=dt, pin_memory=(mem == "pinned"))
        return d, h

    def run(d, h):
        h.copy_(d, non_blocking=non_blocking)
        if non_blocking:
            # D2H with non_blocking returns before the data lands in host memory;
            # Gloo reads the host buffer, so wait for the copy stream first.
            torch.cuda.current_stream(dev).synchronize()
        dist.all_reduce(h, group=group)
        d.copy_(h, non_blocking=non_blocking)
        return None

    d, h = setup()
    run(d, h)
    torch.cuda.synchronize(dev)
    n_wrong = verify.global_wrong(
        verify.count_wrong(d, verify.reduce_expected("sum", n, count, dt, device=dev)), ctx.group, ctx.device)
    td, th = setup()
    m = measure(ctx, bench_cfg, lambda a: run(td, th), mode="blocking")
    rec = make_record(experiment=EXPERIMENT, op="all_reduce", backend="gloo", device="cuda", dtype=dtype,
                      world_size=n, size_bytes=count * dt.itemsize, count=count, in_place=True, m=m, n_wrong=n_wrong,
                      redop="sum", table="gpu_staging", host_memory=mem, non_blocking=non_blocking,
                      pipeline="D2H -> Gloo all_reduce on host -> H2D")
    submit(request, benchmark, m, rec)


def pcie_peak_gbps(device_index: int) -> tuple[float | None, str]:
    """Nominal PCIe bandwidth per direction from nvidia-smi's max link generation and width."""
    if not shutil.which("nvidia-smi"):
        return None, "nvidia-smi not found"
    try:
        r = subprocess.run(["nvidia-smi", "-i", str(device_index), "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
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
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9, f"{bus_bits}-bit at {clock_khz / 1e6:.2f} GHz"


def test_copy_bandwidth(copy_case, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    ctx = dist_ctx
    _skip_without_gpu(ctx)
    direction, mem, size = copy_case
    dev = ctx.device
    dtype, dt = "float32", torch.float32
    count = size // dt.itemsize
    if count == 0:
        pytest.skip(f"{size} B is smaller than one float32 element")
    active = ctx.rank == 0  # one copy at a time on one GPU: the link's own bandwidth
    pin = mem == "pinned"
    if active:
        src_dev = "cpu" if direction == "h2d" else dev
        dst_dev = "cpu" if direction == "d2h" else dev
        src = verify.pattern(0, count, dt, device=src_dev)
        if direction == "h2d" and pin:
            src = src.pin_memory()
        dst = torch.empty(count, dtype=dt, device=dst_dev, pin_memory=pin and direction == "d2h")
    non_blocking = pin  # a pageable copy is synchronous whatever the flag says

    def run(a):
        if active:
            dst.copy_(src, non_blocking=non_blocking)
        return None

    run(False)
    torch.cuda.synchronize(dev)
    wrong = verify.count_wrong(dst.cpu(), src.cpu()) if active else 0
    n_wrong = verify.global_wrong(wrong, ctx.group, ctx.device)
    m = measure(ctx, bench_cfg, run, mode="blocking")  # measure syncs the device after each copy
    if direction == "d2d":
        peak, link = memory_peak_gbps(dev)
        moved = 2  # a device copy reads and writes every byte
    else:
        peak, link = pcie_peak_gbps(dev.index)
        moved = 1
    achieved = moved * size / m.median_s / 1e9 if m.median_s > 0 else 0.0
    rec = make_record(experiment=EXPERIMENT, op="copy", backend=ctx.backend, device="cuda", dtype=dtype,
                      world_size=1, size_bytes=count * 4, count=count, in_place=False, m=m, n_wrong=n_wrong,
                      bw_op="send_recv", table="copy", direction=direction, host_memory=mem,
                      non_blocking=non_blocking, nominal_peak_gbps=peak, link=link,
                      pct_of_peak=100 * achieved / peak if peak else None, bytes_moved_factor=moved,
                      copy_rank=0)
    submit(request, benchmark, m, rec)
