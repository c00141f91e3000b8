"""The link probe on a real 2-rank Gloo group through the launcher: the window goes beyond MAX_BYTES in x4 steps,
its steps are marked, the last one says why it stopped (the steps it did not take are no skipped cases), and the
link figure reads how far it went."""

from __future__ import annotations

import pytest

from suite import results
from suite.model import link_rate
from suite.model.link_probe import PROBE_STEP, size_text
from tests.conftest import load_bench, run_suite
from tests.helpers.p2p import TINY


@pytest.mark.slow
def test_the_window_probes_beyond_max_bytes_and_the_link_figure_says_how_far(tmp_path):
    # one size in the sweep: no step of it to judge, so the probe's first step runs (a few iterations, well within
    # its time bound); whether it goes further depends on the link and the machine's load, and either is checked
    # the window's cases alone (the other patterns' own probes are other tests')
    args = [*TINY, "--min-bytes", "16K", "--max-bytes", "16K", "--", "-k", "window"]
    proc = run_suite(tmp_path, *args, nproc=2, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = load_bench(tmp_path)
    win = [r for r in results.records(run) if r.get("pattern") == "window" and r["variant"] == "unidirectional"]
    sweep = [r for r in win if not r.get("beyond_sweep")]
    beyond = [r for r in win if r.get("beyond_sweep")]
    assert max(r["size_bytes"] for r in sweep) == 16 << 10 and all("link_probe" not in r for r in sweep)
    # at least the first step ran, each x4, marked, the last with its why
    assert beyond, proc.stdout[-3000:]
    assert [r["size_bytes"] for r in beyond] == [(16 << 10) * PROBE_STEP**k for k in range(1, len(beyond) + 1)]
    assert all(r["table"] == "link_probe" and r["link_probe"]["beyond_max_bytes"] for r in beyond)
    assert [r["link_probe"]["step"] for r in beyond] == list(range(1, len(beyond) + 1))
    last = beyond[-1]["link_probe"]
    assert last["why"] in ("levelled off", "size cap", "time bound") and last["stopped"].startswith(last["why"])
    assert all(r["link_probe"]["why"] is None for r in beyond[:-1])  # only the last step stopped it
    # the steps it did not take are no skipped cases: in none of the run's lists of them, nor in pytest's
    assert not [s for s in run["suite"]["skipped"] if "link probe" in s["reason"]], run["suite"]["skipped"]
    assert "link probe stopped" not in proc.stdout + proc.stderr and " skipped" not in proc.stdout, proc.stdout[-3000:]
    (fig,) = link_rate.link_figures(run).values()
    assert f"p2p window 0->1 up to {size_text(beyond[-1]['size_bytes'])}, {last['why']}" in fig.source
    assert fig.sizes[1] == beyond[-1]["size_bytes"]
