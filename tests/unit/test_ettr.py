"""The ETTR model (suite/model/ettr.py): the intervals and ETTR forms against hand-computed values, the
closed forms against the seeded Monte-Carlo of Poisson failures (suite/model/ettr_sim.py) at several rates,
validate() on run records, the extrapolation, and the command (python -m suite.model.ettr_cli, make ettr)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from suite.model import ettr, ettr_cli
from suite.model.ettr_sim import simulate
from tests.conftest import ROOT

VENV = Path(sys.executable).parent.parent
H = 3600.0


# ---- the closed forms, by hand ----


def test_young_interval_is_sqrt_2cm():
    # C = 30 s, M = 7.9 h = 28,440 s: sqrt(2 * 30 * 28440) = sqrt(1,706,400) = 1306.29 s
    assert ettr.young_interval(30, 7.9 * H) == pytest.approx(1306.2925, rel=1e-6)


def test_daly_interval_adds_the_higher_order_terms_and_caps_at_m():
    # x = C / 2M = 30 / 56880; sqrt(2CM)(1 + sqrt(x)/3 + x/9) - C = 1306.2925 * 1.0077140 - 30
    assert ettr.daly_interval(30, 7.9 * H) == pytest.approx(1286.37, rel=1e-4)
    assert ettr.daly_interval(50, 20) == 20  # C >= 2M: Daly's interval is M


def test_lambert_w0_solves_w_exp_w():
    for x in (-1 / math.e + 1e-12, -0.3, -0.1, -1e-6):
        w = ettr._lambert_w0(x)
        assert -1 <= w < 0 and w * math.exp(w) == pytest.approx(x, rel=1e-9, abs=1e-15)
    assert ettr._lambert_w0(-0.1) == pytest.approx(-0.1118325592, rel=1e-9)
    assert ettr._lambert_w0(-1 / math.e) == -1.0
    with pytest.raises(ValueError):
        ettr._lambert_w0(-0.5)


def test_best_interval_maximises_the_complete_model_and_daly_is_close():
    for c, m in ((1.0, 20.0), (30.0, 7.9 * H), (30.0, 1.8 * H), (5.0, 60.0)):
        best = ettr.best_interval(c, m)
        at = ettr.exact_ettr(best, c, 7.0, m)
        assert at > ettr.exact_ettr(best * 1.01, c, 7.0, m) and at > ettr.exact_ettr(best * 0.99, c, 7.0, m)
    # small C/M: Daly's estimate within 0.1% of the optimum, Young's within 3%
    assert ettr.daly_interval(30, 7.9 * H) == pytest.approx(ettr.best_interval(30, 7.9 * H), rel=1e-3)
    assert ettr.young_interval(30, 7.9 * H) == pytest.approx(ettr.best_interval(30, 7.9 * H), rel=0.03)


def test_exact_ettr_by_hand_and_in_the_limits():
    # 10 / (20 e^0.1 (e^0.55 - 1)) = 10 / (20 * 1.1051709 * 0.7332530) = 0.617002
    assert ettr.exact_ettr(10, 1, 2, 20) == pytest.approx(0.617002, rel=1e-5)
    # failures vanish: only the checkpoint's stall is left, tau / (tau + C)
    assert ettr.exact_ettr(10, 1, 2, 1e12) == pytest.approx(10 / 11, rel=1e-9)
    # rare failures: the complete model tends to the first-order budget and to Meta's form (+ C/tau)
    m = 1e6
    assert ettr.exact_ettr(100, 1, 50, m) == pytest.approx(ettr.first_order_ettr(100, 1, 50, m), rel=1e-3)
    assert ettr.meta_ettr(100, 50, m) == pytest.approx(1 - (50 + 50) / m)
    assert ettr.first_order_ettr(100, 1, 50, m) == pytest.approx(1 - 0.01 - 100 / m)


def test_live_recovery_loses_the_step_in_flight_and_tends_to_exp_minus_r_over_m():
    assert ettr.live_ettr(1e-6, 30, 300) == pytest.approx(math.exp(-0.1), rel=1e-6)
    # a step of 2 s: the step in flight adds about half a step to each failure's loss
    assert ettr.live_ettr(2, 30, 3000) == pytest.approx(1 - 31 / 3000, rel=1e-3)
    assert ettr.live_ettr(2, 30, 3000, overhead_s=0.2) == pytest.approx(ettr.exact_ettr(2, 0.2, 30, 3000))


def test_job_mtbf_scales_a_node_mttf_by_the_nodes():
    assert ettr.job_mtbf_s(1024 * H, 1024, 8) == pytest.approx(8 * H)
    assert ettr.job_mtbf_s(100.0, 3) == pytest.approx(100 / 3)
    with pytest.raises(ValueError, match="multiple"):
        ettr.job_mtbf_s(100.0, 12, 8)


@pytest.mark.parametrize("bad", [dict(tau_s=0), dict(mtbf_s=-1), dict(ckpt_s=float("nan")), dict(restart_s=True)])
def test_bad_model_input_names_the_value(bad):
    args = dict(tau_s=10, ckpt_s=1, restart_s=2, mtbf_s=20) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        ettr.exact_ettr(**args)


# ---- the closed forms against the Monte-Carlo ----


@pytest.mark.parametrize("ratio", [2, 5, 20, 100])
def test_the_complete_model_agrees_with_simulated_poisson_failures(ratio):
    """MTBF from 2 to 100 checkpoint intervals, 300 to 3,000 failures a run (30,000 intervals at most): within
    1.5% (the seed fixes the draw; rarer failures need fewer, as they cost less of the run)."""
    mtbf = ratio * 10.0
    work = min(3000 * mtbf, 300_000.0)
    sim = simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=mtbf, work_s=work, seed=ratio)
    assert sim.failures > 250
    assert sim.ettr == pytest.approx(ettr.exact_ettr(10, 1, 3, mtbf), rel=0.015)
    live = simulate(tau_s=1, ckpt_s=0, restart_s=3, mtbf_s=mtbf, work_s=work / 10, seed=100 + ratio)
    assert live.ettr == pytest.approx(ettr.live_ettr(1, 3, mtbf), rel=0.015)


def test_the_first_order_forms_hold_only_where_failures_are_rare():
    """The check can fail: at one failure per two intervals the first-order budget is >10% off the simulation."""
    frequent = simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=20, work_s=40_000, seed=7)
    assert abs(ettr.first_order_ettr(10, 1, 3, 20) / frequent.ettr - 1) > 0.10
    rare = simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=2000, work_s=400_000, seed=7)
    # within 2%: what is left is C/tau against the exact C/(tau + C)
    assert ettr.first_order_ettr(10, 1, 3, 2000) == pytest.approx(rare.ettr, rel=0.02)


def test_the_simulation_is_seeded_and_counts_what_it_lost():
    a = simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=30, work_s=3000, seed=5)
    assert a == simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=30, work_s=3000, seed=5)
    assert a != simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=30, work_s=3000, seed=6)
    # wall time = kept work + checkpoints + redone work + restarts (each failure's, recoveries cut short aside)
    assert a.wall_s >= 3000 + 299 * 1 + a.redone_s
    assert a.ettr == pytest.approx(3000 / a.wall_s)
    clean = simulate(tau_s=10, ckpt_s=1, restart_s=3, mtbf_s=1e15, work_s=100, seed=1)
    assert clean.failures == 0 and clean.wall_s == pytest.approx(109)  # 10 segments, 9 checkpoints


# ---- validate(records) ----


def _record(strategy: str, *, mtbf: float, seed: int, ckpt_every: int = 5, step: float = 2.0, r: float = 3.0) -> dict:
    """A run record as the recovery experiment writes it, from a simulated run with known costs: its time to
    recover ends at the first step committed after the fault (the restart, then one step)."""
    live = "torchft" in strategy
    tau, c = (step, 0.0) if live else (ckpt_every * step, 1.0)
    sim = simulate(tau_s=tau, ckpt_s=c, restart_s=r, mtbf_s=mtbf, work_s=600 * mtbf, seed=seed)
    redone_steps = sim.redone_s / step
    return dict(
        strategy=strategy, fault="poisson", wall_s=sim.wall_s, ettr=sim.ettr, ckpt_save_s=None if live else c,
        ckpt_load_s=None if live else 0.5, t_recover=r + step, steps_redone=redone_steps,
        step_s_clean=step, mtbf_s=mtbf, ckpt_every=None if live else ckpt_every, n_faults=sim.failures,
    )  # fmt: skip


def test_validate_passes_runs_the_model_describes_at_three_rates():
    records = [_record(s, mtbf=m, seed=k) for k, m in enumerate((30.0, 60.0, 240.0)) for s in ("elastic", "torchft")]
    rows = ettr.validate(records)
    assert all(r.ok for r in rows), [(r.strategy, r.mtbf_s, r.error) for r in rows]
    assert ettr.rates_within_bar(rows) == [30.0, 60.0, 240.0]
    assert rows[0].restart_s == pytest.approx(3.0)
    assert rows[0].meta is not None and rows[1].meta is None  # live recovery has no checkpoint interval


def test_a_record_is_modelled_by_its_strategys_trait_not_its_name():
    """The recovery experiment writes its strategy's ``heals_from_peer`` in each record: a live strategy named
    without any word of LIVE_WORDS is modelled live, and one named torchft that restores checkpoints is not. A
    record without the trait (written before it) is read by its name."""
    live = _record("torchft", mtbf=60.0, seed=1)
    ckpt = _record("elastic", mtbf=60.0, seed=2)
    renamed = [live | {"strategy": "peerheal", "heals_from_peer": True}, ckpt | {"heals_from_peer": False}]
    rows = ettr.validate(renamed + [ckpt | {"strategy": "torchft-ckpt", "heals_from_peer": False}])
    assert [r.meta is None for r in rows] == [True, False, False]  # live recovery has no checkpoint interval
    assert all(r.ok for r in rows), [(r.strategy, r.error) for r in rows]
    assert rows[0].predicted == ettr.validate([live])[0].predicted
    assert [r.meta is None for r in ettr.validate([live, ckpt])] == [True, False]  # old records: by their name


def test_the_restart_cost_is_the_time_to_recover_less_one_step_not_the_work_redone():
    """Elastic: restarted at 10 s, the first step committed after the fault is the first of 6 redone (2 s each):
    R is 10 s. The work redone is the model's own term (half a checkpoint interval per failure on average)."""
    rec = _record("elastic", mtbf=60.0, seed=3)
    rec |= {"t_recover": 12.0, "steps_redone": 6 * rec["n_faults"]}
    (row,) = ettr.validate([rec])
    assert row.restart_s == pytest.approx(10.0)


def test_validate_fails_a_run_that_lost_more_than_the_model_says():
    rec = _record("elastic", mtbf=60.0, seed=3)
    rec["ettr"] *= 0.85  # the run lost 15% more than its costs explain
    (row,) = ettr.validate([rec])
    assert not row.ok and row.error == pytest.approx(1 / 0.85 - 1, rel=0.1)
    assert ettr.rates_within_bar([row]) == []


def test_validate_reads_failures_from_events_and_per_failure_lists():
    rec = _record("elastic", mtbf=60.0, seed=4)
    n = rec.pop("n_faults")
    rec["events"] = [dict(rank=k, kind="fault", t=float(i)) for i in range(n) for k in (0, 1)]
    assert ettr.failures_seen(rec) == n
    listed = dict(rec, t_recover=[rec["t_recover"]] * n, steps_redone=[rec["steps_redone"] / n] * n)
    assert ettr.validate([listed])[0].predicted == pytest.approx(ettr.validate([rec])[0].predicted)
    # a single planned fault and no schedule: the model takes the rate the run saw; no rate to pass at
    one = dict(rec, events=None, t_fault=12.0, mtbf_s=None)
    (row,) = ettr.validate([one])
    assert row.failures == 1 and row.at_schedule is None and ettr.rates_within_bar([row]) == []


def test_validate_names_the_record_and_field_it_cannot_use():
    rec = _record("elastic", mtbf=60.0, seed=4)
    with pytest.raises(ValueError, match=r"record 1 \(elastic, poisson\): ckpt_save_s"):
        ettr.validate([rec, dict(rec, ckpt_save_s="slow")])


# ---- the extrapolation and the command ----


def test_extrapolation_gives_the_best_whole_step_interval_and_ettr_per_strategy():
    scales = {r: h * H for r, h in ettr.META_MTTF_H.items()}
    pts = ettr.extrapolation(scales, ckpt_s=30, restart_s=300, async_ckpt_s=3, live_loss_s=60, step_s=2)
    assert [(p.ranks, p.strategy.split(",")[0]) for p in pts][:3] == [
        (1024, "checkpoint/restart"),
        (1024, "checkpoint/restart"),
        (1024, "live recovery (torchft)"),
    ]
    sync = {p.ranks: p for p in pts if p.strategy == "checkpoint/restart, sync save"}
    assert sync[1024].best_s % 2 == 0 and sync[1024].best_s == pytest.approx(ettr.best_interval(30, 7.9 * H), abs=1)
    assert sync[16384].ettr < sync[1024].ettr < 1  # shorter MTTF, lower ETTR, same costs
    assert sync[1024].ettr == pytest.approx(ettr.exact_ettr(sync[1024].best_s, 30, 300, 7.9 * H))
    with pytest.raises(ValueError, match="step_s"):
        ettr.extrapolation(scales, ckpt_s=30, restart_s=300, live_loss_s=60)


def test_the_command_prints_the_table_at_metas_scales(capsys):
    assert ettr_cli.main(["table", "--ckpt-s", "30", "--restart-s", "5min", "--live-s", "1min", "--step-s", "2"]) == 0
    out = capsys.readouterr().out
    assert "| 1,024 | 7.9 h | checkpoint/restart, sync save |" in out and "| 16,384 | 1.8 h |" in out
    assert "live recovery (torchft)" in out and "vs ByteRobust 97%" in out


def test_the_command_scales_a_node_mttf(capsys):
    argv = ["table", "--ckpt-s", "30", "--restart-s", "300", "--node-mttf", "1024h", "--ranks", "8,64"]
    assert ettr_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "| 8 | 1.02e+03 h |" in out and "| 64 | 128 h |" in out  # 1 node, then 8 nodes of 8 ranks


@pytest.mark.parametrize(
    "argv,said",
    [
        (["table", "--ckpt-s", "fast", "--restart-s", "300"], "--ckpt-s must be a duration"),
        (["table", "--ckpt-s", "30", "--restart-s", ""], "--restart-s is required"),
        (["table", "--ckpt-s", "30", "--restart-s", "300", "--scale", "1024"], "RANKS=MTTF"),
        (["table", "--ckpt-s", "30", "--restart-s", "300", "--scale", "1024=0h"], "MTTF must be positive"),
        (["table", "--ckpt-s", "30", "--restart-s", "300", "--live-s", "60"], "--live-s needs --step-s"),
        (["table", "--ckpt-s", "30", "--restart-s", "300", "--node-mttf", "9h", "--ranks", "12"], "whole number"),
        (["validate", "no/such/records.json"], "cannot read run records"),
        (["validate", ""], "validate needs the JSON file"),
    ],
)
def test_bad_input_is_one_line_and_status_2(argv, said, capsys):
    assert ettr_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and said in err


def test_the_command_validates_records_and_misses_the_bar_with_status_1(tmp_path, capsys):
    good = [_record("elastic", mtbf=m, seed=k) for k, m in enumerate((30.0, 60.0, 240.0))]
    (tmp_path / "good.json").write_text(json.dumps({"records": good}))
    assert ettr_cli.main(["validate", str(tmp_path / "good.json")]) == 0
    assert "3 of 3 runs within 10%" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text(json.dumps(good[:1] + [dict(good[1], ettr=good[1]["ettr"] * 0.8)]))
    assert ettr_cli.main(["validate", str(tmp_path / "bad.json")]) == 1
    assert "1 of 2 runs within 10%" in capsys.readouterr().out


def test_make_ettr_check_prints_the_monte_carlo_table():
    r = subprocess.run(
        ["make", "-s", "--no-print-directory", "-o", f"{VENV}/.installed", f"VENV={VENV}", "ettr-check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("| strategy | MTBF |") and len(lines) == 2 + 2 * len(ettr_cli.CHECK_RATES)


def _doc_table(after: str) -> list[list[str]]:
    """The rows of the first markdown table after ``after`` in docs/recovery.md, as cells."""
    text = (ROOT / "docs" / "recovery.md").read_text()
    lines = text[text.index(after) :].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| "))
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("| "):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    return rows


def test_the_docs_extrapolation_table_is_what_make_ettr_prints():
    argv = ["table", "--ckpt-s", "30", "--restart-s", "300", "--async-ckpt-s", "3", "--live-s", "60", "--step-s", "2"]
    args = ettr_cli.parser().parse_args(argv)
    printed = ettr_cli.format_points(
        ettr.extrapolation(ettr_cli.scales(args), ckpt_s=30, restart_s=300, async_ckpt_s=3, live_loss_s=60, step_s=2)
    )
    want = [[c.strip() for c in ln.strip("|").split("|")] for ln in printed.splitlines()[2:]]
    assert _doc_table("make ettr ETTR_CKPT_S=30 ETTR_RESTART_S=300 ETTR_ASYNC_CKPT_S=3") == want


def test_the_docs_monte_carlo_table_is_what_make_ettr_check_prints():
    """The closed-form columns exactly; the simulated ones within 0.5% (they pass through the C library's log)."""
    doc = _doc_table("With its default seed (1)")
    rows = ettr_cli.check_rows(1, 4000)
    assert len(doc) == len(rows)
    for cells, r in zip(doc, rows):
        assert cells[0] == ("live" if r["live"] else "checkpoint") and cells[7] == f"{r['exact']:z.4f}"
        assert cells[9:] == [f"{r['first_order']:z.4f}", f"{r['meta']:z.4f}"]
        assert float(cells[6]) == pytest.approx(r["simulated"], rel=0.005)
