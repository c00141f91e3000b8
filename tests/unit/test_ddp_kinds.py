"""The DDP experiment's kinds of case are records (experiments/ddp/kinds.py): no module of the experiment asks a
variant for its kind's name or compares its kind with one; every kind has its record, and each variant's record
says what its case runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from experiments.ddp import kinds
from experiments.ddp.cases import variants
from experiments.ddp.settings import DdpSettings

ROOT = Path(__file__).resolve().parents[2]
DDP = ROOT / "experiments" / "ddp"
NAMES = set(kinds.KINDS)


def _is_kind(node: ast.AST) -> bool:
    """``<x>.kind`` or ``<x>.kind.name``."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def _names_in(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES]


def kind_comparisons(source: str) -> list[str]:
    """Where ``source`` dispatches on a kind by name or identity: a comparison with ``<x>.kind`` (or its name), a
    ``kind=`` string argument, or a literal collection or dict of two or more kind names (a table of names is a
    comparison waiting to happen)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_is_kind(s) for s in (node.left, *node.comparators)):
            found.append(f"line {node.lineno}: compares a kind")
        elif isinstance(node, ast.keyword) and node.arg == "kind" and isinstance(node.value, ast.Constant):
            found.append(f"line {node.value.lineno}: kind={node.value.value!r}, a name, not a record")
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_names_in(node)) >= 2:
            found.append(f"line {node.lineno}: a collection of kind names {_names_in(node)}")
        elif isinstance(node, ast.Dict) and len([k for k in node.keys if k is not None and _names_in(k)]) >= 2:
            found.append(f"line {node.lineno}: a dict keyed by kind names")
    return found


def test_no_module_of_the_experiment_compares_a_kind():
    modules = [p for p in DDP.glob("*.py") if p.name != "kinds.py"]
    assert len(modules) > 10
    found = {p.name: kind_comparisons(p.read_text()) for p in modules}
    assert {p: f for p, f in found.items() if f} == {}


@pytest.mark.parametrize(
    "line",
    [
        # each form the experiment used before its kinds became records
        'if v.kind == "accum": pass',
        'x = case.kind != "all_reduce"',
        'ok = v.kind in ("solo", "local")',
        'ok = v.kind not in ("solo", "local")',
        'ok = v.kind.name == "ddp"',
        "ok = v.kind is kinds.SOLO",
        'Variant(model=m, kind="ddp", label="ddp")',
        'OP = {"solo": "solo_step", "local": "local_step"}',
    ],
)
def test_the_rule_catches_each_way_a_kind_was_compared(line):
    assert kind_comparisons(line)


def test_the_rule_leaves_fields_and_homonyms_alone():
    # the fields of the record, and "ddp" as the experiment's name or a record's label
    src = 'if v.kind.trains and not v.kind.accumulates: pass\nok = r.get("experiment") != "ddp"\nlabel = "ddp"'
    assert kind_comparisons(src) == []


def test_every_kind_is_declared_and_named_once():
    assert all(k.name == name for name, k in kinds.KINDS.items())
    assert len({k.op for k in kinds.KINDS.values()}) == len(kinds.KINDS)
    declared = {v.kind.name for v in variants(DdpSettings())}
    assert declared == NAMES


def test_each_kinds_record_says_what_its_case_runs():
    k = kinds.KINDS
    assert {n for n, r in k.items() if not r.communicates} == {"solo", "local"}
    assert {n for n, r in k.items() if r.baseline} == {"solo", "local", "all_reduce", "init_broadcast", "ddp_init"}
    assert {n for n, r in k.items() if r.trains} == {"solo", "local", "ddp", "manual", "manual_coalesced", "accum"}
    assert {n for n, r in k.items() if r.ddp_step} == {"ddp"}
    assert {n for n, r in k.items() if r.init} == {"init_broadcast", "ddp_init"}
    assert [n for n, r in k.items() if r.steps_ranks is not None] == ["solo"]
