"""The pages of `make doctor` and `make validate-predict` as a person opens them (tests/browser.py: headless
Chromium, 1400x1800): each opens on its picture, inside the first screen, every image decoded, nothing fetched.
Built from the stored runs in tests/fixtures (no new runs)."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

from tests.browser import assert_opens_on, needs_chromium
from tests.conftest import make

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _caption(page: str, img_id: str) -> str:
    m = re.search(rf"<img id='{img_id}'[^>]*>\s*<figcaption>(.*?)</figcaption>", page, re.S)
    assert m, f"no figure {img_id} with a caption"
    return html.unescape(m.group(1))


def _sick_doctor_run(d: Path) -> Path:
    """The stored 2-rank doctor run with two findings planted: its ranks on two hosts with an expected link
    rate of 1gbit (125 MB/s) and the 1 -> 0 bandwidth link 30x slower (~17 MB/s: slow against it), and rank 1's
    compute 3x slower (a straggler)."""
    run = json.loads((FIXTURES / "doctor-gloo-2" / "bench.json").read_text())
    run["machine_info"]["suite"]["hostnames"] = ["node0", "node1"]
    run["suite"]["config"]["doctor"]["expect_link_rate"] = "1gbit"
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
