"""Tables of the point-to-point experiment (records only; never measures).

How to read them:

- *ping-pong*: one-way latency (sample / (2K), K back-to-back round trips per sample,
  OSU-style) and bandwidth (size / one-way time) from rank 0 to each peer, vs message
  size; ``K`` is the round trips per sample. ``x`` after a peer marks a cross-node pair.
- *pair matrix*: one-way latency (small size) and bandwidth (large size) for every
  ordered pair (row = initiator); ``*`` marks cross-node pairs, ``!`` a pair more than
  1.5x slower than the median pair (a slow link).
- *window*: time per message of one direction and its bandwidth (bi: both directions at once, each
  direction's bandwidth, and ``bi both`` = the two together, OSU ``osu_bibw``).
- *ring*, *producer*, *control*, *batching* (and any pattern without a table of its own): the same
  work done different ways, one column per variant of the pattern (suite/ops/p2p/); the fastest is
  marked ``<``; ``speed-up`` is relative to the first column.
- *deadlock*: where both-ranks-send-first blocks in the backend (no progress within a
  bound T scaled to the expected transfer time, nor within a multiple of it), steps that
  were only slow (done after T), and the correct orderings timed at that size.
"""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Clause, fmt_bytes, metrics, pingpong_records, wrong, wrong_cell


def _us(t: float | None) -> str:
    return f"{t:z10.1f}" if t is not None else f"{'-':>10}"


def _gb(x: float | None) -> str:
    return f"{x:z8.3f}" if x is not None else f"{'-':>8}"


def _by(recs: list[dict], pattern: str) -> list[dict]:
    return [r for r in recs if r.get("pattern") == pattern]


def _header(recs: list[dict], title: str) -> str:
    r = recs[0]
    return (
        f"# p2p {title}  ({r['backend']}, {r['device']}, {r['world_size']} ranks, "
        f"{r['iterations']} iters, {r['dtype']})"
    )


def _wrong_line(recs: list[dict]) -> str:
    w = sum(wrong(r) for r in recs)
    return f"# #wrong total: {w} [{'OK' if w == 0 else 'FAILED'}]"


def pingpong_table(recs: list[dict]) -> str:
    peers = sorted({r["dst"] for r in recs})
    cross = {r["dst"]: r.get("cross_node", False) for r in recs}
    cell = {(r["size_bytes"], r["dst"]): r for r in recs}
    names = [f"0<->{p}{' x' if cross[p] else ''}" for p in peers]
    lines = [
        _header(
            recs,
            "ping-pong: one-way latency = sample / (2K), a sample = K back-to-back round trips "
            "(OSU osu_latency); bandwidth = size / one-way time",
        ),
        f"#{'size':>11} " + " ".join(f"{n:>26}" for n in names),
        f"#{'(B)':>11} " + " ".join(f"{'lat(us)':>10} {'GB/s':>8} {'K':>6}" for _ in peers),
    ]
    for size in sorted({r["size_bytes"] for r in recs}):
        row = []
        for p in peers:
            r = cell.get((size, p))
            k = r.get("round_trips_per_sample") if r else None
            row.append(f"{_us(r and r['time_us'])} {_gb(r and r['algbw_gbps'])} {k if k else '-':>6}")
        lines.append(f" {size:>11} " + " ".join(row))
    return "\n".join(lines + [_wrong_line(recs)]) + "\n"


def pair_matrix_table(recs: list[dict]) -> str:
    n = recs[0]["world_size"]
    out = []
    sizes = sorted({r["size_bytes"] for r in recs})
    for size in sizes:
        rs = [r for r in recs if r["size_bytes"] == size]
        # the smallest size shows latency, the largest bandwidth
        key, unit = (
            ("algbw_gbps", "bandwidth, GB/s")
            if len(sizes) > 1 and size == sizes[-1]
            else ("time_us", "one-way latency, us")
        )
        cell = {(r["src"], r["dst"]): r for r in rs}
        vals = [r[key] for r in rs]
        med = metrics.percentile(vals, 50) if vals else 0.0
        lines = [
            _header(
                rs,
                f"pair matrix at {metrics.format_size(size)}B: {unit} (row = initiator, "
                "* cross-node, ! >1.5x slower than the median pair)",
            ),
            "#" + f"{'src/dst':>7} " + " ".join(f"{d:>10}" for d in range(n)),
        ]
        for a in range(n):
            row = []
            for b in range(n):
                r = cell.get((a, b))
                if r is None:
                    row.append(f"{'-':>10}")
                    continue
                v = r[key]
                slow = (v > 1.5 * med) if key == "time_us" else (v < med / 1.5)
                mark = ("*" if r.get("cross_node") else "") + ("!" if slow else "")
                row.append(f"{v:8.{1 if key == 'time_us' else 3}f}{mark:<2}")
            lines.append(f" {a:>7} " + " ".join(row))
        lines.append(_wrong_line(rs))
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def _directions(r: dict, order: list[str]) -> int:
    """1 or 2 (a bidirectional window); a run stored before records said so: its time normalisation's words,
    or before those the order the variants ran in (unidirectional first)."""
    if r.get("directions"):
        return r["directions"]
    if r.get("time_normalisation"):
        return 2 if "both directions at once" in r["time_normalisation"] else 1
    return 1 + order.index(r["variant"])


def window_table(recs: list[dict]) -> str:
    order = _variants(recs)
    cell = {(r["size_bytes"], _directions(r, order)): r for r in recs}
    r0 = recs[0]
    lines = [
        _header(
            recs,
            f"window: isend/irecv window, ranks {r0['src']}<->{r0['dst']}"
            f"{' (cross-node)' if r0.get('cross_node') else ''}; time per message and bandwidth of one "
            "direction; bi both = both directions together",
        ),
        f"#{'size':>11} {'window':>6} {'uni(us)':>10} {'uni GB/s':>8} {'bi(us)':>10} {'bi GB/s':>8} {'bi both':>8}",
    ]
    for size in sorted({r["size_bytes"] for r in recs}):
        u, b = cell.get((size, 1)), cell.get((size, 2))
        w = (u or b)["window"]
        lines.append(
            f" {size:>11} {w:>6} {_us(u and u['time_us'])} {_gb(u and u['algbw_gbps'])}"
            f" {_us(b and b['time_us'])} {_gb(b and b['algbw_gbps'])} {_gb(b and b.get('aggregate_algbw_gbps'))}"
        )
    return "\n".join(lines + [_wrong_line(recs)]) + "\n"


def comparison_table(
    recs: list[dict], title: str, variants: list[str], row_key: str = "size_bytes", row_name: str = "size(B)"
) -> str:
    """Rows by ``row_key``, one time column per variant, the fastest marked, speed-up vs the first."""
    cell = {(r[row_key], r["variant"]): r for r in recs}
    lines = [
        _header(recs, title),
        f"#{row_name:>11} " + " ".join(f"{v[:20]:>21}" for v in variants) + f" {'fastest':>21} {'speed-up':>9}",
        f"#{'':>11} " + " ".join(f"{'time(us)':>21}" for _ in variants),
    ]
    for key in sorted({r[row_key] for r in recs}):
        times = {v: cell[(key, v)]["time_us"] for v in variants if (key, v) in cell}
        best = min(times, key=times.get) if times else None
        row = []
        for v in variants:
            t = times.get(v)
            row.append(f"{'-':>21}" if t is None else f"{t:z20.1f}{'<' if v == best else ' '}")
        first = times.get(variants[0])
        speed = f"{first / times[best]:z8.2f}x" if best and first else f"{'-':>9}"
        lines.append(f" {key:>11} " + " ".join(row) + f" {best or '-':>21} {speed:>9}")
    return "\n".join(lines + [_wrong_line(recs)]) + "\n"


def barrier_table(recs: list[dict]) -> str:
    cell = {(r["size_bytes"], bool(r["barrier_each_step"])): r for r in recs}
    lines = [
        _header(
            recs,
            f"barrier cost: ring steps (isend/irecv) with and without a barrier after each "
            f"({recs[0]['steps']} steps); time per step",
        ),
        f"#{'size':>11} {'no barrier':>10} {'barrier':>10} {'overhead':>10} {'ratio':>7}",
    ]
    for size in sorted({r["size_bytes"] for r in recs}):
        a, b = cell.get((size, False)), cell.get((size, True))
        over = f"{b['time_us'] - a['time_us']:z10.1f}" if a and b else f"{'-':>10}"
        ratio = f"{b['time_us'] / a['time_us']:z6.2f}x" if a and b and a["time_us"] > 0 else f"{'-':>7}"
        lines.append(f" {size:>11} {_us(a and a['time_us'])} {_us(b and b['time_us'])} {over} {ratio}")
    return "\n".join(lines + [_wrong_line(recs)]) + "\n"


def deadlock_table(recs: list[dict]) -> str:
    r = recs[0]
    blocked = r.get("deadlock_blocked_from_bytes")
    completed = r.get("deadlock_completed_bytes") or []
    lines = [_header(recs, "deadlock demonstration: both ranks call blocking send first")]
    lines.append(
        f"# isolated pair ({r.get('deadlock_backend')}, {r.get('deadlock_device')}), sizes probed "
        f"ascending: {', '.join(metrics.format_size(s) for s in r.get('deadlock_sizes_probed') or []) or '-'}"
    )
    lines.append(f"#   completed at: {', '.join(metrics.format_size(s) for s in completed) or 'no size'}")
    lines.append(
        f"#   bound per step T = max({r.get('deadlock_floor_s', 0):zg} s, {r.get('deadlock_slack', 0):zg} x "
        f"size / rate); rate {(r.get('deadlock_rate_bytes_per_s') or 0) / 1e6:z.1f} MB/s "
        f"({(r.get('deadlock_rate_source') or '-').split(':')[0]}); slow = progress only after T, "
        f"blocked = none within {r.get('deadlock_blocked_factor', 0):zg} x T"
    )
    if blocked is not None:
        lines.append(
            f"#   BLOCKED from {metrics.format_size(blocked)}B: no progress within "
            f"{r['deadlock_no_progress_within_s']:z.1f} s, none after {r['deadlock_no_progress_for_s']:z.1f} s "
            f"either; pair killed"
        )
    else:
        lines.append("#   no probed size blocked")
    slow = [e for e in r.get("deadlock_steps") or [] if e["outcome"] == "slow"]
    lines.append(
        "#   slow (late, then completed): "
        + (
            ", ".join(
                f"{e['step']} at {metrics.format_size(e['bytes'])}B took {e['took_s']:z.1f} s (T {e['bound_s']:z.1f} s)"
                for e in slow
            )
            or "none"
        )
    )
    orders = r.get("deadlock_correct_orderings") or {}
    lines.append(
        f"#   correct orderings at {metrics.format_size(r.get('deadlock_correct_orderings_bytes') or 0)}B in the "
        "pair: " + ", ".join(f"{k} {v}" for k, v in orders.items())
    )
    lines.append(f"#   probe wall time {r.get('deadlock_elapsed_s', 0):z.1f} s")
    lines.append(f"#{'ordering (ranks 0<->1)':>24} {'size(B)':>11} {'time(us)':>10} {'GB/s':>8} {'#wrong':>6}")
    for x in recs:
        lines.append(
            f" {x['variant']:>24} {x['size_bytes']:>11} {_us(x['time_us'])} {_gb(x['algbw_gbps'])} {wrong_cell(x)}"
        )
    return "\n".join(lines + [_wrong_line(recs)]) + "\n"


def _variants(rs: list[dict]) -> list[str]:
    """A table's columns: the variants its records say share it (``columns``, the pattern's order; one that
    did not run shows "-"), or for a run stored before records said so, the variants in the order they ran."""
    declared = next((r["columns"] for r in rs if r.get("columns")), None)
    return list(declared) if declared else list(dict.fromkeys(r["variant"] for r in rs))


def _producer_tables(rs: list[dict]) -> list[str]:
    """One table per meaning of the size: the variants that hand every consumer the same buffer (isend to
    each vs broadcast), and those that hand each its own chunk (isend to each vs scatter)."""
    by_size: dict[str, list[dict]] = {}
    for r in rs:
        by_size.setdefault(r["size_definition"], []).append(r)
    return [
        comparison_table(group, f"producer -> consumers, size = {definition}", _variants(group))
        for definition, group in by_size.items()
    ]


def _batching_tables(rs: list[dict]) -> list[str]:
    out = []
    for k in sorted({r["k_messages"] for r in rs}):
        ks = [r for r in rs if r["k_messages"] == k]
        out.append(
            comparison_table(
                ks,
                f"batching: {k} messages of {metrics.format_size(ks[0]['message_bytes'])}B "
                f"rank {ks[0]['src']}->{ks[0]['dst']} (time for all {k})",
                _variants(ks),
                row_key="message_bytes",
                row_name="msg(B)",
            )
        )
    return out


SECTIONS = {
    "pingpong": lambda rs: [pingpong_table(rs)],
    "pair_matrix": lambda rs: [pair_matrix_table(rs)],
    "window": lambda rs: [window_table(rs)],
    "ring": lambda rs: [
        comparison_table(rs, "ring: send to next, receive from previous (time per step)", _variants(rs))
    ],
    "exchange": lambda rs: [deadlock_table(rs)],
    "producer": _producer_tables,
    "control": lambda rs: [
        comparison_table(
            rs,
            "control messages: 4-byte signal vs p2p ready/go vs barrier",
            _variants(rs),
            row_key="world_size",
            row_name="ranks",
        )
    ],
    "barrier_cost": lambda rs: [barrier_table(rs)],
    "batching": _batching_tables,
}
"""Pattern -> its tables. A pattern of suite/ops/p2p/ without an entry gets one comparison table of its
variants (``_section``), so a new pattern is in the tables without an edit here."""


def _section(pattern: str, rs: list[dict]) -> list[str]:
    if pattern in SECTIONS:
        return SECTIONS[pattern](rs)
    return [comparison_table(rs, f"{pattern}: one column per variant (time per iteration)", _variants(rs))]


def format_tables(records: list[dict]) -> str:
    """Every p2p table for the records of one run: the sections of each pattern, in the order they ran (the
    order of suite/ops/p2p's PATTERNS). Everything comes from the records: reading a run imports no torch."""
    out = []
    by_ws: OrderedDict = OrderedDict()
    for r in records:
        by_ws.setdefault(r["world_size"], []).append(r)
    for recs in by_ws.values():
        for pattern in dict.fromkeys(r["pattern"] for r in recs):
            if rs := _by(recs, pattern):
                out += _section(pattern, rs)
    return "\n".join(o for o in out if o)


def headline(run: dict, recs: list[dict]) -> Clause | None:
    """The ping-pong's one-way latency at its smallest size and its rate at its largest (the link's rate
    the collectives' sentence is set against); None without a ping-pong (the core's sentence)."""
    pp = pingpong_records(recs)
    if not pp:
        return None
    small = min(pp, key=lambda r: (r["size_bytes"], r["time_us"]))
    big = max(pp, key=lambda r: (r["size_bytes"], r["busbw_gbps"]))
    pair = f" {small['src']}<->{small['dst']}" if "src" in small and "dst" in small else ""
    return Clause(
        text=f"ping-pong{pair} takes {metrics.format_time_us(small['time_us'])} one-way at "
        f"{fmt_bytes(small['size_bytes'])} and moves {metrics.format_rate_gbps(big['busbw_gbps'])} at "
        f"{fmt_bytes(big['size_bytes'])} (one-way time, OSU osu_latency)",
        numbers={"latency_us": small["time_us"], "link_gbps": big["busbw_gbps"], "size_bytes": big["size_bytes"]},
    )
