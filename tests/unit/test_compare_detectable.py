"""What a comparison says it can tell, proved through ``python -m suite.report compare``: a run compared
with itself is "same (identical runs)" and passes the gate; and the change a noisy pair can detect, per
case and summed up, is exactly where the gate starts calling a planted slowdown slower.

The runs are built without a random generator: every case's run medians sit at fixed multiples of its
time, each run's samples spread evenly about its median, so the statements are checked with 3% margins
on either side of the bound the comparison printed (no CPU's last digit decides a verdict)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from suite.report import cli as report
from tests.conftest import ROOT
from tests.helpers.compare_runs import synthetic_record

FIXTURE = ROOT / "tests" / "fixtures" / "collectives-gloo-2"
N_CASES = 8
BASE_RUNS = (-1.0, 0.0, 1.0)
NEW_RUNS = (-0.5, 0.0, 1.5)
"""Each case's run medians, as multiples of its own between-run spread in log space: the middle run of
each side sits at the case's time, so every measured ratio is 1 and a planted factor is the ratio."""


def _case(i: int, log_offset: float, factor: float) -> dict:
    t = 100.0 * (i + 1) * factor * float(np.exp(log_offset * 0.03 * (i + 1)))  # case i: between-run sd grows with i
    return synthetic_record(i, [t * float(np.exp(w)) for w in np.linspace(-0.05, 0.05, 11)])  # median exactly t


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


def test_the_stated_detectable_change_is_where_the_gate_calls_slower(tmp_path, capsys):
    base = _side(tmp_path, "base", BASE_RUNS)
    status, out = _compare(capsys, base, _side(tmp_path, "new", NEW_RUNS))
    assert status == 3, out  # noisy: most cases inconclusive, nothing flagged
    rows = _rows(out)
    assert len(rows) == N_CASES and all(r[-1] != "slower" for r in rows), out
    # per case: the measured slowdown beyond which it is called slower ("+N%" in its detect column)
    bound = [_pct(next(t for t in r if re.fullmatch(r"\+\d+(?:\.\d)?%", t))) for r in rows]
    assert sorted(bound) == bound and len(set(bound)) == N_CASES  # noisier cases need more
    # the summary: half the cases, all of them, and a change common to every case (the overall ratio)
    m = re.search(
        r"# detectable with REPEAT=3 a side here: changes beyond \+(\d+(?:\.\d)?)%/-[\d.]+% in half the cases, "
        r"\+(\d+(?:\.\d)?)%/-[\d.]+% in all; beyond \+(\d+(?:\.\d)?)%/-[\d.]+% common to every case",
        out,
    )
    assert m, out
    half, every, common = (float(g) / 100 for g in m.groups())
    assert half == pytest.approx(sorted(bound)[(N_CASES - 1) // 2], abs=0.006) and every == pytest.approx(bound[-1])

    def planted(name: str, factor) -> list[str]:
        _, o = _compare(capsys, base, _side(tmp_path, name, NEW_RUNS, factor))
        return [r[-1] for r in _rows(o)], o

    # each case's own bound: 3% beyond it is slower, 3% short of it is not
    over = lambda i: (1 + bound[i]) * (1.03 if i % 2 == 0 else 0.97)  # noqa: E731
    verdicts, o = planted("per-case", over)
    assert [v == "slower" for v in verdicts] == [i % 2 == 0 for i in range(N_CASES)], o
    # the half and the all of the summary
    verdicts, o = planted("half-over", lambda i: (1 + half) * 1.03)
    assert sum(v == "slower" for v in verdicts) >= N_CASES / 2, o
    verdicts, o = planted("half-under", lambda i: (1 + half) * 0.97)
    assert sum(v == "slower" for v in verdicts) < N_CASES / 2, o
    verdicts, o = planted("all-over", lambda i: (1 + every) * 1.03)
    assert verdicts == ["slower"] * N_CASES, o
    # a slowdown common to every case: the overall ratio catches it beyond the stated bound, not short of it
    _, o = planted("common-over", lambda i: (1 + common) * 1.03)
    assert "-> slower" in o, o
    _, o = planted("common-under", lambda i: (1 + common) * 0.97)
    assert "-> slower" not in o, o
