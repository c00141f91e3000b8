"""Bandwidth and latency metrics: pure, torch-free functions.

Definitions follow nccl-tests (doc/PERFORMANCE.md, src/*.cu ``getBw`` hooks):

    algbw = S / t          S in bytes, t in seconds, GB/s = 1e9 bytes/s
    busbw = algbw * factor(op, n)

``S`` is the size nccl-tests passes to ``getBw``: the full buffer of the
collective (for all_gather/reduce_scatter/all_to_all/gather/scatter this is
the per-rank chunk times n). The factor converts algbw into the bandwidth each
rank's link must sustain under a ring/flat algorithm, so busbw is the number
that compares with a link's nominal speed:

- all_reduce: each rank sends and receives 2(n-1)/n of the buffer
  (reduce-scatter phase + all-gather phase of a ring).
- all_gather, reduce_scatter, all_to_all, gather, scatter: (n-1)/n (each rank
  moves every chunk but its own).
- broadcast, reduce, send/recv: 1 (the whole buffer crosses each link once).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from suite import op_table

GB = 1e9


@dataclass(frozen=True)
class OpFacts:
    """What the suite knows of an op family, in one place: nccl-tests' bus-bandwidth factor and the
    ring algorithm's number of sequential latency steps (the α coefficient of suite.model.fit), both as
    functions of the world size n."""

    busbw_factor: Callable[[int], float]
    ring_latency_steps: Callable[[int], float] | None


OP_TABLE: dict[str, OpFacts] = {f.name: OpFacts(f.busbw_factor, f.ring_latency_steps) for f in op_table.FAMILIES}
"""The op families of the one op table, suite/op_table.py (see the module docstring for the factors and
suite/model/fit.py for the steps)."""

OPS_WITH_FACTOR = tuple(OP_TABLE)


def busbw_factor(op: str, world_size: int) -> float:
    """nccl-tests bus-bandwidth factor for ``op`` at ``world_size`` ranks."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    try:
        return float(OP_TABLE[op].busbw_factor(world_size))
    except KeyError:
        raise ValueError(f"no bus-bandwidth factor for op {op!r}; known: {', '.join(OP_TABLE)}") from None


def ring_latency_steps(op: str, world_size: int) -> float | None:
    """Sequential latency steps of ``op``'s ring algorithm at ``world_size`` ranks; None if unmodelled."""
    facts = OP_TABLE.get(op)
    return None if facts is None or facts.ring_latency_steps is None else float(facts.ring_latency_steps(world_size))


def algbw_gbps(size_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 bytes/s); 0 for a zero-byte op."""
    if time_s <= 0:
        raise ValueError(f"time must be positive, got {time_s}")
    return size_bytes / time_s / GB


def busbw_gbps(op: str, size_bytes: int, time_s: float, world_size: int) -> float:
    """Bus bandwidth in GB/s: algbw times the op's factor."""
    return algbw_gbps(size_bytes, time_s) * busbw_factor(op, world_size)


def percentiles(samples: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Linear-interpolated percentiles (numpy's ``method="linear"``, its default), each q in [0, 100]:
    one sort for all of them."""
    if len(samples) == 0:
        raise ValueError("percentile of no samples")
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"q must be in [0, 100], got {q}")
    return [float(x) for x in np.percentile(np.asarray(samples, dtype=float), list(qs), method="linear")]


def percentile(samples: Sequence[float], q: float) -> float:
    """One linear-interpolated percentile (``percentiles``)."""
    return percentiles(samples, [q])[0]


def tail_min_samples(q: float) -> int:
    """Fewest samples with which percentile ``q`` is reported: 1/f for the tail fraction f = min(q, 100−q)/100
    (p05 and p95: 20, p99: 100, p50: 2). With fewer, no sample is expected beyond the percentile: the p95 of
    5-19 samples (the p99 of fewer than 100) is interpolated between the largest ones, the sample
    maximum rather than a tail latency."""
    f = min(q, 100.0 - q) / 100.0
    return 1 if f <= 0 else math.ceil(round(1.0 / f, 9))


def last_per_sample(per_rank: Sequence[Sequence[float]]) -> tuple[list[int], list[float]]:
    """Per sample ``i``: the rank ``r`` with the largest ``per_rank[r][i]`` (the lowest on a tie) and by how
    much it exceeds the median of the other ranks' values (0.0 with one rank).

    On each rank's time from the barrier exit to its op call, that is the rank that entered the op last
    (the late arrival) and how late; on each rank's whole time, the rank that finished last."""
    n = len(per_rank)
    ranks, by = [], []
    for col in zip(*per_rank):
        r = max(range(n), key=col.__getitem__)
        others = [col[j] for j in range(n) if j != r]
        ranks.append(r)
        by.append(float(col[r] - np.median(others)) if others else 0.0)
    return ranks, by


def latency_stats_us(samples_s: Sequence[float]) -> dict[str, float | None]:
    """p05/p50/p95/p99, min, max and mean of per-iteration samples, in µs; a percentile with fewer
    samples than ``tail_min_samples`` is None (the median, min and max are always there)."""
    us = [s * 1e6 for s in samples_s]
    p05, p50, p95, p99 = percentiles(us, [5, 50, 95, 99])

    def tail(q, v):
        return v if len(us) >= tail_min_samples(q) else None

    return {
        "p05_us": tail(5, p05),
        "p50_us": p50,
        "p95_us": tail(95, p95),
        "p99_us": tail(99, p99),
        "min_us": min(us),
        "max_us": max(us),
        "mean_us": sum(us) / len(us),
    }


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """1-based ranks (k, n+1-k) of the order statistics that bound the median's confidence interval.

    The number of samples below the population median is Binomial(n, 1/2) whatever the
    distribution (continuous), so [x_(k), x_(n+1-k)] covers the median with probability
    1 - 2·P(B <= k-1), B ~ Binomial(n, 1/2), exactly (Conover, Practical Nonparametric
    Statistics, 3rd ed., §3.2; Hollander & Wolfe §3.6). k is the largest rank whose coverage
    is still >= ``confidence``, computed in exact integer arithmetic, so the interval is the
    shortest symmetric one with coverage >= the nominal level for every n. When even the full
    range falls short (2/2^n > 1 - confidence: n <= 5 at 95%) it is the full range (k = 1),
    and ``median_ci_coverage`` says how much it covers.
    """
    return _median_ci_ranks(int(n), str(confidence))


@functools.lru_cache(maxsize=4096)
def _median_ci_ranks(n: int, confidence: str) -> tuple[int, int]:
    if n < 1:
        raise ValueError(f"need at least one sample, got n={n}")
    alpha = 1 - Fraction(confidence)  # the decimal as written: 0.95 is 19/20, not its binary neighbour
    if not 0 < alpha < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    limit = alpha.numerator << n  # 2·tail/2^n <= alpha  <=>  2·tail·den <= num·2^n (integers, no rounding)
    k, tail, comb = 1, 1, 1  # tail = sum of C(n, i) for i <= k-1 (what rank k leaves out below); comb = C(n, k-1)
    while 2 * (k + 1) <= n + 1:  # rank k+1 still at or below its mirror rank n-k
        comb = comb * (n - k + 1) // k  # C(n, k)
        if 2 * (tail + comb) * alpha.denominator > limit:
            break
        tail, k = tail + comb, k + 1
    return k, n + 1 - k


def median_ci_coverage(n: int, confidence: float = 0.95) -> float:
    """Exact coverage of ``median_ci`` at n samples: 1 - 2·P(Binomial(n, 1/2) <= k-1)."""
    k, _ = median_ci_ranks(n, confidence)
    return float(1 - Fraction(2 * sum(math.comb(n, i) for i in range(k)), 1 << n))


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the order statistics
    x_(k), x_(n+1-k) chosen from the exact binomial distribution (``median_ci_ranks``), so its
    coverage is >= ``confidence`` for every n >= 6 at 95% (with fewer samples: the full range,
    whose coverage ``median_ci_coverage`` gives)."""
    if not samples:
        raise ValueError("median_ci of no samples")
    xs = sorted(samples)
    k, k_hi = median_ci_ranks(len(xs), confidence)
    return xs[k - 1], xs[k_hi - 1]


def median_ci_halfwidth_pct(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of the median's confidence interval as % of the median."""
    lo, hi = median_ci(samples, confidence)
    med = percentile(samples, 50)
    if med <= 0:
        return math.inf
    return 100.0 * (hi - lo) / 2.0 / med


def sequential_confidence(look: int, confidence: float = 0.95) -> float:
    """The level of look ``look`` (1, 2, ...) of a CI re-tested after every batch (optional stopping).

    Look j spends (1 - confidence)·6/(π²j²) of the miss probability; the spends sum to
    1 - confidence over all looks (Σ 1/j² = π²/6), so by the union bound the intervals of all
    looks cover together, and the one at which sampling stops covers with >= ``confidence``
    whatever the stopping rule (a Bonferroni confidence sequence; cf. Howard et al., "Time-uniform,
    nonparametric, nonasymptotic confidence sequences", Ann. Statist. 2021, for tighter ones)."""
    if look < 1:
        raise ValueError(f"look must be >= 1, got {look}")
    return 1.0 - (1.0 - confidence) * 6.0 / (math.pi**2 * look**2)


def z_two_sided(confidence: float) -> float:
    """The standard normal quantile z with P(|Z| <= z) = confidence (1.96 at 95%)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return statistics.NormalDist().inv_cdf((1 + confidence) / 2)


def parse_size(text: str) -> int:
    """Parse a byte size like ``8``, ``1K``, ``64M``, ``2G`` (binary units, as nccl-tests)."""
    s = str(text).strip().upper().removesuffix("B").removesuffix("I")
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    num, unit = s, ""
    if s and s[-1] in units:
        num, unit = s[:-1], s[-1]
    try:
        value = float(num)
    except ValueError:
        raise ValueError(f"not a byte size: {text!r} (use e.g. 1024, 4K, 64M, 1G)") from None
    if value < 0 or not math.isfinite(value):
        raise ValueError(f"byte size must be a non-negative number, got {text!r}")
    result = value * units[unit]
    if result > 1 << 50:
        raise ValueError(f"byte size {text!r} is larger than 1P; no host can hold that")
    if result != int(result):
        raise ValueError(f"byte size must be a whole number of bytes, got {text!r}")
    return int(result)


def format_number(x, spec: str) -> str:
    """``format(x, spec)`` for a person, for a spec chosen at run time (a literal spec carries Python's ``z``
    instead): a value that rounds to zero from below reads as zero, never "-0.0" or "-0.00%", whatever
    side of zero the CPU's arithmetic left it on."""
    s = format(x, spec)
    if s.lstrip().startswith("-"):
        try:
            if float(s.strip().rstrip("%")) == 0:
                return format(0.0, spec)
        except ValueError:  # "-inf", a grouped "-1,000": not a zero
            pass
    return s


def format_size(n_bytes: int) -> str:
    """Human-readable binary size: 1024 -> '1K', 1536 -> '1536'."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale}{unit}"
    return str(n_bytes)


def format_time_us(us: float) -> str:
    """A time for people, in the unit that reads best, three significant digits: 73.5 µs, 1.98 ms, 161 ms,
    2.04 s (never ``1.61e+05 us``; 999.7 µs is ``1 ms``, not ``1e+03 µs``)."""
    for scale, unit in ((1e6, "s"), (1e3, "ms"), (1.0, "µs")):
        v = us / scale
        if abs(float(f"{v:z.3g}")) >= 1 or scale == 1.0:
            return f"{v:z.3g} {unit}" if abs(v) < 999.5 else f"{v:z.0f} {unit}"
    raise AssertionError("unreachable")


def format_rate_gbps(gbps: float) -> str:
    """A rate for people, three significant digits, never an exponent: ``2.69 MB/s``, ``310 MB/s``, ``1.41 GB/s``
    (999.7 MB/s is ``1 GB/s``); below 1 kB/s in B/s."""
    mb = gbps * 1e3
    if float(f"{mb:z.3g}") >= 1000:
        return f"{gbps:z.3g} GB/s"
    return f"{mb:z.3g} MB/s" if mb >= 1e-3 else f"{gbps * 1e9:z.3g} B/s"


def phase_parts(breakdown: dict[str, float], top: int | None = None) -> str:
    """``timed 94.1 s (23%), warmup 40.2 s (10%), ...``: seconds per phase, largest first (the ``top`` largest)."""
    total = sum(breakdown.values()) or 1.0
    ranked = [(k, v) for k, v in sorted(breakdown.items(), key=lambda kv: -kv[1]) if v]
    return ", ".join(f"{k} {v:z.1f} s ({100 * v / total:z.0f}%)" for k, v in ranked[:top])


def size_sweep(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """Geometric sweep min, min*f, ... <= max (nccl-tests -b/-e/-f)."""
    if min_bytes < 0 or max_bytes < min_bytes:
        raise ValueError(f"need 0 <= min_bytes <= max_bytes, got {min_bytes}..{max_bytes}")
    if factor <= 1 and min_bytes != max_bytes:
        raise ValueError(f"step factor must be > 1, got {factor}")
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(int(s))
        if factor <= 1 or s == 0:
            break
        s = s * factor
    return sizes
