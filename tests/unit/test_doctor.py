"""The doctor's decision rules (experiments/doctor/verdict.py) on synthetic samples: what it must name, and the noise
and near-threshold cases where it must say healthy."""

from __future__ import annotations

import io
import json
import math
import re

import pytest

from experiments.doctor import detectable, stragglers
from experiments.doctor import verdict as doctor
from suite import results
from suite.common.failures import EXIT_FINDING, EXIT_OK
from tests.helpers.doctor_runs import N_SAMPLES, THREE_NODES, doctor_run


@pytest.mark.parametrize("seed", range(5))
def test_healthy_noisy_links_and_ranks_are_healthy(seed):
    d = doctor.diagnose(doctor_run(THREE_NODES, noise=0.1, seed=seed))
    assert d.verdict == "healthy", [f.where for f in d.findings] + [e for e in d.detectable if not e["conclusive"]]
    assert d.exit_status == EXIT_OK and d.advice == []
    assert all(e["detectable"] <= e["rule"] * detectable.NOISE_ALLOWANCE for e in d.detectable)
    assert {(c["probe"], c["class"]) for c in d.classes} == {
        (p, c) for p in ("latency", "bandwidth", "bidirectional") for c in ("intra-node", "inter-node")
    }


def test_a_link_just_under_the_threshold_stays_healthy():
    d = doctor.diagnose(
        doctor_run(THREE_NODES, slow=lambda p, a, b, k: 1.35 if (p, a, b) == ("bandwidth", 0, 2) else 1.0, noise=0.05)
    )
    assert d.verdict == "healthy"
    e = next(x for x in d.links if (x["probe"], x["src"], x["dst"]) == ("bandwidth", 0, 2))
    assert 1.25 < e["ratio"] < 1.45 and not e["slow"]


def test_one_slow_link_is_named_with_its_direction():
    d = doctor.diagnose(
        doctor_run(THREE_NODES, slow=lambda p, a, b, k: 4.0 if (p, a, b) == ("bandwidth", 1, 3) else 1.0)
    )
    assert d.exit_status == EXIT_FINDING
    assert [(e["src"], e["dst"]) for e in d.slow_links] == [(1, 3)]
    (f,) = d.findings
    assert f.kind == "slow_link" and f.where.startswith("1 (node0) -> 3 (node1)")
    assert f.ratio == pytest.approx(0.25, rel=0.15)
    assert len(f.evidence) == 2  # one case per pass


def test_a_link_slow_in_one_pass_only_is_noise():
    d = doctor.diagnose(
        doctor_run(THREE_NODES, slow=lambda p, a, b, k: 4.0 if (p, a, b, k) == ("bandwidth", 1, 3, 1) else 1.0)
    )
    assert d.verdict == "healthy"


def _node2_egress_quarter(probe: str, a: int, b: int, k: int) -> float:
    """node2's (ranks 4, 5) outgoing links at a quarter of the others' bandwidth: its pair probes out take 4x."""
    return 4.0 if probe == "bandwidth" and a in (4, 5) and b < 4 else 1.0


def test_a_node_whose_outgoing_links_are_slow_is_one_weak_node():
    d = doctor.diagnose(doctor_run(THREE_NODES, slow=_node2_egress_quarter))
    outgoing = {(a, b) for a in (4, 5) for b in range(4)}
    assert {(e["src"], e["dst"]) for e in d.slow_links} == outgoing
    assert [w["host"] for w in d.weak_nodes] == ["node2"]
    assert d.weak_nodes[0]["affected"] == ["outgoing bandwidth"]
    (f,) = d.findings  # one cause, not eight findings
    assert f.kind == "weak_node" and "node2" in f.where and len(f.evidence) == 8
    assert f.ratio == pytest.approx(0.25, rel=0.15)


def test_a_rank_slowed_only_in_communication_by_its_nodes_slow_egress_is_part_of_the_weak_node():
    # node2's egress at a quarter: its rank 5 also reads slow in the collectives (its sends cross that link), not
    # in the compute probe. One cause, one finding: rank 5 is the weak node's evidence, not a straggler finding.
    d = doctor.diagnose(
        doctor_run(
            THREE_NODES,
            slow=_node2_egress_quarter,
            comm_slow=lambda r: 2.0 if r == 5 else 1.0,
            noise=0.05,
        )
    )
    assert [s["rank"] for s in d.stragglers] == [5] and not d.stragglers[0]["in_compute"]
    (f,) = d.findings
    assert f.kind == "weak_node" and f.where.startswith("node2 (ranks 4, 5)") and "rank 5" in f.evidence


def test_a_compute_straggler_on_a_node_with_slow_egress_is_still_its_own_finding():
    d = doctor.diagnose(
        doctor_run(
            THREE_NODES,
            slow=_node2_egress_quarter,
            rank_slow=lambda r: 2.0 if r == 5 else 1.0,
            noise=0.05,
        )
    )
    assert [(f.kind, f.where) for f in d.findings] == [
        ("weak_node", d.findings[0].where),
        ("straggler", "rank 5 (node2)"),
    ]


def test_incoming_slowness_is_told_from_outgoing():
    d = doctor.diagnose(
        doctor_run(THREE_NODES, slow=lambda p, a, b, k: 4.0 if p == "bandwidth" and b in (0, 1) and a >= 2 else 1.0)
    )
    assert [(w["host"], w["affected"]) for w in d.weak_nodes] == [("node0", ["incoming bandwidth"])]


def test_a_straggler_rank_is_named_with_how_much_it_holds_back():
    d = doctor.diagnose(doctor_run(THREE_NODES, rank_slow=lambda r: 1.5 if r == 3 else 1.0, noise=0.05))
    assert [s["rank"] for s in d.stragglers] == [3]
    (f,) = d.findings
    assert f.kind == "straggler" and f.where == "rank 3 (node1)"
    assert d.stragglers[0]["holds_back_us"] == pytest.approx(1000, rel=0.3)  # 1.5 x 2000 us - 2000 us


def test_a_rank_slow_at_compute_and_late_at_the_ops_gives_both_hold_backs():
    # Rank 4 computes 1.3x (600 us over the others' 2 ms) and reaches each all_reduce 1 ms late: the headline
    # is the compute probe's figure, and what the others waited inside the collectives is said beside it (on
    # shared cores the two differ: its peers compute faster while it is away).
    slow = {4: 1.3}
    d = doctor.diagnose(
        doctor_run(
            THREE_NODES, rank_slow=lambda r: slow.get(r, 1.0), late_us=lambda r: 1000.0 * (r in slow), noise=0.02
        )
    )
    (s,) = d.stragglers
    assert s["rank"] == 4 and s["in_compute"] and s["in_communication"]
    assert s["holds_back_us"] == pytest.approx(600, rel=0.2)
    assert s["holds_back_in_communication_us"] == pytest.approx(1150, rel=0.2)  # 1 ms late + its op 1.3 x 500 us
    assert d.ranks[4]["holds_back_us_in"]["all_reduce-4096"] == pytest.approx(1150, rel=0.2)
    (f,) = d.findings
    assert f.confidence.endswith(" per step in compute, 1.15 ms inside the collectives"), f.confidence


def test_a_rank_that_arrives_late_is_named_by_the_communication_probes():
    # Rank 4 reaches each all_reduce 1 ms after the others: they all wait for it inside the op, so every
    # rank's time is ~1.5 ms and only the arrivals tell who it was. Its compute is normal.
    d = doctor.diagnose(doctor_run(THREE_NODES, late_us=lambda r: 1000.0 if r == 4 else 0.0, noise=0.05))
    assert [s["rank"] for s in d.stragglers] == [4]
    s = d.stragglers[0]
    assert s["in_communication"] and not s["in_compute"]
    assert s["holds_back_us"] == pytest.approx(1000, rel=0.2) and s["late_arrival"] == N_SAMPLES
    assert d.ranks[4]["late_arrival_in"] == {"all_reduce-4096": "10/10", "all_reduce-65536": "10/10"}
    (f,) = d.findings
    assert f.kind == "straggler" and f.where == "rank 4 (node2)" and "entered the op last in 10" in f.confidence


def test_the_per_rank_plot_shows_the_late_rank_in_the_communication_probes():
    # what the report's box plot draws: every all-rank probe, the communication ones as own times
    run = doctor_run(THREE_NODES, late_us=lambda r: 1000.0 if r == 4 else 0.0, noise=0.05)
    probes = dict(stragglers.rank_time_probes([b["extra_info"] for b in run["benchmarks"]]))
    assert set(probes) == {"compute-pass1", "compute-pass2", "all_reduce-4096", "all_reduce-65536"}
    for label in ("all_reduce-4096", "all_reduce-65536"):
        meds = [sorted(r)[len(r) // 2] for r in probes[label]]
        assert max(range(6), key=meds.__getitem__) == 4 and meds[4] > 1.5 * sorted(meds)[2], meds


def test_own_time_is_the_sample_less_the_wait_for_the_last_arrival():
    # 3 ranks, 1 sample: rank 1 arrived 100 us after rank 0 and 99 us after rank 2
    rec = {"rank_samples_us": [[110.0], [110.0], [110.0]], "rank_arrivals_us": [[0.0], [100.0], [1.0]]}
    assert stragglers.own_times_us(rec) == [[10.0], [110.0], [11.0]]
    # samples per op (2 ops per sample) and divided by a time divisor of 5: the wait is too
    rec |= {"ops_per_sample": 2, "time_divisor": 5}
    assert stragglers.own_times_us(rec) == [[100.0], [110.0], [pytest.approx(100.1)]]
    assert stragglers.own_times_us({"rank_samples_us": [[3.0], [4.0]]}) == [[3.0], [4.0]]  # stored before arrivals


def test_a_rank_always_a_little_slowest_is_not_a_straggler():
    # slowest every time (p tiny), but by 5%: not worth a finding (the effect rule)
    d = doctor.diagnose(doctor_run(THREE_NODES, rank_slow=lambda r: 1.05 if r == 2 else 1.0, noise=0.005))
    assert d.ranks[2]["slowest_in"]["compute-pass1 + compute-pass2"] == "20/20"
    assert d.verdict == "healthy"


def test_both_ranks_of_a_cpu_starved_node_make_a_weak_node():
    d = doctor.diagnose(doctor_run(THREE_NODES, rank_slow=lambda r: 2.5 if r in (2, 3) else 1.0, noise=0.05))
    assert sorted(s["rank"] for s in d.stragglers) == [2, 3]
    assert [(w["host"], w["affected"]) for w in d.weak_nodes] == [("node1", ["compute: every rank a straggler"])]
    assert [f.kind for f in d.findings] == ["weak_node"]


def test_links_below_the_expectation_are_slow_even_when_all_alike():
    # every inter-node link carries 256 KiB per ms = 262 MB/s; EXPECT_LINK_RATE=10gbit is 1.25 GB/s
    d = doctor.diagnose(doctor_run(THREE_NODES, expect="10gbit"))
    assert d.expectation["source"] == "EXPECT_LINK_RATE"
    inter_bw = {(e["src"], e["dst"]) for e in d.links if e["probe"] == "bandwidth" and e["class"] == "inter-node"}
    assert {(e["src"], e["dst"]) for e in d.slow_links} == inter_bw
    assert d.exit_status == EXIT_FINDING
    # the compose LINK_RATE is the expectation when none is given: 2gbit = 250 MB/s, met
    d = doctor.diagnose(doctor_run(THREE_NODES, link_rate="2gbit"))
    assert d.verdict == "healthy"
    row = next(c for c in d.classes if (c["probe"], c["class"]) == ("bandwidth", "inter-node"))
    assert row["of_expected"] == pytest.approx(1.05, rel=0.1)


def test_binomial_upper_tail_hand_values():
    assert stragglers.binomial_upper_tail(10, 10, 0.25) == pytest.approx(0.25**10)
    assert stragglers.binomial_upper_tail(0, 10, 0.25) == pytest.approx(1.0)
    # P(X >= 2), n = 3, p = 1/2: (3 + 1) / 8
    assert stragglers.binomial_upper_tail(2, 3, 0.5) == pytest.approx(0.5)


def test_a_run_without_probes_says_so(tmp_path):
    d = doctor.diagnose({"benchmarks": [], "machine_info": {}})
    assert d.verdict == "no probes"
    (tmp_path / "bench.json").write_text('{"benchmarks": [], "machine_info": {}}')
    assert doctor.main([str(tmp_path)]) == 2
    assert doctor.main([str(tmp_path / "missing")]) == 2


def test_the_verdict_table_leads_with_the_findings():
    d = doctor.diagnose(doctor_run(THREE_NODES, slow=_node2_egress_quarter))
    text = doctor.format_verdict(d)
    first, second, third = text.splitlines()[:3]
    assert "1 FINDING(S) (exit 8)" in first
    assert "weak_node" in third and "node2" in third


@pytest.mark.parametrize("seed", range(5))
def test_links_too_noisy_to_tell_a_slow_one_are_inconclusive_not_healthy(seed):
    """Samples spread ±25% (log-sd), 10 a link: no false alarm, and no claim either."""
    d = doctor.diagnose(doctor_run(THREE_NODES, noise=0.25, seed=seed))
    assert d.findings == [] and d.exit_status == EXIT_OK
    assert d.verdict == "inconclusive"
    loose = [e for e in d.detectable if not e["conclusive"]]
    assert loose and all(e["detectable"] > e["rule"] * detectable.NOISE_ALLOWANCE for e in loose)
    assert any(a.startswith("a larger ITERS (more samples") for a in d.advice), d.advice  # no ITERS stored


TRIAL_LATENCY_US = [66.8, 98.0, 151.0, 233.0, 402.0, 686.0]
"""One-way latency per pair of a default 4-rank `make doctor` on a busy 2-core machine: 66.8 to 686 µs."""


def _trial_run() -> dict:
    """The doctor's probes as noisy as that run's: 4 ranks on one 2-core host, 10 samples a probe spread
    ±30% (log-sd), the latency pairs' medians spanning 66.8-686 µs."""
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    lat = dict(zip(pairs, TRIAL_LATENCY_US))
    run = doctor_run(
        ["vm"] * 4, slow=lambda p, a, b, k: lat[(a, b)] / 20.0 if p == "latency" else 1.0, noise=0.3, seed=7
    )
    run["machine_info"]["suite"]["hosts"]["vm"] = {"cpu_count": 2, "affinity_cpus": 2, "ranks": [0, 1, 2, 3]}
    run["suite"]["config"]["iters"] = 10
    return run


def test_a_run_as_noisy_as_a_default_run_on_two_cores_is_inconclusive_with_what_it_could_detect(tmp_path):
    run = _trial_run()
    recs = [b["extra_info"] for b in run["benchmarks"]]
    links = [r for r in recs if "samples_us" in r]
    uncertain = [r for r in links if results.median_ci_pct(r) > 10]
    assert len(uncertain) >= 0.9 * len(links)  # like that run's 55 of 58 probes
    d = doctor.diagnose(run)
    assert d.verdict == "inconclusive" and d.findings == [] and d.exit_status == EXIT_OK
    lat = next(e for e in d.detectable if e["what"] == "intra-node latency")
    assert lat["rule"] == 2.0 and lat["detectable"] > 2.0 * detectable.NOISE_ALLOWANCE and not lat["conclusive"]
    assert d.advice[0] == "NPROC=2 (one rank per core: 4 ranks share 2 cores on vm)"
    assert d.headline.startswith("inconclusive: no finding, but ")
    assert f"intra-node latency slowed up to {lat['detectable']:z.3g}x (its rule: 2x)" in d.headline
    text = doctor.format_verdict(d)
    assert text.startswith("# doctor: 4 ranks on 1 host(s); verdict: INCONCLUSIVE (exit 0")
    assert re.search(r"link  intra-node latency +[\d.]+x / [\d.]+x  NOT CONCLUSIVE: its rule is 2x", text), text
    # through the doctor's own command, on the stored run: the verdict, doctor.json, exit 0
    (tmp_path / "bench.json").write_text(json.dumps(run))
    out = io.StringIO()
    assert doctor.run_doctor(tmp_path, out) == EXIT_OK
    assert "verdict: INCONCLUSIVE" in out.getvalue() and "#  to tell: NPROC=2" in out.getvalue()
    stored = json.loads((tmp_path / "doctor.json").read_text())
    assert stored["verdict"] == "inconclusive" and stored["detectable"] and stored["advice"] == d.advice


def test_a_straggler_hidden_by_too_few_samples_is_inconclusive():
    """Rank samples so few that no sign test can pass: the rank class cannot tell, whatever the links say."""
    per_rank = detectable.rank_detect([[100.0, 101.0, 99.0], [100.0, 100.5, 99.5], [99.0, 100.0, 101.0]])
    assert per_rank == [math.inf] * 3  # 3 samples: P(all 3 slower) = 1/8, never below ALPHA / n
    (entry,) = detectable.rank_detectable(per_rank)
    assert not entry["conclusive"]
