"""Tables of the placement experiment. Reads records only.

Most tables pivot one comparison into columns (intra vs inter, flat vs
hierarchical, ...) with time (µs) and busbw (GB/s) per column and each
column's time relative to the first ("x first": > 1 is slower).
"""

from __future__ import annotations

from collections import OrderedDict

from suite.tables import pivot, wrong_cell

def topology_table(rec: dict) -> str:
    fake = rec.get("fake_nodes") or 0
    lines = [f"# topology: {rec['world_size']} ranks on {rec['hosts']} host(s), nodes by hostname "
             f"{rec['nodes']}" + (f"; SUITE_FAKE_NODES={fake} groups them as {rec['grouping_nodes']} "
                                  "(grouping only: traffic and hostnames stay real)" if fake else ""),
             f"#{'rank':>5} {'host':>16} {'node':>5} {'local':>5} {'cpus':>18} {'numa':>6} {'threads':>7} {'gpu':>24}"]
    for i, r in enumerate(rec.get("ranks") or []):
        aff = r.get("affinity") or []
        cpus = _cpulist(aff)
        gpu = r.get("gpu")
        g = "-" if not gpu else f"cuda:{gpu['index']} numa {gpu.get('numa_node', '?')}"
        numa = ",".join(str(x) for x in r.get("numa_nodes_of_affinity") or []) or "-"
        lines.append(f" {r['rank']:>5} {r['hostname'][:16]:>16} {rec['nodes'][i]:>5} {r['local_rank']:>5} "
                     f"{cpus[:18]:>18} {numa:>6} {r['torch_threads']:>7} {g[:24]:>24}")
    if rec.get("hosts", 1) == 1:
        lines.append("# one host: every rank pair and group is intra-node here; docker compose or Slurm runs "
                     "show inter-node cases")
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
    lines = ["# copy bandwidth on rank 0's GPU vs the nominal peak (H2D/D2H: PCIe gen x width per direction; "
             "D2D: memory bandwidth, a copy moves 2 x size)",
             f"#{'copy':>5} {'host mem':>9} {'size(B)':>11} {'time(us)':>10} {'GB/s':>8} {'peak':>8} {'% peak':>7} "
             f"{'link':>24} {'#wrong':>6}"]
    for r in recs:
        moved = r.get("bytes_moved_factor", 1)
        gbps = r["algbw_gbps"] * moved
        peak = r.get("nominal_peak_gbps")
        pct = r.get("pct_of_peak")
        if pct is None and peak:  # derived: 100 x algbw x bytes_moved_factor / nominal peak
            pct = 100 * gbps / peak
        lines.append(f" {r['direction']:>5} {r['host_memory']:>9} {r['size_bytes']:>11} {r['time_us']:10.1f} "
                     f"{gbps:8.2f} {peak if peak is not None else float('nan'):8.1f} "
                     f"{pct if pct is not None else float('nan'):7.1f} {str(r.get('link'))[:24]:>24} "
                     f"{wrong_cell(r)}")
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
        out.append(pivot("send/recv between rank pairs on one node vs across nodes (both directions at once; "
                         "size per direction)", by["pairs"], lambda r: f"{r['placement']} {r['ranks']}",
                         notes=host_note))
    if by.get("groups"):
        out.append(pivot("all_reduce in a group on one node vs spread over nodes (busbw with the group's size)",
                         by["groups"], lambda r: f"{r['placement']} {r['ranks']}", notes=host_note))
    if by.get("hierarchical"):
        h = by["hierarchical"][0]
        fake = h.get("fake_nodes") or 0
        out.append(pivot("flat vs hierarchical all_reduce (intra-node reduce, leaders all_reduce, intra-node "
                         "broadcast; blocking), exact and equal to flat",
                         by["hierarchical"], lambda r: r["algorithm"],
                         notes=(f"nodes: {h['grouping_nodes']}" + (f" (SUITE_FAKE_NODES={fake}: grouping only)"
                                                                   if fake else ""),
                                *(("one node: the hierarchy is reduce + broadcast inside it (the leaders' "
                                   "all_reduce has one rank); SUITE_FAKE_NODES=2 groups the ranks as two nodes",)
                                  if len(h["grouping_nodes"]) == 1 else ()))))
    if by.get("affinity"):
        a = by["affinity"][0]
        out.append(pivot(f"rank-to-core pinning (every thread of a rank, Gloo's workers included): all_reduce, "
                         f"{a['cpus_available']} CPUs per rank before pinning", by["affinity"],
                         lambda r: r["pinning"],
                         notes=(f"torch threads {a['torch_threads']} (context: torch.set_num_threads sizes ATen's "
                                "pool, not Gloo's worker threads, so it is no axis here)",)))
    if by.get("contiguity"):
        c = next((r for r in by["contiguity"] if "send_accepts_noncontiguous" in r), None)
        notes = ["transposed: all_reduce gets a non-contiguous view (the backend copies it: a hidden copy);"
                 " send/recv gets explicit copies"]
        if c is not None and not c["send_accepts_noncontiguous"]:
            notes.append(c["send_noncontiguous_error"])
        out.append(pivot("contiguous vs non-contiguous (transposed view) tensors", by["contiguity"],
                         lambda r: r["layout"], notes=tuple(notes)))
    if by.get("gpu_placement"):
        out.append(pivot("GPU placement: all_reduce by tensor home and backend", by["gpu_placement"],
                         lambda r: r["placement"]))
    if by.get("gpu_staging"):
        out.append(pivot("explicit staging D2H -> Gloo all_reduce -> H2D (blocking)", by["gpu_staging"],
                         lambda r: f"{r['host_memory']} nb={'on' if r['non_blocking'] else 'off'}"))
    if by.get("copy"):
        out.append(copy_table(by["copy"]))
    return "\n".join(out)
