"""The planted faults over plain Gloo: a ``TorchDispatchMode`` (the mechanism torch's CommDebugMode uses) entered on
every rank around each armed call of a case (``SUITE_INJECT_BACKEND``; suite/harness/plant/backend.py ``armed``).
It sees every op c10d issues through the dispatcher on any group, so also those of DDP's reducer, FSDP2, DTensor
(tensor and sequence parallel) and the pipeline schedules: it runs each c10d op (``torch.ops.c10d.*``, a coalesced
one's pairs each as one op) and functional collective (``torch.ops._c10d_functional.*``) on Gloo, waits for it, and
applies this rank's fault to its result with the one implementation of the classes (suite/harness/plant/corruptions.py);
it then returns the op's own (now complete) Work or output. A receive (and, under aliasing, a send) is not waited
for when issued, which would deadlock a batch that posts its receives first: a thread waits for it and applies the
fault before its Work completes. wrong_reduction issues the op once with the other reduction instead.

Every other op passes unchanged; outside an armed call the mode is not there at all. A functional collective's
output is new, so what drop and partial leave unwritten is zeros (what a fresh allocation would hold).
"""

from __future__ import annotations

import atexit
import itertools
import threading
import time

import torch
import torch.distributed as dist

from suite import op_table
from suite.harness import c10d
from suite.harness.plant.corruptions import Corrupter, scribble, wrong_op


class Planting:
    """What the dispatch mode keeps from one armed call to the next, owned by the harness that arms them
    (suite/harness/runner.py): each group's faults by its c10d name (what stale and reorder keep between ops lasts
    as the group does), the count of armed calls, the lock under which receives' waiting threads apply theirs, and
    what those threads raised (``failed``: the armed call raises it, see ``FaultMode``)."""

    def __init__(self) -> None:
        self.groups: dict[str, Corrupter] = {}
        self.calls = itertools.count(1)
        self.lock = threading.Lock()
        self.failed: list[BaseException] = []

    def raise_failed(self, fault: str) -> None:
        """Raise what a receive's thread raised applying ``fault`` (its Work's wait does not: torch's Work made from a
        future completes when the future fails, and a caller would go on with the receive's data unfaulted)."""
        with self.lock:
            failed, self.failed = self.failed, []
        if failed:
            raise RuntimeError(f"the planted {fault} could not be applied to a receive: {failed[0]!r}") from failed[0]

    def faults(self, pg) -> Corrupter:
        name = pg.group_name
        if name not in self.groups:
            self.groups[name] = Corrupter(pg.size(), lambda: dist.get_process_group_ranks(pg))
        return self.groups[name]


_C10D = {
    # op: (outputs, inputs, what the reduction substitute calls; None: reduces nothing)
    "allreduce_": (lambda a, r: a["tensors"], lambda a, r: [], "allreduce"),
    "broadcast_": (lambda a, r: [] if r == a["root_rank"] else a["tensors"], lambda a, r: [], None),
    "reduce_": (lambda a, r: a["tensors"] if r == a["root_rank"] else [], lambda a, r: [], "reduce"),
    "allgather_": (lambda a, r: a["output_tensors"][0], lambda a, r: a["input_tensors"], None),
    "_allgather_base_": (lambda a, r: [a["output_tensor"]], lambda a, r: [a["input_tensor"]], None),
    "gather_": (lambda a, r: (a["output_tensors"] or [[]])[0], lambda a, r: a["input_tensors"], None),
    "scatter_": (lambda a, r: a["output_tensors"], lambda a, r: (a["input_tensors"] or [[]])[0], None),
    "reduce_scatter_": (lambda a, r: a["output_tensors"], lambda a, r: a["input_tensors"][0], "reduce_scatter"),
    "_reduce_scatter_base_": (lambda a, r: [a["output_tensor"]], lambda a, r: [a["input_tensor"]], "rs_base"),
    "alltoall_": (lambda a, r: a["output_tensors"], lambda a, r: a["input_tensors"], None),
    "alltoall_base_": (lambda a, r: [a["output"]], lambda a, r: [a["input"]], None),
}
"""How to read each c10d collective's arguments, by its name (c10d's schema): its outputs, its inputs, what
``wrong_reduction``'s substitute calls (None: it reduces nothing). Which of them a fault applies to is the op
table's (suite/op_table.py: a row's ``c10d``), ``_PLANTED``."""
_PLANTED = frozenset(op.c10d for op in op_table.OPS if op.c10d and op.peer is None)
"""The c10d collectives the op table's rows issue: the ones a fault applies to."""
_P2P = frozenset(op.c10d for op in op_table.OPS if op.c10d and op.peer is not None)
"""The c10d sends and receives the op table's rows issue."""
_COALESCED = {
    "allgather_into_tensor_coalesced_": None,
    "reduce_scatter_tensor_coalesced_": "rs_coalesced",
    "allreduce_coalesced_": "allreduce_coalesced",
}
"""The coalesced forms (each of its pairs as one op) and what their reduction substitute calls."""
_IN_PLACE_FUNCTIONAL = {"all_reduce_", "all_reduce_coalesced_"}


class FaultMode(c10d.DispatchMode):
    """The ops dispatched inside, on any group, faulty with ``fault`` (one armed call: reorder pairs its messages)."""

    def __init__(self, fault: str, planting: Planting):
        super().__init__()
        self.fault, self.planting, self.call = fault, planting, next(planting.calls)
        atexit.unregister(_let_gloo_workers_finish)  # registered once per process
        atexit.register(_let_gloo_workers_finish)

    def __exit__(self, exc_type, exc_val, exc_tb):
        super().__exit__(exc_type, exc_val, exc_tb)
        if exc_type is None:  # the call's receives were waited for: what their threads raised fails the call
            self.planting.raise_failed(self.fault)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ns, name = c10d.op_name(func)
        if ns == "c10d" and name in _P2P:
            return self._p2p(func, name, c10d.op_args(func, args, kwargs), args, kwargs)
        if ns == "c10d" and (name in _PLANTED or name in _COALESCED):
            return self._collective(func, name, c10d.op_args(func, args, kwargs), args, kwargs)
        if ns == "_c10d_functional" and name != "wait_tensor" and "group_name" in c10d.op_shape(func)[0]:
            return self._functional(func, name, c10d.op_args(func, args, kwargs))
        return func(*args, **kwargs)

    # --- c10d's ops ---------------------------------------------------------------------------------------

    def _collective(self, func, name: str, a: dict, args, kwargs):
        pg = dist.ProcessGroup.unbox(a["process_group"])
        faults, fault, rank = self.planting.faults(pg), self.fault, pg.rank()
        result: list = []
        if name in _COALESCED:
            outs = list(a.get("outputs", a.get("tensors")))
            ins = list(a.get("inputs", []))
            pairs = [([o], [ins[i]] if ins else []) for i, o in enumerate(outs)]
        else:
            get_outs, get_ins, _ = _C10D[name]
            pairs = [(list(get_outs(a, rank)), list(get_ins(a, rank)))]

        def run():
            how = _C10D[name][2] if name in _C10D else _COALESCED[name]
            if fault == "wrong_reduction" and how is not None:
                work = _reduced_wrong(pg, how, a)
                result.append(_as_result(func, a, work))
            else:
                result.append(func(*args, **kwargs))
            _work(result[0]).wait()

        pairs = [([o for o in outs if o is not None], ins) for outs, ins in pairs]
        befores = [faults.before(fault, outs) for outs, _ in pairs]
        run()  # a coalesced op: issued once, each of its pairs then faulty as one op
        for (outs, ins), before in zip(pairs, befores):
            faults.apply(fault, name, outs, before, ins)
        # complete, holding what Gloo's future holds (its outputs, now faulty: DDP's comm hooks read it); not Gloo's
        # own Work, whose wait may copy the result into the output again (its reduce_scatter_single does)
        done = c10d.completed_work(c10d.future_value(_work(result[0]))).boxed()
        return (result[0][0], done) if isinstance(result[0], tuple) else done

    def _p2p(self, func, name: str, a: dict, args, kwargs):
        pg = dist.ProcessGroup.unbox(a["process_group"])
        faults, fault, t = self.planting.faults(pg), self.fault, a["tensors"][0]
        before = t.clone() if fault in ("drop", "partial") else None
        work = func(*args, **kwargs)
        if name == "send":
            if fault != "aliasing":
                return work
            # the send's buffer written once the message is out: what a transport reusing it would do
            return _then(self.planting, work, lambda: scribble(a["tensors"], []))
        call, src = self.call, a["src"]

        def apply():
            if fault == "reorder":
                faults.reorder(call, src, t)
            else:
                faults.apply(fault, "recv", [t], None if before is None else [before], [])

        return _then(self.planting, work, apply)

    # --- the functional collectives (DTensor's) -------------------------------------------------------------

    def _functional(self, func, name: str, a: dict):
        pg = c10d.resolve_group(a["group_name"])
        fault = self.fault
        if fault == "wrong_reduction" and "reduce_op" in a:
            a["reduce_op"] = wrong_op(getattr(dist.ReduceOp, a["reduce_op"].upper())).name.lower()
        ins = list(a["inputs"]) if "inputs" in a else [a["input"]]
        in_place = name in _IN_PLACE_FUNCTIONAL
        keep = fault in ("drop", "partial")
        held = [t.clone() for t in ins] if in_place and keep else None
        out = func(**a)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        for o in outs:
            c10d.wait_tensor(o)
        if name == "broadcast" and pg.rank() == a["src"]:
            outs = []  # the root's output is its own input
        faults = self.planting.faults(pg)
        for i, o in enumerate(outs):
            before = [held[i] if in_place else torch.zeros_like(o)] if keep else None
            faults.apply(fault, name, [o], before, [] if in_place else [ins[min(i, len(ins) - 1)]])
        return out


GLOO_WORKERS_GRACE_S = 0.25
"""How long a process that planted faults waits at exit for Gloo's workers (see ``_let_gloo_workers_finish``)."""


def _let_gloo_workers_finish() -> None:
    """Give Gloo's worker threads time to drop their last finished Work while the interpreter is alive.

    A c10d op dispatched through any ``TorchDispatchMode`` keeps its process group alive in C++ (torch 2.13: the
    group outlives ``destroy_process_group``, its worker threads with it). A worker drops a finished Work a moment
    after its waiter returns; when the waiter's process is already finalizing, the Work's tensors need the GIL and
    the worker calls std::terminate (SIGABRT, "terminate called without an active exception"): a rank that planted
    faults died after its results were written. Sleeping here releases the GIL before finalization starts."""
    time.sleep(GLOO_WORKERS_GRACE_S)


def _work(result):
    """The Work of a c10d op's result (a Work, or a tuple ending with one), as torch.distributed's."""
    w = result[-1] if isinstance(result, tuple) else result
    return w if isinstance(w, dist.Work) else dist.Work.unbox(w)


def _as_result(func, a: dict, work):
    """``work`` (torch.distributed's) in the shape ``func``'s schema returns: a Work, or (its outputs, the Work)."""
    boxed = work.boxed()
    names, returns = c10d.op_shape(func)
    return boxed if returns == 1 else (a[names[0]], boxed)


def _reduced_wrong(pg, how: str, a: dict):
    """The reducing op of ``a`` issued on ``pg`` with wrong_reduction's other reduction; its Work."""
    asked = dist.ReduceOp.RedOpType(a["reduce_op"].op())
    op = dist.ReduceOp(wrong_op(asked))
    if how in ("allreduce", "allreduce_coalesced"):
        opts = dist.AllreduceOptions() if how == "allreduce" else dist.AllreduceCoalescedOptions()
        opts.reduceOp = op
        return getattr(pg, how)(a["tensors"], opts)
    if how == "reduce":
        opts = dist.ReduceOptions()
        opts.reduceOp, opts.rootRank, opts.rootTensor = op, a["root_rank"], a["root_tensor"]
        return pg.reduce(a["tensors"], opts)
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = op
    if how == "reduce_scatter":
        return pg.reduce_scatter(a["output_tensors"], a["input_tensors"], opts)
    if how == "rs_coalesced":
        return pg.reduce_scatter_tensor_coalesced(a["outputs"], a["inputs"], opts)
    return c10d.reduce_scatter_base(pg, a["output_tensor"], a["input_tensor"], opts)


def _then(planting: Planting, work, apply):
    """A Work that completes once ``work`` has and ``apply()`` has run (a thread waits: the caller may issue
    other ops, a send its peer's receive waits for, before it waits itself); what either raises is kept in
    ``planting.failed`` for the armed call to raise."""
    inner = work if isinstance(work, dist.Work) else dist.Work.unbox(work)
    fut: torch.futures.Future = torch.futures.Future()

    def wait():
        try:
            inner.wait()
            # what a transport writes is no autograd op: a pipeline stage's receive buffer is a leaf of its last
            # step's graph (requires_grad), and in-place writes to it raise where grad mode is on (this thread's)
            with planting.lock, torch.no_grad():
                apply()
        except Exception as e:  # the Work completes all the same: the armed call raises it
            with planting.lock:
                planting.failed.append(e)
            fut.set_exception(e)
            return
        fut.set_result(None)

    threading.Thread(target=wait, name="planted-fault-wait", daemon=True).start()
    return c10d.work_from_future(fut).boxed()
