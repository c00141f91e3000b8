"""Bad input typed on make's command line: one line on stderr (make's own ``Error 2`` aside) and status 2,
before anything starts, for every knob a target takes (a value argparse would take for an option, a backend the
target does not run, a misspelled knob); the launcher's command line shown only with V=1."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.conftest import ROOT, load_script, make


def said(r) -> list[str]:
    """What a make run said on stderr besides make's own closing line (``make: *** [...] Error 2``)."""
    return [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("make: ***")]


def test_a_knob_value_that_looks_like_an_option_is_one_line(tmp_path):
    for knob in ("MIN_BYTES=-1K", "MAX_BYTES=-4", "STEP_FACTOR=-x", "ITERS=-k"):
        r = make("bench-cpu", knob, f"RESULTS={tmp_path / 'r'}", timeout=60)
        assert r.returncode == 2, (knob, r.stderr)
        (line,) = said(r)
        assert line.startswith("error: ") and knob.split("=")[1] in line, (knob, r.stderr)
        assert not (tmp_path / "r").exists()


def test_bench_cpu_with_nccl_points_to_bench_gpu(tmp_path):
    r = make("bench-cpu", "BACKEND=nccl", f"RESULTS={tmp_path / 'r'}", timeout=60)
    assert r.returncode == 2, r.stderr
    (line,) = said(r)
    assert line.startswith("error: ") and "make bench-gpu" in line and "DEVICE" not in line, line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("backend", ["nccl", "mpi"])
def test_doctor_refuses_a_backend_it_does_not_run(tmp_path, backend):
    r = make("doctor", f"BACKEND={backend}", f"RESULTS={tmp_path / 'r'}", timeout=60)
    assert r.returncode == 2, r.stderr
    (line,) = said(r)
    assert line.startswith("error: ") and f"BACKEND={backend}" in line and "make doctor" in line, line
    assert "Gloo" in line and r.stdout == "" and not (tmp_path / "r").exists()


def test_a_misspelled_knob_is_refused_with_the_nearest_before_anything_starts(tmp_path):
    r = make("bench-cpu", "MAXBYTES=64M", "NPROC=0", f"RESULTS={tmp_path / 'r'}", timeout=60)
    assert r.returncode == 2 and not (tmp_path / "r").exists(), r.stderr
    (line,) = r.stderr.splitlines()  # make's own one line: nothing ran, so no recipe's Error 2
    assert "MAXBYTES (did you mean MAX_BYTES?): no such knob" in line, line
    assert r.stdout == ""


@pytest.mark.parametrize(
    "target, typo, near",
    [
        ("bench-gpu", "NPROCS=2", "NPROC"),
        ("doctor", "DOCTOR_ITER=3", "DOCTOR_ITERS"),
        ("compare", "TOLERENCE=0.1", "TOLERANCE"),
        ("report", "RUNS=results/x", "RUN"),
        ("predict", "RANK_PER_NODE=8", "RANKS_PER_NODE"),
        ("compose-up", "NNODE=2", "NNODES"),
        ("k8s", "IMAGES=x", "IMAGE"),
        ("bench-cpu", "DDP_PARAM=1M", "DDP_PARAMS"),
        ("bench-cpu", "SUITE_PROGRES=plain", "SUITE_PROGRESS"),
    ],
)
def test_every_target_refuses_a_misspelled_knob(target, typo, near):
    r = make("-n", target, typo, timeout=60)  # the check runs as make reads its files: -n runs nothing anyway
    assert r.returncode == 2 and f"did you mean {near}?" in r.stderr, r.stderr


def test_known_variables_and_the_environment_pass():
    env = {**os.environ, "MAXBYTES": "64M"}  # the environment is not checked
    r = make(
        "-n", "bench-cpu", "NPROC=2", "MAX_BYTES=64K", "DDP_PARAMS=1M", "SUITE_PROGRESS=plain", "NCCL_DEBUG=INFO",
        "V=1", "DEVICE=cpu", "lower=1", env=env, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_every_name_the_suite_reads_is_known_and_every_documented_make_line_passes():
    from suite.common.knobs import ENV_KNOBS, KNOBS
    from suite.common.switches import SWITCHES

    mv = load_script("make_vars")
    names = {k.make for k in KNOBS} | {k.env for k in ENV_KNOBS} | set(SWITCHES)
    assert not names - mv.known()
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    refused = {}
    for f in files:
        if not f.endswith((".md", ".mk", ".sh", ".yml", "Makefile", "run")) or f.startswith("tests/"):
            continue
        for line in (ROOT / f).read_text().splitlines():
            if re.search(r"(?:\bmake|\$\(MAKE\)|make-status)\s+[\w-]", line):
                for name in re.findall(r"(?<![\w$/.<-])([A-Z][A-Z0-9_]*)=", line):
                    if name not in ("KNOB", "MAXBYTES", "MINE_COUNT") and mv.refusal([name]):  # examples
                        refused.setdefault(name, f)
    assert not refused, refused


def test_the_launchers_command_line_is_shown_only_with_v_1(tmp_path):
    for target in ("bench-cpu", "doctor"):
        quiet = make(target, "NPROC=0", f"RESULTS={tmp_path / 'r'}", timeout=60)
        assert quiet.returncode == 2 and quiet.stdout == "", quiet.stdout
        (line,) = said(quiet)
        assert line.startswith("error: ") and "NPROC" in line, (target, quiet.stderr)
        shown = make(target, "NPROC=0", "V=1", f"RESULTS={tmp_path / 'r'}", timeout=60)
        assert shown.returncode == 2 and "-m suite.launch --nproc 0 " in shown.stdout + shown.stderr, shown.stderr
        assert not (tmp_path / "r").exists()


def test_refusals_read_as_at_a_shell_when_the_tests_run_under_make(tmp_path, monkeypatch):
    """`make test` runs the tests inside make; the make a test starts still answers as the user's does."""
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("MAKEFLAGS", "w")
    r = make("bench-cpu", "ITERS=-k", f"RESULTS={tmp_path / 'r'}", timeout=60)
    assert r.returncode == 2, r.stderr
    assert said(r) == ["error: iters must be a number, got '-k'"], r.stderr
    assert "Entering directory" not in r.stdout, r.stdout
