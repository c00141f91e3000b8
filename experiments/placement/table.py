"""Tables of the placement experiment. Reads records only.

Most tables pivot one comparison into columns (intra vs inter, flat vs
hierarchical, ...) with time (µs) and busbw (GB/s) per column and each
column's time relative to the first ("x first": > 1 is slower).
"""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Clause, DTYPE_SHORT, fmt_bytes, num, pivot, time_ratio, wrong, wrong_cell


def topology_table(rec: dict) -> str:
    fake = rec.get("fake_nodes") or 0
    lines = [
        f"# topology: {rec['world_size']} ranks on {rec['hosts']} host(s), nodes by hostname "
        f"{rec['nodes']}"
        + (
            f"; SUITE_FAKE_NODES={fake} groups them as {rec['grouping_nodes']} "
            "(grouping only: traffic and hostnames stay real)"
            if fake
            else ""
        ),
        f"#{'rank':>5} {'host':>16} {'node':>5} {'local':>5} {'cpus':>18} {'numa':>6} {'threads':>7} {'gpu':>24}",
    ]
    for i, r in enumerate(rec.get("ranks") or []):
        aff = r.get("affinity") or []
        cpus = _cpulist(aff)
        gpu = r.get("gpu")
        g = "-" if not gpu else f"cuda:{gpu['index']} numa {gpu.get('numa_node', '?')}"
        numa = ",".join(str(x) for x in r.get("numa_nodes_of_affinity") or []) or "-"
        lines.append(
            f" {r['rank']:>5} {r['hostname'][:16]:>16} {rec['nodes'][i]:>5} {r['local_rank']:>5} "
            f"{cpus[:18]:>18} {numa:>6} {r['torch_threads']:>7} {g[:24]:>24}"
        )
    if rec.get("hosts", 1) == 1:
        lines.append(
            "# one host: every rank pair and group is intra-node here; docker compose or Slurm runs "
            "show inter-node cases"
        )
    if rec.get("nvidia_smi_topo"):
        lines.append("# nvidia-smi topo -m:")
        lines += [f"#   {ln}" for ln in rec["nvidia_smi_topo"].rstrip().splitlines()]
    return "\n".join(lines) + "\n"


def _cpulist(cpus: list[int]) -> str:
    if not cpus:
        return "-"
    parts, start, prev = [], cpus[0], cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        if c is not None:
            start = prev = c
    return ",".join(parts)


def copy_table(recs: list[dict]) -> str:
    """Copy bandwidth vs the nominal peak (the record's pct_of_peak; derived here from algbw,
    bytes_moved_factor and nominal_peak_gbps for a record without it)."""
    lines = [
        "# copy bandwidth on rank 0's GPU vs the nominal peak (H2D/D2H: PCIe gen x width per direction; "
        "D2D: memory bandwidth, a copy moves 2 x size)",
        f"#{'copy':>5} {'host mem':>9} {'size(B)':>11} {'time(us)':>10} {'GB/s':>8} {'peak':>8} {'% peak':>7} "
        f"{'link':>24} {'#wrong':>6}",
    ]
    for r in recs:
        moved = r.get("bytes_moved_factor", 1)
        gbps = r["algbw_gbps"] * moved
        peak = r.get("nominal_peak_gbps")
        pct = r.get("pct_of_peak")
        if pct is None and peak:  # derived: 100 x algbw x bytes_moved_factor / nominal peak
            pct = 100 * gbps / peak
        lines.append(
            f" {r['direction']:>5} {r['host_memory']:>9} {r['size_bytes']:>11} {r['time_us']:z10.1f} "
            f"{gbps:z8.2f} {peak if peak is not None else float('nan'):z8.1f} "
            f"{pct if pct is not None else float('nan'):z7.1f} {str(r.get('link'))[:24]:>24} "
            f"{wrong_cell(r)}"
        )
    return "\n".join(lines) + "\n"


def contiguity_table(recs: list[dict]) -> str:
    """Contiguous vs transposed per op, with the measured copy round trip of the transposed view, its share
    of the transposed time, and the transposed - contiguous difference beside it."""
    copies = {(r["size_bytes"], r["dtype"]): r for r in recs if r["op"] == "copy"}
    c = next((r for r in recs if "send_accepts_noncontiguous" in r), None)
    lines = [
        "# contiguous vs non-contiguous (transposed view) tensors; copy = measured round trip "
        "view.copy_(view.contiguous()) of the same view (blocking), share = copy / transposed time",
        "# all_reduce gets the view as it is (a backend copy, if any, shows as transposed - contiguous ~ copy); "
        "send/recv copies explicitly (.contiguous() before send, copy_ into the view after recv)",
    ]
    if c is not None and not c["send_accepts_noncontiguous"]:
        lines.append(f"# {c['send_noncontiguous_error']}")
    lines += [
        f"#{'op':>12} {'size(B)':>9} {'type':>5} {'contiguous':>19} {'transposed':>19} {'x first':>8} "
        f"{'transp -':>10} {'copy':>9} {'copy':>6}",
        f"#{'':>12} {'':>9} {'':>5} {'time(us)':>10} {'busbw':>8} {'time(us)':>10} {'busbw':>8} {'':>8} "
        f"{'contig(us)':>10} {'(us)':>9} {'share':>6}",
    ]
    rows: OrderedDict = OrderedDict()
    for r in recs:
        if r["op"] != "copy":
            rows.setdefault((r["op"], r["size_bytes"], r["dtype"]), {})[r["layout"]] = r
    n_wrong = sum(wrong(r) for r in recs)

    def cell(r):
        return f" {r['time_us']:z10.1f} {num(r['busbw_gbps'], '.3f', 8)}" if r else f" {'-':>10} {'-':>8}"

    for (op, size, dtype), by in rows.items():
        a, t = by.get("contiguous"), by.get("transposed")
        both = a is not None and t is not None and a["time_us"] > 0
        copy = (t or {}).get("copy_roundtrip_us")
        if copy is None and (size, dtype) in copies:
            copy = copies[(size, dtype)]["time_us"]
        share = (t or {}).get("copy_share")
        lines.append(
            f" {op[:12]:>12} {size:>9} {DTYPE_SHORT.get(dtype, dtype):>5}"
            + cell(a)
            + cell(t)
            + f" {num(t['time_us'] / a['time_us'] if both else None, '.2f', 8)}"
            + f" {num(t['time_us'] - a['time_us'] if both else None, '.1f', 10)}"
            + f" {num(copy, '.1f', 9)} {num(None if share is None else 100 * share, '.0f', 5)}%"
        )
    lines.append(f"# #wrong total: {n_wrong} [{'OK' if n_wrong == 0 else 'FAILED'}]")
    return "\n".join(lines) + "\n"


def format_tables(records: list[dict]) -> str:
    by: OrderedDict = OrderedDict()
    for r in records:
        by.setdefault(r.get("table", "other"), []).append(r)
    out = []
    for rec in by.get("topology", []):
        out.append(topology_table(rec))
    one_host = next((r["hosts"] == 1 for r in by.get("topology", [])), None)
    host_note = ("inter-node columns appear in multi-node runs (all ranks share one host here)",) if one_host else ()
    if by.get("pairs"):
        out.append(
            pivot(
                "send/recv between rank pairs on one node vs across nodes (both directions at once; "
                "size per direction)",
                by["pairs"],
                lambda r: f"{r['placement']} {r['ranks']}",
                notes=host_note,
            )
        )
    if by.get("groups"):
        out.append(
            pivot(
                "all_reduce in a group on one node vs spread over nodes (busbw with the group's size)",
                by["groups"],
                lambda r: f"{r['placement']} {r['ranks']}",
                notes=host_note,
            )
        )
    if by.get("hierarchical"):
        h = by["hierarchical"][0]
        fake = h.get("fake_nodes") or 0
        other = next((r for r in by["hierarchical"] if r["algorithm"] != "flat"), None)
        shape = other["algorithm"] if other else "hierarchical"
        title = {
            "hierarchical": "flat vs hierarchical all_reduce (intra-node reduce, leaders all_reduce, "
            "intra-node broadcast; blocking), exact and equal to flat",
            "reduce_broadcast": "flat all_reduce vs reduce + broadcast (one node: no hierarchy; blocking), "
            "exact and equal to flat",
            "leaders_all_reduce": "flat all_reduce vs the leaders' all_reduce (one rank per node: no "
            "intra-node level; blocking), exact and equal to flat",
        }.get(shape, shape)
        notes = [f"nodes: {h['grouping_nodes']}" + (f" (SUITE_FAKE_NODES={fake}: grouping only)" if fake else "")]
        if other and other.get("hierarchy"):
            notes.append(f"{shape}: {other['hierarchy']}")
        if shape == "reduce_broadcast":
            notes.append("SUITE_FAKE_NODES=2 groups the ranks as two nodes for a two-level run")
        out.append(pivot(title, by["hierarchical"], lambda r: r["algorithm"], notes=tuple(notes)))
    if by.get("affinity"):
        a = by["affinity"][0]
        out.append(
            pivot(
                f"rank-to-core pinning (every thread of a rank, Gloo's workers included): all_reduce, "
                f"{a['cpus_available']} CPUs per rank before pinning",
                by["affinity"],
                lambda r: r["pinning"],
                notes=(
                    f"torch threads {a['torch_threads']} (context: torch.set_num_threads sizes ATen's "
                    "pool, not Gloo's worker threads, so it is no axis here)",
                ),
            )
        )
    if by.get("contiguity"):
        out.append(contiguity_table(by["contiguity"]))
    if by.get("gpu_placement"):
        out.append(
            pivot("GPU placement: all_reduce by tensor home and backend", by["gpu_placement"], lambda r: r["placement"])
        )
    if by.get("gpu_staging"):
        out.append(
            pivot(
                "explicit staging D2H -> Gloo all_reduce -> H2D (blocking)",
                by["gpu_staging"],
                lambda r: f"{r['host_memory']} nb={'on' if r['non_blocking'] else 'off'}",
            )
        )
    if by.get("copy"):
        out.append(copy_table(by["copy"]))
    return "\n".join(out)


_HEADLINE_PAIRS = (
    ("pairs", "placement", "intra", "inter", "send/recv across nodes takes {r}x the time within a node"),
    ("groups", "placement", "intra", "inter", "an all_reduce group spread over nodes takes {r}x one node's time"),
    ("affinity", "pinning", "unpinned", "pinned", "pinning ranks to cores gives {r}x the unpinned time"),
    ("contiguity", "layout", "contiguous", "transposed", "a transposed tensor takes {r}x a contiguous one's time"),
)
"""The comparisons the headline may say, first found first: (table, field, base, other, sentence)."""


def headline(run: dict, recs: list[dict]) -> Clause | None:
    """The first two placement comparisons the run has, as time ratios at their largest shared size."""
    said, numbers = [], {}
    for table, fld, base, other, text in _HEADLINE_PAIRS:
        rs = [r for r in recs if r.get("table") == table]
        got = time_ratio(rs, lambda r, f=fld: r.get(f), base, other)
        if got is not None and len(said) < 2:
            ratio, a, _ = got
            said.append(text.format(r=f"{ratio:z.2f}") + f" ({a['op']}, {fmt_bytes(a['size_bytes'])})")
            numbers[f"{table}_time_ratio"] = ratio
    return Clause(text="; ".join(said), numbers=numbers) if said else None
