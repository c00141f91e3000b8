"""Planted bug: the ring all_reduce's reduce-scatter phase sends the wrong chunk.

At step s rank ``me`` should send chunk ``me - s``; this plant makes it send chunk ``me - s + 1``
(the review's planted clone), so a neighbour folds a chunk into the wrong place. With the old periodic
patterns every chunk of a multiple of 8 elements was the same and the run reported ``#wrong 0 [OK]``
at 2 ranks; tests/dist/test_misrouting_dist.py requires it to fail. Even chunks only (the test's size).
"""

from suite.ops import algorithms

_exchange = algorithms.exchange


def _sends_the_next_chunk(send, recv, dst, src, group=None, *args, **kwargs):
    reduce_scatter_step = (
        send is not None and recv is not None and send.untyped_storage().data_ptr() != recv.untyped_storage().data_ptr()
    )  # the all-gather phase receives straight into the buffer; reduce-scatter into a scratch chunk
    if reduce_scatter_step and send._base is not None:
        base = send._base.view(-1)
        n, ln = base.numel() // send.numel(), send.numel()
        k = (send.storage_offset() - base.storage_offset()) // ln
        send = base.narrow(0, (k + 1) % n * ln, ln)
    return _exchange(send, recv, dst, src, group, *args, **kwargs)


algorithms.exchange = _sends_the_next_chunk
