"""``pp_1f1b``: ``Schedule1F1B``, one stage per rank; it needs at least as many micro-batches as stages."""

from ..strategy import PP, Pipeline, Strategy


def _cannot(world: int, microbatches: int) -> str | None:
    if microbatches < world:
        return f"pp_1f1b needs SHARDED_MICROBATCHES >= {world} stages, not {microbatches}"
    return None


STRATEGY = Strategy(
    name="pp_1f1b",
    what="`Schedule1F1B`, one stage per rank (needs `SHARDED_MICROBATCHES` >= world)",
    data="the whole batch, in micro-batches",
    mesh_dims=(PP,),
    pipeline=Pipeline(schedule="Schedule1F1B", cannot=_cannot),
)
