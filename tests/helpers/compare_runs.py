"""Synthetic runs for suite.report.compare: records (``synthetic_record``), runs of many cases
(``synthetic_run``), and the simulations of many comparisons whose bounds the unit tier checks at a few
trials and the e2e tier at many."""

from __future__ import annotations

import math
import numpy as np
from suite.report import compare


N_CASES = 60


def synthetic_record(i: int, samples, **extra) -> dict:
    s = [float(v) for v in samples]
    return {
        "experiment": "synthetic",
        "op": "all_reduce",
        "backend": "gloo",
        "device": "cpu",
        "world_size": 2,
        "timing_mode": "blocking",
        "dtype": "float32",
        "size_bytes": 1024 * (i + 1),
        "identity": [],
        "samples_us": s,
        "time_us": float(np.median(s)),
        "peak_mem_bytes": int(1e6 + 1000 * s[0]),
        **extra,
    }


def synthetic_run(
    rng, run_sd, factor=lambda i: 1.0, n: int = 20, within_sd: float = 0.02, n_cases: int = N_CASES
) -> list[dict]:
    """One run: every case's samples around 100·(i+1) µs, each case's run median shifted by its own
    lognormal factor (``run_sd``: one sd for every case, or a list, one per case: between-run
    variation case by case; ``_shifted_runs`` shifts whole runs), times ``factor(i)``."""
    sds = run_sd if isinstance(run_sd, list) else [run_sd] * n_cases
    return [
        synthetic_record(
            i, 100.0 * (i + 1) * factor(i) * math.exp(rng.normal(0, sd)) * np.exp(rng.normal(0, within_sd, n))
        )
        for i, sd in enumerate(sds)
    ]


def any_flagged(c) -> bool:
    return any(x.verdict in ("slower", "faster") for x in c.cases)


QUIET, NOISY = 0.02, 0.2


HETERO = [QUIET] * 36 + [NOISY] * 4  # most cases quiet, some 10x noisier


def same_commit_trials(trials: int, runs: int = 3) -> tuple[int, int]:
    """Comparisons of ``runs`` runs a side of one commit, 36 quiet cases and 4 ten times noisier: in how
    many trials some case was called slower/faster, and in how many the gate failed."""
    flagged = failed = 0
    for trial in range(trials):
        rng = np.random.default_rng(1000 + trial)
        base = [synthetic_run(rng, HETERO, n=5, within_sd=0.01, n_cases=40) for _ in range(runs)]
        new = [synthetic_run(rng, HETERO, n=5, within_sd=0.01, n_cases=40) for _ in range(runs)]
        c = compare.compare_runs(base, new, n_boot=50)
        flagged += any_flagged(c)
        failed += c.failed
    return flagged, failed


def slowdown_trials(trials: int) -> tuple[int, int, int]:
    """2x slower: the 4 noisiest of 40 cases, compared with 2 runs a side and then with the runs per side
    the inconclusive ones ask for. Returns (gates that FAIL with the asked runs, slower verdicts of the
    group with them, slower verdicts of the group at 2 runs a side); no quiet case may be flagged."""
    group = range(36, 40)
    slow = lambda i: 2.0 if i in group else 1.0  # noqa: E731
    found = cases_found = cases_found_at_2 = 0
    for trial in range(trials):
        rng = np.random.default_rng(500 + trial)

        def side(k, f=lambda i: 1.0, rng=rng):
            return [synthetic_run(rng, HETERO, f, n=5, within_sd=0.01, n_cases=40) for _ in range(k)]

        c = compare.compare_runs(side(2), side(2, slow), n_boot=100)
        cases_found_at_2 += sum(c.cases[i].verdict == "slower" for i in group)
        asked = max((c.cases[i].runs_needed or 2) for i in group)
        c = compare.compare_runs(side(asked), side(asked, slow), n_boot=100)
        found += c.failed
        cases_found += sum(c.cases[i].verdict == "slower" for i in group)
        assert not any(x.verdict in ("slower", "faster") for x in c.cases[:36])
    return found, cases_found, cases_found_at_2
