"""Metrics against hand-computed values (nccl-tests factors, DESIGN.md §3)."""

import pytest

from suite import metrics

# factor(op, n) computed by hand for n = 1, 2, 3, 4, 8
HAND = {
    "all_reduce": {1: 0.0, 2: 1.0, 3: 4 / 3, 4: 1.5, 8: 1.75},
    "all_gather": {1: 0.0, 2: 0.5, 3: 2 / 3, 4: 0.75, 8: 0.875},
    "reduce_scatter": {1: 0.0, 2: 0.5, 3: 2 / 3, 4: 0.75, 8: 0.875},
    "all_to_all": {1: 0.0, 2: 0.5, 3: 2 / 3, 4: 0.75, 8: 0.875},
    "gather": {1: 0.0, 2: 0.5, 3: 2 / 3, 4: 0.75, 8: 0.875},
    "scatter": {1: 0.0, 2: 0.5, 3: 2 / 3, 4: 0.75, 8: 0.875},
    "broadcast": {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 8: 1.0},
    "reduce": {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 8: 1.0},
    "send_recv": {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 8: 1.0},
}


@pytest.mark.parametrize("op", sorted(HAND))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_busbw_factor_matches_hand_values(op, n):
    assert metrics.busbw_factor(op, n) == pytest.approx(HAND[op][n], abs=1e-12)


def test_all_reduce_busbw_is_not_deepspeed_2x():
    # 1 GB in 1 s at 8 ranks: algbw 1 GB/s, busbw 1.75 GB/s (DeepSpeed's 2*S/t would say 2.0)
    assert metrics.algbw_gbps(10**9, 1.0) == pytest.approx(1.0)
    assert metrics.busbw_gbps("all_reduce", 10**9, 1.0, 8) == pytest.approx(1.75)
    assert metrics.busbw_gbps("all_gather", 4 * 10**6, 2e-3, 4) == pytest.approx(2.0 * 0.75)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="no bus-bandwidth factor"):
        metrics.busbw_factor("allreduce", 4)
    with pytest.raises(ValueError):
        metrics.busbw_factor("all_reduce", 0)
    with pytest.raises(ValueError):
        metrics.algbw_gbps(100, 0)


def test_percentiles_match_numpy_linear():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert metrics.percentile(xs, 50) == 3.0
    assert metrics.percentile(xs, 0) == 1.0
    assert metrics.percentile(xs, 100) == 5.0
    assert metrics.percentile(xs, 25) == 2.0
    assert metrics.percentile([1.0, 2.0], 50) == 1.5
    s = metrics.latency_stats_us([1e-6, 2e-6, 3e-6])
    assert s["p50_us"] == pytest.approx(2.0) and s["min_us"] == pytest.approx(1.0)
    assert metrics.percentile((2.0, 8.0), 30) == 3.8 and type(metrics.percentile([1, 2], 50)) is float


def test_percentile_rejects_no_samples_and_q_outside_0_100():
    with pytest.raises(ValueError, match="no samples"):
        metrics.percentile([], 50)
    for q in (-1, 100.5, float("nan")):
        with pytest.raises(ValueError, match=r"q must be in \[0, 100\]"):
            metrics.percentile([1.0], q)


def test_median_ci_brackets_median_and_shrinks():
    import random

    rng = random.Random(0)
    small = [rng.gauss(100, 10) for _ in range(20)]
    big = [rng.gauss(100, 10) for _ in range(2000)]
    lo, hi = metrics.median_ci(small)
    assert lo <= metrics.percentile(small, 50) <= hi
    assert metrics.median_ci_halfwidth_pct(big) < metrics.median_ci_halfwidth_pct(small)
    assert metrics.median_ci_halfwidth_pct([7.0] * 10) == 0.0
    assert metrics.z_two_sided(0.95) == pytest.approx(1.959964, abs=1e-5)


@pytest.mark.parametrize(
    "text,value",
    [
        ("8", 8),
        ("1K", 1024),
        ("4k", 4096),
        ("64M", 64 << 20),
        ("1G", 1 << 30),
        ("2MiB", 2 << 20),
        ("1.5K", 1536),
        ("0", 0),
    ],
)
def test_parse_size(text, value):
    assert metrics.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-1K", "1.3", "1X", "nan", "inf", "1E256", "2P"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        metrics.parse_size(text)


def test_size_sweep():
    assert metrics.size_sweep(1024, 1 << 20, 4) == [1024, 4096, 16384, 65536, 262144, 1 << 20]
    assert metrics.size_sweep(8, 8, 2) == [8]
    assert metrics.size_sweep(8, 100, 2) == [8, 16, 32, 64]
    assert metrics.format_size(1 << 20) == "1M" and metrics.format_size(1536) == "1536"
    with pytest.raises(ValueError):
        metrics.size_sweep(10, 5, 2)
    assert metrics.busbw_factor("barrier", 4) == 0.0  # a barrier moves no payload


def test_tail_percentiles_need_enough_samples():
    # the rule: a percentile q needs 1/f samples, f = min(q, 100-q)/100 (p05/p95 20, p99 100)
    assert [metrics.tail_min_samples(q) for q in (5, 95, 99)] == [20, 20, 100]
    few = metrics.latency_stats_us([i * 1e-6 for i in range(1, 20)])  # 19 samples: the p95 is the maximum
    assert few["p05_us"] is None and few["p95_us"] is None and few["p99_us"] is None
    assert few["p50_us"] == pytest.approx(10.0) and few["max_us"] == pytest.approx(19.0)
    enough = metrics.latency_stats_us([i * 1e-6 for i in range(1, 21)])
    assert enough["p95_us"] == pytest.approx(19.05) and enough["p05_us"] == pytest.approx(1.95)
    assert enough["p99_us"] is None
    hundred = metrics.latency_stats_us([i * 1e-6 for i in range(1, 101)])
    assert hundred["p99_us"] == pytest.approx(99.01)


def test_last_per_sample_names_the_largest_and_its_lead_over_the_others_median():
    # 3 ranks x 3 samples: rank 1 late in sample 0 (9 vs 1 and 3), a tie in sample 1, none in sample 2
    ranks, by = metrics.last_per_sample([[1, 5, 2], [9, 5, 2], [3, 4, 2]])
    assert ranks == [1, 0, 0]  # the lowest rank on a tie
    assert by == pytest.approx([9 - 2, 5 - 4.5, 0.0])
    assert metrics.last_per_sample([[4.0, 1.0]]) == ([0, 0], [0.0, 0.0])  # one rank: nothing to lead
