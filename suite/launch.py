"""Command-line front door: validate, then start the ranks with torchrun.

    python -m suite.launch --nproc 4 --max-bytes 1M [--experiments collectives] [-- -k all_reduce]

Everything a run needs is checked here, before any process group exists: the
knobs (exit 2), the backend/device/world layout and the network settings
(exit 3). Then torchrun starts the ranks, each running
``pytest -p suite.plugin experiments/...``; rank 0 writes
``<results-root>/<run-id>/bench.json`` and this process points
``<results-root>/latest`` at it. The exit status is the ranks' (1 on any failure).

Multi-node (compose, Slurm, several hosts): pass --nnodes/--node-rank/--master-addr
(or NNODES/NODE_RANK/MASTER_ADDR/MASTER_PORT in the environment); every node runs
the same command.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from suite.config import ConfigError, build_config, check_timing_mode
from suite.failures import (EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_PEER_FAILURE, EXIT_PREFLIGHT,  # noqa: F401
                            EXIT_RENDEZVOUS, EXIT_SIGINT, EXIT_SIGTERM, EXIT_WRONG_RESULT)

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS_DIR = ROOT / "experiments"



class RendezvousError(RuntimeError):
    """MASTER_ADDR/MASTER_PORT cannot work; nothing was started."""


def available_experiments() -> list[str]:
    return sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.py") if not p.stem.startswith("_") and p.stem != "conftest")


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ConfigError(f"{name}={v!r} is not an integer") from None


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1:]
    else:
        passthrough = []
    ap = argparse.ArgumentParser(prog="python -m suite.launch", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", default=None, help="ranks per node (NPROC_PER_NODE; default 4)")
    ap.add_argument("--nnodes", default=None, help="number of nodes (NNODES; default 1)")
    ap.add_argument("--node-rank", default=None, help="this node's index (NODE_RANK; default 0)")
    ap.add_argument("--master-addr", default=None, help="host of node 0 (MASTER_ADDR) for multi-node runs")
    ap.add_argument("--master-port", default=None, help="port on node 0 (MASTER_PORT; default 29500)")
    ap.add_argument("--rdzv-timeout-s", default="120", help="how long nodes wait for each other at start")
    ap.add_argument("--experiments", default="all", help="comma-separated experiment modules, or all")
    ap.add_argument("--results-root", default="results", help="where run directories are created")
    ap.add_argument("--debug", action="store_true",
                    help="TORCH_DISTRIBUTED_DEBUG=DETAIL: collective shape/order mismatches become named errors")
    ap.add_argument("--run-id", default=None, help="run directory name (default: UTC timestamp)")
    for opt in ("min-bytes", "max-bytes", "step-factor", "dtypes", "redops", "root", "warmup", "iters",
                "timing", "pipeline-depth", "precision-pct", "max-time-s", "backend", "device", "timeout-s",
                "heartbeat-timeout-s"):
        ap.add_argument(f"--{opt}", default=None)
    return ap.parse_args(argv), passthrough


def config_from_args(a: argparse.Namespace):
    return build_config(min_bytes=a.min_bytes, max_bytes=a.max_bytes, step_factor=a.step_factor, dtypes=a.dtypes,
                        redops=a.redops, root=a.root, warmup_iters=a.warmup, iters=a.iters, timing_mode=a.timing,
                        pipeline_depth=a.pipeline_depth, precision_pct=a.precision_pct, max_time_s=a.max_time_s,
                        backend=a.backend, device=a.device, timeout_s=a.timeout_s,
                        heartbeat_timeout_s=a.heartbeat_timeout_s)


def _int_arg(value, env: str, default: int, name: str, minimum: int) -> int:
    if value is None:
        n = _env_int(env, default)
    else:
        try:
            n = int(value)
        except ValueError:
            raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {n}")
    return n


def check_experiment_knobs(names: list[str]) -> None:
    """Experiments with knobs of their own (DDP_*, MP_*, ...) define ``check_environment()``;
    a bad value becomes a ConfigError here instead of a collection error on every rank."""
    import importlib

    for name in names:
        check = getattr(importlib.import_module(f"experiments.{name}"), "check_environment", None)
        if check is None:
            continue
        try:
            check()
        except ValueError as e:
            raise ConfigError(f"experiment {name}: {e}") from None


def layout(a: argparse.Namespace) -> dict:
    """Validated node/rank layout from arguments and the environment."""
    nproc = _int_arg(a.nproc, "NPROC_PER_NODE", 4, "NPROC", 1)
    nnodes = _int_arg(a.nnodes, "NNODES", 1, "NNODES", 1)
    node_rank = _int_arg(a.node_rank, "NODE_RANK", 0, "NODE_RANK", 0)
    port = _int_arg(a.master_port, "MASTER_PORT", 29500, "MASTER_PORT", 1)
    if nproc > 512:
        raise ConfigError(f"NPROC {nproc} is more ranks than one node can host; use several nodes")
    if node_rank >= nnodes:
        raise ConfigError(f"NODE_RANK {node_rank} must be < NNODES {nnodes}")
    if port > 65535:
        raise ConfigError(f"MASTER_PORT {port} is not a TCP port (1-65535)")
    addr = a.master_addr or os.environ.get("MASTER_ADDR") or ("127.0.0.1" if nnodes == 1 else None)
    if addr is None:
        raise ConfigError("a multi-node run needs MASTER_ADDR (the host of node 0)")
    try:
        rdzv_timeout = float(a.rdzv_timeout_s)
    except ValueError:
        raise ConfigError(f"--rdzv-timeout-s must be a number, got {a.rdzv_timeout_s!r}") from None
    if not (1 <= rdzv_timeout <= 86400):
        raise ConfigError(f"--rdzv-timeout-s must be between 1 and 86400 seconds, got {a.rdzv_timeout_s!r}")
    return {"nproc": nproc, "nnodes": nnodes, "node_rank": node_rank, "master_addr": addr,
            "master_port": port, "world_size": nproc * nnodes, "rdzv_timeout_s": rdzv_timeout}


def preflight(cfg, lay: dict) -> None:
    """Environment checks; raise PreflightError with the fix. Starts nothing."""
    from suite.dist import PreflightError, resolve_backend, resolve_device

    device = resolve_device(cfg.device)
    backend = resolve_backend(cfg.backend, device)
    check_timing_mode(cfg.timing_mode, backend, device)  # auto resolved: cuda_graph on a CPU host
    if device == "cuda" and backend == "nccl":
        import torch

        if lay["nproc"] > torch.cuda.device_count():
            raise PreflightError(f"NPROC={lay['nproc']} but this node has {torch.cuda.device_count()} GPU(s); "
                                 "NCCL needs one GPU per rank")
    if cfg.root >= lay["world_size"]:
        raise ConfigError(f"ROOT {cfg.root} does not exist in a world of {lay['world_size']} ranks")
    # Memory: a collective case holds its input, output and expected result, and the
    # expected value is built in float64 (x2 for float32): ~8x the largest message per rank.
    need = 8 * cfg.max_bytes * lay["nproc"]
    avail = _mem_available()
    if avail is not None and need > 0.9 * avail:
        raise PreflightError(f"MAX_BYTES={cfg.max_bytes} with {lay['nproc']} ranks needs about "
                             f"{need / 2**30:.1f} GiB but {avail / 2**30:.1f} GiB is available; lower MAX_BYTES or NPROC")
    from suite.sysinfo import container_limits

    lim = container_limits()
    shm = lim.get("dev_shm_bytes")
    if lim.get("in_container") and shm is not None and shm < 32 * 2**20:
        raise PreflightError(f"/dev/shm is {shm / 2**20:.0f} MiB in this container; torch.multiprocessing needs more: "
                             "run it with --shm-size=256m (compose: shm_size: 256m)")
    if lay["nnodes"] > 1:
        try:
            socket.getaddrinfo(lay["master_addr"], lay["master_port"])
        except socket.gaierror as e:
            raise RendezvousError(f"MASTER_ADDR {lay['master_addr']!r} does not resolve ({e}); "
                                  "set it to node 0's hostname or IP") from None
        if lay["node_rank"] == 0 and not _port_free(lay["master_port"]):
            raise RendezvousError(f"MASTER_PORT {lay['master_port']} is already in use on this host; "
                                  "choose another port")
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        names = os.environ.get(var)
        if names:
            have = {n for _, n in socket.if_nameindex()}
            for name in names.split(","):
                name = name.strip().lstrip("^=")
                if name and name not in have and not any(h.startswith(name) for h in have):
                    raise PreflightError(f"{var}={names!r}: no interface {name!r} on this host "
                                         f"(have: {', '.join(sorted(have))})")


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def torchrun_command(lay: dict, files: list[str], suite_opts: list[str], passthrough: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(lay["nproc"])]
    if lay["nnodes"] == 1:
        cmd += ["--standalone"]
    else:
        cmd += ["--nnodes", str(lay["nnodes"]), "--node-rank", str(lay["node_rank"]),
                "--master-addr", lay["master_addr"], "--master-port", str(lay["master_port"]),
                # static rendezvous waits 30 min for a missing node by default
                "--rdzv-conf", f"timeout={int(lay['rdzv_timeout_s'])},read_timeout={int(lay['rdzv_timeout_s'])}"]
    cmd += ["-m", "pytest", "-p", "suite.plugin", "-q", "-rs", *files, *suite_opts, *passthrough]
    return cmd


def flight_recorder_env(env: dict, run_dir: Path, torch_version: str) -> dict[str, str]:
    """NCCL flight-recorder settings for the ranks, unless the user set their own.

    The flight recorder keeps the last collectives of each rank in a ring buffer;
    with dump-on-timeout a hung or failed NCCL run leaves one trace per rank
    (``<run_dir>/nccl_trace_rank_<rank>``) for ``torchfrtrace <run_dir> -p nccl_trace_rank_``.
    torch 2.9 renamed TORCH_NCCL_TRACE_BUFFER_SIZE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE to
    TORCH_FR_BUFFER_SIZE / TORCH_FR_DUMP_TEMP_FILE (the old names still work, with a
    deprecation warning; torchtitan switches on the same version). Dumps need
    TORCH_NCCL_ASYNC_ERROR_HANDLING=3, its default (pytorch/pytorch#121055).
    """
    major_minor = tuple(int(x) for x in re.findall(r"\d+", torch_version)[:2])
    new_names = major_minor >= (2, 9)
    out: dict[str, str] = {}
    for new, old, value in (("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"),
                            ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                             str(run_dir.resolve() / "nccl_trace_rank_"))):
        if new not in env and old not in env:
            out[new if new_names else old] = value
    if "TORCH_NCCL_DUMP_ON_TIMEOUT" not in env:
        out["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
    return out


def update_latest(results_root: Path, run_dir: Path) -> None:
    """Point results_root/latest at run_dir (atomic symlink swap)."""
    link = results_root / "latest"
    tmp = results_root / f".latest.{os.getpid()}"
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    os.symlink(run_dir.name, tmp)
    os.replace(tmp, link)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        a, passthrough = parse_args(argv)
        cfg = config_from_args(a)
        lay = layout(a)
        names = available_experiments() if a.experiments in ("all", "") else \
            [e.strip() for e in a.experiments.split(",") if e.strip()]
        unknown = [e for e in names if e not in available_experiments()]
        if unknown or not names:
            raise ConfigError(f"unknown experiment(s) {', '.join(unknown) or '(none)'}; "
                              f"choose from {', '.join(available_experiments())} or all")
        check_experiment_knobs(names)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from suite.dist import PreflightError, resolve_backend, resolve_device

    try:
        preflight(cfg, lay)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PreflightError as e:
        print(f"preflight failed: {e}", file=sys.stderr)
        return EXIT_PREFLIGHT
    except RendezvousError as e:
        print(f"preflight failed: {e}", file=sys.stderr)
        return EXIT_RENDEZVOUS

    run_id = a.run_id or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    results_root = Path(a.results_root)
    run_dir = results_root / run_id
    suite_opts = ["--results-dir", str(run_dir), "--run-id", run_id]
    for opt in ("min_bytes", "max_bytes", "step_factor", "dtypes", "redops", "root", "warmup", "iters", "timing",
                "pipeline_depth", "precision_pct", "max_time_s", "backend", "device", "timeout_s",
                "heartbeat_timeout_s"):
        v = getattr(a, opt)
        if v is not None:
            suite_opts += [f"--{opt.replace('_', '-')}", str(v)]
    files = [str((EXPERIMENTS_DIR / f"{n}.py").relative_to(ROOT)) for n in names]
    cmd = torchrun_command(lay, files, suite_opts, passthrough)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default, set quietly and recorded
    if a.debug:
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    if (run_dir / "bench.json").exists():
        print(f"error: {run_dir} already holds a run; choose another RUN_ID", file=sys.stderr)
        return EXIT_BAD_INPUT
    if resolve_backend(cfg.backend, resolve_device(cfg.device)) == "nccl":
        import torch

        env.update(flight_recorder_env(env, run_dir, torch.__version__))
    # Every node creates it: ranks leave failure notes (and NCCL flight-recorder dumps) here.
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"# run {run_id}: {lay['nnodes']} node(s) x {lay['nproc']} rank(s), experiments: {', '.join(names)}",
          flush=True)
    rc, signum, tail = _run_ranks(cmd, env, run_dir)
    status = _final_status(rc, signum, run_dir, root_cause(tail) if rc != 0 else None)
    if lay["node_rank"] == 0 and (run_dir / "bench.json").exists():
        _stamp_status(run_dir, status, signum)
        update_latest(results_root, run_dir)
        print(f"# results: {run_dir / 'bench.json'} (also {results_root / 'latest'})", flush=True)
        write_report(run_dir)
    return status


def _descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (from /proc; torchrun starts each worker in a
    session of its own, so killing torchrun's process group does not reach them)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in [proc.pid, *_descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _run_ranks(cmd: list[str], env: dict, run_dir: Path) -> tuple[int, int | None, list[str]]:
    """Run torchrun in its own session; forward SIGINT/SIGTERM; never leave it behind.

    torchrun's stderr passes through a thread that keeps its tail, so the
    launcher can name the rank torchrun saw fail first."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True, stderr=subprocess.PIPE,
                            text=True, errors="replace", bufsize=1)
    tail: collections.deque = collections.deque(maxlen=400)

    def pump():
        for line in proc.stderr:
            tail.append(line)
            sys.stderr.write(line)
            sys.stderr.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    received: list[int] = []

    def forward(signum, _frame):
        received.append(signum)
        try:
            proc.send_signal(signum)  # torchrun stops its workers on SIGINT/SIGTERM
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    failures_dir = run_dir / "failures"
    failed_since = None
    try:
        while True:
            try:
                rc = proc.wait(timeout=GRACE_S if received else 1.0)
                break
            except subprocess.TimeoutExpired:
                pass
            if received:
                # torchrun did not finish within the grace period: end the whole tree.
                _kill_tree(proc)
                continue
            if failed_since is None and failures_dir.is_dir() and any(failures_dir.iterdir()):
                failed_since = time.monotonic()
            if failed_since is not None and time.monotonic() - failed_since > FAILURE_GRACE_S:
                # A rank reported a fatal failure, but torchrun is still waiting on a rank
                # that ignores SIGTERM (a frozen one): do not wait for its 30 s grace.
                _kill_tree(proc)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for pid in _descendants(proc.pid):  # workers that outlived torchrun (e.g. a frozen one)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reader.join(timeout=5)
    return rc, (received[0] if received else None), list(tail)


def root_cause(lines: list[str]) -> dict | None:
    """The first failed rank from torchrun's error summary ("Root Cause" block)."""
    text = "".join(lines)
    i = text.rfind("Root Cause")
    if i < 0:
        return None
    block = text[i:]
    rank = re.search(r"rank\s*:\s*(\d+)", block)
    host = re.search(r"host\s*:\s*(\S+)", block)
    code = re.search(r"exitcode\s*:\s*(-?\d+)(?:.*?\((SIG\w+)\))?", block)
    if not rank or not code:
        return None
    return {"rank": int(rank.group(1)), "host": host.group(1) if host else "?", "exitcode": int(code.group(1)),
            "signal": code.group(2)}


GRACE_S = 20.0
"""How long torchrun gets to stop its workers after SIGINT/SIGTERM before they are killed."""
FAILURE_GRACE_S = 5.0
"""How long ranks get to exit on their own after one reported a fatal failure."""


def _final_status(rc: int, signum: int | None, run_dir: Path, first: dict | None = None) -> int:
    """Map the ranks' outcome to the documented exit status, printing the cause."""
    failures = []
    for f in sorted((run_dir / "failures").glob("rank*.json")):
        try:
            failures.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            pass
    for fl in failures:
        print(f"# failure on rank {fl.get('rank')} ({fl.get('host')}): {fl.get('cause')}", file=sys.stderr)
    if signum is not None:
        print(f"# interrupted by signal {signum}; completed cases are in {run_dir / 'bench.json'}", file=sys.stderr)
        return EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM
    if first is not None and not failures:
        how = f"killed by {first['signal']}" if first["exitcode"] < 0 else f"exited with status {first['exitcode']}"
        print(f"# first failure: rank {first['rank']} on host {first['host']} {how}", file=sys.stderr)
    if any(fl.get("kind") == "rank_error" for fl in failures):
        return EXIT_FAILED  # a rank raised; the others' lost-peer errors are its consequence
    if any(fl.get("kind") == "peer_failure" for fl in failures):
        return EXIT_PEER_FAILURE
    if first is not None and first["exitcode"] < 0:
        return EXIT_PEER_FAILURE  # a rank was killed or died of a signal: the others lost a peer
    wrong = _wrong_cases(run_dir)
    if wrong:
        print(f"# {len(wrong)} case(s) produced wrong elements: {', '.join(wrong[:5])}", file=sys.stderr)
        return EXIT_WRONG_RESULT
    return EXIT_OK if rc == 0 else EXIT_FAILED


def _wrong_cases(run_dir: Path) -> list[str]:
    try:
        run = json.loads((run_dir / "bench.json").read_text())
    except (OSError, ValueError):
        return []
    return [b["name"] for b in run.get("benchmarks", []) if (b.get("extra_info", {}).get("n_wrong") or 0) > 0]


def _stamp_status(run_dir: Path, status: int, signum: int | None) -> None:
    """Record the launcher's verdict in bench.json (atomically)."""
    from suite.fileio import write_json_atomic

    path = run_dir / "bench.json"
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    s = run.setdefault("suite", {})
    s["exit_status"] = status
    s["interrupted_by_signal"] = signum
    if status != EXIT_OK:
        s["complete"] = False if signum is not None or status == EXIT_PEER_FAILURE else s.get("complete", False)
    write_json_atomic(path, run)


def write_report(run_dir: Path) -> None:
    """The run's HTML/Markdown report (suite.report), also for a partial run. A report
    failure never changes the bench's exit status: it warns and says how to retry.
    SUITE_REPORT=0 skips it (the harness's own tests, which do not look at it)."""
    if os.environ.get("SUITE_REPORT", "1") == "0":
        return
    try:
        from suite.report import write_report as _write

        path = _write(run_dir)
    except Exception as e:  # noqa: BLE001 - any failure of the report is reported, never raised
        print(f"warning: report not written ({type(e).__name__}: {e}); the results are intact - "
              f"retry with: python -m suite.report html {run_dir}", file=sys.stderr, flush=True)
    else:
        print(f"# report: {path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
