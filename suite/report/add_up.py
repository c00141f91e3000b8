"""The first screen's numbers that do not add up, each with its cause where the suite measured one: a DDP step
whose time beyond its compute exceeds its whole gradient all_reduce, a pipeline that idles well beyond what its
own model of compute and transfer predicts, pinning ranks to cores that slows them, and a sharded step set
beside DDP's though the two train different models. The cause is the run's own record of its ranks against its
cores and of the machine's load (summary.load_causes: ranks that wait for a core), or pinning that put several
ranks on one core (the placement record's ``ranks_per_core``); where none is recorded, the row says "not
explained". Each check reads the records a headline sentence names (its numbers), by their fields, whatever the
experiment. Reads records only."""

from __future__ import annotations

from suite import results
from suite.metrics import format_time_us
from suite.report import summary
from suite.report.headline import Headline

EXCESS = 1.25
"""A figure beyond 1.25x what its parts or its model allow is said to not add up (noise stays under it)."""


def add_up_rows(run: dict, items: list[Headline]) -> list[tuple[str, str]]:
    """One (what, why) row per number of the first screen (``items``: its headlines) that does not add up, with
    its cause."""
    recs = results.records(run)
    causes = summary.load_causes(run)
    hosts = ((run.get("machine_info") or {}).get("suite") or {}).get("hosts") or {}
    seen = "no other load seen" if any(h.get("load_avg_start") for h in hosts.values()) else "load not recorded"
    because = f"likely cause: {causes[0]}" if causes else f"not explained (ranks fit their cores, {seen})"
    rows = [*_steps(recs, items, because), *_pipelines(recs, items, because), *_pinning(recs, because)]
    return [("does not add up", text) for text in rows + _models(recs, items)]


def _named(recs: list[dict], h: Headline, field: str, number: str) -> list[dict]:
    """The records of ``h``'s experiment whose ``field`` is the sentence's ``number``."""
    value = h.numbers.get(number)
    return [r for r in recs if r.get("experiment") == h.experiment and value is not None and r.get(field) == value]


def _steps(recs: list[dict], items: list[Headline], because: str) -> list[str]:
    """A training step a sentence names (``step_us``) whose time beyond the same step without communication
    exceeds its gradient all_reduce timed alone."""
    out = []
    for h in items:
        for r in _named(recs, h, "time_us", "step_us")[:1]:
            alone = r.get("allreduce_ms")
            if not alone or r.get("local_step_ms") is None:
                continue
            beyond = r["time_us"] / 1e3 - r["local_step_ms"]
            if beyond > EXCESS * alone:
                t = format_time_us
                out.append(
                    f"{h.experiment}: the step takes {t(beyond * 1e3)} beyond its compute, more than its whole "
                    f"{t(alone * 1e3)} gradient all_reduce (timed alone): {t((beyond - alone) * 1e3)} is neither; "
                    + because
                )
    return out


def _pipelines(recs: list[dict], items: list[Headline], because: str) -> list[str]:
    """A pipeline a sentence names (``bubble``): its measured idle share against its model's (stage compute
    and transfer timed alone) and the ideal (S-1)/(M+S-1)."""
    out = []
    for h in items:
        for r in _named(recs, h, "bubble", "bubble")[:1]:
            model = r.get("model_bubble")
            if model is not None and r["bubble"] > EXCESS * model:
                out.append(
                    f"{h.experiment}: the pipeline idles {r['bubble']:z.0%} where its model (each stage's compute "
                    f"and each transfer timed alone) says {model:z.0%} and the ideal is "
                    f"{r.get('ideal_bubble', 0):z.0%}; {because}"
                )
    return out


def _pinning(recs: list[dict], because: str) -> list[str]:
    """Pinning ranks to cores that makes them slower: the pinned record's ranks per core, else the run's."""
    aff = [r for r in recs if r.get("table") == "affinity" and r.get("pinning") in ("pinned", "unpinned")]
    unpinned = {(r["op"], r["size_bytes"]): r for r in aff if r["pinning"] == "unpinned"}
    for p in sorted((r for r in aff if r["pinning"] == "pinned"), key=lambda r: -r["size_bytes"]):
        u = unpinned.get((p["op"], p["size_bytes"]))
        if u is None or p["time_us"] <= EXCESS * u["time_us"]:
            continue
        per_core = p.get("ranks_per_core")
        cause = (
            f"cause: pinning put {per_core} ranks on each core (the record's ranks_per_core), where unpinned they "
            f"could spread over {p.get('cpus_available')} CPUs"
            if isinstance(per_core, int) and per_core > 1
            else because
        )
        return [f"{p['experiment']}: pinned ranks take {p['time_us'] / u['time_us']:z.2f}x the unpinned time; {cause}"]
    return []


def _models(recs: list[dict], items: list[Headline]) -> list[str]:
    """Step times of two experiments' sentences side by side, of models of different sizes."""
    sizes = {}
    for h in items:
        times = {v for k, v in h.numbers.items() if k.endswith("step_us")}
        steps = [r for r in recs if r.get("experiment") == h.experiment and r.get("time_us") in times]
        named = [r for r in steps if r.get("n_params")]
        if named:
            r = max(named, key=lambda r: r["n_params"])
            sizes[h.experiment] = (r["n_params"], r.get("model"))
    if len({n for n, _ in sizes.values()}) < 2:
        return []
    said = ", ".join(f"{exp}'s {model + ' ' if model else ''}{n} parameters" for exp, (n, model) in sizes.items())
    return [f"{' and '.join(sizes)} train models of different sizes ({said}): their step times are not comparable"]
