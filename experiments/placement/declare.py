"""What the placement declarations share (cases.py, gpu_cases.py): the experiment's name, the in-place sum
all_reduce case whose whole buffer counts, and the element count of a size."""

from __future__ import annotations

from suite.api import Bytes, Case, collectives

EXPERIMENT = "placement"

WHOLE_BUFFER = "the whole buffer of the collective (nccl-tests S)"


def all_reduce_case(label: str, identity: dict, count: int, dtype: str, **kw) -> Case:
    """An in-place sum all_reduce case of this experiment (the whole buffer counts, the all_reduce factor)."""
    return Case(
        experiment=EXPERIMENT,
        op="all_reduce",
        label=label,
        identity={**identity, "redop": "sum", "in_place": True},
        bytes=Bytes(
            size_bytes=count * collectives.elsize(dtype),
            count=count,
            dtype=dtype,
            bw_op="all_reduce",
            definition=WHOLE_BUFFER,
        ),
        **kw,
    )


def count_of(size: int, dtype: str) -> int:
    """Elements of ``dtype`` in ``size`` bytes."""
    return size // collectives.elsize(dtype)
