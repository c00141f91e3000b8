"""The link's rate and latency, one figure per link, that every reader of a stored run sets its numbers
against (``link_figures``: docs/metrics.md, "The link's rate"); and LINK_RATE, the configured rate of the
links between hosts (``make compose-up LINK_RATE=200mbit``: the compose simulation shapes them with tc) or
EXPECT_LINK_RATE, the rate they should carry, read from a stored run. Reads stored JSON only: no torch, no
harness."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from suite.model.link_probe import PROBE_STEP, RatePoint, probe_stop, size_text, step_gain

# tc(8) rate units: bit-based (bit, kbit, mbit, gbit, tbit) and byte-based (bps, kbps, ...);
# SI multipliers (tc's k = 1000), plus the IEC forms (kibit, mibps, ...).
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?i?)(bit|bps)?\s*$", re.I)
_MULT = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


def parse_link_rate(text: str) -> float | None:
    """A tc rate such as ``1gbit``, ``200mbit``, ``125mbps`` in GB/s; None if unparseable.

    As in tc(8), ``bit`` units count bits and ``bps`` units count *bytes* per second;
    a bare number is bits per second.
    """
    m = _RATE.match(str(text))
    if not m:
        return None
    value, prefix, unit = float(m.group(1)), m.group(2).lower(), (m.group(3) or "bit").lower()
    bytes_per_s = value * _MULT[prefix] / (8.0 if unit == "bit" else 1.0)
    return bytes_per_s / 1e9


def configured_link_rate(machine_info: Mapping) -> tuple[str, float] | None:
    """(text, GB/s) of LINK_RATE from the run's environment record (slowest host wins)."""
    hosts = (machine_info.get("suite") or {}).get("hosts") or {}
    found = []
    for h in hosts.values():
        text = (h.get("env") or {}).get("LINK_RATE")
        if text:
            gbps = parse_link_rate(text)
            if gbps:
                found.append((gbps, text))
    if not found:
        return None
    gbps, text = min(found)
    return text, gbps


def declared_link_rate(run: Mapping) -> dict | None:
    """What a link between hosts is declared to carry: EXPECT_LINK_RATE from the run's config (the doctor's
    expectation), else the compose LINK_RATE; ``{"rate": text, "gbps": GB/s, "source": ...}`` or None."""
    cfg = (run.get("suite") or {}).get("config") or {}
    # EXPECT_LINK_RATE is an experiment's setting, nested in the config under that experiment's name
    text = next(
        (
            str(v["expect_link_rate"]).strip()
            for v in cfg.values()
            if isinstance(v, Mapping) and v.get("expect_link_rate")
        ),
        "",
    )
    if text and parse_link_rate(text):
        return {"rate": text, "gbps": parse_link_rate(text), "source": "EXPECT_LINK_RATE"}
    found = configured_link_rate(run.get("machine_info") or {})
    if found:
        return {"rate": found[0], "gbps": found[1], "source": "LINK_RATE (the compose simulation's shaped links)"}
    return None


# --- one figure per link: the yardstick every reader sets a bandwidth against --------------------------

SATURATED = 0.9
"""The rate has stopped growing where the α–β model's rate at the probe's largest size is at least this share
of β (S / (S + α·β)); below it the probe stopped while the rate was still growing and β is extrapolated."""


@dataclass(frozen=True, kw_only=True)
class LinkFigure:
    """The rate and the latency of one link (one rank pair on one backend and device), as every reader of a
    run sets its numbers against them: the headline, the "% of link rate" column, the fits' reference link
    and the ring model, the doctor's expectation and the predictions."""

    backend: str
    device: str
    world_size: int
    src: int
    dst: int
    link_class: str
    """intra (one host) or inter (between hosts)."""
    beta_gbps: float
    """The link's asymptotic rate, GB/s: one direction's, a window of messages in flight."""
    beta_ci_gbps: tuple[float, float] | None
    alpha_us: float
    """The link's one-way latency, µs."""
    alpha_ci_us: tuple[float, float] | None
    measured: bool
    """False: the rate is declared (EXPECT_LINK_RATE or LINK_RATE across hosts)."""
    source: str
    """Where the rate comes from: ``p2p window 0->1, α–β fit`` or ``EXPECT_LINK_RATE=10gbit``."""
    alpha_source: str
    sizes: tuple[int, int] = (0, 0)
    """The smallest and the largest message the rate's probe sent (0, 0: declared)."""
    n_sizes: int = 0
    reached: float | None = None
    """The model's rate at the largest size as a share of β (SATURATED: the rate had stopped growing)."""
    both_gbps: float | None = None
    """Both directions at once (the bidirectional window's aggregate): the yardstick of an op that sends
    both ways on the link at the same time; None where the run has no such probe."""

    @property
    def saturated(self) -> bool:
        return self.reached is None or self.reached >= SATURATED


def _pair(r: Mapping) -> tuple[int, int] | None:
    try:
        src, dst = int(r["src"]), int(r["dst"])
    except (KeyError, TypeError, ValueError):
        return None
    return (src, dst) if src >= 0 and dst >= 0 else None


def _is_pingpong(r: Mapping) -> bool:
    """One message at a time on one pair, one-way time: the ping-pong and the pair matrix (a record without a
    pattern: one whose variant or table names it)."""
    if r.get("pattern"):
        return r["pattern"] in ("pingpong", "pair_matrix")
    return any(w in str(r.get(f, "")).lower() for f in ("table", "variant") for w in ("ping", "pair"))


def _probe(recs: list[dict], pattern: str, variant: str | None = None) -> dict:
    """(backend, device, world size, src, dst) -> {size: record} of one p2p pattern's usable records (pattern
    ``pingpong``: the ping-pong and the pair matrix, ``_is_pingpong``)."""
    out: dict = {}
    for r in recs:
        pair = _pair(r)
        if (
            r.get("op") != "send_recv"
            or not (_is_pingpong(r) if pattern == "pingpong" else r.get("pattern") == pattern)
            or (variant is not None and r.get("variant") != variant)
            or pair is None
            or r.get("n_wrong") not in (0, None)
            or not (r.get("time_us") or 0) > 0
            or not (r.get("size_bytes") or 0) > 0
        ):
            continue
        at = out.setdefault((r["backend"], r["device"], int(r["world_size"]), *pair), {})
        if r["size_bytes"] not in at or r["time_us"] < at[r["size_bytes"]]["time_us"]:
            at[r["size_bytes"]] = r
    return out


def _rate(at: dict) -> tuple[float, tuple[float, float] | None, float | None, str]:
    """(β, its interval, the share of β reached at the largest size, how) of a probe's records by size: the
    α–β fit's β where the fit earns a model (suite.model.fit ``no_model``) and has a bandwidth term, else the
    largest size's median rate with the interval of its median."""
    from suite.model import fit

    sizes = sorted(at)
    m = fit.fit_model(sizes, [at[s]["time_us"] for s in sizes])
    if m is not None and m.shown and math.isfinite(m.beta_gbps) and m.beta_gbps > 0:
        top = m.pieces[-1]
        reached = sizes[-1] / (sizes[-1] + max(top.alpha_us, 0.0) * top.beta_gbps * 1e3)
        return m.beta_gbps, top.beta_ci_gbps, reached, "α–β fit" + (" above its knee" if m.piecewise else "")
    big = _point(at[sizes[-1]])
    gbps, ci = big.gbps, big.ci_gbps
    why = "one size: no α–β fit" if m is None else f"no α–β model: {m.no_model() or 'no bandwidth term'}"
    return gbps, ci, None, f"the median rate at its largest size ({why})"


def _latency(at: dict | None) -> tuple[float, tuple[float, float] | None, str] | None:
    """(α, its interval, how) from the same pair's ping-pong: the fitted α where the fit earns a model, else the
    smallest size's one-way time."""
    if not at:
        return None
    from suite.model import fit

    sizes = sorted(at)
    m = fit.fit_model(sizes, [at[s]["time_us"] for s in sizes])
    if m is not None and m.shown:
        return m.alpha_us, m.pieces[0].alpha_ci_us, "α of its α–β fit"
    return at[sizes[0]]["time_us"], None, f"one-way time at {sizes[0]} B (no α–β model)"


def _figure(key: tuple, at: dict, how: str, pp: dict | None, bi: dict | None, hosts: list[str]) -> LinkFigure:
    backend, device, n, src, dst = key
    beta, beta_ci, reached, fitted = _rate(at)
    lat = _latency(pp) or (None, None, "")
    if lat[0] is None:  # no ping-pong of the pair: the probe's own α (per message in a stream)
        from suite.model import fit

        m = fit.fit_model(sorted(at), [at[s]["time_us"] for s in sorted(at)])
        lat = (max(m.alpha_us, 0.0), m.pieces[0].alpha_ci_us, "α of the rate's fit") if m else (0.0, None, "none")
    cls = _class(key, at, hosts)
    both = None
    if bi:
        b = _rate(bi)[0]
        both = 2 * b
    sizes = sorted(at)
    return LinkFigure(
        backend=backend,
        device=device,
        world_size=n,
        src=src,
        dst=dst,
        link_class=cls,
        beta_gbps=beta,
        beta_ci_gbps=beta_ci,
        alpha_us=lat[0],
        alpha_ci_us=lat[1],
        measured=True,
        source=f"p2p {how} {src}{'<->' if how == 'ping-pong' else '->'}{dst}"
        + (f" {probe_reach(at)}" if how == "window" else "")
        + f", {fitted}"
        + (" (no streaming probe of this link class in this run)" if how == "ping-pong" else ""),
        alpha_source=f"p2p ping-pong {src}<->{dst}, {lat[2]}" if pp else f"p2p {how} {src}->{dst}, {lat[2]}",
        sizes=(sizes[0], sizes[-1]),
        n_sizes=len(sizes),
        reached=reached,
        both_gbps=both,
    )


def _point(r: Mapping) -> RatePoint:
    """A window record's rate, with the interval of its median."""
    from suite import results

    gbps = r["size_bytes"] / (r["time_us"] * 1e3)
    pct = results.median_ci_pct(r)
    ci = None if pct is None or pct >= 100 else (gbps / (1 + pct / 100), gbps / (1 - pct / 100))
    return RatePoint(r["size_bytes"], gbps, ci)


def probe_reach(at: dict) -> str:
    """How far the streaming probe went and why it stopped, from its records by size: ``up to 16 MiB, levelled
    off`` (the link probe's own verdict, ``link_probe`` of its last step beyond the sweep; without one, the stop
    rule over the sweep's sizes)."""
    top = max(at)
    lp = at[top].get("link_probe") or {}
    if lp.get("why"):
        return f"up to {size_text(top)}, {lp['why']}"
    if lp:
        return f"up to {size_text(top)}, still growing (the probe's next step did not run)"
    points = {s: _point(r) for s, r in at.items()}
    if probe_stop(list(points.values()), cap_bytes=top * PROBE_STEP, time_s=math.inf):
        return f"up to {size_text(top)}, levelled off"
    prev = points.get(top // PROBE_STEP)
    if prev is None:
        return f"up to {size_text(top)}, no probe beyond the sweep"
    gain = step_gain(prev, points[top])[0]
    said = f"{gain:+z.0%} over {size_text(prev.size_bytes)}"
    return f"up to {size_text(top)}, still growing ({said}; no probe beyond the sweep)"


def _class(key: tuple, at: dict, hosts: list[str]) -> str:
    """intra (both ranks on one host) or inter, from the run's hostnames, else from the records' cross_node."""
    src, dst = key[3], key[4]
    if max(src, dst) < len(hosts):
        return "inter" if hosts[src] != hosts[dst] else "intra"
    return "inter" if any(r.get("cross_node") for r in at.values()) else "intra"


def class_figures(run: Mapping) -> dict[tuple[str, str, int, str], LinkFigure]:
    """One LinkFigure per (backend, device, world size, link class) of a stored run: for the class of the
    streaming probe's pair (rank 0 and the last rank: the p2p window's), its rate from that probe (the
    unidirectional window, fitted α–β over its sizes) and its latency from the same pair's ping-pong; for a class
    no window crossed, the ping-pong of one of its pairs (the farthest); across hosts the declared rate
    (EXPECT_LINK_RATE, else LINK_RATE) where one is given. The one module every reader of a link asks."""
    from suite import results

    recs = results.communication_records(results.records(run))  # the link is not timed on a crowded pass
    hosts = list((((run.get("machine_info") or {}).get("suite") or {}).get("hostnames")) or [])
    window, bidir = _probe(recs, "window", "unidirectional"), _probe(recs, "window", "bidirectional")
    pingpong = _probe(recs, "pingpong")
    declared = declared_link_rate(run)
    out: dict = {}
    for probes, how in ((window, "window"), (pingpong, "ping-pong")):
        for key in sorted(probes, key=lambda k: (-len(probes[k]), -k[4], k)):  # most sizes, then the farthest pair
            where = (*key[:3], _class(key, probes[key], hosts))
            if where in out:
                continue
            fig = _figure(key, probes[key], how, pingpong.get(key), bidir.get(key), hosts)
            if declared and fig.link_class == "inter":
                fig = dataclasses.replace(
                    fig,
                    beta_gbps=declared["gbps"],
                    beta_ci_gbps=None,
                    measured=False,
                    source=f"{declared['source'].split()[0]}={declared['rate']} (measured: {fig.beta_gbps:z.3g} GB/s, "
                    f"{fig.source})",
                    reached=None,
                )
            out[where] = fig
    return out


def link_figures(run: Mapping) -> dict[tuple[str, str, int], LinkFigure]:
    """One LinkFigure per (backend, device, world size): the link the run's streaming probe crossed (rank 0 and
    the last rank, ``class_figures``), else the ping-pong's farthest pair. What the headline, the "% of link
    rate" column, the fits' reference link and ring model set their numbers against."""
    out: dict = {}
    for (backend, device, n, _), fig in class_figures(run).items():  # the window's figures come first
        out.setdefault((backend, device, n), fig)
    return out


def link_for(run: Mapping, rec: Mapping, figures: Mapping | None = None) -> LinkFigure | None:
    """The link figure a record is set against: its backend's, device's and world size's (else the same
    backend and device at another world size); across hosts without a probe, the declared rate; else None."""
    figs = link_figures(run) if figures is None else figures
    key = (rec.get("backend"), rec.get("device"), int(rec.get("world_size") or 0))
    if key in figs:
        return figs[key]
    same = [f for k, f in figs.items() if k[:2] == key[:2]]
    if same:
        return max(same, key=lambda f: f.world_size)
    hosts = len(set((((run.get("machine_info") or {}).get("suite") or {}).get("hostnames")) or []))
    declared = declared_link_rate(run)
    if declared and max(hosts, int(rec.get("hosts") or 1)) > 1:
        return LinkFigure(
            backend=str(key[0]),
            device=str(key[1]),
            world_size=key[2],
            src=-1,
            dst=-1,
            link_class="inter",
            beta_gbps=declared["gbps"],
            beta_ci_gbps=None,
            alpha_us=0.0,
            alpha_ci_us=None,
            measured=False,
            source=f"{declared['source'].split()[0]}={declared['rate']}",
            alpha_source="none measured",
        )
    return None
