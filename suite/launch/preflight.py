"""Everything a run needs, checked before any process group exists: the layout of nodes and
ranks (exit 2; the knobs are validated by suite.common.config), the case selection (exit 2: ``SelectionCheck``, a
pytest collection of its own, no rank), the backend, device, memory, ports and interfaces (exit 3), the rendezvous
address (exit 4). Starts no rank."""

from __future__ import annotations

import argparse
import os
import socket

from suite.common.backends import (
    PreflightError,
    TorchFacts,
    check_planted_backend,
    record_of,
    resolve_backend,
    resolve_device,
)
from suite.common.config import ConfigError, check_timing_mode


class RendezvousError(RuntimeError):
    """MASTER_ADDR/MASTER_PORT cannot work; nothing was started."""


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ConfigError(f"{name}={v!r} is not an integer") from None


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
    if not (1 <= rdzv_timeout <= 86400):
        raise ConfigError(f"--rdzv-timeout-s must be between 1 and 86400 seconds, got {a.rdzv_timeout_s!r}")
    return {
        "nproc": nproc,
        "nnodes": nnodes,
        "node_rank": node_rank,
        "master_addr": addr,
        "master_port": port,
        "world_size": nproc * nnodes,
        "rdzv_timeout_s": rdzv_timeout,
    }


def preflight_with_selection(
    cfg,
    lay: dict,
    names: list[str],
    files: list[str],
    passthrough: list[str],
    cwd,
    torch_facts=TorchFacts.here,
    warm=None,
) -> None:
    """``preflight``, and the case selection of ``passthrough`` (``SelectionCheck`` on the experiments' ``files``,
    in the ``warm`` torchrun where there is one) collected beside it: ConfigError, PreflightError or
    RendezvousError as they find."""
    selection = selection_args(passthrough)
    check = SelectionCheck(cfg, lay, files, selection, cwd, warm) if selection else None
    try:
        preflight(cfg, lay, torch_facts)
        if check is not None:
            check.result(names, lay["world_size"])
    finally:
        if check is not None:
            check.close()


def selection_args(passthrough: list[str]) -> list[str]:
    """The pytest options of ``passthrough`` that choose cases (``-k`` and ``-m``, the last of each, as pytest
    takes them), as ``["-k", expr, ...]``; empty when none is given (every case runs: nothing to check)."""
    ap = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    ap.add_argument("-k", dest="k")
    ap.add_argument("-m", dest="m")
    known, _ = ap.parse_known_args(passthrough)
    return [x for flag, v in (("-k", known.k), ("-m", known.m)) if v is not None for x in (flag, v)]


class SelectionCheck:
    """Whether the case selection (``K=`` / ``-k``, ``-m``) matches any case, found by pytest's own collection
    of the chosen experiments in a process of its own, before any rank starts: the cases an experiment declares
    depend on the config and the world size, and ``-k`` is pytest's expression over their names. Started
    first, beside the launcher's own checks; ``result`` waits for it. With a ``warm`` torchrun (suite/launch/warm.py)
    the collection is a fork of that process, torch already imported there (an interpreter of its own imports
    torch anew: about 2 s of CPU); without one (BACKEND=mpi), ``python -m pytest``. Only a collection that ran and
    matched nothing refuses the run; any other trouble (an experiment that does not import) is left to the ranks,
    which name it as before."""

    def __init__(self, cfg, lay: dict, files: list[str], selection: list[str], cwd, warm=None):
        import json
        import subprocess
        import sys
        import tempfile

        self.selection = selection
        self._tmp = tempfile.TemporaryDirectory(prefix="suite-selection-")
        config = os.path.join(self._tmp.name, "config.json")
        with open(config, "w") as fh:
            json.dump(cfg.as_dict(), fh, default=str)
        env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}  # no store to reach
        env.update(
            RANK="0",
            WORLD_SIZE=str(lay["world_size"]),
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE=str(lay["nproc"]),
            SUITE_PROGRESS="off",
            OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
            PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # the plugins a rank autoloads choose no case; some take seconds
        )
        args = ["-p", "pytest_benchmark.plugin", "-p", "suite.harness.pytest.plugin", "-q", "--collect-only"]
        args += ["-p", "no:faulthandler", *files, "--suite-config", config, *selection]
        self._warm, self._proc = warm, None
        if warm is not None:
            warm.collect(args, env, cwd)
        else:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def result(self, names: list[str], world_size: int) -> None:
        """Wait for the collection; ConfigError when the selection matched no case."""
        from suite.common.failures import EXIT_NOTHING_SELECTED

        try:
            rc = self._warm.collected() if self._proc is None else self._proc.wait()
        finally:
            self.close()
        if rc == EXIT_NOTHING_SELECTED:  # the plugin's status for "no tests collected"
            chosen = ", ".join(f"{flag} {value!r}" for flag, value in zip(self.selection[::2], self.selection[1::2]))
            raise ConfigError(
                f"the case selection (K= / {chosen}) matches no case of {', '.join(names)} at {world_size} ranks; "
                "nothing started"
            )

    def close(self) -> None:
        """End the collection if it still runs (the warm torchrun's ends with it: its ``close``), and remove its
        config file."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._tmp.cleanup()


def preflight(cfg, lay: dict, torch_facts=TorchFacts.here) -> None:
    """Environment checks; raise PreflightError with the fix. Starts nothing. ``torch_facts()``: what torch says
    of devices and backends (the warm torchrun's, which imports torch beside this check: suite/launch/warm.py)."""
    facts = torch_facts()
    device = resolve_device(cfg.device, facts)
    why = record_of(cfg.backend).call("launch_problem", lay)  # MPI: mpi4py, mpiexec, the nodes; before the
    if why is not None:  # generic line of resolve_backend
        raise PreflightError(why)
    backend = resolve_backend(cfg.backend, device, facts)
    check_planted_backend(backend, device)
    check_timing_mode(cfg.timing_mode, backend, device)  # auto resolved: cuda_graph on a CPU host
    if device == "cuda" and record_of(backend).one_gpu_per_rank:
        if lay["nproc"] > facts.cuda_devices:
            raise PreflightError(
                f"NPROC={lay['nproc']} but this node has {facts.cuda_devices} GPU(s); "
                f"{record_of(backend).shown} needs one GPU per rank"
            )
    if cfg.root >= lay["world_size"]:
        raise ConfigError(f"ROOT {cfg.root} does not exist in a world of {lay['world_size']} ranks")
    # Memory: a collective case holds its input, output and expected result, and the
    # expected value is built in float64 (x2 for float32): ~8x the largest message per rank.
    need = 8 * cfg.max_bytes * lay["nproc"]
    avail = _mem_available()
    if avail is not None and need > 0.9 * avail:
        raise PreflightError(
            f"MAX_BYTES={cfg.max_bytes} with {lay['nproc']} ranks needs about "
            f"{need / 2**30:z.1f} GiB but {avail / 2**30:z.1f} GiB is available; lower MAX_BYTES or NPROC"
        )
    from suite.system.sysinfo import container_limits

    lim = container_limits()
    shm = lim.get("dev_shm_bytes")
    if lim.get("in_container") and shm is not None and shm < 32 * 2**20:
        raise PreflightError(
            f"/dev/shm is {shm / 2**20:z.0f} MiB in this container; torch.multiprocessing needs more: "
            "run it with --shm-size=256m (compose: shm_size: 256m)"
        )
    if lay["nnodes"] > 1:
        try:
            socket.getaddrinfo(lay["master_addr"], lay["master_port"])
        except socket.gaierror as e:
            raise RendezvousError(
                f"MASTER_ADDR {lay['master_addr']!r} does not resolve ({e}); set it to node 0's hostname or IP"
            ) from None
        if lay["node_rank"] == 0 and not _port_free(lay["master_port"]):
            raise RendezvousError(
                f"MASTER_PORT {lay['master_port']} is already in use on this host; choose another port"
            )
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        names = os.environ.get(var)
        if names:
            have = {n for _, n in socket.if_nameindex()}
            for name in names.split(","):
                name = name.strip().lstrip("^=")
                if name and name not in have and not any(h.startswith(name) for h in have):
                    raise PreflightError(
                        f"{var}={names!r}: no interface {name!r} on this host (have: {', '.join(sorted(have))})"
                    )


def _mem_available() -> int | None:
    import psutil

    return psutil.virtual_memory().available


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True
