"""The pages of `make bench-cpu`, `make doctor` and `make validate-predict` as a person opens them
(tests/browser.py: headless Chromium, 1400x1800): each opens on its picture, inside the first screen, every image
decoded, nothing fetched; a run's page says its verdict, backend, world and every warning before any scrolling
on a laptop's 1280x900. Built from the stored runs in tests/fixtures (no new runs)."""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
from pathlib import Path

from tests.browser import assert_on_small_screen, assert_opens_on, needs_chromium
from tests.conftest import make

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _caption(page: str, img_id: str) -> str:
    m = re.search(rf"<img id='{img_id}'[^>]*>\s*<figcaption>(.*?)</figcaption>", page, re.S)
    assert m, f"no figure {img_id} with a caption"
    return html.unescape(m.group(1))


def _sick_doctor_run(d: Path) -> Path:
    """The stored 2-rank doctor run with two findings planted: its ranks on two hosts with an expected link
    rate of 1gbit (125 MB/s) and the 1 -> 0 bandwidth link 30x slower (~17 MB/s: slow against it), and rank 1's
    compute 3x slower (a straggler); its exit status the doctor's on a finding."""
    run = json.loads((FIXTURES / "doctor-gloo-2" / "bench.json").read_text())
    run["machine_info"]["suite"]["hostnames"] = ["node0", "node1"]
    run["suite"]["config"]["doctor"]["expect_link_rate"] = "1gbit"
    run["suite"]["exit_status"] = 8  # as the launcher stamps the doctor's finding
    for b in run["benchmarks"]:
        e = b["extra_info"]
        if e.get("probe") == "bandwidth" and e["src"] == 1:
            e["samples_us"] = [30 * x for x in e["samples_us"]]
        if e.get("probe") == "compute":
            e["rank_samples_us"][1] = [3 * x for x in e["rank_samples_us"][1]]
    d.mkdir(parents=True)
    (d / "bench.json").write_text(json.dumps(run))
    return d


@needs_chromium
def test_the_doctors_report_opens_on_the_link_matrices_with_the_finding(tmp_path):
    run = _sick_doctor_run(tmp_path / "sick")
    r = make("-s", "report", f"RUN={run}")  # what `make doctor` writes at the end of its run
    assert r.returncode == 0, r.stdout + r.stderr
    page = run / "report" / "index.html"
    text = page.read_text()
    assert text.index("<img ") == text.index("<img id='fig-doctor-glance'")  # the first picture of the page
    caption = _caption(text, "fig-doctor-glance")
    assert caption.startswith("doctor: 2 findings: slow link 1 (node1) -> 0 (node0) [bandwidth, inter-node]")
    assert "the slow link boxed in red" in caption and "rank 1 in red in the bars below" in caption
    assert_opens_on(page, tmp_path, "#fig-doctor-glance")
    # on a laptop's screen: the verdict (the doctor's finding: exit status 8), the world, the doctor's sentence
    assert "verdict: FINDING: " in text and "backend gloo on cpu; 2 ranks on 2 hosts (node0: 1, node1: 1)" in text
    assert_on_small_screen(page, tmp_path, ["#verdict", "#world", "#headline li:first-child"])


@needs_chromium
def test_an_inconclusive_doctors_page_says_so_on_its_first_screen(tmp_path):
    """The stored 2-rank doctor run (5 samples a probe, its two bandwidth links 2.3x apart): nothing found, and
    nothing ruled out; the page's first screen says so with what could hide, not a bare PASS."""
    run = tmp_path / "doctor"
    shutil.copytree(FIXTURES / "doctor-gloo-2", run)
    r = make("-s", "report", f"RUN={run}")
    assert r.returncode == 0, r.stdout + r.stderr
    page = run / "report" / "index.html"
    text = html.unescape(page.read_text())
    screen = text[text.index("<div id='first-screen'>") : text.index("<div id='headline'>")]
    assert "verdict: PASS: 18 cases, 0 wrong" in screen and "backend gloo on cpu; 2 ranks on 1 host (vm)" in screen
    (doctor,) = re.findall(r"<li class='warning'><b>doctor</b>: ([^<]+)</li>", screen)
    assert doctor.startswith("inconclusive: no finding, but intra-node bandwidth slowed up to ")
    assert "to tell: ITERS=20" in doctor
    assert_on_small_screen(page, tmp_path, ["#verdict", "#world", ".warning"])


def _troubled_bench_run(d: Path) -> Path:
    """The stored 2-rank run of the collectives (its broadcasts: one figure), as a `make bench-cpu` on a busy 2-core
    machine would store it at its worst: 4 ranks on the 2 cores, a case of a second, oversubscribed pass at 8
    ranks, the machine's load at 6, stopped by Ctrl-C."""
    run = json.loads((FIXTURES / "collectives-gloo-2" / "bench.json").read_text())
    run["benchmarks"] = [b for b in run["benchmarks"] if b["extra_info"]["variant"] == "broadcast"]
    over = copy.deepcopy(run["benchmarks"][-1])
    over["extra_info"].update(world_size=8, oversubscribed=True)
    run["benchmarks"].append(over)
    (host,) = run["machine_info"]["suite"]["hosts"].values()
    host.update(ranks=[0, 1, 2, 3], load_avg_start=[6.0, 6.0, 6.0])
    run["machine_info"]["suite"]["load_avg_run"] = {"peak_1min": 6.0, "end": [6.0, 6.0, 6.0], "samples": 9}
    run["suite"].update(complete=False, exit_status=130, interrupted_by_signal=2)
    d.mkdir(parents=True)
    (d / "bench.json").write_text(json.dumps(run))
    return d


@needs_chromium
def test_a_bench_pages_first_screen_says_the_verdict_the_world_and_every_warning(tmp_path):
    run = _troubled_bench_run(tmp_path / "busy")
    r = make("-s", "report", f"RUN={run}")  # what `make bench-cpu` writes at the end of its run
    assert r.returncode == 0, r.stdout + r.stderr
    page = run / "report" / "index.html"
    text = html.unescape(page.read_text())
    screen = text[text.index("<div id='first-screen'>") : text.index("<div id='headline'>")]  # before the headline
    assert "verdict: INTERRUPTED: 5 cases, 0 wrong" in screen
    assert "backend gloo on cpu; 2 ranks on 1 host (vm)" in screen
    warned = re.findall(r"<li class='warning'><b>([^<]+)</b>: ([^<]+)</li>", screen)
    kinds = ["PARTIAL", "CPU oversubscribed", "OVERSUBSCRIBED pass", "unstable", "load during the run"]
    assert [k for k, _ in warned] == kinds, warned
    why = dict(warned)
    assert why["PARTIAL"].startswith("interrupted by signal 2: the 5 cases kept")
    assert why["CPU oversubscribed"].startswith("4 ranks on 2 usable cores: ")
    assert why["OVERSUBSCRIBED pass"].startswith("1 case(s) of collectives at 8 ranks: more ranks than usable cores")
    assert re.match(r"[1-4] of 4 cases uncertain by more than ±10%", why["unstable"]), why["unstable"]
    assert why["load during the run"].startswith("load average 6.0 on the host's 2 cores during the run")
    assert_on_small_screen(page, tmp_path, ["#verdict", "#world", ".warning", "#headline li"])
    assert_opens_on(page, tmp_path, "#headline-figure img")  # and the headline figure still on a tall screen


@needs_chromium
def test_make_validate_predict_opens_on_predicted_against_measured(tmp_path):
    """`make validate-predict` on stored runs (VALIDATE_REUSE=1 takes them instead of compose runs): the fit
    run and the check run are the stored 2-rank run of the collectives and the sharded steps."""
    res = tmp_path / "results"
    for n in (2, 3):
        shutil.copytree(FIXTURES / "sharded-gloo-2", res / f"validate-predict-{n}n1p")
    r = make("-s", "validate-predict", "VALIDATE_REUSE=1", "VALIDATE_FIT=2", "VALIDATE_CHECK=3", f"RESULTS={res}")
    assert r.returncode == 0, r.stdout + r.stderr
    page = res / "validate-predict-1p.html"
    assert f"page: {page}" in r.stdout
    text = page.read_text()
    m = re.search(r"<body><h1>[^<]*</h1><figure id='headline-figure'><img [^>]*><figcaption>(.*?)</figcaption>", text)
    assert m, text[:600]  # the page opens on the figure
    caption = html.unescape(m.group(1))
    assert caption.startswith("Nothing here to hold to the ±10% target: no size of these runs is bandwidth-bound")
    assert "training steps: sharded step" in caption
    assert_opens_on(page, tmp_path, "#headline-figure img")
