"""The placement experiment's first picture at the top of the report (its spec's ``glance`` hook): the copy
rate of rank 0's GPU against size per direction and host memory, under the nominal ceilings it is compared
with (PCIe for host copies, memory bandwidth for device copies); a run without the copy cases (no CUDA)
says so in its caption. Reads stored records only."""

from __future__ import annotations

from collections import OrderedDict

from suite.api import Picture, figures

CEILING = {"d2d": "memory bandwidth peak (a copy moves 2 x size)", "h2d": "PCIe peak", "d2h": "PCIe peak"}


def glance(run: dict, recs: list[dict]) -> Picture | None:
    """Copy rate (GB/s, bytes moved) against size per (direction, host memory), the nominal peaks drawn."""
    copies = [r for r in recs if r.get("table") == "copy" and r.get("algbw_gbps")]
    if not copies:
        return Picture(
            title="placement: copy rates",
            png=None,
            caption="placement: no copy rates in this run (the host-device copy cases need CUDA); "
            "its comparisons are in its section.",
        )
    lines: OrderedDict = OrderedDict()
    ceilings: OrderedDict = OrderedDict()
    for r in sorted(copies, key=lambda r: r["size_bytes"]):
        rate = r["algbw_gbps"] * r.get("bytes_moved_factor", 1)
        xs, ys = lines.setdefault(f"{r['direction']} {r['host_memory']}", ([], []))
        xs.append(r["size_bytes"])
        ys.append(rate)
        if r.get("nominal_peak_gbps"):
            what = CEILING.get(r["direction"], "nominal peak")
            ceilings.setdefault(r["nominal_peak_gbps"], f"{what}: {r['nominal_peak_gbps']:z.3g} GB/s")
    return Picture(
        title="placement: copy rate against the memory and PCIe ceilings",
        png=figures.size_lines(
            "placement: copy rate against the memory and PCIe ceilings",
            [(label, xs, ys) for label, (xs, ys) in lines.items()],
            ylabel="copy rate (GB/s of bytes moved)",
            ceilings=list(ceilings.items()),
        ),
        caption="placement: how fast rank 0's GPU copies to and from the host (pinned and pageable) and within "
        "itself, against the nominal peaks: pinned copies should approach PCIe, pageable ones fall short of it.",
    )
