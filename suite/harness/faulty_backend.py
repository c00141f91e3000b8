"""A planted faulty backend: Gloo wrapped so that the ops of the cases it is armed for return results wrong
the way one class of real bug makes them wrong. It proves the checks (suite/harness/verify.py and the
harness's own) against each class; docs/metrics.md has the table of what catches what.

``SUITE_INJECT_BACKEND=<fault>[:<name>[,<name>...]]`` (suite/common/faults.py) starts the run's process
group on it instead of Gloo (suite/harness/dist.py ``init_distributed``); no experiment knows: the group
is ``torch.distributed``'s default and every ``new_group`` without a backend of its own gets one too. It is
no backend a user can pick (``BACKEND`` does not list it), and every record made under it says so
(``planted_fault``). The harness arms it (``armed``) around each call of a matching case, in the check
run and in the timed samples; every other op (the harness's own barriers and reductions, the support
probes) passes to Gloo unchanged. Each op still runs on Gloo, once, on every rank, so the ranks stay in
step and c10d's sequence numbers count as they do on Gloo; the fault is applied to this rank's result:

- ``drop``: the last chunk of the output (the last rank's part; a message's last 1/n) is never written;
- ``stale``: the first call of an op at a shape fills an output kept by the backend; every later call
  returns that first result again (a cache that is never refreshed);
- ``misroute``: the output's chunks (or a message's n parts) are delivered one place over;
- ``duplicate``: the first chunk is written twice, in its place and in the second's (which is missing);
- ``overrun``: the op also writes the output's first chunk past its end, into the next bytes of the same
  storage;
- ``reorder``: of two messages from the same peer in one call, each lands in the other's buffer;
- ``partial``: only the first half of each message (output) is delivered;
- ``wrong_reduction``: the ranks reduce with another op (sum where avg was asked, max where sum, min
  where max, max where min, sum where product);
- ``aliasing``: an out-of-place op (and a send) also writes its output's first elements into its input;
- ``group_rank``: the group's rank taken for the global one: the output's chunks (a message's n parts) placed by
  the global rank of the rank they belong to (mod n), not its rank in the group; the same on the world's group,
  whose ranks are the global ones, so only a group of other ranks (``COLLECTIVES_GROUPS=interleaved``) shows it.

Collectives complete before they return (their Work is already done), so a fault is applied where the
result is whole; a receive's fault is applied when its Work is waited for. A class that cannot apply to
an op (no input to alias for an in-place op, no reduction in a gather, one message with nothing to
reorder) leaves that op correct: docs/metrics.md says why for each.
"""

from __future__ import annotations

import contextlib
import itertools

import torch.distributed as dist

from suite.harness import c10d, mpi_backend
from suite.harness.corruptions import Corrupter, scribble, wrong_op

from suite.common import faults
from suite.common.backends import check_planted_backend
from suite.common.switches import switch

NAME = "suite_faulty"
"""The name it is registered under (not a BACKEND value)."""

FAULTS = faults.BACKEND_FAULTS


class Arming:
    """Which fault the ops issued now get (None: none), and which armed call this is (reorder pairs the messages
    of one call only). One per process: the default group makes it, every later group shares it."""

    def __init__(self) -> None:
        self.fault: str | None = None
        self.call = 0
        self._calls = itertools.count(1)

    def start(self, fault: str) -> None:
        """The ops issued from now on are one armed call, faulty with ``fault``."""
        self.fault, self.call = fault, next(self._calls)


@contextlib.contextmanager
def armed(group, fault: str | None, planting=None):
    """The ops issued inside are faulty with ``fault``: on this backend by its group, on any other (plain Gloo) by the
    dispatch mode of suite/harness/fault_mode.py, which also reaches FSDP2's, DTensor's and the pipelines' ops
    (``planting``: what it keeps between armed calls, a ``fault_mode.Planting``)."""
    arming = getattr(group, "arming", None)
    if fault is None:
        yield
        return
    if arming is None:  # plain Gloo: the dispatch mode plants it (suite/harness/fault_mode.py)
        from suite.harness.fault_mode import FaultMode

        with FaultMode(fault, planting):
            yield
        return
    arming.start(fault)
    try:
        yield
    finally:
        arming.fault = None


def planted_in(case, env=None) -> tuple[str | None, str | None]:
    """(the fault SUITE_INJECT_BACKEND arms for ``case``'s calls, what its record's ``planted_fault`` says); (None,
    None) when the switch is off."""
    inj = switch("SUITE_INJECT_BACKEND", env)
    if inj is None:
        return None, None
    if faults.targets(inj.name, case):
        return inj.fault, f"backend {inj.fault}"
    return None, f"backend {inj.fault} (not armed for this case)"


def armed_call(group, fault: str | None, call, planting=None):
    """``call`` (a case's ``Buffers.call``) with its ops faulty with ``fault`` (None: ``call`` itself)."""
    if fault is None:
        return call

    def faulty(async_op: bool):
        with armed(group, fault, planting):
            return call(async_op)

    return faulty


def backend_for(backend: str, device_type: str, env=None) -> str:
    """The backend c10d starts the run's group on: ``backend``, or this one under SUITE_INJECT_BACKEND (Gloo on
    CPU only; the launcher's preflight says so before any rank starts)."""
    if switch("SUITE_INJECT_BACKEND", env) is None:
        return mpi_backend.c10d_name(backend)
    check_planted_backend(backend, device_type, env)
    return register()


def register() -> str:
    """Register the backend with c10d (once per process); its name."""
    if not hasattr(dist.Backend, NAME.upper()):  # register_backend names it there
        dist.Backend.register_backend(NAME, FaultyGroup, devices=["cpu"])
    return NAME


class _Recv(dist.Work):
    """A receive's Work whose wait applies the fault once the data is there."""

    def __init__(self, inner, apply):
        super().__init__()
        self.inner, self.apply = inner, apply

    def wait(self, timeout=None):
        ok = self.inner.wait() if timeout is None else self.inner.wait(timeout)
        if self.apply is not None:
            apply, self.apply = self.apply, None
            apply()
        return ok

    def is_completed(self):
        return self.inner.is_completed()


class FaultyGroup(dist.ProcessGroup):
    """c10d's creator of the backend and the process group itself: Gloo underneath, faults on top."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self.gloo = c10d.gloo_backend(store, rank, size, timeout)
        world = dist.group.WORLD if dist.is_initialized() else None
        self.arming = world.arming if isinstance(world, FaultyGroup) else Arming()
        self._n = size
        self.faults = Corrupter(size, lambda: dist.get_process_group_ranks(self))

    def getBackendName(self):
        return NAME

    @property
    def group_name(self) -> str:
        """The name c10d registered the group under (a Python process group has none of its own in C++: a
        DeviceMesh, FSDP2 and DTensor look groups up by it)."""
        return c10d.registered_name(self)

    def _get_sequence_number_for_group(self):
        return c10d.sequence_number(self.gloo)

    # --- applying a fault to a finished op ----------------------------------------------------------

    def _collective(self, op: str, issue, opts, outs, ins=(), reduces: bool = False):
        fault = self.arming.fault
        if fault is None:
            return issue(opts)
        if fault == "wrong_reduction" and reduces:
            opts.reduceOp = wrong_op(opts.reduceOp)
        work = []

        def run():
            work.append(issue(opts))
            work[0].wait()

        self.faults.around(fault, op, outs, ins, run)
        # what Gloo's future holds (its output tensors, now faulty): DDP's comm hooks read it, and a None there
        # crashes the reducer
        return c10d.completed_work(c10d.future_value(work[0]))

    # --- collectives ----------------------------------------------------------------------------------

    def allreduce(self, tensors, opts):
        return self._collective("allreduce", lambda o: self.gloo.allreduce(tensors, o), opts, tensors, reduces=True)

    def broadcast(self, tensors, opts):
        # the root's tensor is what it sends, never written: a fault lands on the receivers' copies
        outs = [] if self.rank() == opts.rootRank else tensors
        return self._collective("broadcast", lambda o: self.gloo.broadcast(tensors, o), opts, outs)

    def reduce(self, tensors, opts):
        outs = tensors if self.rank() == opts.rootRank else []
        return self._collective("reduce", lambda o: self.gloo.reduce(tensors, o), opts, outs, reduces=True)

    def allgather(self, output_lists, inputs, opts):
        return self._collective(
            "allgather", lambda o: self.gloo.allgather(output_lists, inputs, o), opts, output_lists[0], inputs
        )

    def all_gather_single(self, output, input, opts):
        chunks = list(output.chunk(self._n))
        return self._collective(
            "allgather_base", lambda o: self.gloo.allgather([chunks], [input], o), opts, [output], [input]
        )

    def gather(self, output_lists, inputs, opts):
        outs = output_lists[0] if output_lists else []
        return self._collective("gather", lambda o: self.gloo.gather(output_lists, inputs, o), opts, outs, inputs)

    def scatter(self, outputs, input_lists, opts):
        ins = input_lists[0] if input_lists else []
        return self._collective("scatter", lambda o: self.gloo.scatter(outputs, input_lists, o), opts, outputs, ins)

    def reduce_scatter(self, outputs, input_lists, opts):
        return self._collective(
            "reduce_scatter",
            lambda o: self.gloo.reduce_scatter(outputs, input_lists, o),
            opts,
            outputs,
            input_lists[0],
            reduces=True,
        )

    def reduce_scatter_single(self, output, input, opts):
        return self._collective(
            "reduce_scatter_base",
            lambda o: self.gloo.reduce_scatter([output], [list(input.chunk(self._n))], o),
            opts,
            [output],
            [input],
            reduces=True,
        )

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts):
        return self._collective(
            "alltoall_base",
            lambda o: self.gloo.alltoall_base(output, input, output_split_sizes or [], input_split_sizes or [], o),
            opts,
            [output],
            [input],
        )

    def alltoall(self, outputs, inputs, opts):
        return self._collective("alltoall", lambda o: self.gloo.alltoall(outputs, inputs, o), opts, outputs, inputs)

    def barrier(self, opts):
        return self.gloo.barrier(opts)

    # --- point to point -------------------------------------------------------------------------------

    def send(self, tensors, dst, tag):
        work = self.gloo.send(tensors, dst, tag)
        fault = self.arming.fault
        if fault != "aliasing":
            return work
        # the send's buffer written once the message is out: what a transport reusing it would do
        return _Recv(work, lambda: scribble(tensors, []))

    def recv(self, tensors, src, tag):
        fault = self.arming.fault
        t = tensors[0]
        if fault is None:
            return self.gloo.recv(tensors, src, tag)
        before = t.clone() if fault in ("drop", "partial") else None
        call = self.arming.call

        def apply():
            if fault == "reorder":
                self.faults.reorder(call, src, t)
            else:
                self.faults.apply(fault, "recv", [t], None if before is None else [before], [])

        return _Recv(self.gloo.recv(tensors, src, tag), apply)
