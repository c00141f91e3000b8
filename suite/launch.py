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
import datetime
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from suite.config import ConfigError, build_config

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS_DIR = ROOT / "experiments"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_PREFLIGHT = 3


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
    ap.add_argument("--run-id", default=None, help="run directory name (default: UTC timestamp)")
    for opt in ("min-bytes", "max-bytes", "step-factor", "dtypes", "redops", "root", "warmup", "iters",
                "timing", "pipeline-depth", "precision-pct", "max-time-s", "backend", "device", "timeout-s"):
        ap.add_argument(f"--{opt}", default=None)
    return ap.parse_args(argv), passthrough


def config_from_args(a: argparse.Namespace):
    return build_config(min_bytes=a.min_bytes, max_bytes=a.max_bytes, step_factor=a.step_factor, dtypes=a.dtypes,
                        redops=a.redops, root=a.root, warmup_iters=a.warmup, iters=a.iters, timing_mode=a.timing,
                        pipeline_depth=a.pipeline_depth, precision_pct=a.precision_pct, max_time_s=a.max_time_s,
                        backend=a.backend, device=a.device, timeout_s=a.timeout_s)


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
    return {"nproc": nproc, "nnodes": nnodes, "node_rank": node_rank, "master_addr": addr,
            "master_port": port, "world_size": nproc * nnodes, "rdzv_timeout_s": rdzv_timeout}


def preflight(cfg, lay: dict) -> None:
    """Environment checks; raise PreflightError with the fix. Starts nothing."""
    from suite.dist import PreflightError, resolve_backend, resolve_device

    device = resolve_device(cfg.device)
    backend = resolve_backend(cfg.backend, device)
    if device == "cuda" and backend == "nccl":
        import torch

        if lay["nproc"] > torch.cuda.device_count():
            raise PreflightError(f"NPROC={lay['nproc']} but this node has {torch.cuda.device_count()} GPU(s); "
                                 "NCCL needs one GPU per rank")
    if cfg.root >= lay["world_size"]:
        raise ConfigError(f"ROOT {cfg.root} does not exist in a world of {lay['world_size']} ranks")
    if lay["nnodes"] > 1:
        try:
            socket.getaddrinfo(lay["master_addr"], lay["master_port"])
        except socket.gaierror as e:
            raise PreflightError(f"MASTER_ADDR {lay['master_addr']!r} does not resolve ({e}); "
                                 "set it to node 0's hostname or IP") from None
        if lay["node_rank"] == 0 and not _port_free(lay["master_port"]):
            raise PreflightError(f"MASTER_PORT {lay['master_port']} is already in use on this host; "
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
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from suite.dist import PreflightError

    try:
        preflight(cfg, lay)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PreflightError as e:
        print(f"preflight failed: {e}", file=sys.stderr)
        return EXIT_PREFLIGHT

    run_id = a.run_id or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    results_root = Path(a.results_root)
    run_dir = results_root / run_id
    suite_opts = ["--results-dir", str(run_dir), "--run-id", run_id]
    for opt in ("min_bytes", "max_bytes", "step_factor", "dtypes", "redops", "root", "warmup", "iters", "timing",
                "pipeline_depth", "precision_pct", "max_time_s", "backend", "device", "timeout_s"):
        v = getattr(a, opt)
        if v is not None:
            suite_opts += [f"--{opt.replace('_', '-')}", str(v)]
    files = [str((EXPERIMENTS_DIR / f"{n}.py").relative_to(ROOT)) for n in names]
    cmd = torchrun_command(lay, files, suite_opts, passthrough)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default, set quietly and recorded
    if lay["node_rank"] == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
    print(f"# run {run_id}: {lay['nnodes']} node(s) x {lay['nproc']} rank(s), experiments: {', '.join(names)}",
          flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait()
    if lay["node_rank"] == 0 and (run_dir / "bench.json").exists():
        update_latest(results_root, run_dir)
        print(f"# results: {run_dir / 'bench.json'} (also {results_root / 'latest'})", flush=True)
        write_report(run_dir)
    return EXIT_OK if rc == 0 else EXIT_FAILED


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
