"""Two fail-slow benches side by side (``make compare BASE=results/<bench> NEW=results/<bench>``): per detector,
each headline figure of the base and the new bench with its 95% interval, and a verdict per figure:

- *worse* when the two intervals do not overlap and the new one lies on the bad side (a lower F1, detection rate,
  precision or localisation; a longer time to detect; more false alarms per hour);
- *better* when they do not overlap on the good side; *same* otherwise (the intervals overlap: the trials cannot
  tell them apart; more trials narrow them).

Exit status 1 when any figure is worse (the compare gate's regression status), else 0; 2 when a side is no
bench. Disjoint 95% intervals are a conservative test (two figures can differ with overlapping intervals): a
commit flagged worse is worse, one that passes may still be slightly worse.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .table import estimate_text

FILE = "failslow.json"
FIGURES = (
    ("f1", "F1", True),
    ("recall", "detection rate", True),
    ("precision", "precision", True),
    ("localisation", "localisation", True),
    ("time_to_detect_s", "time to detect (s)", False),
    ("false_alarms_per_hour", "false alarms / h", False),
)
"""(score field, its name, whether higher is better)."""
REGRESSION = 1


def is_bench(path: str | Path) -> bool:
    return (Path(path) / FILE).is_file()


def judge(base: dict, new: dict, higher_better: bool) -> str:
    """worse | better | same | - (a side has no interval) for one figure's two estimates."""
    if None in (base.get("lo"), base.get("hi"), new.get("lo"), new.get("hi")):
        return "-"
    if new["hi"] < base["lo"]:
        return "worse" if higher_better else "better"
    if new["lo"] > base["hi"]:
        return "better" if higher_better else "worse"
    return "same"


def compare(base: dict, new: dict) -> tuple[list[list[str]], bool]:
    """The rows (detector, figure, base, new, verdict) of every detector both benches scored; whether any is worse."""
    rows, worse = [], False
    for det in [d for d in base.get("scores", {}) if d in new.get("scores", {})]:
        b, n = base["scores"][det]["all"], new["scores"][det]["all"]
        for key, name, up in FIGURES:
            v = judge(b[key], n[key], up)
            worse |= v == "worse"
            rows.append([det, name, estimate_text(b[key]), estimate_text(n[key]), v])
    return rows, worse


def main(base_path: str, new_paths: list[str]) -> int:
    """Print each new bench against the base; the status (module docstring)."""
    docs = {}
    for p in [base_path, *new_paths]:
        try:
            docs[p] = json.loads((Path(p) / FILE).read_text())
        except (OSError, ValueError) as e:
            print(f"error: {p} is no fail-slow bench ({FILE}: {e})", file=sys.stderr)
            return 2
    status = 0
    for p in new_paths:
        rows, worse = compare(docs[base_path], docs[p])
        if not rows:
            print(f"error: {base_path} and {p} scored no detector in common", file=sys.stderr)
            return 2
        print(f"# fail-slow bench: {p} against {base_path} (95% intervals; worse/better: they do not overlap)")
        width = max(len(r[2]) for r in rows) + 2
        for r in rows:
            print(f"  {r[0]:<7} {r[1]:<20} {r[2]:<{width}} {r[3]:<{width}} {r[4]}")
        print(f"# verdict: {'WORSE' if worse else 'no figure worse'}")
        status = max(status, REGRESSION if worse else 0)
    return status
