"""The recovery experiment's pure logic: the seeded fault schedule, the plan's checks (bad input is one line),
and what the event files say (detection, recovery, steps redone, the first step whose state went wrong)."""

from __future__ import annotations

import pytest

from experiments.recovery import measure
from experiments.recovery.plan import Fault, Plan, PlanError, check_plan
from experiments.recovery.schedule import parse_faults, poisson_faults
from experiments.recovery.settings import RecoverySettings
from suite.api import ConfigError


def _parse(text, world=2, steps=20, seed=0):
    return parse_faults(text, world=world, steps=steps, seed=seed)


def test_spelled_faults_parse_in_step_order():
    assert _parse("stop:0@9,kill:1@5") == (Fault(kind="kill", rank=1, step=5), Fault(kind="stop", rank=0, step=9))
    assert _parse("none") == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("explode:1@5", "unknown fault class 'explode'"),
        ("kill:1", "spell it <class>:<rank>@<step>"),
        ("kill:x@5", "'x' is not a number"),
        ("kill:1.5@5", "'1.5' is not a whole number"),
        ("kill:1@5.5", "'5.5' is not a whole number"),
        ("kill:1@inf", "'inf' must be a finite number >= 0"),
        ("kill:1@nans", "'nan' must be a finite number >= 0"),
        ("poisson:infs", "'inf' must be a finite number >= 0"),
        ("kill:1@5,stop:0@5", "two faults at step 5"),
        ("poisson:0", "poisson needs a mean time between failures > 0 steps"),
    ],
)
def test_a_bad_spelling_says_what_is_wrong(text, says):
    with pytest.raises(PlanError, match=None) as e:
        _parse(text)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_poisson_schedule_is_seeded_increasing_and_inside_the_run():
    a = poisson_faults(seed=3, mtbf=5, steps=200, world=4)
    assert a == poisson_faults(seed=3, mtbf=5, steps=200, world=4)
    assert a != poisson_faults(seed=4, mtbf=5, steps=200, world=4)
    steps = [f.step for f in a]
    assert steps == sorted(set(steps)) and 0 < steps[0] and steps[-1] < 200
    assert {f.rank for f in a} <= set(range(4)) and {f.kind for f in a} == {"kill"}
    # the mean gap is the mean time between failures, to within the spread of 40-odd draws
    assert 3.5 < 200 / len(a) < 7


def _plan(tmp_path, **kw):
    return Plan(**{"workdir": str(tmp_path / "ck"), "steps": 10, "ckpt_every": 4, **kw})


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"faults": (Fault(kind="melt", rank=0, step=3),)}, "unknown fault class 'melt'"),
        ({"faults": (Fault(kind="kill", rank=2, step=3),)}, "fault target rank 2 is beyond the world of 2 ranks"),
        ({"faults": (Fault(kind="kill", rank=0, step=10),)}, "fault step 10 is outside the run's steps 1..9"),
        ({"ckpt_every": 11}, "checkpoint interval 11 must be between 1 and the run's 10 steps"),
        ({"ckpt_mode": "lazy"}, "unknown checkpoint mode 'lazy'"),
        ({"bug": "typo"}, "unknown planted bug 'typo'"),
        ({"bug": "older_ckpt_rank1", "world": 1}, "older_ckpt_rank1 needs a rank 1, but the job has 1 rank"),
    ],
)
def test_a_bad_plan_is_one_line(tmp_path, kw, says):
    with pytest.raises(PlanError) as e:
        check_plan(_plan(tmp_path, **kw))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_checkpoint_dir_that_cannot_be_written_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("")  # a directory under a file cannot be made, not even by root
    with pytest.raises(PlanError, match="checkpoint directory .*file/ck cannot be written: Not a directory"):
        check_plan(Plan(workdir=str(tmp_path / "file" / "ck"), steps=10, ckpt_every=4))


def test_a_good_plan_passes_and_survives_json(tmp_path):
    p = _plan(tmp_path, faults=(Fault(kind="stop", rank=1, step=5),), ckpt_mode="async")
    check_plan(p)
    assert Plan.from_json(p.to_json()) == p


def test_the_settings_name_the_knob(tmp_path):
    RecoverySettings(ckpt_dir=str(tmp_path)).validate()
    with pytest.raises(ConfigError, match="RECOVERY: fault target rank 3 is beyond the world of 2 ranks"):
        RecoverySettings(faults=("kill:3@2",), ckpt_dir=str(tmp_path)).validate()
    with pytest.raises(ConfigError, match="RECOVERY: disconnect needs the compose cluster"):
        RecoverySettings(faults=("disconnect:1@2",), ckpt_dir=str(tmp_path)).validate()


def test_each_strategy_is_a_case_and_torchft_runs_kills_and_stops(tmp_path):
    from types import SimpleNamespace

    from experiments.recovery.cases import cases

    s = RecoverySettings(faults=("kill:1@6", "stop:1@6"), ckpt_modes=("sync", "async"), ckpt_dir=str(tmp_path))
    labels = [c.label for c in cases(SimpleNamespace(recovery=s), 2)]
    assert labels == ["elastic-sync-kill:1@6", "elastic-async-kill:1@6", "torchft-kill:1@6"] + [
        "elastic-sync-stop:1@6",
        "elastic-async-stop:1@6",
        "torchft-stop:1@6",
    ]
    both = RecoverySettings(faults=("kill:0@3,stop:1@6",), ckpt_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="^RECOVERY: torchft needs one replica group that no fault strikes"):
        both.validate()
    RecoverySettings(strategies=("elastic",), faults=both.faults, ckpt_dir=str(tmp_path)).validate()
    poisson = RecoverySettings(faults=("poisson:2",), ckpt_dir=str(tmp_path))
    poisson.validate()  # its torchft case draws from replica 1 only
    by = {c.identity["strategy"]: c for c in cases(SimpleNamespace(recovery=poisson), 2)}
    assert set(by) == {"elastic", "torchft"}
    only = RecoverySettings(strategies=("torchft",), faults=("kill:1@6",), ckpt_dir=str(tmp_path))
    assert [c.identity["strategy"] for c in cases(SimpleNamespace(recovery=only), 2)] == ["torchft"]
    with pytest.raises(ConfigError, match="RECOVERY_STRATEGIES: unknown \\['nvrx'\\]; choose from elastic, torchft"):
        RecoverySettings(strategies=("nvrx",), ckpt_dir=str(tmp_path)).validate()


def test_the_checks_and_the_cases_read_a_strategys_traits_not_its_name(tmp_path, monkeypatch):
    """What a strategy needs follows its record (plan.STRATEGIES): one that heals from a live peer needs a
    replica group no fault strikes, one whose job spans the compose nodes takes them, whatever it is called."""
    from dataclasses import replace
    from types import SimpleNamespace

    from experiments.recovery import plan
    from experiments.recovery.cases import cases

    every = ("kill:0@3,stop:1@6",)  # strikes both replica groups
    traits = dict(plan.STRATEGIES)
    monkeypatch.setitem(plan.STRATEGIES, "elastic", replace(traits["elastic"], heals_from_peer=True))
    with pytest.raises(ConfigError, match="^RECOVERY: torchft needs one replica group that no fault strikes"):
        RecoverySettings(strategies=("elastic",), faults=every, ckpt_dir=str(tmp_path)).validate()
    for k, v in {"COMPOSE_SIM": "1", "NNODES": "2", "MASTER_ADDR": "node0"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(plan.STRATEGIES, "elastic", replace(traits["elastic"], spans_nodes=False))
    s = RecoverySettings(strategies=("elastic",), faults=("kill:1@6",), ckpt_dir=str(tmp_path))
    assert [c.fields["job_nodes"] for c in cases(SimpleNamespace(recovery=s), 2)] == [1]
    monkeypatch.setitem(plan.STRATEGIES, "elastic", traits["elastic"])
    assert [c.fields["job_nodes"] for c in cases(SimpleNamespace(recovery=s), 2)] == [2]
    both = RecoverySettings(strategies=("elastic", "torchft"), faults=("kill:1@6",), ckpt_dir=str(tmp_path))
    got = {c.identity["strategy"]: c.fields["heals_from_peer"] for c in cases(SimpleNamespace(recovery=both), 2)}
    assert got == {"elastic": False, "torchft": True}  # the record carries the trait the ETTR model reads
    monkeypatch.setitem(plan.STRATEGIES, "torchft", replace(traits["torchft"], spans_nodes=True))
    with pytest.raises(ConfigError, match="^RECOVERY_DIR: a disconnect needs the job across the compose nodes"):
        RecoverySettings(strategies=("torchft",), faults=("disconnect:1@2s",)).validate()


def test_the_planted_bugs_do_what_their_record_says_whatever_they_are_called(tmp_path, monkeypatch):
    """The elastic ranks' restores and the torchft replicas' plants follow each plant's record (plan.PLANTS): which
    checkpoint it restores, on which ranks, in which lives; a plant renamed, or a new one, works the same."""
    from dataclasses import replace

    from experiments.recovery import plan, torchft_strategy, worker

    ckpts = [2, 4, 6]  # claimed: 6, older: 4
    p = Plan(world=3, workdir=str(tmp_path), faults=(Fault(kind="kill", rank=1, step=3),))

    def restores(bug):  # each rank's (claimed, loaded together, loaded alone) in attempts 0 and 1
        q = replace(p, bug=bug)
        return [[worker.restore_steps(q, r, a, ckpts) for r in range(3)] for a in (0, 1)]

    right = [(6, 6, None)] * 3
    assert restores("") == [right, right]
    assert restores("older_ckpt") == [right, [(6, 4, None)] * 3]
    assert restores("older_ckpt_rank1") == [right, [(6, 6, None), (6, 6, 4), (6, 6, None)]]
    assert worker.restore_steps(replace(p, bug="older_ckpt"), 0, 1, [2]) == (2, 0, None)  # older: the initial state
    monkeypatch.setitem(plan.PLANTS, "renamed", replace(plan.PLANTS["older_ckpt_rank1"], name="renamed", ranks=(0, 2)))
    assert restores("renamed") == [right, [(6, 6, 4), (6, 6, None), (6, 6, 4)]]
    check_plan(replace(p, bug="renamed"))
    with pytest.raises(PlanError, match="^the planted bug renamed needs a rank 2, but the job has 2 ranks$"):
        check_plan(replace(p, world=2, bug="renamed"))

    def carriers(bug):  # the (replica, life) processes that carry it, of 2 replicas and 3 lives each
        r = torchft_strategy.Replicas(replace(p, world=2, bug=bug), "http://lighthouse")
        return {(g, life) for g in range(2) for life in range(3) if r.plant(g, life) == bug}

    assert carriers("stale") == {(0, 1), (0, 2), (1, 1), (1, 2)}  # every replacement (a healed replica)
    assert carriers("phantom") == {(0, 0), (0, 1), (0, 2)}  # replica 0, every life
    monkeypatch.setattr(torchft_strategy, "PLANTS", {"late": replace(plan.PLANTS["phantom"], name="late", ranks=(1,))})
    assert carriers("late") == {(1, 0), (1, 1), (1, 2)}


# --- what the events say ---------------------------------------------------------------------------


def _ev(rank, attempt, kind, t, step=None, **kw):
    return {"rank": rank, "attempt": attempt, "kind": kind, "t": t, "step": step, **kw}


def _run(bad_restore=False, bad_rank1=False, bad_final1=False):
    """Two ranks, a checkpoint at step 2, rank 1 killed at step 3, the restart restores step 2. Rank 0's state
    after step k is s<k>, rank 1's r<k> (the same parameters, its own BatchNorm statistics); a restore holds
    rank 0's. ``bad_rank1``: rank 1 alone restores step 1's state (a difference the next forward's broadcast of
    rank 0's buffers would hide from rank 0); ``bad_final1``: rank 1 ends in a state of its own."""
    ev = [_ev(0, 0, "restore", 0.0, 0, digest="s0", load_s=0.0), _ev(1, 0, "restore", 0.0, 0, digest="s0", load_s=0.0)]
    for k, t in ((1, 1.0), (2, 2.0), (3, 3.0)):
        ev += [
            _ev(0, 0, "commit", t, k, digest=f"s{k}", step_s=0.5),
            _ev(1, 0, "commit", t, k, digest=f"r{k}", step_s=0.5),
        ]
    ev += [_ev(0, 0, "save", 2.1, 2, save_s=0.1), _ev(1, 0, "fault", 3.5, 3, fault="kill")]
    ev += [_ev(0, 0, "detect", 3.75, how="reset")]
    ev += [_ev(1, 1, "restore", 9.0, 2, digest="s1" if bad_rank1 else "s2", load_s=0.2)]
    ev += [_ev(0, 1, "restore", 9.0, 2, digest="s1" if bad_restore else "s2", load_s=0.2)]
    for k, t in ((3, 10.0), (4, 11.0)):
        ev += [
            _ev(0, 1, "commit", t, k, digest=f"s{k}", step_s=0.5),
            _ev(1, 1, "commit", t, k, digest=f"r{k}", step_s=0.5),
        ]
    return ev + [
        _ev(0, 1, "done", 11.5, 4, digest="s4"),
        _ev(1, 1, "done", 11.5, 4, digest="x" if bad_final1 else "r4"),
    ]


def _reference():
    """The fault-free run's events: every rank's restore of step 0, its commits and its end."""
    ev = [_ev(r, 0, "restore", 0.0, 0, digest="s0") for r in (0, 1)]
    ev += [_ev(r, 0, "commit", float(k), k, digest=f"{'sr'[r]}{k}") for k in range(1, 5) for r in (0, 1)]
    return ev + [_ev(r, 0, "done", 5.0, 4, digest=f"{'sr'[r]}4") for r in (0, 1)]


def test_detection_recovery_and_redone_steps_come_from_the_events():
    ref = [e for e in _run() if e["attempt"] == 0 or e["kind"] == "done"]
    out = measure.summarise(_run(), ref, steps=4, global_batch=16, t0=0.0)
    assert (out["t_fault"], out["t_detect"], out["t_recover"]) == (3.5, 0.25, 6.5)
    assert out["steps_redone"] == 1 and out["samples_dropped"] == 0
    assert (out["ckpt_save_s"], out["ckpt_load_s"], out["step_s_clean"]) == (0.1, 0.2, 0.5)


def test_the_first_wrong_state_is_named_at_its_step():
    reference = measure.state_at(_reference())
    assert measure.first_wrong(_run(), reference) is None
    assert measure.wrong_finals(_run(), reference, steps=4, world=2) == []
    wrong = measure.first_wrong(_run(bad_restore=True), reference)
    assert wrong["kind"] == "restore" and wrong["step"] == 2
    assert "went wrong at step 2: rank 0's state restored as step 2 (attempt 1)" in measure.wrong_line(wrong)


def test_every_ranks_state_is_checked_not_rank_0s_alone():
    """A state wrong on rank 1 only, its commits and rank 0's all right after it, is named at its step (it passed
    when rank 0's digests alone were checked); so is a rank 1 that ends in a state of its own, or none."""
    reference = measure.state_at(_reference())
    wrong = measure.first_wrong(_run(bad_rank1=True), reference)
    assert (wrong["rank"], wrong["kind"], wrong["step"]) == (1, "restore", 2)
    assert "went wrong at step 2: rank 1's state restored as step 2 (attempt 1)" in measure.wrong_line(wrong)
    assert measure.first_wrong(_run(bad_final1=True), reference) is None
    assert measure.wrong_finals(_run(bad_final1=True), reference, steps=4, world=2) == [1]
    no_end = [e for e in _run() if not (e["kind"] == "done" and e["rank"] == 1)]
    assert measure.wrong_finals(no_end, reference, steps=4, world=2) == [1]


def test_the_timeline_has_each_ranks_fault_detection_and_recovery():
    kinds = {(e["rank"], e["kind"]) for e in measure.timeline(_run(), 0.0)}
    assert {(1, "fault"), (0, "detect"), (0, "recover"), (1, "recover"), (0, "commit")} <= kinds


def test_the_table_shows_each_ranks_timeline_and_the_wrong_step():
    from experiments.recovery.table import format_tables

    rec = {"fault": "kill:1@3", "ckpt_mode": "sync", "exact": False, "wrong": "went wrong at step 2"}
    text = format_tables([{**rec, "events": measure.timeline(_run(), 0.0)}])
    assert "#   went wrong at step 2" in text and "NO" in text
    assert "#   rank 1: fault 3.50s (step 3), recover 10.00s (step 3)" in text
    assert "#   rank 0: detect 3.75s, recover 10.00s (step 3)" in text


def test_repeated_cases_are_distinct_jobs_and_the_table_gives_their_spread(tmp_path):
    """RECOVERY_REPEATS=3: each case three times, each its own job (its own key, label and identity), and the table
    gives each strategy, fault and mode's median and range over its runs; one run each: no spread table."""
    from types import SimpleNamespace

    from experiments.recovery.cases import cases
    from experiments.recovery.table import format_tables

    s = RecoverySettings(faults=("kill:1@6",), repeats=3, ckpt_dir=str(tmp_path))
    s.validate()
    got = cases(SimpleNamespace(recovery=s), 2)
    assert [c.label for c in got] == [f"{st}-kill:1@6-r{i}" for st in ("elastic-sync", "torchft") for i in range(3)]
    assert [c.identity["repeat"] for c in got] == [0, 1, 2, 0, 1, 2]
    once = cases(SimpleNamespace(recovery=RecoverySettings(faults=("kill:1@6",), ckpt_dir=str(tmp_path))), 2)
    assert [c.label for c in once] == ["elastic-sync-kill:1@6", "torchft-kill:1@6"]
    assert all("repeat" not in c.identity for c in once)
    with pytest.raises(ConfigError, match="^RECOVERY_REPEATS: runs of each case must be >= 1, got 0$"):
        RecoverySettings(repeats=0, ckpt_dir=str(tmp_path)).validate()

    def rec(strategy, detect, recover, ettr, exact=True):
        return dict(strategy=strategy, fault="kill:1@6", ckpt_mode="sync", t_detect=detect, t_recover=recover,
                    ettr=ettr, exact=exact)  # fmt: skip

    runs = [rec("elastic", 0.2, 18.0, 0.01), rec("elastic", 0.1, 20.0, 0.03), rec("elastic", 0.4, 19.0, 0.02, False)]
    lines = format_tables([*runs, rec("torchft", None, None, 0.9)]).splitlines()
    i = lines.index(next(x for x in lines if x.startswith("# spread over repeats")))
    row = ["elastic", "kill:1@6", "sync", "3", "0.200", "(0.100-0.400)", "19.00", "(18.00-20.00)", "0.0200"]
    assert lines[i + 2].split() == [*row, "(0.0100-0.0300)", "2/3"]
    # a run that measured no detection (nan or None) is left out of the spread, not printed as nan
    from experiments.recovery.table import spread

    assert spread([float("nan"), 0.3, None, 0.1], ".2f") == "0.20 (0.10-0.30)"
    assert spread([float("nan")], ".2f") == "-"
    assert lines[i + 3].split() == ["torchft", "kill:1@6", "sync", "1", "-", "-", "0.9000", "1/1"]
    assert "spread over repeats" not in format_tables(runs[:1])
