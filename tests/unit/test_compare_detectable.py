"""A run compared with itself, through ``python -m suite.report compare``: "same (identical runs)", and
the gate passes (one noisy run a side read INCONCLUSIVE and asked for hundreds of repeats)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from suite.report import cli as report
from tests.conftest import ROOT
from tests.unit.test_compare import _rec

FIXTURE = ROOT / "tests" / "fixtures" / "collectives-gloo-2"
N_CASES = 8
BASE_RUNS = (-1.0, 0.0, 1.0)
NEW_RUNS = (-0.5, 0.0, 1.5)
"""Each case's run medians, as multiples of its own between-run spread in log space: the middle run of
each side sits at the case's time, so every measured ratio is 1 and a planted factor is the ratio."""


def _case(i: int, log_offset: float, factor: float) -> dict:
    t = 100.0 * (i + 1) * factor * float(np.exp(log_offset * 0.03 * (i + 1)))  # case i: between-run sd grows with i
    return _rec(i, [t * float(np.exp(w)) for w in np.linspace(-0.05, 0.05, 11)])  # median exactly t


def _side(root: Path, name: str, offsets, factors=lambda i: 1.0) -> str:
    """REPEAT=3 runs ``root/name-r1..r3`` (``make bench-cpu REPEAT=3 RUN_ID=name``); case i times factors(i)."""
    for k, off in enumerate(offsets, 1):
        d = root / f"{name}-r{k}"
        d.mkdir(parents=True)
        run = {
            "machine_info": {"suite": {"n_hosts": 1, "versions": {"torch": "2.13.0+cpu"}}},
            "suite": {"config": {"iters": 11, "warmup_iters": 1}},
            "benchmarks": [{"extra_info": _case(i, off, factors(i))} for i in range(N_CASES)],
        }
        (d / "bench.json").write_text(json.dumps(run))
    return str(root / name)


def _compare(capsys, base: str, new: str) -> tuple[int, str]:
    status = report.main(["compare", base, new])
    return status, capsys.readouterr().out


def _rows(out: str) -> list[list[str]]:
    return [ln.split() for ln in out.splitlines() if ln.startswith(" synthetic-")]


def _pct(token: str) -> float:
    return float(token.rstrip("%")) / 100


def test_a_run_compared_with_itself_is_same_identical_runs(capsys):
    status, out = _compare(capsys, str(FIXTURE), str(FIXTURE))  # one noisy run a side: was INCONCLUSIVE
    assert status == 0, out
    assert "133 matched case(s): 0 slower, 0 faster, 133 same, 0 inconclusive" in out
    assert "-> same (identical runs)" in out and "# gate: PASS (identical runs" in out
    assert "REPEAT=" not in out.split("#case")[1]  # nothing to resolve: no repeat asked for


def test_repeated_runs_compared_with_themselves_are_identical(tmp_path, capsys):
    base = _side(tmp_path, "a", BASE_RUNS)
    status, out = _compare(capsys, base, base)
    assert status == 0 and "-> same (identical runs)" in out, out
    # the same runs given in another order are the same runs
    runs = [f"{base}-r{k}" for k in (3, 1, 2)]
    status, out = _compare(capsys, base, ",".join(runs))
    assert status == 0 and "-> same (identical runs)" in out, out
