"""pytest glue: the suite runs as ``torchrun ... -m pytest -p suite.harness.pytest.plugin``.

Every rank runs the same collection with the same options. This plugin

- adds the suite's options and builds one validated ``BenchConfig``;
- gives tests the ``bench_cfg`` and ``dist_ctx`` fixtures (the group is started
  once per session on first use and destroyed at the end);
- turns a harness ``Measurement`` into a pytest-benchmark entry (suite/harness/pytest/results_file.py ``submit``):
  the stats pytest-benchmark stores and compares are the cross-rank samples,
  and ``extra_info`` is the suite's record;
- on rank 0 only: rewrites ``<results-dir>/bench.json`` atomically after every
  case (marked incomplete until the session ends; suite/harness/pytest/results_file.py), shows its
  progress (suite/common/progress.py: a live line on a terminal, periodic lines elsewhere) and
  prints nccl-tests-style tables; other ranks keep quiet except for failures, which they print to stderr
  (suite/harness/pytest/rank_output.py).

A case that raised on this rank alone stops the session (suite/harness/pytest/failure_notes.py). What the plugin
keeps for the session is a ``RunState`` (suite/harness/pytest/run_state.py).
"""

from __future__ import annotations

import gc
import os
import sys
import time

import pytest

from suite import registry
from suite.errors import CaseFailed, CaseSkipped, StepNotTaken
from suite.harness import profiling
from suite.harness.pytest import bench_adapter, failure_notes, rank_output, terminal
from suite.common import progress
from suite.harness.pytest.results_file import submit, write_results
from suite.harness.pytest.run_state import RUN, RunState, rank_from_env, state
from suite.common import failures, fileio
from suite.common.config import (
    ConfigError,
    build_config,
    config_from_json,
)
from suite.common.knobs import KNOBS, settings_from_env
from suite.common.switches import switch
from suite.system import sysinfo

pytest_plugins = ("suite.watch.plugin",)  # the training watch's line on the terminal, past the case's capture

SKIP = pytest.StashKey[CaseSkipped]()
"""What skipped a case, kept on its test item for the skip's record: the world size it needs (``needs_ranks``), or
whether it is a probe's step not taken (StepNotTaken)."""


def pytest_addoption(parser):
    g = parser.getgroup("suite", "distributed-communication suite")
    for k in KNOBS:
        g.addoption(f"--{k.flag}", dest=f"suite_{k.field}", default=None, help=k.help)
    g.addoption(
        "--suite-config",
        default=None,
        help="the validated config the launcher wrote (config.json); replaces the options above",
    )
    g.addoption("--results-dir", default=None, help="directory for bench.json (rank 0 writes it)")
    g.addoption("--run-id", default=None, help="identifier stored with the results")
    g.addoption(
        "--show-benchmark-table",
        action="store_true",
        default=False,
        help="also print pytest-benchmark's own statistics table",
    )


def _suite_config(config):
    o = config.option
    if o.suite_config:
        return config_from_json(o.suite_config)
    return build_config(**{k.field: getattr(o, f"suite_{k.field}") for k in KNOBS}, **settings_from_env())


def pytest_configure(config):
    try:
        bench_adapter.check_version()
        terminal.check_version()
        config.addinivalue_line("filterwarnings", bench_adapter.UNUSED_FIXTURE)
        cfg = _suite_config(config)
        # fd 1 is still the real stdout here: pytest's capture is suspended between its phases
        mode = progress.mode(stdout_is_terminal=progress.is_terminal(1))
        every_s = switch("SUITE_PROGRESS_S")
        all_ranks_output = switch("SUITE_ALL_RANKS_OUTPUT")
    except (ConfigError, bench_adapter.UnsupportedVersion, terminal.UnsupportedVersion, OSError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None
    if mode == "live" and (config.getoption("capture", "fd") == "no" or all_ranks_output):
        mode = "plain"  # the tests' prints (-s) or the other ranks' output would write over the line
    rank = rank_from_env()
    st = config.stash[RUN] = RunState(
        cfg=cfg, rank=rank, progress_mode=mode if rank == 0 else "off", progress_every_s=every_s
    )
    if st.progress_mode == "live":
        # the live line's own handle on the terminal: while a test runs, pytest points fd 1 at its capture
        st.tty = os.fdopen(os.dup(1), "w", encoding=sys.stdout.encoding or "utf-8", errors="replace")


def pytest_sessionstart(session):
    config = session.config
    st = state(config)
    if st is None or st.rank == 0:
        return
    # pytest-benchmark's own saving (--benchmark-autosave/--benchmark-save/--benchmark-json)
    # belongs to rank 0, or every rank would store a copy of the run.
    bench_adapter.silence_session(config)
    if not switch("SUITE_ALL_RANKS_OUTPUT"):
        rank_output.quiet_rank(config, st)


# SUITE_PROFILE=1: a torch.profiler trace of every case (suite/harness/profiling.py).
@pytest.fixture(autouse=True)
def suite_profile(request):
    """With SUITE_PROFILE set: a trace of this case on this rank, saved with the run's results."""
    nodeid = request.node.nodeid
    results_dir = getattr(request.config.option, "results_dir", None)
    if not profiling.wanted(nodeid) or not results_dir:
        yield None
        return
    with profiling.profile_to(profiling.trace_path(results_dir, nodeid, rank_from_env())) as prof:
        yield prof


@pytest.fixture(scope="session")
def bench_cfg(request):
    """The run's validated BenchConfig."""
    return request.config.stash[RUN].cfg


@pytest.fixture(scope="session")
def dist_ctx(request):
    """The started process group (once per session), destroyed at session end."""
    from suite.harness.dist import destroy_distributed, init_distributed
    from suite.common.backends import PreflightError
    import torch.distributed as dist

    config = request.config
    st = config.stash[RUN]
    cfg = st.cfg
    started = time.perf_counter()
    try:
        ctx = init_distributed(cfg, results_dir=config.option.results_dir, heartbeat_timeout_s=cfg.heartbeat_timeout_s)
    except (PreflightError, ConfigError) as e:
        pytest.exit(f"preflight failed: {e}", returncode=3)
    from suite.harness import journal

    j = journal.install(ctx.rank, config.option.results_dir)  # every op recorded; dumps for the hang diagnosis
    st.phases.timeline = j.timeline  # phases, samples and cases become spans of the run's trace
    per_rank: list = [None] * ctx.world_size
    dist.all_gather_object(per_rank, sysinfo.collect_local(), group=ctx.group)
    # What exists now (torch, pytest, the group) lives as long as the session: moved out of the collector's
    # sight, a full collection (the harness's before a case that measures peak memory) scans only what the
    # cases made: about 1 s less per such case on a loaded 2-core machine (docs/reports.md).
    gc.collect()
    gc.freeze()
    st.phases.add("start", time.perf_counter() - started, started=started)
    st.machine = sysinfo.collect_global(per_rank) | {
        "backend": ctx.backend,
        "device": str(ctx.device),
        "world_size": ctx.world_size,
    }
    yield ctx
    destroy_distributed(ctx)


@pytest.fixture(scope="session")
def _suite_harness(request, dist_ctx, bench_cfg):
    from suite.harness.runner import Harness

    return Harness(
        dist_ctx,
        bench_cfg,
        keep_rank_samples=switch("SUITE_KEEP_RANK_SAMPLES"),
        phases=request.config.stash[RUN].phases,
    )


class _Bridge:
    """What a declared case's test function gets as ``harness``: run the case, hand the
    result to pytest-benchmark, turn the harness's outcomes into pytest's."""

    def __init__(self, request, benchmark, harness):
        self.request, self.benchmark, self.harness = request, benchmark, harness

    def run(self, case) -> dict:
        try:
            m, rec = self.harness.run(case)
        except CaseSkipped as e:
            self.request.node.stash[SKIP] = e  # the skip's record reads it (pytest_runtest_makereport)
            pytest.skip(str(e))
        except CaseFailed as e:  # alike on every rank, and the run goes on: the launcher names it
            self.request.config.stash[RUN].failed.append(
                {"case": self.request.node.nodeid, "message": str(e).strip()[:500]}
            )
            pytest.fail(str(e), pytrace=False)
        submit(self.request, self.benchmark, m, rec)
        return rec


@pytest.fixture
def harness(request, benchmark, _suite_harness):
    """Runs declared cases (suite/case.py) for the test that asks for it."""
    return _Bridge(request, benchmark, _suite_harness)


def pytest_generate_tests(metafunc):
    """Parametrize every test made by ``suite.case.experiment_test`` with its declared cases."""
    provider = getattr(metafunc.function, "suite_cases", None)
    if provider is None or "suite_case" not in metafunc.fixturenames:
        return
    from suite.harness.dist import read_launch_env

    cases = provider(metafunc.config.stash[RUN].cfg, read_launch_env().world_size)
    metafunc.parametrize("suite_case", cases, ids=[c.label for c in cases])


def pytest_benchmark_update_machine_info(config, machine_info):
    st = state(config)
    info = st.machine if st is not None else None
    if info:
        machine_info["suite"] = info


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each case's wall time and phases also count to its experiment (suite.phase_seconds_by_experiment); the
    case is a span of the run's trace (suite/harness/journal/timeline.py)."""
    st = state(item.config)
    if st is None:
        yield
        return
    started = time.perf_counter()
    with st.phases.of_experiment(registry.experiment_of(item.nodeid)):
        yield
    if st.phases.timeline is not None:
        st.phases.timeline.span("case", item.name, started, time.perf_counter(), {"case": item.nodeid})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A case that raised leaves its journal at once (suite/harness/journal/__init__.py), before pytest formats the
    traceback: when a peer died, torchrun ends this rank within a second."""
    j = sys.modules.get("suite.harness.journal")
    if j is not None and j.current() is not None and j.current().case != item.nodeid:
        j.current().set_case(item.nodeid)  # the session's first case: the journal was installed in its setup
    outcome = yield
    exc = outcome.excinfo[1] if outcome.excinfo else None
    failure_notes.dump_journal(exc)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    st = state(item.config)
    skip = item.stash.get(SKIP, None)
    if rep.skipped and isinstance(skip, StepNotTaken):  # no skipped case: in no list (pytest_report_teststatus)
        rep.step_not_taken = True
    elif st is not None and rep.skipped and isinstance(rep.longrepr, tuple):  # every skip, with its reason
        reason = str(rep.longrepr[2])
        st.skipped.append(
            {"case": item.nodeid, "reason": reason[len("Skipped: ") :] if reason.startswith("Skipped: ") else reason}
            | ({"needs_ranks": skip.needs_ranks} if skip is not None and skip.needs_ranks is not None else {})
        )
    failure_notes.stop_the_session(item, call, rep)


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    """A probe's step not taken is no skipped case: pytest's counts and its list of skips leave it out, and its
    progress shows no letter for it."""
    if getattr(report, "step_not_taken", False):
        return "", "", "probe stopped"
    return None


def _inject_fault(item) -> None:
    """SUITE_INJECT_FAULT=<action>:<rank>:<n>: before the n-th test (0-based), rank <rank>
    kills (SIGKILL), terminates (SIGTERM), freezes (SIGSTOP) itself, exits(3), or raises.
    For the suite's own failure tests: the faults are real process events."""
    inj = switch("SUITE_INJECT_FAULT")  # checked before the ranks started (suite/common/switches.py check_switches)
    if inj is None:
        return
    action, rank = inj.action, inj.rank
    st = item.config.stash[RUN]
    st.n_tests += 1
    if rank != st.rank or st.n_tests != inj.n:
        return
    import signal

    sys.stderr.write(f"[rank {rank}] injecting fault: {action}\n")
    sys.stderr.flush()
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "term":
        os.kill(os.getpid(), signal.SIGTERM)
    elif action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "exit":
        os._exit(3)
    elif action == "raise":
        raise RuntimeError(f"injected error on rank {rank}")


def pytest_runtest_setup(item):
    j = sys.modules.get("suite.harness.journal")
    if j is not None and j.current() is not None:
        j.current().set_case(item.nodeid)  # the case a hung op belongs to
    st = state(item.config)
    if st is not None and st.live is not None:
        st.live.update(case=item.nodeid)
    if st is not None and st.rank == 0:
        progress.note_case(item.config.option.results_dir, item.nodeid)  # an interrupt names it
    _inject_fault(item)


def pytest_runtest_logreport(report):
    rank_output.failure_line(report)


def pytest_collection_finish(session):
    st = state(session.config)
    if st is None:
        return
    st.total, st.done, st.progress_t0 = len(session.items), 0, time.time()
    st.progress_last = st.progress_t0
    if st.progress_mode == "live" and session.items:
        rank_output.start_live(session.config, st)


def pytest_runtest_teardown(item, nextitem):
    """Rank 0: its progress moves on (suite/harness/pytest/rank_output.py)."""
    rank_output.after_case(item, nextitem)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    rank_output.stop_live(config)  # before anything prints the summary (also after a failure or Ctrl-C)
    if exitstatus == pytest.ExitCode.INTERRUPTED and state(config) is not None:  # the launcher's lines say it
        terminal.forget_interrupt(config.pluginmanager.get_plugin("terminalreporter"))
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        # pytest's 5 would read as the suite's "lost a peer"; say what happened instead
        sys.stderr.write("error: the case selection (K= / -k) matched no case of the chosen experiments\n")
        session.exitstatus = failures.EXIT_NOTHING_SELECTED
    st = state(config)
    if st is not None:
        from suite.harness.dist import EndOfRun

        if st.phases.timeline is not None:  # this rank's part of the run's trace (suite/harness/journal/timeline.py)
            st.phases.timeline.write_part("end of session")
        st.end = EndOfRun(st.rank, config.option.run_id)
        st.end.ending()  # rank 0: its cases are over, its last write follows
        ok = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        st.ran_to_the_end = exitstatus in ok and not (session.shouldstop or session.shouldfail)
    if st is not None and st.rank == 0 and st.records:
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        try:
            write_results(config, complete=not interrupted and session.shouldstop is False, exitstatus=int(exitstatus))
        except fileio.ResultsWriteError as e:  # one line (the launcher names it too); bench.json keeps its last cases
            sys.stderr.write(f"error: {e}\n")
            failures.record_failure(config.option.results_dir, 0, str(e), kind=e.failure_kind)
            session.exitstatus = failures.EXIT_IO


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    rank_output.summary(terminalreporter, config)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    rank_output.stop_live(config)
    st = state(config)
    if st is not None and st.end is not None:  # torchrun ends every rank at the first that exits non-zero
        if st.rank == 0:
            st.end.done()
        elif st.ran_to_the_end:
            st.end.wait()
    if st is not None and st.tty is not None:
        tty, st.tty = st.tty, None
        tty.close()
