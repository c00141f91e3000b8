"""The doctor's text, from a stored doctor run (tests/fixtures/doctor-gloo-2): its probes' table names every
case by its full label (the end tells the passes, sizes and forms apart) and gives times in the unit a
person reads (µs, ms, s), as does its verdict; the generic table keeps the distinguishing end of a label
too long for its column."""

from __future__ import annotations

import re
import shutil

from experiments.doctor import verdict
from suite import results
from suite.report import cli as report
from suite.report.tables import fit_labels, generic_table
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "doctor-gloo-2"
TIME = r"\d+(?:\.\d+)? (?:µs|ms|s)"


def _records() -> list[dict]:
    return results.records(results.load_run(FIXTURE))


def test_the_doctors_table_names_every_case_in_full_with_readable_times(capsys):
    assert report.main([str(FIXTURE)]) == 0  # python -m suite.report RUN: the tables printed at the end of a run
    out = capsys.readouterr().out
    recs = _records()
    for r in recs:  # e.g. ...-64B-pass1 and ...-64B-pass2, ...-4096B-oop and ...-65536B-oop
        assert re.search(rf" {re.escape(r['label'])} ", out), r["label"]
    assert "e+" not in out and "pair_matrix-send_recv-0to1-64B-pas " not in out
    compute = [ln for ln in out.splitlines() if "compute-mm128-pass1" in ln]
    assert len(compute) == 1 and re.search(rf"\b{TIME}\b", compute[0]) and " ms" in compute[0], compute


def test_the_verdict_gives_times_in_readable_units(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)  # the verdict writes doctor.json beside the records
    assert verdict.main([str(run)]) == 0  # make doctor-verdict RUN=...
    out = capsys.readouterr().out
    assert "e+" not in out and "compute probe per rank: " in out, out
    line = next(ln for ln in out.splitlines() if "compute probe per rank" in ln)
    assert re.fullmatch(rf"   compute probe per rank: {TIME} \.\. {TIME} \(median {TIME}\)", line), line
    lat = next(ln for ln in out.splitlines() if "latency" in ln and "one-way" in ln)
    assert re.search(rf"{TIME} one-way at 64B \({TIME} \.\. {TIME}\)", lat), lat


def test_the_generic_table_keeps_the_distinguishing_end_of_a_long_label():
    for probe in ("latency", "bandwidth", "all_gather"):  # a generic table per op, as format_tables makes them
        recs = [r for r in _records() if r["probe"] == probe]
        labels = [row.split()[0] for row in generic_table("t", recs).splitlines()[2:]]
        assert len(set(labels)) == len(recs), labels  # every row told apart
        for label, r in zip(labels, recs):
            assert len(label) <= 34 and r["label"].endswith(label.lstrip("…")), (label, r["label"])
    assert fit_labels(["a" * 40, "b" * 40], 10) == ["aaaa…aaaaa", "bbbb…bbbbb"]  # nothing shared: both ends
    assert fit_labels(["x-1", "long-shared-start-1", "long-shared-start-2"], 8) == ["x-1", "…start-1", "…start-2"]
