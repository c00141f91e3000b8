"""``BACKEND=mpi``: a c10d process group over mpi4py, for CPU tensors (torch's PyPI wheels are built without MPI).

Registered with c10d as ``mpi4py`` (``mpi`` is the name of torch's own, absent, MPI backend); the records say
``mpi``. Every op is MPI's non-blocking form (``Iallreduce``, ``Isend``, ...) on numpy views of the tensors, no
copy, and returns a Work whose ``wait`` polls the requests until the run's timeout (MPI has none of its own: a
peer that never arrives raises ``DistBackendError`` "Timed out waiting ...", as Gloo does). Copies are made
only where MPI forbids or lacks the form:

- an output made of several tensors (``all_gather``, ``gather``, ``all_to_all``) or an input made of several
  (``scatter``, ``reduce_scatter``, ``all_to_all``) that are not one run of memory: MPI takes one buffer, so the
  parts are gathered into one (and the result copied out of one) once the op is done;
- an out-of-place op whose input and output share memory (MPI forbids aliasing), except the forms MPI has
  ``MPI_IN_PLACE`` for (all_reduce, reduce at the root, all_gather_into_tensor with the input at this rank's
  place, all_to_all_single on one buffer); ``reduce_scatter_tensor`` in place receives into a fresh chunk
  (MPI's in-place form puts the result at the buffer's start, not at this rank's chunk);
- float16 and bfloat16: MPI has no such type; data that only moves goes as int16 (the same bits), a
  reduction is done in float32 and rounded back (exact for every value the suite's checks use).

``avg`` is MPI's sum divided by the group's size (truncated for integers). The ranks must be started by
``mpiexec`` (suite/harness/mpi/rank.py): processes started otherwise cannot join one MPI world. A group
made by ``new_group`` is the MPI communicator of its ranks (``Create_group`` over ``COMM_WORLD``).
"""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from suite.harness import c10d
from suite.harness.mpi import watch as mpi_watch

NAME = "mpi4py"
"""The name it is registered with c10d under (``BACKEND=mpi`` in the suite)."""

_HALF = (torch.float16, torch.bfloat16)
_SPIN = 2000
"""Polls of a request before the waiting thread starts yielding the CPU (ranks may outnumber the cores)."""


def register() -> str:
    """Register the backend with c10d (once per process); its name."""
    if not hasattr(dist.Backend, NAME.upper()):  # register_backend names it there
        dist.Backend.register_backend(NAME, MpiGroup, devices=["cpu"])
    return NAME


def _mpi():
    from mpi4py import MPI  # initialises MPI in this process (MPI_THREAD_MULTIPLE)

    return MPI


def communicator(group):
    """The MPI communicator under ``group``, a process group of this backend (its ranks' own for one that
    ``new_group`` made); None for a group of another backend."""
    return getattr(group, "comm", None) if isinstance(group, MpiGroup) else None


def numpy_view(t: torch.Tensor):
    """A numpy view of ``t``'s memory (int16 for the 16-bit floats: MPI moves their bits unchanged)."""
    if not t.is_contiguous():
        raise ValueError(f"the MPI backend needs contiguous tensors, got shape {tuple(t.shape)} strides {t.stride()}")
    return (t.view(torch.int16) if t.dtype in _HALF else t).detach().numpy()


def _flat(parts: list[torch.Tensor]) -> torch.Tensor | None:
    """``parts`` as one tensor over their own memory when they lie back to back in one storage, else None."""
    first = parts[0]
    if not all(p.is_contiguous() and p.dtype == first.dtype for p in parts):
        return None
    step = first.numel() * first.element_size()
    if any(p.untyped_storage().data_ptr() != first.untyped_storage().data_ptr() for p in parts):
        return None
    if any(p.numel() != first.numel() or p.data_ptr() != first.data_ptr() + i * step for i, p in enumerate(parts)):
        return None
    return torch.as_strided(first, (first.numel() * len(parts),), (1,), first.storage_offset())


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the memory of ``a`` and ``b`` overlaps (MPI forbids it between an op's input and output)."""
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


class MpiWork(dist.Work):
    """MPI requests as a c10d Work: ``wait`` polls them until done or the timeout, then ``finish`` (the copies
    out, the average's division) runs once."""

    def __init__(self, reqs, what: str, timeout_s: float, finish=None, result=None):
        super().__init__()
        self.reqs, self.what, self.timeout_s, self.finish, self.result = reqs, what, timeout_s, finish, result
        self._done = False

    def _complete(self) -> None:
        self._done = True
        if self.finish is not None:
            finish, self.finish = self.finish, None
            finish()

    def is_completed(self) -> bool:
        if not self._done and _mpi().Request.Testall(self.reqs):
            self._complete()
        return self._done

    def wait(self, timeout=None) -> bool:
        if self._done:
            return True
        limit = self.timeout_s if not timeout else timeout.total_seconds()
        test, polls, start = _mpi().Request.Testall, 0, time.monotonic()
        while not test(self.reqs):
            polls += 1
            if polls > _SPIN:
                if time.monotonic() - start > limit:
                    raise dist.DistBackendError(
                        f"[mpi] Timed out waiting {limit:z.0f} s for {self.what}: a peer never took part"
                    )
                os.sched_yield()
        self._complete()
        return True

    def get_future(self):
        self.wait()
        fut = torch.futures.Future()
        fut.set_result(self.result)
        return fut


def _communicator(store, rank: int, size: int):
    """The MPI communicator of a group: COMM_WORLD for the whole world, else the group's ranks' own, whose
    COMM_WORLD ranks the members tell each other through the group's store (c10d gives a creator only the
    group's rank and size)."""
    MPI = _mpi()
    world = MPI.COMM_WORLD
    if size == world.Get_size():
        return world
    store.set(f"mpi_rank/{rank}", str(world.Get_rank()))
    ranks = [int(store.get(f"mpi_rank/{r}")) for r in range(size)]
    return world.Create_group(world.Get_group().Incl(ranks))


class MpiGroup(dist.ProcessGroup):
    """c10d's creator of the backend and the process group itself."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self.comm = _communicator(store, rank, size)
        self.timeout_s = timeout.total_seconds()
        self._n, self._seq = size, 0
        self.watchers: list = []
        """Callables ``watcher(op, tensors)`` told of every op before it is issued (its torch name, e.g.
        ``all_reduce``, and its tensor arguments in c10d's order): what a dispatcher-level observer such as
        CommDebugMode sees of a C++ backend, which never sees a Python process group's ops."""

    def getBackendName(self):
        return NAME

    @property
    def group_name(self) -> str:
        """The name c10d registered the group under (a Python process group has none of its own in C++)."""
        return c10d.registered_name(self)

    def _get_sequence_number_for_group(self):
        return self._seq

    def _work(self, what: str, reqs, finish=None, result=None) -> MpiWork:
        self._seq += 1
        return MpiWork(reqs if isinstance(reqs, list) else [reqs], what, self.timeout_s, finish, result)

    def _reduction(self, what: str, ins: list, outs: list, opts, issue):
        """A reducing op: ``issue(inputs, outputs, mpi_op)`` on the tensors (16-bit floats: float32 copies, rounded
        back into ``outs`` when done; an input that is an output stays one tensor); avg divides the result by the
        group's size."""
        mpi_op = next((m for k, m in _reduce_ops() if opts.reduceOp == k), None)
        if mpi_op is None:
            raise ValueError(f"the MPI backend does not support {opts.reduceOp} (MPI has sum, product, min, max)")
        avg = opts.reduceOp == dist.ReduceOp.AVG
        wide = (ins or outs)[0].dtype in _HALF
        w_outs = [o.float() if wide else o for o in outs]
        w_ins = []
        for i in ins:
            k = next((k for k, o in enumerate(outs) if o is i), None)
            w_ins.append(w_outs[k] if k is not None else i.float() if wide else i)

        def finish():
            for o, w in zip(outs, w_outs):
                if avg:
                    w.div_(self._n, rounding_mode=None if w.is_floating_point() else "trunc")
                if w is not o:
                    o.copy_(w)

        return self._work(what, issue(w_ins, w_outs, mpi_op), finish, outs)

    # --- collectives ----------------------------------------------------------------------------------

    def allreduce(self, tensors, opts):
        t = tensors[0]
        MPI = _mpi()
        return self._reduction(
            "all_reduce", [t], [t], opts, lambda i, o, op: self.comm.Iallreduce(MPI.IN_PLACE, numpy_view(o[0]), op)
        )

    def reduce(self, tensors, opts):
        t, root, MPI = tensors[0], opts.rootRank, _mpi()

        def issue(i, o, op):
            if o:
                return self.comm.Ireduce(MPI.IN_PLACE, numpy_view(o[0]), op, root=root)
            return self.comm.Ireduce(numpy_view(i[0]), None, op, root=root)

        # a non-root's tensor is only sent: nothing is written back into it
        return self._reduction("reduce", [t], [t] if self.rank() == root else [], opts, issue)

    def broadcast(self, tensors, opts):
        return self._work("broadcast", self.comm.Ibcast(numpy_view(tensors[0]), root=opts.rootRank), result=tensors)

    def barrier(self, opts):
        return self._work("barrier", self.comm.Ibarrier())

    def allgather(self, output_lists, inputs, opts):
        outs = output_lists[0]
        flat = _flat(outs)
        recv = torch.empty(sum(o.numel() for o in outs), dtype=outs[0].dtype) if flat is None else flat
        send = self._apart(inputs[0], recv)
        req = self.comm.Iallgather(numpy_view(send), numpy_view(recv))
        return self._work("all_gather", req, None if flat is not None else _scatter_into(recv, outs), output_lists)

    def all_gather_single(self, output, input, opts):
        c = input.numel()
        mine = output.view(-1).narrow(0, self.rank() * c, c)
        in_place = mine.data_ptr() == input.data_ptr() and input.is_contiguous()
        send = _mpi().IN_PLACE if in_place else numpy_view(self._apart(input, output))
        return self._work("all_gather_into_tensor", self.comm.Iallgather(send, numpy_view(output)), result=[output])

    def gather(self, output_lists, inputs, opts):
        root = opts.rootRank
        if self.rank() != root:
            return self._work("gather", self.comm.Igather(numpy_view(inputs[0]), None, root=root))
        outs = output_lists[0]
        flat = _flat(outs)
        recv = torch.empty(sum(o.numel() for o in outs), dtype=outs[0].dtype) if flat is None else flat
        send = self._apart(inputs[0], recv)
        req = self.comm.Igather(numpy_view(send), numpy_view(recv), root=root)
        return self._work("gather", req, None if flat is not None else _scatter_into(recv, outs), output_lists)

    def scatter(self, outputs, input_lists, opts):
        root, out = opts.rootRank, outputs[0]
        if self.rank() != root:
            return self._work("scatter", self.comm.Iscatter(None, numpy_view(out), root=root), result=outputs)
        send = self._apart(_joined(input_lists[0]), out)
        return self._work("scatter", self.comm.Iscatter(numpy_view(send), numpy_view(out), root=root), result=outputs)

    def reduce_scatter(self, outputs, input_lists, opts):
        out = outputs[0]
        send = self._apart(_joined(input_lists[0]), out)
        return self._reduction(
            "reduce_scatter",
            [send],
            [out],
            opts,
            lambda i, o, op: self.comm.Ireduce_scatter_block(numpy_view(i[0]), numpy_view(o[0]), op),
        )

    def reduce_scatter_single(self, output, input, opts):
        recv = torch.empty_like(output) if _overlap(input, output) else output

        def finish_copy():
            if recv is not output:
                output.copy_(recv)

        work = self._reduction(
            "reduce_scatter_tensor",
            [input],
            [recv],
            opts,
            lambda i, o, op: self.comm.Ireduce_scatter_block(numpy_view(i[0]), numpy_view(o[0]), op),
        )
        return _then(work, finish_copy, [output])

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts):
        MPI = _mpi()
        if output.data_ptr() == input.data_ptr() and not output_split_sizes and not input_split_sizes:
            return self._work(
                "all_to_all_single", self.comm.Ialltoall(MPI.IN_PLACE, numpy_view(output)), result=[output]
            )
        send = self._apart(input, output)
        if not output_split_sizes and not input_split_sizes:
            return self._work(
                "all_to_all_single", self.comm.Ialltoall(numpy_view(send), numpy_view(output)), result=[output]
            )
        row_in = send[0].numel() if send.dim() > 1 else 1
        row_out = output[0].numel() if output.dim() > 1 else 1
        s_counts = [n * row_in for n in (input_split_sizes or [send.shape[0] // self._n] * self._n)]
        r_counts = [n * row_out for n in (output_split_sizes or [output.shape[0] // self._n] * self._n)]
        req = self.comm.Ialltoallv([numpy_view(send), s_counts], [numpy_view(output), r_counts])
        return self._work("all_to_all_single", req, result=[output])

    def alltoall(self, outputs, inputs, opts):
        flat = _flat(outputs)
        recv = torch.empty(sum(o.numel() for o in outputs), dtype=outputs[0].dtype) if flat is None else flat
        send = self._apart(_joined(inputs), recv)
        req = self.comm.Ialltoall(numpy_view(send), numpy_view(recv))
        return self._work("all_to_all", req, None if flat is not None else _scatter_into(recv, outputs), outputs)

    def _apart(self, send: torch.Tensor, recv: torch.Tensor) -> torch.Tensor:
        """``send``, or a copy of it where it shares memory with ``recv`` (MPI forbids an op's buffers to alias)."""
        return send.clone() if _overlap(send, recv) else send

    # --- point to point -------------------------------------------------------------------------------

    def send(self, tensors, dst, tag):
        return self._work("send", self.comm.Isend(numpy_view(tensors[0]), dest=dst, tag=tag))

    def recv(self, tensors, src, tag):
        return self._work("recv", self.comm.Irecv(numpy_view(tensors[0]), source=src, tag=tag), result=tensors)


mpi_watch.watch_ops(MpiGroup)


def _reduce_ops() -> tuple:
    """(c10d's reduce op, MPI's) pairs (avg: a sum, divided when done)."""
    MPI = _mpi()
    return (
        (dist.ReduceOp.SUM, MPI.SUM),
        (dist.ReduceOp.AVG, MPI.SUM),
        (dist.ReduceOp.PRODUCT, MPI.PROD),
        (dist.ReduceOp.MIN, MPI.MIN),
        (dist.ReduceOp.MAX, MPI.MAX),
    )


def _joined(parts: list[torch.Tensor]) -> torch.Tensor:
    """``parts`` as one tensor: over their memory when they lie back to back, else a copy."""
    flat = _flat(parts)
    return flat if flat is not None else torch.cat([p.reshape(-1) for p in parts])


def _scatter_into(recv: torch.Tensor, outs: list[torch.Tensor]):
    """The copy of ``recv``'s consecutive parts into ``outs``, for when the op is done."""

    def finish():
        at = 0
        for o in outs:
            o.view(-1).copy_(recv[at : at + o.numel()])
            at += o.numel()

    return finish


def _then(work: MpiWork, after, result) -> MpiWork:
    """``work`` with ``after`` run once its own finish has run."""
    first = work.finish

    def finish():
        if first is not None:
            first()
        after()

    work.finish, work.result = finish, result
    return work
