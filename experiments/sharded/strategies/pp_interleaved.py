"""``pp_interleaved``: ``ScheduleInterleaved1F1B``, two stages per rank, stage s on rank s mod world (the looped
placement of Narayanan et al., SC'21); the micro-batches run in rounds of the world size."""

from ..strategy import PP, Pipeline, Strategy


def _cannot(world: int, microbatches: int) -> str | None:
    rounds = max(1, microbatches // world)
    if microbatches % rounds:
        return f"pp_interleaved needs SHARDED_MICROBATCHES a multiple of its {rounds} rounds, not {microbatches}"
    return None


STRATEGY = Strategy(
    name="pp_interleaved",
    what="`ScheduleInterleaved1F1B`, two stages per rank (stage s on rank s mod world)",
    data="the whole batch, in micro-batches",
    mesh_dims=(PP,),
    pipeline=Pipeline(schedule="ScheduleInterleaved1F1B", stages_per_rank=2, cannot=_cannot),
)
