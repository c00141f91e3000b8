"""Tables of the backends experiment: capability matrix, lanes side by side with
ratios, all_reduce algorithms, Gloo transport path. Reads records only."""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Clause, DTYPE_SHORT, fmt_bytes, num, pivot, tail_cell, time_ratio, wrong, wrong_cell


def lanes_of(recs: list[dict]) -> list[str]:
    out: list[str] = []
    for r in recs:
        lane = r.get("lane") or f"{r['backend']}/{r['device']}"
        if lane not in out:
            out.append(lane)
    return out


def lane_of(r: dict) -> str:
    return r.get("lane") or f"{r['backend']}/{r['device']}"


def _missing(recs: list[dict]) -> list[str]:
    seen: OrderedDict = OrderedDict()
    for r in recs:
        for m in r.get("lanes_missing", []):
            seen.setdefault(f"{m['backend']}/{m['device']}", m["reason"])
    return [f"{k} ({v})" for k, v in seen.items()]


def capability_table(caps: list[dict]) -> str:
    lines = []
    for rec in caps:
        rows = rec.get("capabilities", [])
        dtypes = list(OrderedDict.fromkeys(r["dtype"] for r in rows if r["dtype"] != "none"))
        lines.append(
            f"# capability matrix: {lane_of(rec)}, {rec['world_size']} ranks "
            f"(probed at run time: one tiny op per cell; yes = runs, NO[k] = rejected, reason k below)"
        )
        lines.append(f"#{'op':>34} " + " ".join(f"{DTYPE_SHORT.get(d, d):>6}" for d in dtypes))
        table: OrderedDict = OrderedDict()
        for r in rows:
            name = (
                r["variant"]
                + (f"({r['redop']})" if r["redop"] != "none" else "")
                + (" in-place" if r["in_place"] and r["variant"] not in ("all_reduce", "broadcast", "reduce") else "")
            )
            table.setdefault(name, {})[r["dtype"]] = r
        reasons: OrderedDict = OrderedDict()
        for name, cells in table.items():
            out = []
            for d in dtypes if "none" not in cells else ["none"]:
                c = cells.get(d)
                if c is None:
                    out.append(f"{'':>6}")
                elif c["supported"]:
                    out.append(f"{'yes':>6}")
                else:
                    k = reasons.setdefault(c["reason"], len(reasons) + 1)
                    out.append(f"{'NO[' + str(k) + ']':>6}")
            lines.append(f" {name[:34]:>34} " + " ".join(out))
        for reason, k in reasons.items():
            lines.append(f"#  [{k}] {reason}")
        supported = sum(1 for r in rows if r["supported"])
        lines.append(f"# {supported}/{len(rows)} forms supported on {lane_of(rec)}")
    missing = _missing(caps)
    if missing:
        lines.append("# not in this run: " + "; ".join(missing))
    return "\n".join(lines) + "\n"


def ratio_over(rec: dict, lane: str) -> dict | None:
    """The entry of ``rec``'s ``ratios`` (experiments/backends/ratios.py) over ``lane``; None where it has none."""
    return next((r for r in rec.get("ratios") or () if r["over"] == lane), None)


def interval_text(ratio: float, lo: float, hi: float) -> str:
    """``0.162 [0.14-0.18]``: a ratio and its interval, three significant digits each."""
    return f"{ratio:z.3g} [{lo:z.3g}-{hi:z.3g}]"


def _ratio_cell(rec: dict, first: dict, first_lane: str) -> str:
    got = ratio_over(rec, first_lane)
    if got is None:  # timed another way than the first lane (or stored before records carried ratios)
        return f"{rec['time_us'] / first['time_us']:z.2f}"
    return interval_text(got["ratio"], got["ci_low"], got["ci_high"])


def compare_table(recs: list[dict], missing: list[str]) -> str:
    lanes = lanes_of(recs)
    world = recs[0]["world_size"]
    sizes = sorted({r["size_bytes"] for r in recs if r["size_bytes"]})
    head = (
        f"backends side by side ({world} ranks, timing={recs[0]['timing_mode']}, largest "
        f"{len(sizes)} sizes of the sweep; ratio = time(lane) / time({lanes[0]}), < 1 is faster; in brackets its "
        "95% interval, a bootstrap of both cases' samples)"
    )
    notes = ()
    if len(lanes) < 2:
        notes = (
            f"only one lane ran ({lanes[0]}): ratios need at least two backends. "
            + ("Not available here: " + "; ".join(missing) if missing else ""),
        )
    return pivot(
        head,
        recs,
        col=lane_of,
        row=lambda r: (r.get("variant", r["op"]), r["size_bytes"], r["dtype"]),
        notes=notes,
        op_width=22,
        footer="busbw in GB/s (nccl-tests factors); ",
        ratio_cell=_ratio_cell,
        ratio_width=20,
    )


BARE_LANE = "mpi4py/numpy"
MPI_LANE = "mpi/cpu"


def process_group_table(recs: list[dict]) -> str | None:
    """MPI through torch against the same calls on mpi4py directly: what the suite's Python process group costs
    per op; None without bare-lane records that carry a ratio over the MPI lane."""
    rows = [(r, ratio_over(r, MPI_LANE)) for r in recs if lane_of(r) == BARE_LANE]
    rows = [(r, got) for r, got in rows if got is not None]
    if not rows:
        return None
    mpi = {(r.get("variant", r["op"]), r["size_bytes"], r["dtype"]): r for r in recs if lane_of(r) == MPI_LANE}
    r0 = rows[0][0]
    lines = [
        f"# the MPI process group's own cost ({r0['world_size']} ranks, timing={r0['timing_mode']}): {MPI_LANE} "
        f"(torch over the suite's mpi4py group) against {BARE_LANE} (the same calls on mpi4py, numpy views)",
        f"# {r0.get('mpi_library', '?')}, wheel {r0.get('mpi_wheel', '?')}, mpi4py {r0.get('mpi4py_version', '?')}; "
        f"the bare lane is {r0.get('floor_note', 'not the floor')}",
        f"#{'op':>22} {'size(B)':>9} {'type':>5} {'torch(us)':>10} {'bare(us)':>10} {'torch/bare [95% CI]':>19} "
        f"{'extra(us)':>10}",
    ]
    for r, got in rows:
        key = (r.get("variant", r["op"]), r["size_bytes"], r["dtype"])
        m = mpi.get(key)
        # ratios are time(bare) / time(mpi): its inverse is how many times the bare call the group takes
        ratio = interval_text(1 / got["ratio"], 1 / got["ci_high"], 1 / got["ci_low"])
        extra = f"{m['time_us'] - r['time_us']:z10.1f}" if m else f"{'-':>10}"
        lines.append(
            f" {key[0][:22]:>22} {key[1]:>9} {DTYPE_SHORT.get(key[2], key[2]):>5} "
            f"{(m or {}).get('time_us', float('nan')):z10.1f} {r['time_us']:z10.1f} {ratio:>19} {extra}"
        )
    return "\n".join(lines) + "\n"


def algorithm_table(recs: list[dict]) -> str:
    """The all_reduce algorithms beside the ring's own step (a send_recv of one ring chunk), every column
    from this table's records: the same timing mode, and the bytes per link each record states."""
    steps = {(lane_of(r), r["dtype"], r["all_reduce_size_bytes"]): r for r in recs if r["op"] == "send_recv"}
    recs = [r for r in recs if r["op"] != "send_recv"]
    n = recs[0]["world_size"]
    factor = 2 * (n - 1) / n
    modes = sorted({r["timing_mode"] for r in recs} | {r["timing_mode"] for r in steps.values()})
    lines = [
        f"# all_reduce algorithms ({n} ranks, timing={'/'.join(modes)} for every column, largest sizes of the "
        f"sweep): the backend's all_reduce vs a ring on p2p ops vs reduce+broadcast; results exact and equal to "
        f"the backend's",
        f"# busbw = algbw x 2(n-1)/n = algbw x {factor:z.3f} = bytes each rank sends / time for the ring, which sends "
        f"2(n-1) = {2 * (n - 1)} messages of one chunk (<= ceil(S/n)) per rank; reduce+broadcast (flat model) "
        f"moves the whole S per message, (n-1) into and out of the root.",
        "# p2p step = one ring step timed alone: send_recv of one chunk (rank r -> r+1); the ring busbw compares "
        "with its GB/s at the chunk size; ring/steps = t(ring) / (2(n-1) x t(step)): 1 = nothing beyond its steps.",
    ]
    algos = list(OrderedDict.fromkeys(r["algorithm"] for r in recs))
    cols = "".join(f" {a[:19]:>19}" for a in algos)
    lines.append(
        f"#{'lane':>12} {'size(B)':>9} {'type':>5}{cols} {'ring/ar':>8} {'naive/ar':>8} {'p2p step':>28} {'ring/':>6}"
    )
    lines.append(
        f"#{'':>12} {'':>9} {'':>5}"
        + "".join(f" {'time(us)':>10} {'busbw':>8}" for _ in algos)
        + f" {'(time)':>8} {'(time)':>8} {'chunk(B)':>9} {'time(us)':>10} {'GB/s':>7} {'steps':>6}"
    )
    rows: OrderedDict = OrderedDict()
    for r in recs:
        rows.setdefault((lane_of(r), r["dtype"], r["size_bytes"]), {})[r["algorithm"]] = r
    n_wrong = sum(wrong(r) for r in steps.values())
    for (lane, dtype, size), by in rows.items():
        cells = []
        for a in algos:
            r = by.get(a)
            cells.append(f" {r['time_us']:z10.1f} {num(r['busbw_gbps'], '.3f', 8)}" if r else f" {'-':>10} {'-':>8}")
            n_wrong += wrong(r)
        ar = by.get("all_reduce")

        def ratio(a, by=by, ar=ar):
            r = by.get(a)
            return f" {r['time_us'] / ar['time_us']:z8.2f}" if r and ar and ar["time_us"] > 0 else f" {'-':>8}"

        step, ring = steps.get((lane, dtype, size)), by.get("ring_p2p")
        if step:
            cells.append(f" {step['size_bytes']:>9} {step['time_us']:z10.1f} {num(step['busbw_gbps'], '.3f', 7)}")
        else:
            cells.append(f" {'-':>9} {'-':>10} {'-':>7}")
        per_ring = (
            ring["time_us"] / (ring["link_messages"] * step["time_us"])
            if step and ring and ring.get("link_messages") and step["time_us"] > 0
            else None
        )
        lines.append(
            f" {lane[:12]:>12} {size:>9} {DTYPE_SHORT.get(dtype, dtype):>5}"
            + "".join(cells[: len(algos)])
            + ratio("ring_p2p")
            + ratio("reduce_broadcast")
            + cells[-1]
            + f" {num(per_ring, '.2f', 6)}"
        )
    lines.append(f"# #wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"


def gloo_path_table(recs: list[dict]) -> str:
    lines = [
        "# Gloo TCP transport by interface (GLOO_SOCKET_IFNAME, read when a group is created): all_reduce sum "
        "through each interface that leads to the other hosts over a path of its own",
        f"#{'path':>12} {'iface':>8} {'network':>18} {'size(B)':>9} {'type':>5} {'time(us)':>10} {'p95(us)':>10} "
        f"{'busbw':>8} {'#wrong':>6}",
    ]
    for r in recs:
        lines.append(
            f" {r['gloo_path']:>12} {r['gloo_socket_ifname']:>8} {r.get('gloo_network', '?'):>18} "
            f"{r['size_bytes']:>9} {DTYPE_SHORT.get(r['dtype'], r['dtype']):>5} {r['time_us']:z10.1f} "
            f"{tail_cell(r, 'p95_us', '.1f', 10)} {num(r['busbw_gbps'], '.3f', 8)} {wrong_cell(r)}"
        )
    return "\n".join(lines) + "\n"


def format_tables(records: list[dict]) -> str:
    by: dict[str, list[dict]] = {}
    for r in records:
        by.setdefault(r.get("table", "compare"), []).append(r)
    out = []
    caps = by.get("capability", [])
    if caps:
        out.append(capability_table(caps))
    compare = by.get("compare", [])
    if compare:
        out.append(compare_table(compare, _missing(caps)))
        own_cost = process_group_table(compare)
        if own_cost:
            out.append(own_cost)
    if by.get("algorithm"):
        out.append(algorithm_table(by["algorithm"]))
    if by.get("gloo_path"):
        out.append(gloo_path_table(by["gloo_path"]))
    return "\n".join(out)


def headline(run: dict, recs: list[dict]) -> Clause | None:
    """Each other lane's time against the first's for the same op at the largest size; with one lane, the
    forms its capability matrix found supported."""
    compare = [r for r in recs if r.get("table", "compare") == "compare"]
    lanes = lanes_of(compare)
    if len(lanes) >= 2:
        said, numbers = [], {}
        for lane in lanes[1:]:
            got = time_ratio(compare, lane_of, lanes[0], lane)
            if got is not None:
                ratio, a, b = got
                ci = ratio_over(b, lanes[0])
                within = f" [95% CI {ci['ci_low']:z.2f}-{ci['ci_high']:z.2f}]" if ci else ""
                said.append(
                    f"{lane} takes {ratio:z.2f}x{within} {lanes[0]}'s time ({a['op']}, {fmt_bytes(a['size_bytes'])})"
                )
                numbers[f"{lane}_time_ratio"] = ratio
        if said:
            return Clause(text="; ".join(said), numbers=numbers)
    rows = [c for r in recs if r.get("table") == "capability" for c in r.get("capabilities", [])]
    ran = f"only {lanes[0]} ran, so no side-by-side ratio" if lanes else "no lane was timed"
    if not rows:
        return Clause(text=ran)
    supported = sum(1 for c in rows if c["supported"])
    return Clause(
        text=f"{ran}; {supported} of {len(rows)} op/dtype forms run (capability probes)",
        numbers={"forms_supported": supported, "forms": len(rows)},
    )
