"""The sharded experiment's strategies are records (experiments/sharded/strategy.py), one file each in
experiments/sharded/strategies/: no module outside that package asks a strategy for its name, every registered
strategy is run by default, listed in the README's table and run by a multi-process test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from experiments.sharded import strategies
from experiments.sharded.settings import ShardedSettings

ROOT = Path(__file__).resolve().parents[2]
SHARDED = ROOT / "experiments" / "sharded"
NAMES = set(strategies.STRATEGIES) | set(strategies.PLANTED)


def _names_in(node: ast.AST) -> list[str]:
    """Strategy names a comparison's operand spells out: a string, or a tuple, list or set of strings."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES]


def name_comparisons(source: str) -> list[str]:
    """Where ``source`` compares something with a strategy's name: ``==``/``!=``/``in`` against a name (or a
    literal collection of them), a ``startswith`` of a name's prefix, or a literal collection or dict keyed by
    two or more names (a table of names is a comparison waiting to happen)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [f"line {node.lineno}: compares with {n!r}" for n in _names_in(side)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith") and node.args and isinstance(node.args[0], ast.Constant):
                arg = node.args[0].value
                if isinstance(arg, str) and any(n.startswith(arg) or n.endswith(arg) for n in NAMES):
                    found.append(f"line {node.lineno}: {node.func.attr}({arg!r})")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_names_in(node)) >= 2:
            found.append(f"line {node.lineno}: a collection of names {_names_in(node)}")
        elif isinstance(node, ast.Dict) and len([k for k in node.keys if k is not None and _names_in(k)]) >= 2:
            found.append(f"line {node.lineno}: a dict keyed by names")
    return found


def test_no_module_outside_strategies_compares_a_strategy_name():
    outside = [p for p in SHARDED.rglob("*.py") if "strategies" not in p.relative_to(SHARDED).parts]
    assert len(outside) > 10
    found = {str(p.relative_to(ROOT)): name_comparisons(p.read_text()) for p in outside}
    assert {p: f for p, f in found.items() if f} == {}


@pytest.mark.parametrize(
    "line",
    [
        'if strategy == "fsdp2_bf16": pass',
        'x = strategy != "ddp"',
        'ok = strategy in ("tp", "2d")',
        'ok = strategy.startswith("pp_")',
        'EXACT = {"ddp", "fsdp2"}',
        'SCHEDULES = {"pp_gpipe": 1, "pp_1f1b": 2}',
    ],
)
def test_the_rule_catches_each_way_a_name_was_compared(line):
    # each form the experiment used before its strategies became records
    assert name_comparisons(line)


def test_the_rule_leaves_attributes_and_single_names_alone():
    assert name_comparisons("if st.pipeline is not None and st.bf16: pass\nx = BASELINE\nname = 'ddp'") == []


def test_every_strategy_runs_by_default_in_registry_order():
    assert ShardedSettings().strategies == tuple(strategies.STRATEGIES)
    assert not set(strategies.STRATEGIES) & set(strategies.PLANTED)
    for name, st in (strategies.STRATEGIES | strategies.PLANTED).items():
        assert st.name == name and strategies.get(name) is st
    assert all(st.planted for st in strategies.PLANTED.values())
    assert not any(st.planted for st in strategies.STRATEGIES.values())


def test_every_strategy_has_its_file_and_its_row_in_the_readme():
    files = {p.stem for p in (SHARDED / "strategies").glob("*.py")} - {"__init__", "planted"}
    assert len(files) == len(strategies.STRATEGIES)
    readme = (SHARDED / "README.md").read_text()
    section = readme.split("## Strategies", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\| `([^`]+)` \| (.+?) \| (.+?) \|$", section, re.M)
    # the table says what each record says: its name, what runs, the data a rank takes
    assert table == [(st.name, st.what, st.data) for st in strategies.STRATEGIES.values()]
    for name in strategies.PLANTED:
        assert f"`{name}`" in readme


def test_every_strategy_is_run_by_a_multi_process_test():
    # the default run at 2 ranks takes every strategy whose mesh fits 2 ranks (the test compares its records with
    # the registry); the others, and the planted ones, are named by a test of tests/dist
    dist = ROOT / "tests" / "dist"
    default = (dist / "test_sharded_dist.py").read_text()
    assert "def test_every_strategy_at_2_ranks_" in default and "fits(2)" in default
    named = set()
    for p in dist.glob("test_sharded*_dist.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.update(node.value.split(","))
    at_two = {n for n, st in strategies.STRATEGIES.items() if not st.mesh_cannot(2)}
    assert set(strategies.STRATEGIES) - at_two <= named and set(strategies.PLANTED) <= named
