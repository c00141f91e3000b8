"""The first screen's numbers that do not add up, each with its cause where the suite measured one: a DDP step
whose time beyond its compute exceeds its whole gradient all_reduce, a pipeline that idles well beyond what its
own model of compute and transfer predicts, pinning ranks to cores that slows them, and a sharded step set
beside DDP's though the two train different models. The cause is the run's own record of its ranks against its
cores and of the machine's load (summary.load_causes: ranks that wait for a core), or pinning that put several
ranks on one core (the placement record's ``ranks_per_core``); where none is recorded, the row says "not
explained". Reads records only."""

from __future__ import annotations

from suite import results
from suite.metrics import format_time_us
from suite.report import summary

EXCESS = 1.25
"""A figure beyond 1.25x what its parts or its model allow is said to not add up (noise stays under it)."""


def add_up_rows(run: dict) -> list[tuple[str, str]]:
    """One (what, why) row per number of the first screen that does not add up, with its cause."""
    recs = results.records(run)
    causes = summary.load_causes(run)
    hosts = ((run.get("machine_info") or {}).get("suite") or {}).get("hosts") or {}
    seen = "no other load seen" if any(h.get("load_avg_start") for h in hosts.values()) else "load not recorded"
    because = f"likely cause: {causes[0]}" if causes else f"not explained (ranks fit their cores, {seen})"
    rows = [*_ddp(recs, because), *_pipeline(recs, because), *_pinning(recs, because), *_models(recs)]
    return [("does not add up", text) for text in rows]


def _ddp(recs: list[dict], because: str) -> list[str]:
    """The DDP step the headline names (the largest gradient): its time beyond the step without communication
    against its gradient all_reduce timed alone."""
    steps = [r for r in recs if r.get("experiment") == "ddp" and r.get("label") == "ddp" and r.get("local_step_ms")]
    if not steps:
        return []
    r = max(steps, key=lambda r: r.get("grad_bytes") or 0)
    beyond, alone = r["time_us"] / 1e3 - r["local_step_ms"], r.get("allreduce_ms")
    if not alone or beyond <= EXCESS * alone:
        return []
    t = format_time_us
    return [
        f"ddp: the step takes {t(beyond * 1e3)} beyond its compute, more than its whole {t(alone * 1e3)} gradient "
        f"all_reduce (timed alone): {t((beyond - alone) * 1e3)} is neither; {because}"
    ]


def _pipeline(recs: list[dict], because: str) -> list[str]:
    """The pipeline the headline names (most micro-batches, fastest schedule): its measured idle share against
    its model's (stage compute and transfer timed alone) and the ideal (S-1)/(M+S-1)."""
    pipe = [r for r in recs if r.get("table") == "pipeline" and r.get("bubble") is not None]
    if not pipe:
        return []
    most = max(p["microbatches"] for p in pipe)
    r = min((r for r in pipe if r["microbatches"] == most), key=lambda r: r["time_us"])
    model = r.get("model_bubble")
    if model is None or r["bubble"] <= EXCESS * model:
        return []
    return [
        f"model_parallel: the pipeline idles {r['bubble']:z.0%} where its model (each stage's compute and each "
        f"transfer timed alone) says {model:z.0%} and the ideal is {r.get('ideal_bubble', 0):z.0%}; {because}"
    ]


def _pinning(recs: list[dict], because: str) -> list[str]:
    """Pinning ranks to cores that makes them slower: the placement record's ranks per core, else the run's."""
    aff = [r for r in recs if r.get("table") == "affinity" and r.get("pinning") in ("pinned", "unpinned")]
    pinned = [r for r in aff if r["pinning"] == "pinned"]
    unpinned = {(r["op"], r["size_bytes"]): r for r in aff if r["pinning"] == "unpinned"}
    for p in sorted(pinned, key=lambda r: -r["size_bytes"]):
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
        return [f"placement: pinned ranks take {p['time_us'] / u['time_us']:z.2f}x the unpinned time; {cause}"]
    return []


def _models(recs: list[dict]) -> list[str]:
    """Sharded train steps beside DDP's: the two experiments train models of their own sizes."""
    sharded = [r for r in recs if r.get("experiment") == "sharded" and r.get("op") == "train_step"]
    ddp = [r for r in recs if r.get("experiment") == "ddp" and r.get("label") == "ddp" and r.get("n_params")]
    if not sharded or not ddp:
        return []
    big = max(ddp, key=lambda r: r.get("grad_bytes") or 0)
    n = sharded[0].get("n_params")
    if n == big["n_params"]:
        return []
    return [
        f"sharded: its train steps are of its own model ({n or '?'} parameters), not of ddp's "
        f"{big.get('model', '?')} ({big['n_params']} parameters): the two step times are not comparable"
    ]
