"""The fail-slow bench's own logic: its trials drawn from one seed and checked before any run (bad input through
``make failslow-bench``: one line, status 2, nothing created), a finished trial read back from its run folder
(flags, then truth, the step slowdown measured), its stored trials scored, tabled and kept when interrupted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.errors import ConfigError
from suite.inject import plan as inject_plan
from suite.inject import truth
from suite.report.failslow import bench, compare, table, trials
from tests.conftest import make


def said(r) -> list[str]:
    """What a make run said on stderr besides make's own closing line."""
    return [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("make: ***")]


def test_the_same_seed_draws_the_same_trials_each_with_every_field_given():
    a = trials.draw(12, 3, ["pause", "slow:1"], 0.25, 2, 20.0)
    assert (
        a
        == trials.draw(12, 3, ["pause", "slow:1"], 0.25, 2, 20.0)
        != trials.draw(12, 4, ["pause", "slow:1"], 0.25, 2, 20.0)
    )
    injected = [p for p in a if p.inject]
    assert 0 < len(injected) < 12 and {p.cls for p in injected} == {"pause", "slow"}
    for p in injected:  # the text the launcher gets resolves to the plan the bench stored, whatever its seed
        got = inject_plan.parse(p.inject, p.seed + 1, 2, 20.0)
        assert (got.cls, got.target, got.onset_s, got.severity, got.duration_s) == (
            p.cls, p.target, p.onset_s, p.severity, p.duration_s,
        )  # fmt: skip
        assert p.cls != "slow" or p.target == 1  # a field given is kept
        assert 4.0 <= p.onset_s <= 10.0  # drawn onsets: 20-50% of the run's expected length


def test_the_clean_share_is_drawn_and_two_trials_hold_a_clean_one():
    assert all(p.inject for p in trials.draw(6, 1, ["slow"], 0.0, 2, 20.0))
    assert not any(p.inject for p in trials.draw(6, 1, ["slow"], 1.0, 2, 20.0))
    for seed in range(20):
        assert any(p.inject is None for p in trials.draw(2, seed, ["slow"], 0.01, 2, 20.0))


@pytest.mark.parametrize(
    "specs, trials_n, said_",
    [
        (["slow"], 0, "TRIALS=0"),
        (["bogus"], 2, "unknown class 'bogus'"),
        (["slow:2"], 2, "target rank '2' does not exist"),
        (["slow:1:5:50"], 2, "severity 50 of slow is out of range"),
        (["pause:0:30"], 2, "onset 30 s is past the run's end"),
        ([], 2, "FAILSLOW_CLASSES is empty"),
    ],
)
def test_bad_trials_are_refused_naming_what_to_change(specs, trials_n, said_):
    with pytest.raises(ConfigError, match=said_):
        trials.draw(trials_n, 0, specs, 0.25, 2, 20.0)


@pytest.mark.parametrize(
    "knob, said_",
    [
        ("TRIALS=0", "TRIALS=0"),
        ("TRIALS=-3", "TRIALS=-3"),
        ("FAILSLOW_CLASSES=gc", "unknown class 'gc'"),
        ("FAILSLOW_CLASSES=pause:7", "target rank '7' does not exist"),
        ("FAILSLOW_CLASSES=slow:::0.5", "severity 0.5 of slow is out of range"),
        ("FAILSLOW_CLASSES=pause:1:45", "onset 45 s is past the run's end"),
        ("FAILSLOW_CLASSES=egress", "egress acts on a node of the compose simulation"),
        ("FAILSLOW_COMPOSE=1 NNODES=1", "NNODES=1, NPROC_PER_NODE=2: the compose bench needs 2 or more nodes"),
        ("FAILSLOW_COMPOSE=1 NNODES=2 NPROC_PER_NODE=1 FAILSLOW_CLASSES=egress:2", "target rank '2' does not exist"),
    ],
)
def test_make_failslow_bench_refuses_bad_input_in_one_line_before_anything_starts(tmp_path, knob, said_):
    r = make("failslow-bench", *knob.split(), f"RESULTS={tmp_path / 'r'}", timeout=60)
    assert r.returncode == 2, r.stderr
    (line,) = said(r)
    assert line.startswith("error: ") and said_ in line, r.stderr
    assert not (tmp_path / "r").exists()


def test_step_times_lay_the_steps_over_the_timed_phase_and_the_slowdown_is_the_median_ratio():
    steps = trials.step_times([10, 10, 10, 10, 20, 20, 20, 20], 100.0, 112.0)
    assert [round(t, 3) for t, _ in steps] == [101.0, 102.0, 103.0, 104.0, 106.0, 108.0, 110.0, 112.0]
    assert steps[-1][0] == pytest.approx(112.0) and steps[0][1] == pytest.approx(1e-5)
    on = steps[3][0] + 1e-9  # the first slow step ends after it
    assert trials.slowdown(steps, on, None) == pytest.approx(1.0)
    assert trials.slowdown(steps, on, steps[4][0]) == pytest.approx(1.0)
    assert trials.slowdown(steps, 99.0, None) is None  # nothing before the onset
    paused = trials.step_times([10] * 10 + [10] * 9 + [1000], 0.0, 1.0)  # a pause holds up one step of ten
    assert trials.slowdown(paused, paused[9][0] + 1e-9, None) == pytest.approx(9.9)  # the median would say 0


def _run(tmp_path: Path, slowdowns: list[dict], told: dict | None, samples: list[float]) -> Path:
    """A finished trial's run folder as the launcher leaves it: bench.json's watched record, the timeline's timed
    phase (rank 0's track, two rounds of samples from 100 s to 110 s in Unix time), the truth."""
    run = tmp_path / "t000"
    run.mkdir()
    rec = {"slowdowns": slowdowns, "samples_us": samples, "world_size": 2, "hosts": 1, "watch_cost_pct": 0.4}
    (run / "bench.json").write_text(json.dumps({"benchmarks": [{"extra_info": {"op": "x"}}, {"extra_info": rec}]}))
    timed = [{"tid": 1, "ph": "X", "name": "timed", "ts": 0, "dur": 1e6}]  # a budget's first samples, then the rest
    timed += [{"tid": 1, "ph": "X", "name": "timed", "ts": 1.2e6, "dur": 8.8e6}, {"tid": 2, "name": "timed", "ts": 0}]
    trace = {"otherData": {"epoch_unix_s": 100.0}, "traceEvents": timed}
    (run / "trace.json").write_text(json.dumps(trace))
    if told is not None:
        truth.write(run, told)
    return run


SLOW_1 = trials.Planned(0, 9, "slow:1:5:2:rest", "slow", 1, 5.0, 2.0, None)
SLOW_1_TOLD = {
    "plan": {"cls": "slow", "target": 1, "severity": 2.0},
    "here": True,
    "applied": True,
    "applied_unix": 105.01,
}
"""A trial of rank 1 slowed 2x from 5 s, and its truth: applied at 105.01 s (Unix), its run's timed phase from 100 s."""


def test_a_finished_trial_is_read_into_the_scorers_terms(tmp_path):
    p, told = SLOW_1, SLOW_1_TOLD
    run = _run(tmp_path, [{"target": "rank 1", "detected_unix": 107.5}], told, [1000.0] * 60 + [3000.0] * 20)
    stored = trials.read(run, p)
    assert (
        stored["void"] is None
        and stored["run_s"] == 10.0
        and stored["flags"] == [{"target": "rank 1", "raised_s": 7.5}]
    )
    assert stored["step_slowdown"] == pytest.approx(2.0) and stored["onset_s"] == pytest.approx(5.0, abs=0.1)
    t = trials.from_stored(stored)
    assert t.localised() and t.first_after_onset().raised_s - t.truth.onset_s == pytest.approx(2.5, abs=0.1)


def test_a_node_flag_is_read_as_a_node_and_names_its_one_rank(tmp_path):
    p, told = SLOW_1, SLOW_1_TOLD
    flag = {"target": "node1", "kind": "node", "detected_unix": 107.5}  # as the watch writes a node's flag
    run = _run(tmp_path, [flag, {"target": "rank 0", "kind": "rank", "detected_unix": 109.0}], told, [1e3] * 80)
    stored = trials.read(run, p)
    assert [f["target"] for f in stored["flags"]] == ["node node1", "rank 0"]
    stored["nodes"] = {"0": "node0", "1": "node1"}  # two nodes of one rank each
    assert trials.from_stored(stored).localised()


def test_a_node_class_is_localised_by_its_node_or_any_of_its_ranks():
    nodes = {"0": "node0", "1": "node1", "2": "node1"}

    def trial(cls, flagged):
        stored = {"inject": f"{cls}:1:5:50:rest", "cls": cls, "target": 1, "onset_s": 5.0, "severity": 50.0}
        stored |= {"step_slowdown": 0.8, "run_s": 20.0, "nodes": nodes, "void": None}
        return trials.from_stored({**stored, "flags": [{"target": flagged, "raised_s": 7.0}]})

    assert trials.acts_on_node("egress") and trials.acts_on_node("nodecpu") and not trials.acts_on_node("slow")
    assert trial("egress", "node node1").localised() and trial("egress", "rank 2").localised()
    assert not trial("egress", "node node0").localised() and not trial("egress", "rank 0").localised()
    assert trial("slow", "rank 1").localised() and not trial("slow", "node node1").localised()


def test_an_injection_outside_the_timed_phase_or_never_applied_is_void(tmp_path):
    p = trials.Planned(0, 9, "pause:0:1:0.5:rest", "pause", 0, 1.0, 0.5, None)
    told = {"plan": {"cls": "pause", "target": 0, "severity": 0.5}, "here": True, "applied": True, "applied_unix": 99.0}
    stored = trials.read(_run(tmp_path, [], told, [1000.0] * 10), p)
    assert "outside the training's timed phase" in stored["void"] and trials.from_stored(stored) is None
    (tmp_path / "b").mkdir()
    stored = trials.read(_run(tmp_path / "b", [], {**told, "applied": False}, [1000.0] * 10), p)
    assert stored["void"] == "the injection was never applied"


def test_a_rescore_reads_the_kept_trials_again(tmp_path):
    p = trials.Planned(0, 9, "slow:1:5:2:rest", "slow", 1, 5.0, 2.0, None)
    told = {"plan": {"cls": "slow", "target": 1, "severity": 2.0}, "here": True, "applied": True, "applied_unix": 105.0}
    (tmp_path / "trials").mkdir()
    _run(tmp_path / "trials", [{"target": "rank 1", "detected_unix": 107.5}], told, [1000.0] * 50 + [3000.0] * 50)
    stale = {"watch": {**p.as_dict(), "run": "t000", "flags": [], "void": "its onset fell outside the steps"}}
    again = bench.reread(tmp_path, stale)["watch"]
    assert again["void"] is None and again["flags"] == [{"target": "rank 1", "raised_s": 7.5}]
    failed = {"watch": {**stale["watch"], "void": "the run exited 9 (its log: t000.log)"}}
    assert bench.reread(tmp_path, failed) == failed


def _stored(inject, flags, slowdown=0.5, onset=5.0):
    t = {"index": 0, "seed": 0, "inject": inject, "run_s": 20.0, "void": None, "nodes": {"0": "node0", "1": "node0"}}
    t["flags"] = [{"target": f, "raised_s": s} for f, s in flags]
    if inject:
        cls, target, _, severity, _ = inject.split(":")
        t |= {
            "cls": cls,
            "target": int(target),
            "severity": float(severity),
            "onset_s": onset,
            "step_slowdown": slowdown,
        }
    return t


def test_the_table_scores_each_class_band_and_the_confusion_names_targets(tmp_path):
    done = [
        _stored("slow:1:5:2.8:rest", [("rank 1", 7.0)]),
        _stored("slow:0:5:1.4:rest", [("rank 1", 8.0)]),  # found, named wrong
        _stored("pause:1:5:0.9:rest", []),  # missed
        _stored("pause:1:5:0.3:rest", [], slowdown=0.05),  # below 10%: sensitivity only
        _stored(None, [("rank 0", 3.0)]),  # a false alarm
        {**_stored(None, []), "void": "the run exited 1"},
    ]
    sc = table.scores(done, seed=1)
    assert sc["void"] == 1 and sc["all"]["found"] == 2 and sc["all"]["positives"] == 3
    assert set(sc["by_class"]) == {"slow 1.3-2.15", "slow 2.15-3", "pause 0.2-0.6", "pause 0.6-1"}
    assert sc["confusion"]["rank 0"] == {"rank 1": 1} and sc["confusion"]["clean"] == {"rank 0": 1}
    assert sc["all"]["localisation"]["value"] == 0.5
    doc = {"config": {"trials": 6, "seed": 1, "classes": ["pause", "slow"]}, "complete": True, "trials": done}
    doc["scores"] = {"watch": sc}
    text = table.write(tmp_path, doc)
    assert "| watch: all | 6 | 4 / 1 / 1 | 0.67 [" in text and "1.00 [" in text
    assert (tmp_path / "confusion-watch.png").read_bytes()[:4] == b"\x89PNG"
    assert "watch: slow 2.15-3" in (tmp_path / "failslow.html").read_text()
    doc["scores"] = {"watch": table.scores(done[-1:], seed=1)}  # every trial void: a table and a picture still
    assert "| watch: all | 1 | 0 / 0 / 1 | - |" in table.write(tmp_path, doc)


def test_an_interrupted_bench_keeps_its_finished_trials(tmp_path, monkeypatch):
    cfg = trials.draw(3, 0, ["slow"], 0.0, 2, 20.0)
    cfg = {"planned": [p.as_dict() for p in cfg], "trial_args": "x", "doctor_args": "", "nproc": 2, "run_s": 20.0}
    cfg |= {"seed": 0, "trials": 3, "classes": ["slow"]}
    calls = []

    def launch(folder, run_id, args, cfg, env):
        calls.append(run_id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return folder / run_id, 1, 1.0

    monkeypatch.setattr(bench, "_launch", launch)
    done, complete = bench.run_trials(tmp_path, cfg, say=lambda _: None)
    assert not complete and len(done) == 1 and "exited 1" in done[0]["watch"]["void"]
    kept = json.loads((tmp_path / bench.FILE).read_text())
    assert kept["complete"] is False and len(kept["trials"]) == 1 and kept["scores"]["watch"]["void"] == 1


def test_on_compose_the_trials_draw_node_classes_and_each_runs_the_simulation_with_its_knobs(tmp_path):
    from suite.report.failslow import compose

    argv = ["--trials", "4", "--seed", "3", "--classes", "egress,nodecpu", "--compose-nodes", "2"]
    argv += ["--nproc-per-node", "1", "--trial-args", "EXPERIMENTS=ddp K='mlp and ddp'"]
    cfg = bench.configure(bench._args(argv))
    assert cfg["nproc"] == 2 and cfg["compose"] == {"nnodes": 2, "per_node": 1}
    injected = [p for p in cfg["planned"] if p["inject"]]
    assert (
        injected and {p["cls"] for p in injected} <= {"egress", "nodecpu"} and {p["target"] for p in injected} <= {0, 1}
    )
    p = injected[0]
    cmd, env = compose.launch(
        compose.Sim(2, 1), tmp_path / "trials", "t000", cfg["trial_args"], bench._env(p["inject"], p["seed"], 36.0)
    )
    assert cmd == [compose.SCRIPT] and (bench.ROOT / compose.SCRIPT).is_file()
    assert env["NNODES"] == "2" and env["NPROC_PER_NODE"] == "1" and env["RUN_ID"] == "t000"
    assert env["RESULTS_DIR"] == str((tmp_path / "trials").resolve()) and env["K"] == "mlp and ddp"
    assert env["INJECT"] == p["inject"] and env["SEED"] == str(p["seed"]) and env["INJECT_RUN_S"] == "36"
    with pytest.raises(ConfigError, match="^--trial-args: '--iters' is not KEY=VALUE"):
        bench.configure(bench._args([*argv[:-1], "--iters 5"]))


def _bench(folder: Path, found: bool, n: int = 12) -> Path:
    """A stored bench of ``n`` slow trials on rank 1, each found after 2 s (``found``) or missed, and 4 clean."""
    flags = [("rank 1", 7.0)] if found else []
    done = [{"watch": _stored("slow:1:5:2.8:rest", flags)} for _ in range(n)]
    done += [{"watch": _stored(None, [])} for _ in range(4)]
    folder.mkdir()
    cfg = {"trials": len(done), "seed": 1, "classes": ["slow"]}
    bench.save(folder, cfg, done, complete=True)
    return folder


def test_make_compare_shows_a_bench_that_detects_worse(tmp_path):
    good, bad = _bench(tmp_path / "good", True), _bench(tmp_path / "bad", False)
    r = make("compare", f"BASE={good}", f"NEW={bad}", timeout=60)
    assert r.returncode == 2 and "# verdict: WORSE" in r.stdout, r.stdout + r.stderr  # make says 2 for status 1
    (f1,) = [ln for ln in r.stdout.splitlines() if ln.split()[:2] == ["watch", "F1"]]
    assert f1.split()[-1] == "worse" and "1.00 [" in f1 and "0.00 [" in f1
    same = json.loads((good / bench.FILE).read_text())
    rows, worse = compare.compare(same, same)
    assert not worse and {r[4] for r in rows} <= {"same", "-"} and len(rows) == len(compare.FIGURES)


def test_a_figure_is_worse_only_when_the_intervals_do_not_overlap():
    base = {"value": 0.9, "lo": 0.8, "hi": 0.95}
    assert compare.judge(base, {"value": 0.5, "lo": 0.4, "hi": 0.7}, True) == "worse"
    assert compare.judge(base, {"value": 0.5, "lo": 0.4, "hi": 0.7}, False) == "better"  # a time: lower is better
    assert compare.judge(base, {"value": 0.85, "lo": 0.7, "hi": 0.9}, True) == "same"
    assert compare.judge(base, {"value": None, "lo": None, "hi": None}, True) == "-"


def test_the_doctors_findings_are_its_flags_and_its_slowdown_the_watch_trials(tmp_path):
    p = trials.Planned(0, 9, "slow:1:5:2:rest", "slow", 1, 5.0, 2.0, None)
    findings = [
        {"kind": "straggler", "where": "rank 1 (vm)", "detail": {"rank": 1, "host": "vm"}},
        {"kind": "slow_link", "where": "0->1", "detail": {"src": 0, "dst": 1}},
    ]
    (tmp_path / "d000").mkdir()
    (tmp_path / "d000" / "doctor.json").write_text(json.dumps({"verdict": "findings", "findings": findings}))
    stored = trials.read_doctor(tmp_path / "d000", p, 8, 61.0, {"void": None, "step_slowdown": 1.2})
    assert [f["target"] for f in stored["flags"]] == ["rank 1", "link 0->1"]
    assert (stored["onset_s"], stored["step_slowdown"], stored["void"]) == (0.0, 1.2, None)
    t = trials.from_stored(stored)
    assert t.localised() and t.first_after_onset().target.name == "1"
    assert "exited 1" in trials.read_doctor(tmp_path / "d000", p, 1, 5.0, {})["void"]
    assert trials.read_doctor(tmp_path / "d000", p, 8, 61.0, {"void": "x"})["void"]


def test_a_clean_trials_foreign_load_flag_is_read_scored_and_tabled_apart(tmp_path):
    """The watch's class of a flag travels from the record to the stored trial, and a clean trial's ``foreign load``
    flag is its own column, neither a false alarm nor in the confusion's named targets."""
    slowdowns = [{"target": "rank 0", "detected_unix": 104.0, "class": "foreign load"}]
    stored = trials.read(_run(tmp_path, slowdowns, None, [1000.0] * 60), trials.Planned(0, 9, None))
    assert stored["flags"] == [{"target": "rank 0", "raised_s": 4.0, "class": "foreign load"}]
    done = [stored, _stored(None, []), _stored("slow:1:5:2.8:rest", [("rank 1", 7.0)])]
    done[2]["flags"][0]["class"] = "foreign load"  # an injected trial's flag is found whatever its class
    sc = table.scores(done, seed=1)
    assert (sc["all"]["false_positive_trials"], sc["all"]["foreign_load_trials"], sc["all"]["found"]) == (0, 1, 1)
    assert sc["confusion"]["clean"] == {"foreign load": 1, "nothing": 1}
    doc = {"config": {"trials": 3, "seed": 1, "classes": ["slow"]}, "complete": True, "trials": done}
    doc["scores"] = {"watch": sc}
    assert "| watch: all | 3 | 1 / 2 / 0 | 1.00 [" in table.write(tmp_path, doc)
    assert "| 0.0 [0.0, " in (tmp_path / "failslow.md").read_text() and "| 1 of 2 |" in table.markdown(doc)
