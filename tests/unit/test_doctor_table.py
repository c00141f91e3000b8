"""The doctor's text, from a stored doctor run (tests/fixtures/doctor-gloo-2): its probes' table names every
case by its full label (the end tells the passes, sizes and forms apart) and gives times in the unit a
person reads (µs, ms, s), as does its verdict; the generic table keeps the distinguishing end of a label
too long for its column."""

from __future__ import annotations

from suite import results
from suite.report.tables import fit_labels, generic_table
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "doctor-gloo-2"


def _records() -> list[dict]:
    return results.records(results.load_run(FIXTURE))


def test_the_generic_table_keeps_the_distinguishing_end_of_a_long_label():
    for probe in ("latency", "bandwidth", "all_gather"):  # a generic table per op, as format_tables makes them
        recs = [r for r in _records() if r["probe"] == probe]
        labels = [row.split()[0] for row in generic_table("t", recs).splitlines()[2:]]
        assert len(set(labels)) == len(recs), labels  # every row told apart
        for label, r in zip(labels, recs):
            assert len(label) <= 34 and r["label"].endswith(label.lstrip("…")), (label, r["label"])
    assert fit_labels(["a" * 40, "b" * 40], 10) == ["aaaa…aaaaa", "bbbb…bbbbb"]  # nothing shared: both ends
    assert fit_labels(["x-1", "long-shared-start-1", "long-shared-start-2"], 8) == ["x-1", "…start-1", "…start-2"]
