"""No number printed for a person can read ``-0``.

A value that rounds to zero from below (a bootstrap bound of -1e-17, a drift of -0.0004 %) formats as
``-0.0`` with Python's plain float specs, and whether the bound is -1e-17 or +1e-17 depends on the CPU and
the BLAS build. Python's ``z`` option (PEP 682) drops the sign of a zero after rounding, so every float
format spec in the product carries it: in f-strings, ``format(x, spec)`` and ``"...".format(...)``.

Checked on the syntax tree of every module under suite/, experiments/, scripts/ and examples/: a float
presentation type (``e E f F g G %``, or a precision with no type) without ``z`` is a failure, named by
file and line. A spec chosen at run time (a table helper's ``fmt`` argument) cannot be read there: such a
helper formats through ``suite.metrics.format_number``, which reads a negative zero as zero whatever the spec.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from suite.metrics import format_number
from suite.report import fit_table, tables

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("suite", "experiments", "scripts", "examples")

# Python's format-spec mini-language (string.Formatter / PEP 3101, with PEP 682's "z")
SPEC = re.compile(
    r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?#?0?\d*[,_]?"
    r"(?:\.(?P<precision>\d+))?(?P<type>[bcdeEfFgGnosxX%])?"
)


def needs_z(spec: str) -> bool:
    """True for a float spec that could print a negative zero (a float presentation type without ``z``)."""
    m = SPEC.fullmatch(spec)
    if m is None or m["z"]:
        return False
    return m["type"] in tuple("eEfFgG%") or (m["type"] is None and m["precision"] is not None)


def _specs(tree: ast.AST):
    """(line, spec) for every literal format spec in a module: f-string specs, format(x, "spec") and
    "{:spec}".format(...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
            parts = node.format_spec.values
            if all(isinstance(p, ast.Constant) for p in parts):  # a spec with a {width} inside is built at run time
                yield node.lineno, "".join(p.value for p in parts)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "format" and len(node.args) == 2:
                spec = node.args[1]
                if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
                    yield node.lineno, spec.value
            elif isinstance(f, ast.Attribute) and f.attr == "format" and isinstance(f.value, ast.Constant):
                if isinstance(f.value.value, str):
                    for m in re.finditer(r"(?<!\{)\{[^{}:]*:([^{}]*)\}", f.value.value):
                        yield node.lineno, m.group(1)


def offenders(source: str) -> list[tuple[int, str]]:
    return [(line, spec) for line, spec in _specs(ast.parse(source)) if needs_z(spec)]


def test_every_float_format_spec_drops_the_sign_of_zero():
    found = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if bad := offenders(p.read_text()):
                found[p.relative_to(ROOT).as_posix()] = bad
    assert not found, f"float format specs without 'z' (they print -0.0 for a value rounding to 0 from below): {found}"


def test_the_rule_sees_every_kind_of_spec_and_only_float_ones():
    src = (
        'a = f"{x:.1f} {y:z.2f} {n:d} {n:>8} {s:<12} {p:.1%} {q:.3} {w:{width}.2f}"\n'
        'b = format(x, ".3g")\nc = format(x, "z.3g")\nd = "{:.2e} {:>5}".format(x, y)\ne = "{k:5.1f}".format(k=1)\n'
    )
    assert sorted(offenders(src)) == [(1, ".1%"), (1, ".1f"), (1, ".3"), (2, ".3g"), (4, ".2e"), (5, "5.1f")]


@pytest.mark.parametrize("bound", [-0.0, -1e-17, -0.04])
def test_a_fit_bound_that_rounds_to_zero_from_below_prints_as_zero(bound):
    """The α–β fit table's α and its bootstrap interval: an exact-zero intercept whose bound comes out
    a hair below zero on one CPU (the AMD machine's -0.0) reads "0.0", as it does on another."""
    assert fit_table._interval(0.0, (bound, 0.0), ".1f") == "0.0 [0.0, 0.0]"
    assert fit_table._interval(-1e-12, (bound, 0.01), ".1f") == "0.0 [0.0, 0.0]"
    assert fit_table._interval(-0.06, None, ".1f") == "-0.1"  # a real negative value keeps its sign


@pytest.mark.parametrize("value", [-0.0, -1e-17, -0.0004])
def test_table_cells_with_a_spec_chosen_at_run_time_print_no_negative_zero(value):
    assert format_number(value, "7.3f") == "  0.000" and format_number(value, ".1%") == "0.0%"
    assert tables.num(value, ".2f", 6) == "  0.00"
    assert tables.tail_cell({"p95_us": value, "samples_us": list(range(40))}, "p95_us", ".1f", 6) == "   0.0"
    assert format_number(-0.06, ".1f") == "-0.1" and format_number(-1000.0, ",.0f") == "-1,000"
    assert format_number(float("-inf"), ".1f") == "-inf" and format_number(-3, "d") == "-3"
