"""The stored two-rank Gloo run (tests/fixtures/collectives-gloo-2) and copies of it with scaled samples, for
the report's and make status' tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
import numpy as np
from suite import results


ROOT = Path(__file__).resolve().parents[2]


FIXTURE = ROOT / "tests" / "fixtures" / "collectives-gloo-2"


def stored_run() -> dict:
    return results.load_run(FIXTURE)


def scaled_run(run: dict, factor_fn) -> dict:
    """A copy of ``run`` whose samples are multiplied per sample by ``factor_fn(n)``."""
    out = copy.deepcopy(run)
    for b in out["benchmarks"]:
        e = b["extra_info"]
        s = np.asarray(e["samples_us"]) * factor_fn(len(e["samples_us"]))
        e["samples_us"] = s.tolist()
        e["time_us"] = float(np.median(s))
    return out


def save_run(run: dict, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "bench.json").write_text(json.dumps(run))
    return d
