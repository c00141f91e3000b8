"""A backend is a record in one file of suite/common/backends/: no module of suite/ or experiments/ outside that
package compares a backend's name (it asks the record instead), and the lists of names are the registry's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from suite.common import backends
from suite.common.backends import Backend, record_of

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "suite" / "common" / "backends"


def _spelled(node: ast.AST, names: set[str]) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and i.value in names]


def backend_name_uses(source: str, names: set[str]) -> list[str]:
    """Where ``source`` decides by a backend's name: ``==``/``!=``/``in`` against one (or a literal collection of
    them), a literal collection of two or more names, a dict keyed by two or more."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [f"line {node.lineno}: compares with {n!r}" for s in (node.left, *node.comparators)
                      for n in _spelled(s, names)]  # fmt: skip
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_spelled(node, names)) >= 2:
            found.append(f"line {node.lineno}: a list of names {_spelled(node, names)}")
        elif isinstance(node, ast.Dict) and sum(1 for k in node.keys if k is not None and _spelled(k, names)) >= 2:
            found.append(f"line {node.lineno}: a dict keyed by names")
    return found


def test_no_module_outside_the_records_compares_a_backend_name():
    names = set(backends.names())
    files = [p for pkg in ("suite", "experiments") for p in sorted((ROOT / pkg).rglob("*.py"))]
    outside = [p for p in files if RECORDS not in p.parents]
    assert len(outside) > 100 and {"gloo", "nccl", "mpi", "ucc"} <= names
    found = {str(p.relative_to(ROOT)): backend_name_uses(p.read_text(), names) for p in outside}
    assert {p: f for p, f in found.items() if f} == {}


@pytest.mark.parametrize(
    "line",
    [
        'if backend != "mpi": pass',  # the launcher's branches before the records
        'x = cfg.backend == "nccl" and cfg.device == "cpu"',
        'ok = backend not in ("auto", "nccl")',
        'NO_FUNCTIONAL_COLLECTIVES = ("mpi",)\nok = b not in NO_FUNCTIONAL_COLLECTIVES and "mpi" != b',
        'BACKENDS = ("gloo", "nccl", "mpi", "ucc")',
        'have = {"gloo": 1, "nccl": 2}',
        'lanes = [Lane("nccl", "cuda"), Lane("gloo", "cpu")]\nboth = ["gloo", "nccl"]',
    ],
)
def test_the_rule_catches_each_way_a_name_was_compared(line):
    assert backend_name_uses(line, {"gloo", "nccl", "mpi", "ucc"})


def test_the_rule_leaves_a_group_made_on_a_named_backend_alone():
    ok = 'g = dist.new_group(backend="gloo")\nif record_of(b).torchrun: pass\nx = f"gloo {v}"'
    assert backend_name_uses(ok, {"gloo", "nccl"}) == []


def test_every_record_is_its_own_file_and_the_lists_read_the_registry():
    from suite.common import config, knobs
    from suite.harness import groups

    files = sorted(p.stem for p in RECORDS.glob("*.py") if p.stem not in ("__init__", "record", "registry"))
    assert sorted(backends.names()) == files
    assert config.BACKENDS == ("auto", *backends.names())
    assert next(k.help for k in knobs.KNOBS if k.field == "backend") == " | ".join(config.BACKENDS)
    assert {lane.backend for lane in groups.CANDIDATE_LANES} == set(backends.names())
    for b in backends.records():
        assert b.devices and set(b.devices) <= {"cpu", "cuda"}, b.name
        for field in ("c10d", "launch_problem", "run_env", "model_choice", "model_reference"):
            ref = getattr(b, field)
            assert not ref or callable(backends.resolve(ref)) or isinstance(backends.resolve(ref), dict), (b, field)


def test_the_records_say_what_the_launcher_and_the_ranks_decided_by_name():
    assert [b.name for b in backends.records() if not b.torchrun] == ["mpi"]
    assert backends.auto_backend("cpu") == "gloo" and backends.auto_backend("cuda") == "nccl"
    assert [b.name for b in backends.records() if b.one_gpu_per_rank] == ["nccl"]
    assert [b.name for b in backends.records() if "functional_collectives" in b.cannot] == ["mpi"]
    assert record_of("a_group_of_our_own") == Backend(name="a_group_of_our_own")


def test_the_lanes_are_the_ones_the_backends_experiment_always_planned_in_their_order():
    from suite.harness import groups

    lanes = [(lane.backend, lane.device) for lane in groups.CANDIDATE_LANES]
    assert lanes == [
        ("nccl", "cuda"),
        ("gloo", "cuda"),
        ("gloo", "cpu"),
        ("mpi", "cpu"),
        ("ucc", "cpu"),
        ("ucc", "cuda"),
    ]


def test_a_backend_registers_once_under_an_identifier_in_its_order():
    from suite.common.backends.registry import registry_of

    assert list(registry_of([Backend(name="b", order=2), Backend(name="a", order=3)])) == ["b", "a"]
    with pytest.raises(ValueError, match="registered twice"):
        registry_of([Backend(name="gloo"), Backend(name="gloo", devices=("cpu",))])
    for bad in ("auto", "", "two words"):
        with pytest.raises(ValueError, match="identifier"):
            registry_of([Backend(name=bad)])
