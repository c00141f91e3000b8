"""Bad input typed on make's command line: one line on stderr (make's own ``Error 2`` aside) and status 2,
before anything starts, for every knob a target takes (a value argparse would take for an option, a backend the
target does not run, a misspelled knob); the launcher's command line shown only with V=1."""

from __future__ import annotations

from tests.conftest import make


def said(r) -> list[str]:
    """What a make run said on stderr besides make's own closing line (``make: *** [...] Error 2``)."""
    return [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith(("make: ***", "+ "))]


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
