"""What a CUDA sample is, said in every record; an empty CUDA graph is an error, not a measurement.

The parts that need no GPU: the decision on a captured graph (pure), the record's timer
definition, and the refusal to capture an op that is not on an NCCL group (one-rank Gloo).
tests/gpu/test_gpu.py runs the same paths on a GPU.
"""

from __future__ import annotations

import dataclasses

import pytest

from suite import results
from suite.case import Bytes
from suite.errors import CaseSkipped
from suite.harness.cuda_graph import graph_problem
from suite.harness.timing import measure
from suite.measurement import Measurement
from tests.helpers.inprocess import CFG


def _m(**kw):
    return Measurement(
        samples_s=[1e-3, 2e-3],
        timing_mode=kw.pop("timing_mode", "blocking"),
        ops_per_sample=1,
        warmup_iters=0,
        precision_reached=None,
        **kw,
    )


def _rec(m):
    return results.make_record(
        case=results.RecordCase(
            experiment="x", op="all_reduce", backend="nccl", device="cuda", world_size=2, in_place=True
        ),
        size=Bytes(size_bytes=1024, count=256, dtype="float32", bw_op="all_reduce"),
        m=m,
        check=results.CheckOutcome(wrong=(0, 0)),
    )


def test_empty_capture_is_a_problem_and_a_graph_with_kernels_is_not():
    torch_warning = (
        "The CUDA Graph is empty. This usually means that the graph was attempted to be captured "
        "on wrong device or stream."
    )
    assert "empty" in graph_problem([torch_warning], None)
    assert "no kernel" in graph_problem([], 0)
    assert graph_problem(["some other warning"], 3) is None
    assert graph_problem([], None) is None  # not counted and no warning: a real capture


def test_every_record_says_what_its_timer_includes():
    host = _rec(_m())
    assert host["timer"] == "host" and "includes the host's cost of issuing" in host["timer_definition"]
    ev = _rec(_m(timer="cuda_event"))
    assert "launch overhead" in ev["timer_definition"] and "includes" in ev["timer_definition"]
    assert "graph_kernel_nodes" not in ev  # only cuda_graph samples come from a graph


def test_cuda_graph_records_its_kernel_count():
    rec = _rec(_m(timer="cuda_event", timing_mode="cuda_graph", graph_kernel_nodes=4))
    assert rec["graph_kernel_nodes"] == 4
    assert _rec(_m(timer="cuda_event", timing_mode="cuda_graph"))["graph_kernel_nodes"] is None


def test_cuda_graph_is_refused_for_an_op_not_on_an_nccl_group(ctx):
    cfg = dataclasses.replace(CFG, pipeline_depth=2)
    ran = []
    with pytest.raises(CaseSkipped, match="cuda_graph needs NCCL on CUDA; this group is gloo on cpu"):
        measure(ctx, cfg, lambda a: ran.append(a), mode="cuda_graph", warmup_iters=0)
    assert ran == []  # nothing was captured, nothing timed
