"""The private parts of DDP this experiment reads, each behind one function (checked with torch 2.13).

DDP's public API says nothing of its buckets or of the time its backward spent communicating; its logger
and reducer do, privately:
- ``_set_ddp_runtime_logging_sample_rate`` (``sample_every_iteration``): the logger samples every
  iteration, not one in 100;
- ``_get_ddp_logging_data`` (``logging_data``): the logger's interval statistics of the last step and the
  bucket cap DDP settled on;
- ``reducer._get_zeros_like_grad_buckets`` (``bucket_sizes``): the buckets the reducer holds;
- ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` (``FIRST_BUCKET_BYTES``): the first bucket's cap.
Where this torch lacks one, the numbers it gives are absent from the record (an empty logger reading, no
bucket sizes) rather than guessed; the first bucket falls back to torch's documented 1 MiB.
"""

from __future__ import annotations

import torch.distributed as dist

FIRST_BUCKET_BYTES: int = getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES", 1024 * 1024)


def sample_every_iteration(ddp) -> None:
    """DDP's logger records every iteration's statistics (its default samples one in 100)."""
    set_rate = getattr(ddp, "_set_ddp_runtime_logging_sample_rate", None)
    if set_rate is not None:
        set_rate(1)


def logging_data(ddp) -> dict:
    """DDP's logger now: the previous step's interval statistics, the bucket cap (empty where absent)."""
    get = getattr(ddp, "_get_ddp_logging_data", None)
    return dict(get()) if get is not None else {}


def bucket_sizes(ddp) -> list[int] | None:
    """The bytes of each bucket DDP's reducer holds now, None where this torch does not say."""
    get = getattr(getattr(ddp, "reducer", None), "_get_zeros_like_grad_buckets", None)
    if get is None:
        return None
    return [int(b.buffer().numel() * b.buffer().element_size()) for b in get()]
