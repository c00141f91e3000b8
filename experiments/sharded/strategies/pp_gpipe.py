"""``pp_gpipe``: ``torch.distributed.pipelining``'s ``ScheduleGPipe``, one stage per rank; the whole batch, in
micro-batches (experiments/sharded/pipeline.py)."""

from ..strategy import PP, Pipeline, Strategy

STRATEGY = Strategy(
    name="pp_gpipe",
    what="`torch.distributed.pipelining` `ScheduleGPipe`, one stage per rank",
    data="the whole batch, in micro-batches",
    mesh_dims=(PP,),
    pipeline=Pipeline(schedule="ScheduleGPipe"),
)
