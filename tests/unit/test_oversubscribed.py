"""The oversubscribed pass's records (suite/launch/passes.py): which skipped cases a second pass runs, and how its
marked records are kept out of the headline, the fits and the compare gate but shown, headed, in the tables and
the report. On the stored 2-rank collectives run with planted 4-rank records."""

from __future__ import annotations

import copy
import pickle
from types import SimpleNamespace

import pytest
import torch

from suite import results
from suite.launch import passes
from suite.model import runs
from suite.report import analysis, compare
from suite.report.compare.page import first_screen as first_screen_of_comparison
from suite.report.first_screen import first_screen
from suite.report.fits import fit_sweeps
from suite.report.headline import headline_items
from suite.report.sections import Section
from suite.report.series import groups_by_experiment
from suite.report.tables import format_tables
from tests.conftest import ROOT

RUN = results.load_run(ROOT / "tests" / "fixtures" / "collectives-gloo-2")


def _with_oversubscribed(factor: float = 100.0) -> tuple[dict, list[dict]]:
    """The stored run plus a copy of its all_reduce records at 4 ranks, marked, ``factor`` x as fast."""
    run = copy.deepcopy(RUN)
    added = []
    for b in copy.deepcopy(RUN["benchmarks"]):
        r = b["extra_info"]
        if r["op"] != "all_reduce":
            continue
        r.update(world_size=4, oversubscribed=True, busbw_gbps=(r["busbw_gbps"] or 0) * factor)
        r.update(samples_us=[x / factor for x in r["samples_us"]], time_us=r["time_us"] / factor)
        added.append(r)
        run["benchmarks"].append(b)
    assert added
    return run, added


def test_the_predicate_keeps_every_record_but_the_marked_ones():
    run, added = _with_oversubscribed()
    recs = results.records(run)
    assert results.communication_records(recs) == results.records(RUN)
    assert [r for r in recs if results.oversubscribed(r)] == added


def test_the_headline_states_no_time_of_the_oversubscribed_pass_but_counts_its_cases():
    run, added = _with_oversubscribed()
    (before,), (after,) = [[h for h in headline_items(x) if h.experiment == "collectives"] for x in (RUN, run)]
    assert after.numbers == before.numbers  # the peak bus bandwidth: 100x higher in the planted records
    assert after.n_cases == before.n_cases + len(added)


def _fitted(run: dict) -> dict:
    recs = results.records(run)
    sweeps = fit_sweeps(recs, groups_by_experiment(recs))
    return {k: sorted(sweeps.fitted(k)) for k in sweeps.fits if sweeps.fitted(k)} | {"links": sweeps.links}


def test_the_fits_leave_the_oversubscribed_pass_out_and_its_section_says_so():
    run, added = _with_oversubscribed()
    assert _fitted(run) == _fitted(RUN)
    sec = Section(title="collectives", anchor="collectives", notes=["how to read"])
    analysis.mark_oversubscribed(sec, groups_by_experiment(results.records(run))["collectives"])
    assert sec.notes == [f"{len(added)} case(s) at 4 ranks: {results.OVERSUBSCRIBED_NOTE}.", "how to read"]


def test_the_first_screen_warns_of_the_oversubscribed_pass_with_its_cases_and_world():
    """A default run's second pass (the cases that need more ranks than cores) is a warning of its own on the
    report's first screen, as the ranks of the main pass outnumbering the cores would be."""
    run, added = _with_oversubscribed()
    warned = dict(first_screen(run, headline_items(run)).warnings)
    assert warned["OVERSUBSCRIBED pass"] == f"{len(added)} case(s) of collectives at 4 ranks: " + (
        results.OVERSUBSCRIBED_NOTE.removeprefix("OVERSUBSCRIBED pass: ")
    )
    assert "OVERSUBSCRIBED pass" not in dict(first_screen(RUN, headline_items(RUN)).warnings)


def test_the_models_fit_no_record_of_the_oversubscribed_pass():
    _, added = _with_oversubscribed()
    assert not any(runs.usable(r) for r in added) and all(runs.usable(r) for r in results.records(RUN)[:3])


def test_the_tables_head_the_oversubscribed_pass():
    run, _ = _with_oversubscribed()
    text = format_tables(results.records(run))
    assert text.count(f"# collectives: {results.OVERSUBSCRIBED_NOTE}") == 1
    assert results.OVERSUBSCRIBED_NOTE not in format_tables(results.records(RUN))


def test_the_compare_gate_does_not_judge_the_oversubscribed_pass():
    run, added = _with_oversubscribed()
    slower, _ = _with_oversubscribed(factor=0.01)  # the same cases 100x slower
    c = compare.compare_records(results.records(run), results.records(slower), n_boot=50)
    assert len(c.cases) == len(results.records(RUN)) and not c.only_base and not c.only_new
    assert all(x.verdict == "same" for x in c.cases)
    # and it says what it left out, in the terminal's text and on the page's first screen
    said = f"{len(added)} case(s) of the OVERSUBSCRIBED pass not judged (more ranks than usable cores"
    assert c.oversubscribed == len(added)
    assert f"# not compared: {said}" in compare.format_comparison(c)
    assert dict(first_screen_of_comparison(c)[3])["not compared"].startswith(said)
    plain = compare.compare_records(results.records(RUN), results.records(RUN), n_boot=50)
    assert plain.oversubscribed == 0 and "OVERSUBSCRIBED" not in compare.format_comparison(plain)


def test_a_second_pass_runs_the_cases_skipped_for_want_of_ranks():
    # the skip's record says the world the case needs (needs_ranks); the reason's words are for the user
    skipped = [
        {"case": "a::t[2d]", "reason": "2d needs an even world of at least 4 ranks (a 2 x world/2 mesh), not 2"}
        | {"needs_ranks": 4},
        {"case": "b::t[p2p]", "reason": "point-to-point needs at least 2 ranks (world size 1)", "needs_ranks": 2},
        {"case": "c::t[x]", "reason": "SHARDED_WIDTH=3 does not split over 2 tensor-parallel ranks"},
        {"case": "d::t[big]", "reason": "it needs at least 16 ranks", "needs_ranks": 16},
        {"case": "e::t[grid]", "reason": "my 2 x 2 grid does not fit this world", "needs_ranks": 4},
        {"case": "f::t[quote]", "reason": "the replayed model needs at least 4 ranks' memory, not this host's"},
    ]
    assert passes.wider_cases(skipped, 2) == (4, ["a::t[2d]", "e::t[grid]"])
    assert passes.wider_cases(skipped, 1) == (4, ["a::t[2d]", "b::t[p2p]", "e::t[grid]"])
    assert passes.wider_cases(skipped, 4) == (0, [])


def test_the_suites_skips_for_want_of_ranks_carry_the_world_they_need():
    from experiments.sharded import pipeline, shapes
    from suite.common.config import BenchConfig
    from suite.errors import CaseSkipped
    from suite.ops import p2p, sweep

    mesh = shapes.mesh_cannot("2d", 2)
    assert mesh.ranks == 4 and CaseSkipped(mesh).needs_ranks == 4 and str(CaseSkipped(mesh)) == str(mesh)
    assert pickle.loads(pickle.dumps(mesh)).ranks == 4  # an object collective keeps it
    assert pipeline.cannot_run("pp_1f1b", 1, 2, 1).ranks == 2
    (alone,) = p2p.cases(BenchConfig(), 1, experiment="p2p")
    assert alone.skip(None, None).ranks == 2
    # a pair beyond the world (cases declared at 4 ranks, run at 2), and groups of two unequal parts (3 ranks)
    cfg, ctx = BenchConfig(), SimpleNamespace(world_size=2, device=torch.device("cpu"), backend="gloo")
    far = [c for c in p2p.cases(cfg, 4, experiment="p2p") if c.skip(ctx, cfg) == "ranks 0/3 not in a world of 2"]
    assert far and {c.skip(ctx, cfg).ranks for c in far} == {4}
    halves = sweep.collective_cases(cfg, 3, experiment="collectives", partition=("halves", [[0], [1, 2]]))
    with pytest.raises(CaseSkipped) as odd:
        halves[0].context(None, None)
    assert odd.value.needs_ranks == 4 and "even world" in str(odd.value)
    assert CaseSkipped("SHARDED_WIDTH=3 does not split").needs_ranks is None
    assert CaseSkipped("x", needs_ranks=3).needs_ranks == 3


def test_marking_a_pass_keeps_an_experiments_own_pass_field():
    # the doctor probes every link twice and numbers its records' ``pass``: the launcher's mark is another key
    run = {"benchmarks": [{"extra_info": {"experiment": "doctor", "pass": 2}}]}
    passes.mark(run, passes.OVERSUBSCRIBED)
    (rec,) = [b["extra_info"] for b in run["benchmarks"]]
    assert rec["pass"] == 2 and rec["run_pass"] == "oversubscribed" and rec["oversubscribed"] is True


def test_the_compare_gate_matches_runs_whose_link_probes_went_different_lengths():
    # the link probe's steps beyond the sweep stop where the noise says the rate levelled off: one run may take a
    # step the other did not, and the gate compares the cases both runs declared
    probed = copy.deepcopy(RUN)
    b = copy.deepcopy(RUN["benchmarks"][0])
    b["extra_info"].update(beyond_sweep=True, size_bytes=b["extra_info"]["size_bytes"] * 64)
    probed["benchmarks"].append(b)
    c = compare.compare_records(results.records(RUN), results.records(probed), n_boot=50)
    assert len(c.cases) == len(results.records(RUN)) and not c.only_base and not c.only_new
