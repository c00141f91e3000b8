"""Synthetic runs of the doctor's probes (``doctor_run``) for the tests of its verdict, its picture and the
first failure."""

from __future__ import annotations

import math
import random


SIZE = 256 << 10


N_SAMPLES = 10


def _samples(rng, median_us: float, noise: float, n: int = N_SAMPLES) -> list[float]:
    return [median_us * math.exp(rng.gauss(0, noise)) for _ in range(n)]


def _link(rng, probe, a, b, pass_no, us, noise):
    return {
        "experiment": "doctor",
        "probe": probe,
        "src": a,
        "dst": b,
        "pass": pass_no,
        "world_size": 0,
        "size_bytes": 64 if probe == "latency" else SIZE,
        "label": f"{probe}-{a}to{b}-pass{pass_no}",
        "samples_us": _samples(rng, us, noise),
    }


def doctor_run(
    hosts,
    *,
    slow=lambda probe, a, b, pass_no: 1.0,
    rank_slow=lambda r: 1.0,
    late_us=lambda r: 0.0,
    comm_slow=lambda r: 1.0,
    noise=0.1,
    seed=0,
    expect=None,
    link_rate=None,
):
    """A run of the doctor's probes on ``hosts`` (one entry per rank): links ~1 ms per message inter-node,
    0.2 ms intra-node, times ``slow(...)``; every all-rank probe with rank r's time x ``rank_slow(r)``.
    In the all_reduce probes rank r also reaches the op ``late_us(r)`` after its barrier exit (its
    arrival, besides a few us of noise), and every rank waits inside the op for the last to arrive; its own time
    in them is also x ``comm_slow(r)``."""
    rng = random.Random(seed)
    n = len(hosts)
    recs = []
    for pass_no in (1, 2):
        for a in range(n):
            for b in range(n):
                if a == b:
                    continue
                base = 1000.0 if hosts[a] != hosts[b] else 200.0
                recs.append(_link(rng, "bandwidth", a, b, pass_no, base * slow("bandwidth", a, b, pass_no), noise))
                if a < b:
                    recs.append(_link(rng, "latency", a, b, pass_no, base / 10 * slow("latency", a, b, pass_no), noise))
                    recs.append(
                        _link(
                            rng,
                            "bidirectional",
                            a,
                            b,
                            pass_no,
                            base * 0.6 * slow("bidirectional", a, b, pass_no),
                            noise,
                        )
                    )
        recs.append(
            {
                "experiment": "doctor",
                "probe": "compute",
                "pass": pass_no,
                "world_size": n,
                "label": f"compute-pass{pass_no}",
                "rank_samples_us": [_samples(rng, 2000 * rank_slow(r), noise) for r in range(n)],
            }
        )
    for size in (4096, 65536):
        own = [_samples(rng, 500 * rank_slow(r) * comm_slow(r), noise) for r in range(n)]
        arrivals = [[late_us(r) + rng.uniform(1, 5) for _ in range(N_SAMPLES)] for r in range(n)]
        last = [max(col) for col in zip(*arrivals)]
        recs.append(
            {
                "experiment": "doctor",
                "probe": "all_reduce",
                "world_size": n,
                "label": f"all_reduce-{size}",
                # from the barrier exit: its arrival, its wait inside the op for the last arrival, its op
                "rank_samples_us": [
                    [a[i] + (last[i] - a[i]) + t for i, t in enumerate(o)] for o, a in zip(own, arrivals)
                ],
                "rank_arrivals_us": arrivals,
            }
        )
    for r in recs:
        r["world_size"] = n
    machine = {
        "suite": {
            "hostnames": list(hosts),
            "hosts": {h: {"env": {"LINK_RATE": link_rate} if link_rate else {}} for h in set(hosts)},
        }
    }
    return {
        "benchmarks": [{"extra_info": r} for r in recs],
        "machine_info": machine,
        "suite": {"config": {"doctor": {"expect_link_rate": expect or ""}}},
    }


THREE_NODES = ["node0", "node0", "node1", "node1", "node2", "node2"]
