"""torchrun started warm (suite/launch/warm.py): it runs the job it is handed, in the environment and directory it is
handed, as ``python -m torch.distributed.run`` would; and a run that preflight refuses leaves nothing behind, with no
rank started."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from suite.common.backends import TorchFacts
from suite.common.failures import EXIT_PREFLIGHT
from suite.launch import cli
from suite.launch.warm import WarmTorchrun

pytestmark = pytest.mark.slow


def test_the_job_runs_with_the_environment_and_directory_handed_over(tmp_path, monkeypatch):
    """The environment is the one handed over, not the one the process started with: a variable set only before the
    start is gone. Started from another directory, with no PYTHONPATH: it still finds the suite."""
    monkeypatch.setenv("SUITE_TEST_STALE", "from-the-start")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    warm = WarmTorchrun.start()
    try:
        assert warm.facts() == TorchFacts.here()  # what torch has, as read in this process
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "--no-python"]
        cmd += ["sh", "-c", 'echo "$RANK $WORLD_SIZE $HANDED ${SUITE_TEST_STALE:-unset} $(pwd)" > "out.$RANK"']
        env = {k: v for k, v in os.environ.items() if k != "SUITE_TEST_STALE"}
        proc = warm.go(cmd, {**env, "HANDED": "yes"}, tmp_path)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()[-3000:]
    finally:
        warm.close()
    for rank in (0, 1):
        assert (tmp_path / f"out.{rank}").read_text().split() == [str(rank), "2", "yes", "unset", str(tmp_path)]


def test_closed_before_its_job_it_ends_having_started_nothing():
    warm = WarmTorchrun.start()
    warm.close()
    assert warm.proc.poll() is not None
    assert psutil.Process().children(recursive=True) == []


def test_only_torchrun_commands_are_handed_over(tmp_path):
    warm = WarmTorchrun.start()
    try:
        with pytest.raises(ValueError, match="not a torchrun command"):
            warm.go([sys.executable, "-m", "pytest"], dict(os.environ), tmp_path)
    finally:
        warm.close()
    assert warm.proc.poll() is not None


def test_a_run_preflight_refuses_leaves_no_process(tmp_path, capsys):
    """The launcher in this process: the warm torchrun it started is its child, and gone when it returns."""
    rc = cli.main(
        ["--max-bytes", "512G", "--nproc", "2", "--experiments", "collectives", "--results-root", str(tmp_path)]
    )
    assert rc == EXIT_PREFLIGHT and "preflight failed" in capsys.readouterr().err
    assert psutil.Process().children(recursive=True) == []
    assert list(tmp_path.iterdir()) == []  # nothing written, no rank started


def test_the_selection_is_collected_by_the_warm_torchrun_and_refused_before_any_rank(tmp_path, capsys, monkeypatch):
    """K= / -k is collected by a fork of the warm torchrun, torch already imported there: the launcher starts no
    interpreter of its own for it (``python -m pytest --collect-only`` imported torch a third time, about 2 s of CPU
    on every run given -k). A selection that matches nothing is refused as before: one line, status 2, no rank, no
    process left, nothing written."""
    started = []

    class Seen(subprocess.Popen):  # the real Popen; it notes what it started
        def __init__(self, args, *a, **kw):
            started.append([str(x) for x in args])
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", Seen)
    argv = ["--nproc", "2", "--experiments", "collectives", "--max-bytes", "1K", "--results-root", str(tmp_path)]
    rc = cli.main([*argv, "--", "-k", "nosuchcase"])
    out, err = capsys.readouterr()
    assert rc == 2 and err == (
        "error: the case selection (K= / -k 'nosuchcase') matches no case of collectives at 2 ranks; nothing started\n"
    )
    assert [cmd[:3] for cmd in started] == [[sys.executable, "-m", "suite.launch.warm"]], started
    assert "# run " not in out and list(tmp_path.iterdir()) == []
    assert psutil.Process().children(recursive=True) == []


def test_the_launcher_itself_never_imports_torch_on_a_torchrun_run(tmp_path):
    """Its preflight rules on what the warm torchrun read of torch once it had imported it: the launcher's own
    import beside it was a second ~2 s of CPU on every run (with ``-k``, a third beside the selection's)."""
    cmd = [sys.executable, "-X", "importtime", "-m", "suite.launch", "--nproc", "2", "--experiments", "collectives"]
    cmd += ["--max-bytes", "1K", "--iters", "1", "--results-root", str(tmp_path), "--", "-k", "all_reduce and sum"]
    env = {**os.environ, "SUITE_REPORT": "0"}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=cli.ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "suite.launch.cli" in imported and "torch" not in imported
