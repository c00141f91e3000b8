"""The journal's ring kept in a file: what a rank issued survives the rank (Gloo's SIGABRT on a size mismatch).

A rank that a fatal signal ends leaves no journal dump (suite/harness/journal/dump.py), only faulthandler's
stacks: the ring buffer in its memory is gone. So each entry the journal records is also packed into a
memory-mapped file, ``<run>/hang/rank<r>.ring``: a store into the page cache (no system call, about half a
microsecond), which the kernel keeps when the process dies. The launcher reads the ring of a rank that died
(``read``) in the form of a dump, so the hang diagnosis compares what every rank issued at the op one
died in. Pure Python and no torch: the launcher reads it.

The file: a header (``HEADER``: format, the current case's number, the rank's Unix time less its
perf_counter; then its host and the case's label), the plan (``PLAN``: the write numbers of the last entry
begun and of the last entry recorded ahead, see below) and ``SLOTS`` fixed slots (``SLOT``: the entry's write
number from 1, sequence number, op, group, dimensions, dtype, peer, case number, how many of this op the
case has issued, its start on the rank's perf_counter).

A block of timed samples has its ops recorded before its first sample (suite/harness/journal/quiet.py): their
slots are written ahead of the ops. Before each sample the rank stores one number, the write number of the
sample's last entry (``begun``); ``read`` leaves out the slots recorded ahead past it (never issued), so the last
slot it reads is the sample's op the rank was in, as when each op wrote its slot as it was called.
"""

from __future__ import annotations

import math
import mmap
import struct
from pathlib import Path

from suite import op_table

SLOTS = 256
"""Entries kept (the journal's TAIL)."""
FORMAT = 3
HEADER = struct.Struct("<qqd64s")  # format, case number, Unix time less perf_counter, host; the case label follows
LABEL_BYTES = 1024
PLAN = struct.Struct("<qq")  # after the label: write numbers of the last entry begun and the last recorded ahead
BEGUN = struct.Struct("<q")  # the first of them alone (the store before each sample)
SLOT = struct.Struct("<qqqqqqqqqqqqd")
PLAN_AT = HEADER.size + LABEL_BYTES
OFFSET = PLAN_AT + PLAN.size
NONE = -1
DTYPES = (
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)
DTYPE_BYTES = (4, 8, 2, 2, 8, 4, 2, 1, 1, 1, 8, 16)
"""The bytes of an element of each of DTYPES."""
DIMS = 3
"""Dimensions a slot keeps; a tensor of more reads as one dimension of all its elements."""
_OP_CODE = {op.name: op.code for op in op_table.OPS}
_OP_NAME = {op.code: op.name for op in op_table.OPS}
"""The ops a slot can name, by their code (suite/op_table.py: each row keeps its number, so a ring file an
older run wrote reads the same); another code reads as ``?``."""


class Ring:
    """This rank's ring file, written by ``Journal.enter`` (``put``) and ``Journal.set_case`` (``case``)."""

    def __init__(self, path: Path, host: str, unix_minus_clock: float):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w+b") as fh:
            fh.truncate(OFFSET + SLOTS * SLOT.size)
            self.map = mmap.mmap(fh.fileno(), OFFSET + SLOTS * SLOT.size)
        self.path, self.written, self.case_no = path, 0, 0
        self.host, self.unix_minus_clock = host.encode()[:64], unix_minus_clock
        self.dtypes: dict = {}  # torch dtype -> code (its name looked up once)
        HEADER.pack_into(self.map, 0, FORMAT, 0, unix_minus_clock, self.host)

    def case(self, label: str) -> None:
        self.case_no += 1
        raw = label.encode()[:LABEL_BYTES]
        self.map[HEADER.size : PLAN_AT] = raw + b"\0" * (LABEL_BYTES - len(raw))
        HEADER.pack_into(self.map, 0, FORMAT, self.case_no, self.unix_minus_clock, self.host)

    def plan(self, begun: int, ahead: int) -> None:
        """The entries up to write number ``ahead`` were recorded before they were issued; those past ``begun``
        were not issued (yet)."""
        PLAN.pack_into(self.map, PLAN_AT, begun, ahead)

    def begun(self, n: int) -> None:
        """The entries up to write number ``n`` were issued (or are being): one store, before each timed sample."""
        BEGUN.pack_into(self.map, PLAN_AT, n)

    def fields(self, op: str, group: str, shape, dtype, peer) -> tuple:
        """The fields of an entry that every call of this op on these buffers shares (from its op to its peer):
        found once for the ops a timed round repeats (suite/harness/journal/quiet.py), not per entry."""
        dims = (NONE,) * DIMS if shape is None else _dims(shape)
        code = self.dtypes.get(dtype)
        if code is None:
            name = str(dtype).removeprefix("torch.")
            code = self.dtypes[dtype] = DTYPES.index(name) if name in DTYPES else NONE
        ndim = NONE if shape is None else len(shape)
        peer = peer if isinstance(peer, int) else NONE
        return (_OP_CODE.get(op, NONE), int(group) if group.isdigit() else NONE, ndim, *dims, code, peer)

    def put(self, op: str, group: str, seq, shape, dtype, peer, count: int, clock: float, fields=None) -> None:
        """One entry (the journal's ``enter`` arguments, ``count``: this op's calls in the case so far;
        ``fields``: what ``fields`` gave for the same op, group, shape, dtype and peer, or None)."""
        n = self.written = self.written + 1
        SLOT.pack_into(
            self.map,
            OFFSET + (n % SLOTS) * SLOT.size,  # n from 1: a slot of zeros is empty
            n,
            NONE if seq is None else seq,
            *(fields or self.fields(op, group, shape, dtype, peer)),
            self.case_no,
            count,
            clock,
        )


def _dims(shape) -> tuple:
    if len(shape) > DIMS:
        total = 1
        for d in shape:
            total *= d
        return (total,) + (NONE,) * (DIMS - 1)
    return tuple(shape) + (NONE,) * (DIMS - len(shape))


def read(path: Path, rank: int) -> dict | None:
    """A ring file as a journal dump (suite/harness/journal/dump.py ``snapshot``: rank, host, case, seq,
    case_ops, tail with each op's start on the rank's clock; no threads), None when it is not one. Its last entry
    (of those issued: not the slots recorded ahead past the last begun) is the op the rank was in (``entered``);
    the ring keeps no op's return, so a completed one ends where it began (``end_clock``)."""
    try:
        raw = path.read_bytes()
        fmt, case_no, unix_minus_clock, host = HEADER.unpack_from(raw, 0)
    except (OSError, struct.error):
        return None
    if fmt != FORMAT or len(raw) < OFFSET + SLOTS * SLOT.size:
        return None
    label = raw[HEADER.size : PLAN_AT].split(b"\0", 1)[0].decode(errors="replace")
    begun, ahead = PLAN.unpack_from(raw, PLAN_AT)
    slots = sorted(
        s
        for i in range(SLOTS)
        if (s := SLOT.unpack_from(raw, OFFSET + i * SLOT.size))[0] > 0 and not begun < s[0] <= ahead
    )
    if not slots:
        return None
    written = slots[-1][0]
    tail, seq, case_ops = [], {}, {}
    for n, sq, op, group, ndim, *rest in slots:
        dims, (dtype, peer, case, count, clock) = rest[:DIMS], rest[DIMS:]
        name = _OP_NAME.get(op, "?")
        g = str(group) if group != NONE else "?"
        shape = None if ndim == NONE else [d for d in dims if d != NONE] if ndim <= DIMS else [dims[0]]
        known = shape is not None and 0 <= dtype < len(DTYPES)
        tail.append(
            {
                "op": name,
                "group": g,
                "seq": None if sq == NONE else sq,
                "shape": shape,
                "dtype": DTYPES[dtype] if 0 <= dtype < len(DTYPES) else None,
                "peer": None if peer == NONE else peer,
                "case": label if case == case_no else "",
                "state": "entered" if n == written else "completed",
                "time_unix": clock + unix_minus_clock,
                "clock": clock,
                "end_clock": None if n == written else clock,
                "bytes": math.prod(shape) * DTYPE_BYTES[dtype] if known else None,
            }
        )
        if sq != NONE:
            seq[g] = max(seq.get(g, 0), sq)
        if case == case_no:
            case_ops[name] = max(case_ops.get(name, 0), count)
    return {
        "rank": rank,
        "host": host.split(b"\0", 1)[0].decode(errors="replace") or "?",
        "time_unix": max((e["time_unix"] for e in tail), default=0.0),
        "case": label,
        "seq": seq,
        "case_ops": case_ops,
        "tail": tail,
        "from_ring": True,
        "unix_minus_clock": unix_minus_clock,
        "reason": "its ring file (ended before it could write its journal): each op's start, no op's return",
    }
