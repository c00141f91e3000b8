"""CUDA graphs for the ``cuda_graph`` timing mode (suite/harness/timing.py): capture, and the check that a
captured graph holds work (an empty one would time nothing)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch

from suite.errors import CaseFailed, CaseSkipped
from suite.harness.dist import DistContext
from suite.common.backends import record_of


def capture(ctx: DistContext, issue: Callable[[], None]):
    """Capture what ``issue()`` launches (``depth`` blocking ops) into a CUDA graph, or skip/fail the case on
    every rank.

    Returns ``(graph, kernel_nodes)``. Only ops on an NCCL group on CUDA are captured
    (skip otherwise). NCCL collectives are capturable (PyTorch's test_c10d_nccl
    ``test_allreduce_in_cudagraph`` captures ``all_reduce`` and ``broadcast``); an op
    that does its work on the host (a CPU tensor, a Gloo call made by the op itself)
    runs eagerly *during* the capture and leaves an empty graph, whose replays would
    time nothing: that is a CaseFailed, not a measurement (PyTorch warns "The CUDA
    Graph is empty" at capture end; where ``cuda.bindings`` is installed the kernel
    nodes are also counted, and a graph without kernels fails likewise).
    Capture launches nothing, so ranks agree on the outcome afterwards without
    risking a hang. ``thread_local`` capture mode is a precaution: in the default
    ``global`` mode a capture-unsafe CUDA call from any other thread of the process
    (the NCCL watchdog polls events) would invalidate this capture; ``thread_local``
    still checks everything this thread does. Eager NCCL ops (the barriers) and graph
    replays share one communicator but are never outstanding together (each sample
    ends with a device sync), so this also holds with NCCL_GRAPH_MIXING_SUPPORT=0.
    """
    reason = None
    graph = None
    problem = None
    kernels = None
    if ctx.device.type != "cuda" or not record_of(ctx.backend).cuda_graphs:
        reason = f"timing mode cuda_graph needs NCCL on CUDA; this group is {ctx.backend} on {ctx.device.type}"
    else:
        try:
            graph = _new_graph()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    issue()
            kernels = _kernel_nodes(graph)
            problem = graph_problem([str(w.message) for w in caught], kernels)
        except Exception as e:  # the op does something a graph cannot hold (host sync, allocation)
            graph = None
            reason = (
                "this op cannot be captured in a CUDA graph: "
                + ((str(e).strip().splitlines() or [type(e).__name__])[0][:200])
            )
    if not ctx.agree_all(reason is None):
        raise CaseSkipped(reason or "another rank could not capture this op in a CUDA graph")
    if not ctx.agree_all(problem is None):
        raise CaseFailed(problem or "another rank captured an empty CUDA graph")
    return graph, kernels


def graph_problem(capture_warnings: Sequence[str], kernel_nodes: int | None) -> str | None:
    """Why a captured CUDA graph is not a measurement (None if it is): it holds no work.

    ``capture_warnings`` are the warnings raised during capture (PyTorch's CUDAGraph
    warns "The CUDA Graph is empty" when the capture recorded no node);
    ``kernel_nodes`` the graph's kernel nodes where they could be counted (else None).
    """
    if any("graph is empty" in w.lower() for w in capture_warnings):
        return (
            "the captured CUDA graph is empty: the op ran eagerly during capture (host work, a CPU tensor or a "
            "non-NCCL group), so its replays would time nothing"
        )
    if kernel_nodes == 0:
        return (
            "the captured CUDA graph has no kernel: the op's work is not on the GPU stream, so its replays "
            "would time nothing"
        )
    return None


def _new_graph():
    """A CUDAGraph that keeps its cudaGraph_t (so its nodes can be counted) where torch allows it."""
    try:
        return torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:  # older torch: no keep_graph
        return torch.cuda.CUDAGraph()


def _kernel_nodes(graph) -> int | None:
    """Kernel nodes of a captured graph via cuda.bindings (the package torch's get_graph_data uses), or None."""
    try:
        from cuda.bindings import runtime as rt

        raw = graph.raw_cuda_graph()
        err, _, n = rt.cudaGraphGetNodes(raw, numNodes=0)
        err, nodes, n = rt.cudaGraphGetNodes(raw, numNodes=n)
        if err != rt.cudaError_t.cudaSuccess:
            return None
        kernel = rt.cudaGraphNodeType.cudaGraphNodeTypeKernel
        return sum(1 for node in nodes[:n] if rt.cudaGraphNodeGetType(node)[1] == kernel)
    except Exception:  # no cuda.bindings, no keep_graph, or an API change: not counted
        return None
