"""Command-line front door: validate, then start the ranks with torchrun.

    python -m suite.launch --nproc 2 --max-bytes 1M [--experiments collectives] [-- -k all_reduce]

Everything a run needs is checked here, before any process group exists: the knobs (exit 2), the
backend/device/world layout and the network settings (exit 3). Then torchrun starts the ranks, each running
``pytest -p suite.harness.pytest.plugin experiments/...``; rank 0 writes ``<results-root>/<run-id>/bench.json`` and
this process points ``<results-root>/latest`` at it (unless the run was interrupted). Cases the world was too small
for run after, in a second pass at the world they need (suite/launch/passes.py). The exit status is the
ranks' (1 on any failure).

Multi-node (compose, Slurm, several hosts): pass --nnodes/--node-rank/--master-addr (or
NNODES/NODE_RANK/MASTER_ADDR/MASTER_PORT in the environment); every node runs the same command.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import traceback
from pathlib import Path

from suite import registry

from suite.common import flight_recorder, progress
from suite.common.config import ConfigError, build_config
from suite.common.knobs import KNOBS, settings_from_env
from suite.common.switches import check_switches, switch
from suite.common.failures import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_IO,
    EXIT_OK,
    EXIT_PREFLIGHT,
    EXIT_RENDEZVOUS,
    EXIT_SIGINT,
    status_line,
)
from suite.inject import launcher as inject
from suite.launch import mpi, passes, world
from suite.launch.argv import OptionParser  # argparse, its errors one line and MIN_BYTES=-1K a value
from suite.common.fileio import write_error, write_json_atomic
from suite.common.backends import record_of
from suite.launch.preflight import RendezvousError, preflight_with_selection
from suite.launch.supervise import final_status, run_ranks, stamp_status
from suite.launch.warm import WarmTorchrun
from suite.postmortem.trace import write_trace

ROOT = Path(__file__).resolve().parents[2]  # the checkout: suite/launch/ is two levels down


def available_experiments() -> list[str]:
    return list(registry.discover())


def all_experiments() -> list[str]:
    """What EXPERIMENTS=all runs: every experiment but those whose spec says otherwise (``in_all``: the
    doctor is a health check, ``make doctor``, not a benchmark)."""
    return world.asked_experiments("all")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1 :]
    else:
        passthrough = []
    ap = OptionParser(
        prog="python -m suite.launch",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--nproc", default=None, help="ranks per node (NPROC_PER_NODE; default auto: one per usable core, 2 to 4)"
    )
    ap.add_argument("--nnodes", default=None, help="number of nodes (NNODES; default 1)")
    ap.add_argument("--node-rank", default=None, help="this node's index (NODE_RANK; default 0)")
    ap.add_argument("--master-addr", default=None, help="host of node 0 (MASTER_ADDR) for multi-node runs")
    ap.add_argument("--master-port", default=None, help="port on node 0 (MASTER_PORT; default 29500)")
    ap.add_argument("--rdzv-timeout-s", default="120", help="how long nodes wait for each other at start")
    ap.add_argument("--experiments", default="all", help="comma-separated experiment modules, or all")
    ap.add_argument("--results-root", default="results", help="where run directories are created")
    ap.add_argument(
        "--debug",
        action="store_true",
        help="TORCH_DISTRIBUTED_DEBUG=DETAIL: collective shape/order mismatches become named errors",
    )
    ap.add_argument("--run-id", default=None, help="run directory name (default: UTC timestamp)")
    ap.add_argument(
        "--check",
        action="store_true",
        help="validate the knobs, experiments and run location, then exit (0, or 2 with the message); "
        "starts nothing (docker/compose-run.sh checks every compose knob this way first)",
    )
    for k in KNOBS:
        ap.add_argument(f"--{k.flag}", dest=k.field, default=None, help=f"{k.help} ({k.make})")
    return ap.parse_args(argv), passthrough


def config_from_args(a: argparse.Namespace, env=None):
    """The run's config: the options, and the experiment knobs from the environment (DDP_*, MP_*, ...)."""
    return build_config(**{k.field: getattr(a, k.field) for k in KNOBS}, **settings_from_env(env))


def torchrun_command(lay: dict, files: list[str], suite_opts: list[str], passthrough: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(lay["nproc"])]
    if lay["nnodes"] == 1:
        cmd += ["--standalone"]
    else:
        cmd += [
            "--nnodes",
            str(lay["nnodes"]),
            "--node-rank",
            str(lay["node_rank"]),
            "--master-addr",
            lay["master_addr"],
            "--master-port",
            str(lay["master_port"]),
            # static rendezvous waits 30 min for a missing node by default
            "--rdzv-conf",
            f"timeout={int(lay['rdzv_timeout_s'])},read_timeout={int(lay['rdzv_timeout_s'])}",
        ]
    return cmd + pytest_argv(files, suite_opts, passthrough)


def ranks_command(backend: str, lay: dict, files, suite_opts, passthrough, env: dict, where: dict) -> list[str]:
    """The command that starts the ranks: torchrun, or for a backend started by mpiexec (BACKEND=mpi) mpiexec, with
    the store this process then hosts for them (kept in ``where`` while they run; ``env`` gets its address:
    suite/launch/mpi.py)."""
    if record_of(backend).torchrun:
        return torchrun_command(lay, files, suite_opts, passthrough)
    where["store"] = mpi.host_store(env, lay)
    if mpi.across_hosts(lay, env):  # node 0's mpiexec starts every node's ranks once every node has joined
        mpi.share_node_env(where["store"], env, lay)
        mpi.await_followers(where["store"], lay)
        where["followers"] = lay
    return mpi.command(lay, pytest_argv(files, suite_opts, passthrough), env)


def pytest_argv(files: list[str], suite_opts: list[str], passthrough: list[str]) -> list[str]:
    """What every rank runs after ``python``: the same pytest session under torchrun and mpiexec."""
    # hypothesis's pytest plugin (a dev dependency, for the suite's own tests) costs each rank ~1 s of CPU to import
    argv = ["-m", "pytest", "-p", "suite.harness.pytest.plugin", "-p", "no:hypothesispytest", "-q", "-rs"]
    return argv + [*files, *suite_opts, *passthrough]


RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

STARTED_MARKS = ("bench.json", "failures", "hang")
"""What only a started run leaves in its directory: no rank of a new run can have written them before this
node's torchrun starts (every node must join the rendezvous first), so finding one means an earlier run."""


def check_run_location(results_root: str, run_id: str | None) -> None:
    """RESULTS must be a directory (or not exist yet) and RUN_ID one plain name inside it, naming no
    earlier run: its bench.json or failure notes would be read as this run's."""
    if run_id is not None and (not RUN_ID_RE.fullmatch(run_id) or run_id == "latest"):
        raise ConfigError(
            f"RUN_ID {run_id!r} must be one name of letters, digits, '.', '_' and '-' "
            "(no '/', no leading '.', not 'latest'): runs live directly in RESULTS"
        )
    root = Path(results_root)
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                raise ConfigError(f"RESULTS {results_root!r}: {p} exists and is not a directory")
            break
    if run_id is None:
        return
    run_dir = root / run_id
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"RUN_ID {run_id!r}: {run_dir} exists and is not a directory; choose another RUN_ID")
    left = [m for m in STARTED_MARKS if (run_dir / m).exists()]
    if left:
        raise ConfigError(
            f"{run_dir} already holds a run ({', '.join(left)}); choose another RUN_ID or remove that directory"
        )


def update_latest(results_root: Path, run_dir: Path) -> None:
    """Point results_root/latest at run_dir (atomic symlink swap); ResultsWriteError names the link."""
    link = results_root / "latest"
    tmp = results_root / f".latest.{os.getpid()}"
    try:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        os.symlink(run_dir.name, tmp)
        os.replace(tmp, link)
    except OSError as e:
        raise write_error(link, e) from None


def main(argv: list[str] | None = None) -> int:
    """The run's exit status (docs/failures.md). Whatever fails around the ranks ends in one line naming
    the cause, never a traceback (a launcher bug leaves its traceback in failures/launcher.log)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    where: dict = {}
    status = EXIT_FAILED  # also where the launcher itself failed
    try:
        status = _main(argv, where)
    except KeyboardInterrupt:  # before the ranks started or after they ended: run_ranks forwards it between
        done = where.get("ranks_ended")
        print(
            f"# interrupted by SIGINT after the ranks ended: {done / 'bench.json'} has their results; "
            f"the report was not written - retry with: python -m suite.report html {done}"
            if done is not None
            else "# interrupted by SIGINT before any rank started",
            file=sys.stderr,
            flush=True,
        )
        print(status_line(EXIT_SIGINT), file=sys.stderr, flush=True)
        status = EXIT_SIGINT
    except mpi.NodesError as e:  # BACKEND=mpi across hosts: a node never joined node 0
        print(f"error: {e}; nothing started", file=sys.stderr)
        status = EXIT_RENDEZVOUS
    except Exception as e:  # noqa: BLE001 - the launcher's own bug: one line, the traceback in a file
        print(f"# error: the launcher failed: {type(e).__name__}: {e}{_save_traceback(where)}", file=sys.stderr)
        print(status_line(EXIT_FAILED), file=sys.stderr, flush=True)
    finally:
        if "warm" in where:  # torchrun warmed for ranks that did not start: end it
            where["warm"].close()
        if "followers" in where:  # BACKEND=mpi across hosts: the other nodes end with this node's status
            mpi.release_followers(where["store"], where["followers"], status)
    return status


def _save_traceback(where: dict) -> str:
    """Write the current exception's traceback to <run>/failures/launcher.log; where it went, or ''."""
    run_dir = where.get("run_dir")
    if run_dir is None:
        return ""
    path = run_dir / "failures" / "launcher.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc())
    except OSError:
        return ""
    return f" (traceback in {path})"


def _main(argv: list[str], where: dict) -> int:
    try:
        a, passthrough = parse_args(argv)
        cfg = config_from_args(a)
        names, lay, world_line = world.plan(a, cfg, os.environ)  # NPROC not given: one rank per usable core
        check_run_location(a.results_root, a.run_id)
        check_switches(os.environ, lay["world_size"])  # every SUITE_* switch (suite/common/switches.py SWITCHES)
        inject.check(os.environ, lay["world_size"])  # INJECT's plan (suite/inject/plan.py)
        live = progress.mode(os.environ, progress.is_terminal(sys.stdout)) == "live"
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if a.check:
        print(f"# check: ok ({lay['nnodes']} node(s) x {lay['nproc']} rank(s), experiments: {', '.join(names)})")
        return EXIT_OK
    if not record_of(cfg.backend).torchrun and mpi.across_hosts(lay) and lay["node_rank"] > 0:
        return mpi.follow(lay)  # node 0 checks the run and starts this node's ranks over ssh
    from suite.common.backends import PreflightError, TorchFacts, resolve_backend, resolve_device

    torch_facts = TorchFacts.here
    if record_of(cfg.backend).torchrun:  # torchrun imports torch while preflight runs; no rank starts before run_ranks
        where["warm"] = WarmTorchrun.start()
        torch_facts = where["warm"].facts  # what it found once imported: preflight does not import torch too
    files = [str(registry.cases_file(n).relative_to(ROOT)) for n in names]
    try:  # K= / -k: the case selection collected on the host beside the other checks
        preflight_with_selection(cfg, lay, names, files, passthrough, ROOT, torch_facts, where.get("warm"))
    except (ConfigError, PreflightError, RendezvousError) as e:
        bad = isinstance(e, ConfigError)
        print(f"error: {e}" if bad else f"preflight failed: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT if bad else EXIT_PREFLIGHT if isinstance(e, PreflightError) else EXIT_RENDEZVOUS

    run_id = a.run_id or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    results_root = Path(a.results_root)
    run_dir = results_root / run_id
    # The ranks get the validated config itself, not the raw strings to parse again.
    suite_opts = ["--results-dir", str(run_dir), "--run-id", run_id, "--suite-config", str(run_dir / "config.json")]
    backend = resolve_backend(cfg.backend, resolve_device(cfg.device, facts := torch_facts()), facts)
    env = dict(os.environ)
    cmd = ranks_command(backend, lay, files, suite_opts, passthrough, env, where)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default, set quietly and recorded
    if a.debug:
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    if a.run_id is None:  # a timestamp: checked here (RUN_ID was checked with the other input)
        try:
            check_run_location(a.results_root, run_id)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    env.update(record_of(backend).call("run_env", env, run_dir, facts.version) or {})  # NCCL: its flight recorder
    env.update(flight_recorder.profile_env(env, facts.version))  # PROFILE=1: the flight recorder, for the ops' groups
    # Every node creates it: ranks leave failure notes (and NCCL flight-recorder dumps) here.
    try:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise write_error(run_dir, e) from None
        write_json_atomic(run_dir / "config.json", cfg.as_dict())
    except OSError as e:
        print(f"error: {e}; nothing started", file=sys.stderr)
        return EXIT_IO
    where["run_dir"] = run_dir
    announce(run_id, lay, names, env, world_line)
    # rank 0's live progress line shares this terminal (on node 0): torchrun's stderr lines erase it before
    # they print (rich draws it again below them), and a line left by a killed rank 0 is erased after the run
    live = live and lay["node_rank"] == 0
    erase = live and sys.stderr.isatty()
    rc, signum, first = run_ranks(cmd, env, run_dir, ROOT, erase, lay["world_size"], where.get("warm"))
    where["ranks_ended"] = run_dir
    write_trace(run_dir)  # <run>/trace.json: the ranks' timelines merged (suite/postmortem/trace.py)
    if live and (rc != 0 or signum):  # rank 0 may not have erased its line itself
        sys.stdout.write(progress.RESET_TERMINAL)
        sys.stdout.flush()
    starter = "torchrun" if record_of(backend).torchrun else Path(cmd[0]).name  # mpiexec, or srun under Slurm
    status, cause = final_status(rc, signum, run_dir, first, with_cause=True, starter=starter)
    if lay["node_rank"] == 0 and (run_dir / "bench.json").exists():
        status, signum = _second_pass(run_dir, run_id, lay, backend, env, erase, status, signum)
        status = _conclude(run_dir, results_root, names, status, signum, cause)
    if status != EXIT_OK:
        print(status_line(status), file=sys.stderr, flush=True)
    return status


def announce(run_id: str, lay: dict, names: list[str], env: dict, world_line: str | None = None) -> None:
    """The run's first line, the world chosen where NPROC was not given, and, before any rank starts, whether this
    host's ranks outnumber its usable cores (the ranks record it too: machine_info, the report's summary)."""
    from suite.system import cpu_load
    from suite.system.sysinfo import container_limits

    print(f"# run {run_id}: {lay['nnodes']} node(s) x {lay['nproc']} rank(s), experiments: {', '.join(names)}")
    if world_line is not None:
        print(f"# {world_line}")
    line = cpu_load.describe_share(cpu_load.launch_share(lay["nproc"], env, container_limits().get("cgroup_cpus")))
    if line is not None:
        print(f"# warning: CPU oversubscribed: {line}")
    sys.stdout.flush()


def _second_pass(run_dir: Path, run_id: str, lay: dict, backend: str, env: dict, erase: bool, status: int, signum):
    """The main pass's records stamped, then, where it succeeded on one node, the cases it skipped for want of
    ranks run at the world they need (suite/launch/passes.py); the run's status and signal."""
    passes.mark_main(run_dir)
    if status != EXIT_OK or signum is not None or lay["nnodes"] != 1 or not record_of(backend).torchrun:
        return status, signum

    def start(lay2: dict, cases: list[str], opts: list[str]):
        cmd = torchrun_command(lay2, cases, opts, [])
        return run_ranks(cmd, env, run_dir / passes.SECOND_DIR, ROOT, erase, lay2["world_size"], None)

    return passes.second_pass(run_dir, run_id, lay, start)


def _conclude(run_dir: Path, results_root: Path, names: list[str], status: int, signum, cause) -> int:
    """On node 0, once the ranks have ended: a health check's verdict (0 healthy, EXIT_FINDING when something is
    wrong) where the run succeeded, the status stamped into bench.json, ``latest`` (not for a run that was
    interrupted: it stays at the last run that was not) and the report; the status."""
    for name in names:
        verdict = registry.discover()[name].verdict
        if verdict is not None and status == EXIT_OK:
            status = verdict(run_dir)
    try:
        stamp_status(run_dir, status, signum, cause)
        if signum is None:
            update_latest(results_root, run_dir)
    except OSError as e:  # the ranks' own bench.json stays: valid JSON, marked incomplete until the end
        print(f"# error: {e}; {run_dir / 'bench.json'} is as the ranks left it", file=sys.stderr, flush=True)
        return status or EXIT_IO
    also = f"{results_root / 'latest'} unchanged" if signum is not None else f"also {results_root / 'latest'}"
    from suite.report.run_end import print_end  # the run's last lines: verdict, headlines, time, its files

    print_end(run_dir, status=status, latest=also, report=write_report(run_dir))
    return status


def write_report(run_dir: Path) -> Path | None:
    """The run's HTML/Markdown report (suite.report.cli), also for a partial run: its path. A report
    failure never changes the bench's exit status: it warns and says how to retry (None).
    SUITE_REPORT=0 skips it (the harness's own tests, which do not look at it)."""
    if not switch("SUITE_REPORT"):
        return None
    try:
        from suite.report.cli import write_report as _write

        return Path(_write(run_dir))
    except Exception as e:  # noqa: BLE001 - any failure of the report is reported, never raised
        print(
            f"warning: report not written ({type(e).__name__}: {e}); the results are intact - "
            f"retry with: python -m suite.report html {run_dir}",
            file=sys.stderr,
            flush=True,
        )
        return None


if __name__ == "__main__":
    sys.exit(main())
