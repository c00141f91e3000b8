"""Backends: the same cases on every backend the build and device offer, side by side.

What is measured, in one run (one process group per backend, ``new_group(backend=...)``):

- *lanes*: (backend, device) pairs. A CPU run has Gloo on CPU (plus MPI/UCC
  when torch was built with them); a CUDA run adds NCCL and Gloo with CUDA
  tensors. Lanes the build or host lacks are recorded with the reason.
- *capability matrix*: every collective of ``experiments.collectives`` (its
  REGISTRY and builders, reused as they are) and a p2p ``send_recv``, for
  every dtype (and every reduce op of all_reduce), probed at run time on
  every lane: one tiny op, its error text as the reason, all ranks agreeing.
  Stored as the ``capabilities`` list of one record per lane (op
  ``capability``; its time fields are that lane's barrier latency).
- *side by side*: a subset of the collectives (sum for reducing ops, the
  first in-place form) and a ring ``send_recv`` (each rank sends to rank+1
  and receives from rank-1 with ``batch_isend_irecv``, as nccl-tests'
  sendrecv_perf), at the largest ``N_SIZES`` sizes of the sweep, on every
  lane; the table shows each lane's time and busbw and the ratio to the first
  lane when at least two lanes ran.
- *algorithms*: the backend's ``all_reduce`` vs a ring all_reduce written with
  p2p ops vs reduce + broadcast (``suite.algorithms``), results checked exact
  and equal to the backend's, timed blocking (the hand-written ones cannot be
  issued asynchronously), busbw with the all_reduce factor 2(n-1)/n: for the
  ring, busbw is the bandwidth each rank's link carries, so it compares with
  the p2p ``send_recv`` bandwidth at the same size.
- *Gloo transport path*: torch's Gloo is built with its TCP transport only
  (no ibverbs/uv in the PyPI wheels); the choice it offers is the interface
  (``GLOO_SOCKET_IFNAME``), read when a group is created: loopback vs the
  default-route interface, same host only for loopback.
- *NCCL algorithm/protocol* (``NCCL_ALGO``/``NCCL_PROTO``): NCCL reads them
  when the process's communicators are set up, so a comparison needs separate
  runs; the case skips with the commands to run, and every NCCL record
  carries the values it ran with.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist

from experiments import collectives
from suite import algorithms, verify
from suite.config import BenchConfig
from suite.dist import DistContext, PreflightError, backend_available, resolve_device
from suite.plugin import submit
from suite.results import make_record
from suite.timing import measure

EXPERIMENT = "backends"

COMPARED_VARIANTS = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor",
                     "all_to_all_single", "barrier")
"""The collectives compared across lanes (the full set runs in the collectives experiment)."""
N_SIZES = 3
"""The comparisons run at the largest N_SIZES sizes of the sweep (bandwidth-bound sizes)."""
ALGORITHMS = ("all_reduce", "ring_p2p", "reduce_broadcast")
GLOO_PATHS = ("loopback", "default_route")
ALL_DTYPES = tuple(verify.DTYPE_OF)


@dataclass(frozen=True)
class Lane:
    """One (backend, device) combination."""

    backend: str
    device: str

    @property
    def key(self) -> str:
        return f"{self.backend}-{self.device}"

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.device}"


CANDIDATE_LANES = (Lane("nccl", "cuda"), Lane("gloo", "cuda"), Lane("gloo", "cpu"), Lane("mpi", "cpu"),
                   Lane("ucc", "cpu"), Lane("ucc", "cuda"))


def _mpi_launched(env=None) -> bool:
    env = os.environ if env is None else env
    return any(k in env for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"))


def _local_world(env=None) -> int:
    env = os.environ if env is None else env
    try:
        return int(env.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        return 1


def plan_lanes(device_type: str, env=None) -> tuple[list[Lane], list[tuple[Lane, str]]]:
    """Lanes to run and lanes that cannot run with the reason. Depends only on the
    build, the host and the run's device, so it is the same on every rank."""
    run, missing = [], []
    ver = torch.__version__
    for lane in CANDIDATE_LANES:
        if not backend_available(lane.backend):
            missing.append((lane, f"{lane.backend} is not built into torch {ver}"))
        elif lane.device == "cuda" and not torch.cuda.is_available():
            why = "no CUDA device visible" if torch.version.cuda else f"torch {ver} is a CPU-only build"
            missing.append((lane, why))
        elif lane.device == "cuda" and device_type != "cuda":
            missing.append((lane, "the run uses CPU tensors (DEVICE=cpu); make bench-gpu runs the CUDA lanes"))
        elif lane.backend == "nccl" and _local_world(env) > torch.cuda.device_count():
            missing.append((lane, f"NCCL needs one GPU per rank ({_local_world(env)} ranks on this node, "
                                  f"{torch.cuda.device_count()} GPU(s))"))
        elif lane.backend == "mpi" and not _mpi_launched(env):
            missing.append((lane, "the MPI backend needs ranks started by mpirun (no MPI launcher environment)"))
        else:
            run.append(lane)
    return run, missing


def _planned(config) -> tuple[list[Lane], list[tuple[Lane, str]]]:
    try:
        device_type = resolve_device(config._suite_cfg.device)
    except PreflightError:  # the launcher reports this before any rank starts
        device_type = "cpu"
    return plan_lanes(device_type)


def compared_sizes(cfg: BenchConfig) -> list[int]:
    """The largest N_SIZES (non-zero) sizes of the run's sweep, bytes."""
    return [s for s in cfg.sizes() if s > 0][-N_SIZES:]


def _elsize(dtype: str) -> int:
    return torch.empty((), dtype=verify.DTYPE_OF[dtype]).element_size()


# --- lanes: one process group per backend, created once per session on every rank -------------

@dataclass
class Lanes:
    ctx: dict
    """lane key -> DistContext for that lane's group and device (lanes that started)."""
    failed: dict
    """lane key -> why the group could not be created."""
    missing: list
    """(Lane, reason) for lanes the build or host lacks."""

    def get(self, key: str) -> DistContext:
        if key in self.failed:
            pytest.skip(self.failed[key])
        return self.ctx[key]


@pytest.fixture(scope="session")
def lanes(dist_ctx: DistContext, request) -> Lanes:
    planned, missing = _planned(request.config)
    timeout = datetime.timedelta(seconds=dist_ctx.timeout_s)
    out, failed = {}, {}
    for lane in planned:  # same order on every rank: new_group is collective
        reason, group = None, None
        if lane.backend == dist_ctx.backend and lane.device == dist_ctx.device.type:
            group = dist_ctx.group
        else:
            try:
                group = dist.new_group(backend=lane.backend, timeout=timeout)
            except Exception as e:  # e.g. UCC built but its library missing at run time
                reason = f"{lane.label}: group creation failed: {str(e).strip()[:200]}"
        if not dist_ctx.agree_all(reason is None):
            failed[lane.key] = reason or f"{lane.label}: group creation failed on another rank"
            continue
        device = dist_ctx.device if lane.device == dist_ctx.device.type else torch.device(lane.device)
        # A DistContext per lane: the collectives' builders, probes and the timing
        # loop all take their group, device and backend from it.
        out[lane.key] = dataclasses.replace(dist_ctx, backend=lane.backend, device=device, group=group)
    return Lanes(ctx=out, failed=failed, missing=missing)


def _lane_fields(lctx: DistContext) -> dict:
    f = {"lane": f"{lctx.backend}/{lctx.device.type}", "hosts": len(set(lctx.hostnames))}
    if lctx.backend == "nccl":
        f["nccl_algo"] = os.environ.get("NCCL_ALGO", "default")
        f["nccl_proto"] = os.environ.get("NCCL_PROTO", "default")
    return f


# --- parametrization (identical on every rank) ---------------------------------------------

@dataclass(frozen=True, kw_only=True)
class AlgoCase:
    lane: str
    algorithm: str
    dtype: str
    size_bytes: int
    count: int


def collective_cases(cfg: BenchConfig, world: int, lane_keys: list[str]) -> list[tuple[str, collectives.Case]]:
    sizes = compared_sizes(cfg)
    if not sizes:
        return []
    sub = dataclasses.replace(cfg, min_bytes=sizes[0], max_bytes=sizes[-1], redops=("sum",))
    out = []
    for key in lane_keys:
        for v in COMPARED_VARIANTS:
            coll = collectives.BY_VARIANT[v]
            out += [(key, c) for c in collectives.cases_for(coll, sub, world) if c.in_place == coll.in_place_forms[0]]
    return out


def algo_cases(cfg: BenchConfig, lane_keys: list[str], algorithms_=ALGORITHMS) -> list[AlgoCase]:
    out = []
    for key in lane_keys:
        for dtype in cfg.dtypes:
            for size in compared_sizes(cfg):
                count = size // _elsize(dtype)
                if count == 0:
                    continue
                for a in algorithms_:
                    out.append(AlgoCase(lane=key, algorithm=a, dtype=dtype, size_bytes=count * _elsize(dtype),
                                        count=count))
    return out


def pytest_generate_tests(metafunc):
    config = metafunc.config
    cfg = config._suite_cfg
    planned, _ = _planned(config)
    keys = [lane.key for lane in planned]
    world = collectives.world_size_from_env()
    fx = metafunc.fixturenames
    if "cap_lane" in fx:
        metafunc.parametrize("cap_lane", keys, ids=keys)
    if "bk_case" in fx:
        cases = collective_cases(cfg, world, keys)
        metafunc.parametrize("bk_case", cases, ids=[f"{k}-{collectives.case_id(c)}" for k, c in cases])
    if "p2p_case" in fx:
        cases = [AlgoCase(lane=c.lane, algorithm="send_recv", dtype=c.dtype, size_bytes=c.size_bytes, count=c.count)
                 for c in algo_cases(cfg, keys, ("send_recv",))]
        metafunc.parametrize("p2p_case", cases, ids=[f"{c.lane}-send_recv-{c.dtype}-{c.size_bytes}B" for c in cases])
    if "algo_case" in fx:
        cases = algo_cases(cfg, keys)
        metafunc.parametrize("algo_case", cases,
                             ids=[f"{c.lane}-{c.algorithm}-{c.dtype}-{c.size_bytes}B" for c in cases])
    if "gloo_path" in fx:
        metafunc.parametrize("gloo_path", GLOO_PATHS)


# --- p2p send_recv (ring exchange) ---------------------------------------------------------

@dataclass
class Exchange:
    run: object
    wrong: object


def send_recv_exchange(lctx: DistContext, dtype: str, count: int) -> Exchange:
    """Each rank sends ``count`` elements to rank+1 and receives from rank-1 (one batch)."""
    n, me = lctx.world_size, lctx.rank
    right, left = (me + 1) % n, (me - 1) % n
    dt = verify.DTYPE_OF[dtype]
    send = verify.pattern(me, count, dt, world_size=n, device=lctx.device)
    recv = torch.full((count,), -1, dtype=dt, device=lctx.device)
    ops = [dist.P2POp(dist.isend, send, group=lctx.group, group_peer=right),
           dist.P2POp(dist.irecv, recv, group=lctx.group, group_peer=left)]
    return Exchange(run=lambda a: dist.batch_isend_irecv(ops),
                    wrong=lambda: verify.count_wrong(recv, verify.pattern(left, count, dt, world_size=n,
                                                                          device=lctx.device)))


def _wait(works) -> None:
    for w in works or []:
        w.wait()


# --- capability matrix ---------------------------------------------------------------------

def _probe_send_recv(lctx: DistContext, dtype: str) -> str | None:
    if lctx.world_size < 2:
        return "send_recv needs at least 2 ranks"
    reason = None
    try:
        ex = send_recv_exchange(lctx, dtype, 4)
        _wait(ex.run(False))
        lctx.sync_device()
    except Exception as e:  # the backend's own words become the reason
        reason = f"{lctx.backend} does not support send_recv ({dtype}): " + \
                 (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    if not lctx.agree_all(reason is None) and reason is None:
        reason = f"{lctx.backend} does not support send_recv ({dtype}) on another rank"
    return reason


def capability_matrix(lctx: DistContext, dtypes=ALL_DTYPES) -> list[dict]:
    """Probe every registered collective form and send_recv on this lane."""
    rows = []
    dev = lctx.device.type
    for coll in collectives.REGISTRY:
        if coll.variant == "barrier":
            combos = [("none", None)]
        else:
            redops = collectives.REDUCE_OP if coll.variant == "all_reduce" else ("sum",) if coll.reduces else (None,)
            combos = [(d, r) for d in dtypes for r in redops]
        for dtype, redop in combos:
            for in_place in coll.in_place_forms:
                case = collectives.Case(variant=coll.variant, dtype=dtype, redop=redop, size_bytes=0,
                                        count=4 * lctx.world_size, in_place=in_place,
                                        root=0 if coll.rooted else -1)
                reason = collectives.probe(lctx, case)
                rows.append({"op": coll.op, "variant": coll.variant, "backend": lctx.backend, "device": dev,
                             "dtype": dtype, "redop": redop or "none", "in_place": in_place,
                             "supported": reason is None, "reason": reason or ""})
    for dtype in dtypes:
        reason = _probe_send_recv(lctx, dtype)
        rows.append({"op": "send_recv", "variant": "send_recv", "backend": lctx.backend, "device": dev,
                     "dtype": dtype, "redop": "none", "in_place": False, "supported": reason is None,
                     "reason": reason or ""})
    return rows


def test_capability(cap_lane: str, lanes: Lanes, bench_cfg: BenchConfig, benchmark, request):
    lctx = lanes.get(cap_lane)
    rows = capability_matrix(lctx)
    # A record needs a timing: the lane's barrier latency (few samples; it is context, not the point).
    kw = {"device_ids": [lctx.device.index]} if lctx.backend == "nccl" else {}
    m = measure(lctx, bench_cfg, lambda a: dist.barrier(group=lctx.group, async_op=a, **kw),
                iters=min(bench_cfg.iters, 5), warmup_iters=1)
    rec = make_record(experiment=EXPERIMENT, op="capability", backend=lctx.backend, device=lctx.device.type,
                      dtype="none", world_size=lctx.world_size, size_bytes=0, count=0, in_place=False, m=m,
                      n_wrong=0, table="capability", timed="barrier", capabilities=rows,
                      lanes_missing=[{"backend": ln.backend, "device": ln.device, "reason": r}
                                     for ln, r in lanes.missing] +
                                    [{"backend": k.split("-")[0], "device": k.split("-")[1], "reason": r}
                                     for k, r in lanes.failed.items()],
                      torch_version=torch.__version__, **_lane_fields(lctx))
    submit(request, benchmark, m, rec)


# --- side by side: collectives and send_recv on every lane -----------------------------------

def test_backend_collective(bk_case, lanes: Lanes, bench_cfg: BenchConfig, benchmark, request):
    key, case = bk_case
    lctx = lanes.get(key)
    if case.root >= lctx.world_size:
        pytest.skip(f"root {case.root} not in world of {lctx.world_size}")
    reason = collectives.probe(lctx, case)
    if reason:
        pytest.skip(reason)
    coll = collectives.BY_VARIANT[case.variant]
    m, n_wrong = collectives.check_and_measure(lctx, bench_cfg, case)
    rec = make_record(experiment=EXPERIMENT, op=coll.op, variant=coll.variant, backend=lctx.backend,
                      device=lctx.device.type, dtype=case.dtype, world_size=lctx.world_size,
                      size_bytes=case.size_bytes, count=case.count, in_place=case.in_place, m=m,
                      n_wrong=n_wrong, redop=case.redop or "none", root=case.root, table="compare",
                      **_lane_fields(lctx))
    submit(request, benchmark, m, rec)


def test_backend_send_recv(p2p_case: AlgoCase, lanes: Lanes, bench_cfg: BenchConfig, benchmark, request):
    lctx = lanes.get(p2p_case.lane)
    if lctx.world_size < 2:
        pytest.skip("send_recv needs at least 2 ranks")
    reason = _probe_send_recv(lctx, p2p_case.dtype)
    if reason:
        pytest.skip(reason)
    check = send_recv_exchange(lctx, p2p_case.dtype, p2p_case.count)
    _wait(check.run(False))
    lctx.sync_device()
    n_wrong = verify.global_wrong(check.wrong(), lctx.group, lctx.device)
    timed = send_recv_exchange(lctx, p2p_case.dtype, p2p_case.count)
    m = measure(lctx, bench_cfg, timed.run)
    rec = make_record(experiment=EXPERIMENT, op="send_recv", variant="send_recv", backend=lctx.backend,
                      device=lctx.device.type, dtype=p2p_case.dtype, world_size=lctx.world_size,
                      size_bytes=p2p_case.size_bytes, count=p2p_case.count, in_place=False, m=m,
                      n_wrong=n_wrong, table="compare", pattern="ring: rank r -> r+1 (batch_isend_irecv)",
                      **_lane_fields(lctx))
    submit(request, benchmark, m, rec)


# --- algorithms: backend all_reduce vs ring on p2p vs reduce + broadcast ----------------------

def _algorithm_fn(algorithm: str, lctx: DistContext):
    g = lctx.group
    if algorithm == "all_reduce":
        return lambda t, a=False: dist.all_reduce(t, group=g, async_op=a)
    if algorithm == "ring_p2p":
        return lambda t, a=False: algorithms.ring_all_reduce(t, g)
    if algorithm == "reduce_broadcast":
        return lambda t, a=False: algorithms.naive_all_reduce(t, g)
    raise ValueError(f"unknown algorithm {algorithm!r}")


def model_bytes_busiest_rank(algorithm: str, size_bytes: int, n: int) -> float | None:
    """Bytes the busiest rank sends under a simple model: ring 2(n-1)/n*S; flat
    reduce+broadcast (n-1)*S at the root (it receives as much again); the
    backend's own all_reduce: unknown (it picks its algorithm)."""
    if algorithm == "ring_p2p":
        return algorithms.ring_bytes_sent_per_rank(size_bytes, n)
    if algorithm == "reduce_broadcast":
        return float((n - 1) * size_bytes)
    return None


def test_all_reduce_algorithm(algo_case: AlgoCase, lanes: Lanes, bench_cfg: BenchConfig, benchmark, request):
    c = algo_case
    lctx = lanes.get(c.lane)
    probe_case = collectives.Case(variant="all_reduce", dtype=c.dtype, redop="sum", size_bytes=0, count=0,
                                  in_place=True, root=-1)
    reason = collectives.probe(lctx, probe_case)
    if reason:
        pytest.skip(reason)
    if c.algorithm == "ring_p2p" and lctx.world_size > 1:
        reason = _probe_send_recv(lctx, c.dtype)
        if reason:
            pytest.skip(reason)
    dt = verify.DTYPE_OF[c.dtype]
    n = lctx.world_size

    def fresh():
        return verify.pattern(lctx.rank, c.count, dt, world_size=n, device=lctx.device)

    fn = _algorithm_fn(c.algorithm, lctx)
    reference = fresh()
    dist.all_reduce(reference, group=lctx.group)  # the backend's own answer
    out = fresh()
    fn(out)
    lctx.sync_device()
    maybe_corrupt(lctx, c.algorithm, out)
    expected = verify.reduce_expected("sum", n, c.count, dt, device=lctx.device)
    # wrong vs the exact answer, plus any element that differs from the backend's result
    local = verify.count_wrong(out, expected) + verify.count_wrong(out, reference)
    n_wrong = verify.global_wrong(local, lctx.group, lctx.device)

    timed = fresh()
    # blocking for all three: the hand-written algorithms complete before returning,
    # so a pipelined sample would compare unlike things.
    m = measure(lctx, bench_cfg, lambda a: fn(timed, False), mode="blocking")
    rec = make_record(experiment=EXPERIMENT, op="all_reduce", variant=f"all_reduce:{c.algorithm}",
                      backend=lctx.backend, device=lctx.device.type, dtype=c.dtype, world_size=n,
                      size_bytes=c.size_bytes, count=c.count, in_place=True, m=m, n_wrong=n_wrong,
                      bw_op="all_reduce", redop="sum", table="algorithm", algorithm=c.algorithm,
                      model_bytes_busiest_rank=model_bytes_busiest_rank(c.algorithm, c.size_bytes, n),
                      **_lane_fields(lctx))
    submit(request, benchmark, m, rec)


def maybe_corrupt(ctx: DistContext, name: str, out: torch.Tensor) -> None:
    """Fault injection for the suite's own tests (as in experiments/collectives.py):
    SUITE_INJECT_CORRUPTION=<name>[,<name>...] flips one output element on the last
    rank after the checked run, which the exact check must catch."""
    targets = {t.strip() for t in os.environ.get("SUITE_INJECT_CORRUPTION", "").split(",")}
    if (name in targets or "all" in targets) and ctx.rank == ctx.world_size - 1 and out.numel():
        out.view(-1)[0] += 1


# --- Gloo transport path: which interface the TCP transport uses ------------------------------

def default_route_interface(route_table: str | None = None) -> str | None:
    """Interface of the IPv4 default route (/proc/net/route), or None."""
    if route_table is None:
        try:
            with open("/proc/net/route") as fh:
                route_table = fh.read()
        except OSError:
            return None
    for line in route_table.splitlines()[1:]:
        f = line.split()
        if len(f) > 2 and f[1] == "00000000":
            return f[0]
    return None


def _gloo_device_ok(iface: str) -> str | None:
    try:
        dist.ProcessGroupGloo.create_device(interface=iface)
    except Exception as e:
        return f"Gloo cannot use interface {iface!r}: {str(e).strip().splitlines()[-1][:160]}"
    return None


def test_gloo_path(gloo_path: str, dist_ctx: DistContext, bench_cfg: BenchConfig, benchmark, request):
    ctx = dist_ctx
    if not dist.is_gloo_available():
        pytest.skip("gloo is not built into this torch")
    hosts = len(set(ctx.hostnames))
    if gloo_path == "loopback":
        iface = "lo"
        reason = "loopback reaches only this host; the run spans several hosts" if hosts > 1 else None
    else:
        iface = default_route_interface()
        reason = None if iface else "no IPv4 default route on this host"
    if reason is None:
        reason = _gloo_device_ok(iface)
    if not ctx.agree_all(reason is None):
        pytest.skip(reason or f"interface for {gloo_path} not usable on another rank")
    sizes = compared_sizes(bench_cfg)
    if not sizes:
        pytest.skip("no non-zero size in the sweep")
    dtype = bench_cfg.dtypes[0]
    count = sizes[-1] // _elsize(dtype)
    old = os.environ.get("GLOO_SOCKET_IFNAME")
    os.environ["GLOO_SOCKET_IFNAME"] = iface  # Gloo reads it when the group's device is created
    try:
        group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=ctx.timeout_s))
    finally:
        if old is None:
            del os.environ["GLOO_SOCKET_IFNAME"]
        else:
            os.environ["GLOO_SOCKET_IFNAME"] = old
    try:
        lctx = dataclasses.replace(ctx, backend="gloo", device=torch.device("cpu"), group=group)
        dt = verify.DTYPE_OF[dtype]
        t = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size)
        dist.all_reduce(t, group=group)
        n_wrong = verify.global_wrong(
            verify.count_wrong(t, verify.reduce_expected("sum", ctx.world_size, count, dt)), group, lctx.device)
        timed = verify.pattern(ctx.rank, count, dt, world_size=ctx.world_size)
        m = measure(lctx, bench_cfg, lambda a: dist.all_reduce(timed, group=group, async_op=a))
        rec = make_record(experiment=EXPERIMENT, op="all_reduce", variant="all_reduce", backend="gloo",
                          device="cpu", dtype=dtype, world_size=ctx.world_size, size_bytes=count * _elsize(dtype),
                          count=count, in_place=True, m=m, n_wrong=n_wrong, redop="sum", table="gloo_path",
                          gloo_path=gloo_path, gloo_socket_ifname=iface, transport="tcp", lane="gloo/cpu",
                          hosts=hosts)
        submit(request, benchmark, m, rec)
    finally:
        dist.destroy_process_group(group)


def test_nccl_algo_proto(dist_ctx: DistContext):
    """NCCL's algorithm/protocol choice: documented, run as separate processes."""
    if not (dist.is_nccl_available() and torch.cuda.is_available() and dist_ctx.device.type == "cuda"):
        pytest.skip("NCCL_ALGO/NCCL_PROTO comparison needs NCCL and a CUDA run (make bench-gpu)")
    pytest.skip("NCCL reads NCCL_ALGO/NCCL_PROTO when the process sets up its communicators, so each choice "
                "is a separate run: `NCCL_ALGO=Ring make bench-gpu EXPERIMENTS=backends`, then "
                "NCCL_ALGO=Tree (and NCCL_PROTO=Simple|LL|LL128); NCCL records carry nccl_algo/nccl_proto")
