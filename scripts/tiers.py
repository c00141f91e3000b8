"""Run the test tiers one after another, cheapest first, each with its time against its budget.

    python scripts/tiers.py [--tiers unit,dist,e2e,docker,gpu] [-- PYTEST_ARGS]

The unit tier runs first, in one pytest-xdist worker per core (at most 4: its tests are pure functions
and one-rank in-process groups, each on its own free port and tmp_path), and stops at its first failure
(``-x``; a test already handed to a worker still runs): a broken unit test shows in about a minute, not
after the multi-process tiers, which run one test at a time (their ranks use the cores). When it passes,
the other tiers run to the end, so one run lists every failure. Each tier is its own ``pytest`` process
and ends with a line

    # tier dist: 1210 s (budget 1260 s)

and the run with one line per tier. A tier over its budget is named (``OVER BUDGET``): the budgets are
what keeps ``make test`` under CI's limit on a 2-core machine (docs/tests.md), and a tier's speed is
a target to report, not a test to fail. The exit status is the first failing tier's pytest status
(5, no test selected, counts as a pass: ``-m "not docker"`` selects nothing in the docker tier).

PYTEST_ARGS that name test files or node ids (``tests/e2e/test_what_if.py``, ``tests/dist/test_p2p.py::test_x``)
choose what each tier runs: a tier runs the ones under its folder instead of the whole folder, and a tier that
holds none of them is skipped (said in its line); the other arguments go to every tier.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {"unit": 120, "dist": 960, "e2e": 600, "docker": 540, "gpu": 30}
"""Each tier's budget on CI's 2-core machine, in seconds; docs/tests.md lists them (a unit test checks)."""
NO_TESTS_SELECTED = 5  # pytest.ExitCode.NO_TESTS_COLLECTED
UNIT_WORKERS = ("-n", "auto", "--maxprocesses", "4", "--benchmark-disable")
"""The unit tier's pytest-xdist workers: one per core, at most 4 (pytest-benchmark times nothing in this tier;
it would otherwise warn that xdist disables it)."""


def _tier_of(arg: str, root: Path) -> str | None:
    """The tier whose folder holds ``arg`` where it names a test path under ``tests/`` of ``root`` (a file, a
    folder, or a node id ``<file>::<test>``), else None (an option, or a value of one)."""
    path = Path(arg.split("::", 1)[0])
    parts = path.parts[1:] if path.parts[:1] == (".",) else path.parts
    if len(parts) < 2 or parts[0] != "tests" or parts[1] not in BUDGET_S or not (root / path).exists():
        return None
    return parts[1]


def selection(tier: str, extra: list[str], root: Path) -> tuple[list[str], list[str]] | None:
    """What ``tier`` runs and the other arguments: (its folder, every argument) or, where some arguments are test
    paths, (those of its folder, the arguments that are not test paths); None where paths were given and none is
    its."""
    tiers = [_tier_of(a, root) for a in extra]
    rest = [a for a, t in zip(extra, tiers) if t is None]
    if not any(tiers):
        return [f"tests/{tier}"], rest
    mine = [a for a, t in zip(extra, tiers) if t == tier]
    return (mine, rest) if mine else None


def run_tier(tier: str, targets: list[str], extra: list[str], root: Path) -> tuple[int, float]:
    """pytest on ``targets`` of ``root`` (``selection``: tests/<tier>, or the paths given in it; ``-x`` and
    ``UNIT_WORKERS`` for the unit tier), then ``extra``: its status and wall time."""
    first = ["-x", *UNIT_WORKERS] if tier == "unit" else []
    t0 = time.monotonic()
    rc = subprocess.call([sys.executable, "-m", "pytest", *targets, *first, *extra], cwd=root)
    return (0 if rc == NO_TESTS_SELECTED else rc), time.monotonic() - t0


def line(tier: str, seconds: float, rc: int) -> str:
    over = " OVER BUDGET" if seconds > BUDGET_S[tier] else ""
    failed = f", pytest status {rc}" if rc else ""
    return f"# tier {tier}: {seconds:z.0f} s (budget {BUDGET_S[tier]} s){over}{failed}"


def main(argv: list[str], root: Path = ROOT) -> int:
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    tiers = list(BUDGET_S)
    if argv[:1] == ["--tiers"] and len(argv) == 2:
        tiers = argv[1].split(",")
    elif argv:
        print(f"usage: {__doc__.strip().splitlines()[2].strip()}", file=sys.stderr)
        return 2
    unknown = [t for t in tiers if t not in BUDGET_S]
    if unknown:
        print(f"error: unknown tier(s) {', '.join(unknown)}; choose from {', '.join(BUDGET_S)}", file=sys.stderr)
        return 2
    done: list[str] = []
    status = 0
    for tier in tiers:
        chosen = selection(tier, extra, root)
        if chosen is None:
            done.append(f"# tier {tier}: skipped (none of the test paths given is in tests/{tier})")
            print(done[-1], flush=True)
            continue
        rc, seconds = run_tier(tier, *chosen, root)
        done.append(line(tier, seconds, rc))
        print(done[-1], flush=True)
        status = status or rc
        if rc and tier == "unit":
            print("# the unit tier failed: the other tiers did not run", flush=True)
            break
    print("\n".join(["# tiers:", *done]), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
