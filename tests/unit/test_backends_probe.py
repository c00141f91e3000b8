"""The capability matrix on a one-rank Gloo group in this process: a bug in the suite's own builder
fails the probe instead of becoming a "not supported" cell."""

import dataclasses

import pytest


from experiments.backends import workload as backends_workload
from suite.ops import collectives as ops


def test_capability_matrix_reports_backend_limits_and_raises_suite_bugs(ctx, monkeypatch):
    rows = backends_workload.capability_matrix(ctx, dtypes=("float32", "int32"))
    cell = {(r["variant"], r["dtype"], r["redop"]): r for r in rows}
    assert cell[("all_reduce", "float32", "sum")]["supported"]
    # a limit of the backend is a cell with its words (Gloo cannot average integers)
    assert not cell[("all_reduce", "int32", "avg")]["supported"] and cell[("all_reduce", "int32", "avg")]["reason"]
    coll = ops.BY_VARIANT["all_reduce"]

    def broken(a, lctx):
        raise AttributeError("a bug in the builder")

    monkeypatch.setattr(ops, "REGISTRY", (dataclasses.replace(coll, build=broken),))
    with pytest.raises(AttributeError, match="a bug in the builder"):
        backends_workload.capability_matrix(ctx, dtypes=("float32",))
