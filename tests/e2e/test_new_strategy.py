"""Adding a sharded strategy is adding one file and its registry line: in a copy of the repository's tracked
files, a strategy the product does not have (FSDP2 in bfloat16 without resharding: mixed precision and
``reshard_after_forward=False`` together) is written as ``experiments/sharded/strategies/fsdp2_keep_bf16.py``,
the registry imports it and lists it, and one README row names it. Nothing else changes: the strategy rules
(tests/unit/test_sharded_strategies.py) hold in the copy, and so does the dist tier's 2-rank case
(tests/dist/test_sharded_dist.py), which runs every registered strategy that fits 2 ranks through the launcher
at 2 Gloo ranks, the new one among them; that run's record of the new one says it trained exactly as one
process, its collectives (forward all_gathers in bfloat16, none in backward) as its theory says, its replay
checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import copy_tracked

pytestmark = pytest.mark.slow

NEW = '''"""``fsdp2_keep_bf16``: FSDP2 in bfloat16 without resharding the blocks after forward."""

from ..theory import fsdp_theory
from ..strategy import Strategy

STRATEGY = Strategy(
    name="fsdp2_keep_bf16",
    what="`fsdp2_keep` with `fsdp2_bf16`'s mixed precision",
    data="its rows",
    fsdp=True,
    reshard_after_forward=False,
    param_dtype="bfloat16",
    exact_at_two=True,
    theory=fsdp_theory(reshard=False, gather_dtype="bfloat16"),
)
'''


def _add_strategy(tree: Path) -> None:
    pkg = tree / "experiments" / "sharded" / "strategies"
    (pkg / "fsdp2_keep_bf16.py").write_text(NEW)
    registry = (pkg / "__init__.py").read_text()
    imports, entry = "from . import ddp, fsdp2, fsdp2_bf16,", "        fsdp2_bf16.STRATEGY,\n"
    assert imports in registry and entry in registry
    registry = registry.replace(imports, "from . import ddp, fsdp2, fsdp2_bf16, fsdp2_keep_bf16,")  # its import
    (pkg / "__init__.py").write_text(registry.replace(entry, entry + "        fsdp2_keep_bf16.STRATEGY,\n"))  # its line
    readme = tree / "experiments" / "sharded" / "README.md"
    row = "| `tp` |"
    text = readme.read_text()
    assert row in text
    new_row = (
        "| `fsdp2_keep_bf16` | `fsdp2_keep` with `fsdp2_bf16`'s mixed precision | its rows |\n"  # its record's words
    )
    readme.write_text(text.replace(row, new_row + row, 1))


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    dst = copy_tracked(tmp_path_factory.mktemp("checkout"))
    _add_strategy(dst)
    return dst


def _run(tree: Path, *args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's code, not the checkout's
    e.update({"OMP_NUM_THREADS": "1", "SUITE_PROGRESS": "off", **(env or {})})
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=timeout, env=e)


DIST_CASE = (
    "tests/dist/test_sharded_dist.py::test_every_strategy_at_2_ranks_trains_like_one_process_and_moves_what_theory_says"
)
RULES = "tests/unit/test_sharded_strategies.py"


@pytest.fixture(scope="module")
def tests_in_copy(tree) -> tuple[subprocess.CompletedProcess, dict[str, list[str]], Path]:
    """One pytest process in the copy for the dist tier's 2-rank case and the strategy rules (one interpreter's
    start, not two): its output, each test file's outcomes (``passed``, ``failed``, ... from its JUnit XML) and
    where the 2-rank case's run wrote its results."""
    basetemp = tree.parent / "dist-tmp"  # where that test's run writes its results, read below
    junit = tree.parent / "junit.xml"
    opts = ("-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--basetemp={basetemp}", f"--junitxml={junit}")
    p = _run(tree, "-m", "pytest", *opts, DIST_CASE, RULES, timeout=600)
    outcomes: dict[str, list[str]] = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        bad = [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
        outcomes.setdefault(tc.get("classname", "").replace(".", "/") + ".py", []).append(bad[0] if bad else "passed")
    return p, outcomes, basetemp


def test_the_dist_tiers_2_rank_case_runs_the_new_strategy_checked(tests_in_copy):
    p, outcomes, basetemp = tests_in_copy
    assert outcomes.get(DIST_CASE.split("::")[0]) == ["passed"], p.stdout[-3000:] + p.stderr[-3000:]
    (bench,) = {b.resolve() for b in basetemp.glob("*/results/run/bench.json")}  # pytest links <test>current
    recs = [b["extra_info"] for b in json.loads(bench.read_text())["benchmarks"]]
    recs = {r["op"]: r for r in recs if r.get("strategy") == "fsdp2_keep_bf16"}
    step, replay = recs["train_step"], recs["comm_replay"]
    assert step["checked"] and step["n_wrong"] == 0 and step["world_size"] == 2 and step["backend"] == "gloo"
    assert step["check_rule"] == "exact" and step["inventory_matches_theory"], step["inventory"]
    assert step["dtype"] == "bfloat16+float32" and step["reshard_after_forward"] == "blocks False"
    # no backward all_gather (kept), the forward ones in bfloat16
    gathers = {(r["phase"], r["dtype"]) for r in step["inventory"] if r["op"] == "all_gather"}
    assert gathers == {("forward", "bfloat16")}
    assert replay["checked"] and replay["n_wrong"] == 0 and replay["replayed"] == step["inventory"]


def test_the_strategy_rules_hold_with_the_new_file(tests_in_copy):
    p, outcomes, _ = tests_in_copy
    rules = outcomes.get(RULES, [])
    assert rules and set(rules) <= {"passed", "skipped"}, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]  # and nothing else in the session failed
