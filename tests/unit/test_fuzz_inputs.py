"""Every documented input, fuzzed: either a valid run configuration or a ConfigError
with a message — never another exception, never a started process (reliability.md §8)."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suite.launch import cli as launch
from suite.launch import world
from suite.common.config import ConfigError, build_config
from tests.conftest import ROOT

junk = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            " ",
            "-1",
            "0",
            "1e309",
            "nan",
            "inf",
            "-inf",
            "1K",
            "1G",
            "2.5",
            "abc",
            "NCCL ",
            "gloo;nccl",
            "float8",
            "0x10",
            "1_000",
            "10**9",
            "\x00",
            "🚀",
            "None",
            "1M",
            "64",
        ]
    ),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)

KNOBS = [
    "min_bytes",
    "max_bytes",
    "step_factor",
    "dtypes",
    "redops",
    "root",
    "warmup_iters",
    "iters",
    "timing_mode",
    "pipeline_depth",
    "precision_pct",
    "max_time_s",
    "backend",
    "device",
    "timeout_s",
    "heartbeat_timeout_s",
]


# derandomize: CI must be reproducible; the examples still cover the junk strategies broadly
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.dictionaries(st.sampled_from(KNOBS), junk, max_size=5))
def test_config_is_valid_or_a_clear_error(raw):
    try:
        cfg = build_config(**raw)
    except ConfigError as e:
        assert str(e) and len(str(e)) < 300
        return
    # Anything accepted must be runnable: a finite sweep, positive counts and times.
    assert 1 <= len(cfg.sizes()) <= 64
    assert cfg.iters >= 1 and cfg.timeout_s > 0 and cfg.max_time_s > 0


LAUNCH_FLAGS = [
    "--nproc",
    "--nnodes",
    "--node-rank",
    "--master-port",
    "--rdzv-timeout-s",
    "--experiments",
    "--min-bytes",
    "--iters",
    "--backend",
    "--timing",
    "--dtypes",
]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.sampled_from(LAUNCH_FLAGS), junk), max_size=4))
def test_launcher_validation_is_total(pairs):
    argv = [x for flag, value in pairs for x in (flag, value)]
    try:
        a, _ = launch.parse_args(argv)
        cfg = launch.config_from_args(a)
        _, lay, _ = world.plan(a, cfg, {})  # the experiments, NPROC's default, the layout
    except ConfigError as e:
        assert str(e)
        return
    except SystemExit as e:  # argparse's own usage error (e.g. a value that looks like a flag)
        assert e.code == 2
        return
    assert lay["nproc"] >= 1 and lay["node_rank"] < lay["nnodes"] and 1 <= lay["master_port"] <= 65535
    assert 1 <= lay["rdzv_timeout_s"] <= 86400
    launch.torchrun_command(lay, ["experiments/collectives/cases.py"], [], [])  # builds without error


def _launch(argv, capsys) -> tuple[int, str]:
    """``python -m suite.launch ARGV`` in this process: (exit status, stderr). Only bad input may be
    given: the launcher stops at validation, before it starts anything."""
    try:  # --check: were a bad value ever let through, it returns 0 at once instead of starting a run
        code = launch.main(["--check", *argv])
    except SystemExit as e:  # argparse's own usage error
        code = e.code
    return code, capsys.readouterr().err


def test_cli_bad_value_exits_2_in_a_real_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "suite.launch", "--nproc", "0", "--results-root", str(tmp_path / "r")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error:"), proc.stderr
    assert not (tmp_path / "r").exists()


def test_cli_bad_values_exit_2_fast(tmp_path, capsys):
    for args in (
        ["--nproc", "0"],
        ["--nproc", "abc"],
        ["--nnodes", "2", "--node-rank", "2"],
        ["--master-port", "70000"],
        ["--timing", "fast"],
        ["--min-bytes", "-5"],
        ["--warmup", "x"],
        ["--timeout-s", "-1"],
        ["--heartbeat-timeout-s", "1"],
    ):
        code, err = _launch([*args, "--results-root", str(tmp_path / "r")], capsys)
        assert code == 2, (args, err)
        assert err.startswith("error:"), (args, err)
        assert not (tmp_path / "r").exists()


def test_experiment_knobs_are_checked_before_start(tmp_path, capsys, monkeypatch):
    for env, match in (
        ({"DDP_PARAMS": "lots"}, "DDP_PARAMS"),
        ({"DDP_BUCKETS_MB": "1,x"}, "DDP_BUCKETS_MB"),
        ({"MP_IN": "0"}, "MP_IN"),
    ):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            code, err = _launch(["--nproc", "2", "--results-root", str(tmp_path / "r")], capsys)
        assert code == 2 and match in err, (env, err)
        assert not (tmp_path / "r").exists()


def test_run_location_outside_results_or_on_a_file_exits_2(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    for args, match in (
        (["--run-id", "../../x"], "RUN_ID '../../x' must be one name"),
        (["--run-id", "a/b"], "RUN_ID 'a/b'"),
        (["--run-id", "latest"], "not 'latest'"),
        (["--run-id", ".hidden"], "no leading '.'"),
        (["--results-root", str(tmp_path / "afile")], "is not a directory"),
        (["--results-root", str(tmp_path / "afile" / "sub")], "is not a directory"),
    ):
        root = args[1] if args[0] == "--results-root" else str(tmp_path / "r")
        code, err = _launch(["--nproc", "2", "--results-root", root, *args], capsys)
        assert code == 2, (args, err)
        assert err.startswith("error:") and match in err and "Traceback" not in err, (args, err)
        assert not (tmp_path / "r").exists() and not (tmp_path.parent / "x").exists()


def test_teardown_rate_refuses_zero_runs():
    proc = subprocess.run(
        [sys.executable, "scripts/teardown_rate.py", "0"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "N must be at least 1" in proc.stderr


@pytest.mark.parametrize("args", [["--rounds", "1"], ["--nproc", "1"], ["--env", "DDP_PARAMS"]])
def test_recorder_cost_refuses_bad_input_in_one_line_before_any_run(args):
    cmd = [sys.executable, "scripts/recorder_cost.py", *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == "error: --rounds and --nproc from 2, --iters from 1, --env as KNOB=value\n", proc.stderr


@pytest.mark.parametrize(
    "env, words",
    [
        ({"SUITE_PROGRESS": "fancy"}, "SUITE_PROGRESS='fancy'"),
        ({"SUITE_PROGRESS_S": "soon"}, "SUITE_PROGRESS_S='soon'"),
        ({"SUITE_PROGRESS_S": "-5"}, "SUITE_PROGRESS_S='-5'"),
        ({"SUITE_INJECT_DELAY": "1:0.1@during"}, "SUITE_INJECT_DELAY='1:0.1@during'"),
        ({"SUITE_INJECT_DELAY": "one:0.1"}, "SUITE_INJECT_DELAY='one:0.1'"),
        ({"SUITE_INJECT_DIVERGE": "skipp:1:9"}, "SUITE_INJECT_DIVERGE='skipp:1:9'"),
        ({"SUITE_INJECT_DIVERGE": "skip:1:0"}, "SUITE_INJECT_DIVERGE='skip:1:0'"),
        # --nproc 2: rank 2 would plant nothing
        ({"SUITE_INJECT_DIVERGE": "skip:2:9"}, "not a rank of this run (0..1)"),
    ],
)
def test_bad_progress_and_fault_settings_exit_2_before_any_rank(env, words, monkeypatch, capsys, tmp_path):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, err = _launch(["--nproc", "2", "--results-root", str(tmp_path / "r")], capsys)
    assert code == 2 and words in err and err.count("\n") == 1, err


def test_argparse_refusals_are_one_line_too(tmp_path, capsys):
    """A value argparse would take for an option (``--min-bytes -1K``) reaches the knob's own check; a missing
    value or an unknown option is one line, not argparse's usage."""
    for args, words in (
        (["--min-bytes", "-1K"], "'-1K'"),
        (["--max-bytes", "-4"], "'-4'"),
        (["--nproc"], "--nproc: expected one argument"),
        (["--no-such-option", "1"], "unrecognized arguments: --no-such-option"),
    ):
        code, err = _launch([*args, "--results-root", str(tmp_path / "r")], capsys)
        assert code == 2 and err.startswith("error:") and words in err and len(err.splitlines()) == 1, (args, err)
        assert not (tmp_path / "r").exists()
