"""``window``: streaming bandwidth, OSU ``osu_bw``/``osu_bibw`` style.

A window of ``isend``/``irecv`` (uni: rank 0 -> last rank, then a small ack; bi: both ways). Time is
per message of one direction (iteration / window; bi: both directions at once), so ``algbw`` is the
bandwidth of one direction, as in every p2p record; the bidirectional records add
``aggregate_algbw_gbps`` (both directions together, what ``osu_bibw`` prints). The doctor's bandwidth
probes are this window (``window_case``).
"""

from __future__ import annotations

import torch.distributed as dist

from suite import metrics

from suite.harness import verify
from suite.case import Buffers, Case, wait_all
from suite.common.config import BenchConfig
from suite.harness.dist import DistContext
from suite.ops.p2p.link_probe import beyond_case, observe, probe_window, sizes_beyond
from suite.ops.p2p.pattern import Pattern, Spec, Sweep, blank, both_ends, buffers, cross, make_case, pat, wrong_messages

WINDOW = 64
"""Messages in flight per window: OSU ``osu_bw``/``osu_bibw``'s default window size (recorded as
``window_default``; the case's own ``window`` may be smaller, see WINDOW_MAX_BYTES)."""
WINDOW_MAX_BYTES = 256 << 20
"""The window shrinks so that window x message size stays below this (memory bound; recorded as
``window_max_bytes``)."""


def build(ctx: DistContext, s: Spec, max_bytes: int | None = None) -> Buffers:
    """One rank's window of ``s``; ``max_bytes``: the sweep's largest size where ``s`` is a step of the link
    probe beyond it (link_probe.py), None for a case of the sweep."""
    dt, a, b, w, count = s.dt, s.src, s.dst, s.window, s.count
    me, g = ctx.rank, ctx.group
    bi = s.variant == "bidirectional"
    involved = me in (a, b)
    peer = b if me == a else a
    sends = [pat(ctx, me, count, dt, offset=j * count) for j in range(w)] if involved and (bi or me == a) else []
    recvs = [blank(ctx, count, dt) for _ in range(w)] if involved and (bi or me == b) else []
    ack_out = pat(ctx, me, 1, dt)
    ack_in = blank(ctx, 1, dt)

    def run():
        if not involved:
            return
        works = [dist.irecv(r, peer, group=g) for r in recvs]
        works += [dist.isend(t, peer, group=g) for t in sends]
        wait_all(works)
        if not bi:  # OSU osu_bw: the receiver acknowledges the whole window
            if me == a:
                dist.recv(ack_in, b, group=g)
            else:
                dist.send(ack_out, a, group=g)

    def wrong():
        n = wrong_messages(ctx, recvs, peer, count, dt)
        if involved and not bi and me == a:
            n += verify.count_wrong(ack_in, pat(ctx, b, 1, dt))
        return n

    buf = buffers(
        ctx,
        run,
        wrong,
        recvs + ([ack_in] if involved and not bi and me == a else []),
        sent=sends + ([ack_out] if involved and not bi and me == b else []),
        cross_node=cross(ctx, a, b),
    )

    def derive(m, around, session) -> dict:
        # algbw is one direction's; the aggregate is named (OSU osu_bibw prints it)
        out = {"aggregate_algbw_gbps": metrics.algbw_gbps(2 * s.size_bytes, m.median_s)} if bi else {}
        return out | observe(ctx, s, m, session, max_bytes=max_bytes, window_max=WINDOW)

    buf.derive = derive
    return buf


def window_case(s: Spec, *, experiment: str) -> Case:
    """The streaming-bandwidth case of ``s`` (pattern window; its src, dst, window and variant)."""
    a, b, w = s.src, s.dst, s.window
    bi = s.variant == "bidirectional"
    dirs = 2 if bi else 1
    return make_case(
        PATTERN,
        s,
        (
            f"{w} isend + {w} irecv each way between {a} and {b}, wait all"
            if bi
            else f"{w} isend {a}->{b} (irecv on {b}), wait all, 1-element ack {b}->{a}"
        ),
        experiment=experiment,
        divisor=w,
        normalisation=f"iteration / window {w}: time per message of one direction"
        + (" (both directions at once); algbw = one direction, aggregate_algbw_gbps = both" if bi else ""),
        provenance={
            "aggregate_algbw_gbps": "derived: 2 x size_bytes / time_us (both directions together, OSU osu_bibw)"
        }
        if bi
        else None,
        fields={
            "peer": b,
            "directions": dirs,
            "window_default": WINDOW,
            "window_max_bytes": WINDOW_MAX_BYTES,
            "window_osu": 64,
        },
    )


def _spec(variant: str, sz: int, dtype: str, n: int, window: int) -> Spec:
    return Spec(pattern=PATTERN.name, variant=variant, size_bytes=sz, dtype=dtype, src=0, dst=n - 1, window=window)


def _declare(cfg: BenchConfig, n: int, sw: Sweep, experiment: str) -> list[Case]:
    """Each variant over the sweep, then its link probe's steps beyond the sweep (link_probe.py)."""
    out = []
    for variant in PATTERN.variants:
        for sz in sw.sizes:
            out.append(
                window_case(
                    _spec(variant, sz, sw.dtype, n, max(1, min(WINDOW, WINDOW_MAX_BYTES // sz))), experiment=experiment
                )
            )
        for sz in sizes_beyond(sw.sizes[-1]):
            s = _spec(variant, sz, sw.dtype, n, probe_window(sz, WINDOW))
            out.append(beyond_case(window_case(s, experiment=experiment), s, build, sw.sizes[-1], WINDOW))
    return out


PATTERN = Pattern(
    name="window",
    variants=("unidirectional", "bidirectional"),
    build=build,
    declare=_declare,
    reported_ranks=both_ends,
)
