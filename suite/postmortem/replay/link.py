"""The "link a-b k× slower" what-if priced on the link's α–β model: which part of each op's transfer is the
link's bandwidth term, the only part a slower or faster link stretches.

An op of S bytes over a ring of n ranks costs (Hockney, suite/model/ring.py) ``c_α·α + c_β·S/β``; every step of
the ring moves a chunk over every link of the ring at once, so a link of the ring paces all of them, and a link
that is not one of the ring's edges (ranks that are not neighbours in the ring's order) carries none of it. A
recorded transfer t is then ``(t − w) + w`` with ``w = c_β·S/β`` (at most t) for a link of the ring, 0 for any
other: latency, the backend's reduction on the CPU and its copies are ``t − w`` and stay; the link k× slower makes
``w`` k times as long (``link_transfer``).

The parts, all read from the run, none refitted here:

- S per op: the run's record of the step. The DDP step's ``bucket_sizes`` (its reducer's buckets, in the order it
  launches their all-reduces), or a sharded step's ``inventory`` (the communication debug mode's bytes per
  collective: the mean per op of a name, as the inventory does not keep their order; Gloo's reduce_scatter runs as
  an all_reduce). An op the record does not size keeps its transfer;
- β: the run's link figure of the link's class (suite.model.calibrate.p2p_links: the streaming probe's rate,
  the declared rate across hosts), else the declared rate between hosts (EXPECT_LINK_RATE, the compose
  simulation's LINK_RATE: suite.model.link_rate.declared_link_rate);
- c_β: the op's ring bandwidth factor (suite.model.ring.ring_coefficients, nccl-tests' bus factor): 2(n−1)/n
  for an all_reduce, (n−1)/n for an all_gather, 1 for a broadcast and a send.

Without a figure of the link's class (a one-host run has none) the whole transfer is scaled, an upper bound of
the change, and the what-if says so.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping
from pathlib import Path

from suite.model.ring import ring_coefficients

WHOLE = "no α–β figure of the link's class in the run: every transfer scaled whole (an upper bound)"


@dataclasses.dataclass(frozen=True)
class LinkPrice:
    """What a case's link what-if is priced with: op key -> seconds of the link's bandwidth term in its transfer
    (``wire``; None: no figure, the transfer is scaled whole) and how (``how``, one line)."""

    wire: Mapping[tuple, float] | None
    how: str


def link_transfer(t: float, wire: float, k: float) -> float:
    """A recorded transfer ``t`` over a link k times slower (k < 1: faster): only its bandwidth term ``wire``
    (capped at ``t``) is scaled."""
    w = min(max(wire, 0.0), t)
    return t + (k - 1.0) * w


def on_ring(peers: list[int], a: int, b: int) -> bool:
    """Whether ranks ``a`` and ``b`` are neighbours in the ring of ``peers`` (in rank order, closed)."""
    ring = sorted(peers)
    if a not in ring or b not in ring:
        return False
    d = abs(ring.index(a) - ring.index(b))
    return d == 1 or d == len(ring) - 1


def op_name_of(name: str) -> str:
    """A profiled op's name as the ring model names it (a point-to-point op is a send_recv)."""
    return "send_recv" if name.startswith("p2p ") else name


def wire_seconds(
    peers: Mapping[tuple, list[int]], link: tuple[int, int], sizes: Mapping[str, list[float]], beta_gbps: float
) -> dict[tuple, float]:
    """Op key -> its bandwidth term on ``link`` in seconds: c_β·S/β where the link is one of the op's ring's
    edges, 0 where it is not or the op's size is unknown (``sizes``: op name -> bytes, the i-th of that name the
    i-th, the mean past the end)."""
    out = {}
    for key, ranks in peers.items():
        name, i = key[0], key[1]
        got = sizes.get(name) or []
        coef = ring_coefficients(op_name_of(name), len(ranks))
        if not got or coef is None or not on_ring(ranks, *link):
            out[key] = 0.0
            continue
        size = got[i] if i < len(got) else statistics.fmean(got)
        out[key] = coef[1] * size / (beta_gbps * 1e9)
    return out


def op_sizes(record: Mapping, profiled: set[str]) -> dict[str, list[float]]:
    """Op name (as profiled) -> bytes per op, from a case's record: DDP's ``bucket_sizes`` for its all_reduces,
    in order; else the mean per op of each name in the ``inventory`` (Gloo's reduce_scatter profiled as an
    all_reduce, where the profile has no reduce_scatter)."""
    if record.get("bucket_sizes"):
        return {"all_reduce": [float(x) for x in record["bucket_sizes"]]}
    total: dict[str, list[float]] = {}
    for row in record.get("inventory") or []:
        op = row.get("op")
        if op == "reduce_scatter" and "reduce_scatter" not in profiled:
            op = "all_reduce"
        n = float(row.get("count") or 1)
        t = total.setdefault(op, [0.0, 0.0])
        t[0] += float(row.get("bytes") or 0) * n
        t[1] += n
    return {op: [b / n] for op, (b, n) in total.items() if n > 0}


def figure(run: Mapping, link: tuple[int, int]) -> tuple[float, str] | None:
    """(β GB/s, where it comes from) of the link's class in a stored run (bench.json loaded), None if none."""
    from suite.model.calibrate import p2p_links
    from suite.model.link_rate import declared_link_rate

    suite_info = (run.get("machine_info") or {}).get("suite") or {}
    hosts = int(suite_info.get("n_hosts") or len(set(suite_info.get("hostnames") or [])) or 1)
    world = max([int((b.get("extra_info") or {}).get("world_size") or 0) for b in run.get("benchmarks") or []] or [0])
    per_node = world // hosts if hosts > 1 and world % hosts == 0 else 0  # torchrun's numbering: node by node
    cls = "inter" if per_node and link[0] // per_node != link[1] // per_node else "intra"
    lk = p2p_links(run).get(cls)
    if lk is not None and lk.beta_gbps > 0:
        return lk.beta_gbps, f"{cls}-node link: {lk.source}"
    declared = declared_link_rate(run) if cls == "inter" else None
    if declared:
        return declared["gbps"], f"{cls}-node link: {declared['source'].split()[0]}={declared['rate']} (declared)"
    return None


def price(run_dir: Path, case: str, link: tuple[int, int], peers: Mapping[tuple, list[int]]) -> LinkPrice:
    """How a case's link what-if is priced (``peers``: op key -> its ranks, over the case's steps)."""
    try:
        run = json.loads((run_dir / "bench.json").read_text())
    except (OSError, ValueError):
        return LinkPrice(None, WHOLE)
    fig = figure(run, link)
    rec = next((b.get("extra_info") or {} for b in run.get("benchmarks") or [] if b.get("name") == case), {})
    if fig is None:
        return LinkPrice(None, WHOLE)
    sizes = op_sizes(rec, {k[0] for k in peers})
    wire = wire_seconds(peers, link, sizes, fig[0])
    sized = sorted({k[0] for k, w in wire.items() if w > 0})
    how = (
        f"α–β: only the bandwidth term c_β·S/β of the ops that cross the link scaled; β {fig[0]:z.4g} GB/s, "
        f"{fig[1]}; S of {', '.join(sized) or 'no op'} from the record"
        f" ({'bucket_sizes' if rec.get('bucket_sizes') else 'inventory'}), other ops unchanged"
    )
    return LinkPrice(wire, how)


def at_ranks(
    peers: Mapping[tuple, list[int]], n_to: int, sizes: Mapping[str, list[float]], alpha_us: float, beta_gbps: float
) -> dict[tuple, float]:
    """Op key -> the seconds its transfer gains at ``n_to`` ranks instead of its own group's: the ring model's
    change, (c_α(N) − c_α(n))·α + (c_β(N) − c_β(n))·S/β (0 for an op the model does not cover; the bandwidth
    term 0 where S is unknown)."""
    out = {}
    for key, ranks in peers.items():
        name = op_name_of(key[0])
        now, then = ring_coefficients(name, len(ranks)), ring_coefficients(name, n_to)
        if now is None or then is None:
            out[key] = 0.0
            continue
        got = sizes.get(key[0]) or []
        size = (got[key[1]] if key[1] < len(got) else statistics.fmean(got)) if got else 0.0
        out[key] = (then[0] - now[0]) * alpha_us * 1e-6 + (then[1] - now[1]) * size / (beta_gbps * 1e9)
    return out


def price_ranks(run_dir: Path, case: str, n_to: int, peers: Mapping[tuple, list[int]]) -> tuple[dict | None, str]:
    """(at_ranks's op key -> seconds, how, one line) of a case's "N ranks" what-if, priced on the run's figure of
    the link between its first and last rank (``figure``: β; α the same class's latency where the run measured
    it, else 0 and said); (None, why) without a figure."""
    from suite.model.calibrate import p2p_links

    try:
        run = json.loads((run_dir / "bench.json").read_text())
    except (OSError, ValueError):
        return None, "not priced: the run has no record (bench.json)"
    world = sorted({r for rs in peers.values() for r in rs})
    fig = figure(run, (world[0], world[-1]))
    if fig is None:
        return None, "not priced: no α–β figure of the run's link (a one-host run without a link probe)"
    beta, source = fig
    lk = p2p_links(run).get(source.split("-", 1)[0])
    alpha = lk.alpha_us if lk is not None and lk.alpha_us else 0.0
    rec = next((b.get("extra_info") or {} for b in run.get("benchmarks") or [] if b.get("name") == case), {})
    extra = at_ranks(peers, n_to, op_sizes(rec, {k[0] for k in peers}), alpha, beta)
    latency = f"α {alpha:z.4g} µs" if alpha else "α unknown: the latency terms left out"
    how = f"ring model from {len(world)} to {n_to} ranks: β {beta:z.4g} GB/s, {source}; {latency}"
    return extra, how
