"""Run a test tier N times and report failures per test (the flake budget: 20/20 before landing).

    python scripts/soak.py N PATH [PATH ...] [-- PYTEST_ARGS]

Each round is a fresh ``pytest`` process writing JUnit XML; a round with a failure prints the end of each
failure's report (the assertion and what it saw: a flake's cause is in the round that failed, which is not
run again); the summary lists every test that failed in any round with its failure count, and the exit status
is 1 if any did.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path


REPORT_CHARS = 1500
"""How much of a failure's report a failed round prints: its end (the assertion and the values it saw)."""


def failures(junit: Path) -> tuple[int, dict[str, str]]:
    """(tests run, id -> the failure's report, for each test that failed or errored) from one JUnit XML file."""
    root = ET.parse(junit).getroot()
    ran, failed = 0, {}
    for tc in root.iter("testcase"):
        if tc.find("skipped") is not None:
            continue
        ran += 1
        bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
        if bad is not None:
            failed[f"{tc.get('classname')}::{tc.get('name')}"] = (bad.text or bad.get("message") or "").strip()
    return ran, failed


def main(argv: list[str]) -> int:
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    else:
        extra = []
    if len(argv) < 2 or not argv[0].isdigit() or int(argv[0]) < 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    n, paths = int(argv[0]), argv[1:]
    counts: collections.Counter = collections.Counter()
    ran_total = 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(n):
            junit = Path(d) / f"round{i}.xml"
            t0 = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:randomly", f"--junitxml={junit}", *extra],
                capture_output=True,
                text=True,
            )
            if not junit.exists():
                print(f"round {i + 1}: pytest wrote no report (status {proc.returncode})\n{proc.stdout[-2000:]}")
                counts["<pytest itself>"] += 1
                continue
            ran, failed = failures(junit)
            ran_total += ran
            counts.update(list(failed))  # each failed test once (its report is not a count)
            print(
                f"round {i + 1}/{n}: {ran} tests, {len(failed)} failed, {time.monotonic() - t0:z.0f} s"
                + (": " + ", ".join(failed) if failed else ""),
                flush=True,
            )
            for name, report in failed.items():
                print(f"--- {name}, round {i + 1}:\n{report[-REPORT_CHARS:]}\n---", flush=True)
    print(f"soak: {n} rounds of {' '.join(paths)}")
    if not counts:
        print(f"no failures ({ran_total} test runs)")
        return 0
    for name, c in counts.most_common():
        print(f"  {c}/{n} failed: {name}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
