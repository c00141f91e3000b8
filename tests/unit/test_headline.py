"""The run's headline (suite/report/headline.py): one sentence per experiment with what was measured, the
link's rate it is set against and where that rate comes from, and the verdict; on small synthetic runs and
on the stored fixtures."""

from __future__ import annotations

import re

import pytest

from suite import results
from suite.report.headline import correctness_text, headline_items, headlines
from tests.conftest import ROOT
from tests.unit.conftest import link_figure

FIXTURES = ROOT / "tests" / "fixtures"
MIB = 1 << 20


def _rec(experiment="collectives", op="all_reduce", size=MIB, busbw=1.0, n_wrong=0, **extra) -> dict:
    return {
        "experiment": experiment,
        "op": op,
        "backend": "gloo",
        "device": "cpu",
        "world_size": 2,
        "size_bytes": size,
        "time_us": size / (busbw * 1e3) if busbw else 100.0,
        "busbw_gbps": busbw,
        "n_wrong": n_wrong,
        "checked": n_wrong is not None,
        **extra,
    }


def _pingpong(size=MIB, busbw=2.0, n_wrong=0) -> dict:
    return _rec("p2p", "send_recv", size, busbw, n_wrong, pattern="pingpong", src=0, dst=1)


def _run(recs: list[dict], hosts=("a", "a"), link_rate: str | None = None) -> dict:
    env = {"LINK_RATE": link_rate} if link_rate else {}
    return {
        "benchmarks": [{"extra_info": r} for r in recs],
        "machine_info": {"suite": {"hostnames": list(hosts), "hosts": {h: {"env": env} for h in set(hosts)}}},
    }


def _by_exp(run: dict) -> dict:
    return {h.experiment: h for h in headline_items(run)}


def _window(size=MIB, alpha_us=20.0, beta=2.0, variant="unidirectional", src=0, dst=1) -> dict:
    """A p2p window record on a link of latency ``alpha_us`` and rate ``beta`` GB/s (time per message)."""
    t = alpha_us + size / (beta * 1e3)
    return _rec("p2p", "send_recv", size, size / (t * 1e3), 0, pattern="window", variant=variant, src=src, dst=dst)


def _sweep(make, sizes=tuple(1 << k for k in range(10, 21)), **kw) -> list[dict]:
    return [make(size=s, **kw) for s in sizes]


def test_collectives_are_set_against_the_links_streaming_rate_not_one_ping_pong():
    # the ping-pong's rate at 1 MiB (0.5 GB/s) is one message's, not the link's: the window's fitted β is
    recs = [_rec(busbw=0.5), _rec(size=1024, busbw=0.01), _pingpong(1024, 0.1), _pingpong(MIB, 0.5)]
    h = _by_exp(_run(recs + _sweep(_window)))["collectives"]
    assert "all_reduce reaches 500 MB/s busbw at 1.0 MiB, 25% of the link's measured rate (2 GB/s" in h.text
    assert (
        "p2p window 0->1 up to 1 MiB, still growing (+11% over 256 KiB; no probe beyond the sweep), α–β fit" in h.text
    )
    assert "11 sizes 1.0 KiB–1.0 MiB" in h.text
    assert h.numbers["link_fraction"] == pytest.approx(0.25) and h.numbers["link_gbps"] == pytest.approx(2.0)
    assert h.text.endswith("0 wrong of 2 cases") and h.verdict == "correct"


def test_without_a_window_the_ping_pong_is_the_link_and_the_source_says_so():
    run = _run([_rec(size=4 * MIB, busbw=1.0), _pingpong(1024, 0.1), _pingpong(MIB, 4.0)])
    text = headlines(run)[0]
    assert "25% of the link's measured rate (4 GB/s, p2p ping-pong 0<->1" in text
    assert "(no streaming probe of this link class in this run)" in text


def test_a_probe_that_stopped_while_the_rate_still_grew_says_how_far_it_went():
    # α 1 ms at 2 GB/s: at 64 KiB the rate is ~3% of β; the fit extrapolates, and the sentence says so
    recs = [_rec(size=64 << 10, busbw=0.01)] + _sweep(_window, sizes=(1024, 4096, 16384, 65536), alpha_us=1000.0)
    assert "still growing at 64.0 KiB" in headlines(_run(recs))[0]


def test_the_headline_quotes_sum_float32_at_the_largest_size_not_the_luckiest_form():
    recs = [
        _rec(busbw=0.2, redop="sum", dtype="float32"),
        _rec(busbw=0.9, redop="min", dtype="float32"),  # noise-favoured: it may not lead
        _rec(busbw=0.8, redop="sum", dtype="float64"),
        _rec(size=4096, busbw=1.5, redop="sum", dtype="float32"),  # a smaller size: not the headline's
    ]
    h = _by_exp(_run(recs))["collectives"]
    assert h.text.startswith("collectives: all_reduce (sum, float32) reaches 200 MB/s busbw at 1.0 MiB")
    assert "the other forms in the tables" in h.text


def test_the_headline_gives_the_busbw_interval_from_its_median():
    samples = [100.0 + k for k in range(-10, 11)]
    rec = _rec(busbw=0.5, redop="sum", dtype="float32", samples_us=samples)
    text = headlines(_run([rec]))[0]
    assert re.search(r"reaches 500 MB/s busbw \[4\d\d MB/s, 5\d\d MB/s\] at 1.0 MiB", text), text


def test_a_share_above_the_link_reads_against_both_directions_where_the_op_sends_both_ways():
    recs = [_rec(busbw=3.0)] + _sweep(_window) + _sweep(_window, variant="bidirectional", beta=1.8)
    text = headlines(_run(recs))[0]
    assert "150% of one direction's measured rate, 83% of both directions' at once (3.6 GB/s" in text


def test_a_share_above_every_link_figure_is_marked_with_its_reason():
    text = headlines(_run([_rec(busbw=3.0)] + _sweep(_window)))[0]
    assert "150% of the link's measured rate, marked: above every link figure of this run" in text
    assert "shared memory, not a link" in text


def test_without_a_probe_the_link_rate_is_the_declared_link_across_hosts():
    run = _run([_rec(busbw=0.5)], hosts=("a", "b"), link_rate="8gbit")
    assert "50% of the link's declared rate (1 GB/s, LINK_RATE=8gbit)" in headlines(run)[0]


def test_across_hosts_the_declared_rate_is_the_link_and_expect_link_rate_comes_first():
    recs = [_rec(busbw=0.5)] + _sweep(_window, beta=4.0)
    run = _run(recs, hosts=("a", "b"), link_rate="8gbit")
    assert "50% of the link's declared rate (1 GB/s, LINK_RATE=8gbit (measured: 4 GB/s" in headlines(run)[0]
    run["suite"] = {"config": {"doctor": {"expect_link_rate": "16gbit"}}}
    assert "25% of the link's declared rate (2 GB/s, EXPECT_LINK_RATE=16gbit (measured: 4 GB/s" in headlines(run)[0]


def test_without_either_the_sentence_says_so_instead_of_a_percentage():
    one_host = _run([_rec(busbw=0.5)], link_rate="8gbit")  # LINK_RATE shapes the links between hosts only
    text = headlines(one_host)[0]
    assert "no link rate to set it against" in text and "%" not in text


def test_a_wrong_case_makes_the_verdict_wrong_and_is_counted():
    h = _by_exp(_run([_rec(n_wrong=3), _rec(size=1024), _rec(op="barrier", busbw=None, n_wrong=None)]))["collectives"]
    assert h.verdict == "WRONG" and (h.n_wrong, h.n_unchecked, h.n_cases) == (1, 1, 3)
    assert h.text.endswith("1 wrong of 2 checked cases, 1 unchecked")


def test_correctness_text_counts():
    assert correctness_text(436, 0, 0) == "0 wrong of 436 cases"
    assert correctness_text(4, 0, 4) == "none of 4 cases checked"


def test_an_experiment_this_checkout_lacks_gets_the_generic_sentence():
    run = _run([_rec("gone", "frobnicate", busbw=0.25, label="frob")])
    assert headlines(run) == ["gone: 1 cases; the highest busbw is 250 MB/s (frob, 1.0 MiB); 0 wrong of 1 cases"]


@pytest.mark.parametrize(
    "fixture, expected",
    [
        ("all-gloo-2", ["collectives", "backends", "ddp", "model_parallel", "p2p", "placement"]),
        ("doctor-gloo-2", ["doctor"]),
        ("sharded-gloo-2", ["collectives", "sharded"]),
    ],
)
def test_every_experiment_of_a_stored_run_has_its_own_sentence(fixture, expected):
    run = results.load_run(FIXTURES / fixture)
    items = headline_items(run)
    assert [h.experiment for h in items] == expected
    for h in items:
        assert h.text.startswith(f"{h.experiment}: ") and "wrong of" in h.text
        assert h.verdict in ("correct", "healthy", "inconclusive")  # the doctor's 5 samples a probe: inconclusive
        # every decimal number is followed by its unit (or is a ratio, a share or a size)
        bare = re.findall(r"\d+\.\d+(?![\d.])(?! ?(?:GB/s|MB/s|B/s|KiB|MiB|GiB|µs|ms|s\b|x|%))", h.text)
        assert not bare, (h.text, bare)


def test_each_experiment_says_its_own_finding():
    texts = {h.experiment: h.text for h in headline_items(results.load_run(FIXTURES / "all-gloo-2"))}
    assert "of the link's measured rate" in texts["collectives"]
    assert "one-way at 1.0 KiB" in texts["p2p"]
    assert "107 of 109 op/dtype forms run" in texts["backends"]
    assert "without communication; it hides" in texts["ddp"]
    assert "data-parallel" in texts["model_parallel"] and "pipeline" in texts["model_parallel"]
    assert "the unpinned time" in texts["placement"]
    doctor = headline_items(results.load_run(FIXTURES / "doctor-gloo-2"))[0]
    # 5 samples a link, its two links 2.3x apart: nothing found, and nothing ruled out
    assert doctor.text.startswith("doctor: inconclusive: no finding, but intra-node bandwidth slowed up to ")
    assert doctor.verdict == "inconclusive" and "to tell: ITERS=20" in doctor.text
    sharded = headlines(results.load_run(FIXTURES / "sharded-gloo-2"))[1]
    assert "train step ddp" in sharded and "against DDP's" in sharded


def test_the_run_end_fits_ten_lines_and_names_the_headlines_left_to_the_report(tmp_path):
    from suite.report.run_end import MAX_LINES, end_lines

    run = results.load_run(FIXTURES / "all-gloo-2")  # six experiments: more than fit
    (tmp_path / "tables.txt").write_text("x")
    (tmp_path / "trace.json").write_text("{}")
    lines = end_lines(run, tmp_path, status=0, latest="also latest", report=tmp_path / "index.html", tables_shown=False)
    assert len(lines) == MAX_LINES and all(line.startswith("# ") for line in lines)
    assert lines[0].startswith("# verdict: PASS: 134 cases, 0 wrong, 13 unchecked; exit status 0")
    assert lines[1].startswith("# collectives: all_reduce (sum, float32) reaches")
    assert "(+3 more in the report: " in lines[4]
    assert [line.split(":")[0] for line in lines[5:]] == ["# time", "# results", "# tables", "# report", "# trace"]


def test_the_run_end_puts_a_wrong_experiment_first(tmp_path):
    from suite.report.run_end import end_lines

    run = _run([_rec(), _pingpong(n_wrong=2)])
    run["suite"] = {"complete": True, "started_unix": 100.0, "phase_seconds": {"timed": 3.0, "warmup": 1.0}}
    lines = end_lines(run, tmp_path, status=6, latest="also latest", report=None, tables_shown=False, now=110.0)
    assert lines[0].startswith("# verdict: FAIL: 2 cases, 1 wrong, 0 unchecked; exit status 6")
    assert lines[1].startswith("# p2p: ") and lines[1].endswith("1 wrong of 1 cases")
    time_line = "# time: 10 s from start to report; rank 0: timed 3.0 s (75%), warmup 1.0 s (25%) of 4.0 s"
    time_line += " in its session"
    assert time_line in lines
    assert f"# tables: python -m suite.report {tmp_path}" in lines  # no tables.txt: how to get them


def test_a_tiny_rate_reads_without_an_exponent():
    text = headlines(_run([_rec(size=96, busbw=4.1e-05)]))[0]  # 96 B all_reduce: 41 kB/s, once "4.1e-05 GB/s"
    assert "all_reduce reaches 0.041 MB/s busbw at 96 B" in text and "e-0" not in text


def test_an_unbounded_rate_interval_does_not_excuse_a_share_above_the_link():
    from suite.report.headline import share

    link = link_figure(beta_ci_gbps=(0.5, float("inf")), alpha_us=10.0, source="p2p window 0->1")
    s = share(1.5, link)
    assert "within its interval" not in s.text and s.text.startswith("150% of the link's measured rate, marked")
    assert share(0.5, link).cell == "50%"


def test_an_interrupted_run_reads_interrupted_not_failed(tmp_path):
    from suite.report.run_end import end_lines

    run = _run([_rec()])
    run["suite"] = {"complete": False, "started_unix": 100.0, "phase_seconds": {"timed": 3.0}}
    for status in (130, 143):
        lines = end_lines(run, tmp_path, status=status, latest="unchanged", report=None, tables_shown=False, now=110.0)
        assert lines[0].startswith(f"# verdict: INTERRUPTED: 1 case, 0 wrong, 0 unchecked; exit status {status}")
    lines = end_lines(run, tmp_path, status=5, latest="unchanged", report=None, tables_shown=False, now=110.0)
    assert lines[0].startswith("# verdict: FAIL (partial run): 1 case")  # a run that failed part-way stays a failure
