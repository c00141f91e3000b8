"""How the report groups a run's records: the group a record belongs to, pair matrices and size sweeps,
the series of a group and their legends, and the numbers an experiment measures beyond the shared schema."""

from __future__ import annotations

from collections import OrderedDict

from suite import results
from suite.report.compare.case_identity import MEASUREMENT_FIELDS, case_key

_SERIES_SKIP = {"experiment", "size_bytes", "count", "backend", "device", "world_size", "table"}
_NICE_ORDER = ("variant", "op", "function", "dtype", "redop", "in_place", "root", "timing_mode")


def group_key(r: dict) -> str:
    return str(r.get("table") or r.get("pattern") or r.get("variant") or r["op"])


def is_pair(r: dict) -> bool:
    """A record of one ordered rank pair (src and dst are real ranks, not -1 placeholders)."""
    try:
        return int(r["src"]) >= 0 and int(r["dst"]) >= 0
    except (KeyError, TypeError, ValueError):
        return False


def is_pair_matrix(recs: list[dict]) -> bool:
    """Records that form a src x dst matrix (several sources and several destinations)."""
    pairs = [r for r in recs if is_pair(r)]
    return len(pairs) == len(recs) and len({r["src"] for r in pairs}) > 1 and len({r["dst"] for r in pairs}) > 1


def varying_fields(recs: list[dict]) -> list[str]:
    """Identity fields (suite.report.compare.case_identity.case_key) whose value differs between records, in a stable
    order, leaving out those that only follow the size (e.g. a micro-batch count that sets the
    size): they would split one curve into one-point series."""
    values: OrderedDict = OrderedDict()
    per_size: dict = {}
    for r in recs:
        for k, v in case_key(r):
            if k not in _SERIES_SKIP:
                values.setdefault(k, set()).add(repr(v))
                per_size.setdefault(k, {}).setdefault(r["size_bytes"], set()).add(repr(v))
    n_sizes = len({r["size_bytes"] for r in recs})
    fields = [
        k
        for k, vs in values.items()
        if len(vs) > 1 and not (n_sizes > 1 and all(len(x) == 1 for x in per_size[k].values()))
    ]
    # Free-text descriptions vary with the case but make poor legends: keep them only if
    # nothing else tells the series apart.
    prose = {k for k in fields if any(isinstance(r.get(k), str) and " " in r[k] and len(r[k]) > 24 for r in recs)}
    if len(fields) > len(prose) and prose:
        keep = [k for k in fields if k not in prose]
        if len({tuple(repr(r.get(k)) for k in keep) for r in recs}) == len(
            {tuple(repr(r.get(k)) for k in fields) for r in recs}
        ):
            fields = keep
    fields = sorted(fields, key=lambda k: (_NICE_ORDER.index(k) if k in _NICE_ORDER else len(_NICE_ORDER), k))
    # the fewest fields that still tell every series apart (variant alone often does)
    target = len({tuple(repr(r.get(k)) for k in fields) for r in recs})
    chosen: list[str] = []
    for k in fields:
        if len({tuple(repr(r.get(c)) for c in chosen) for r in recs}) == target:
            break
        if len({tuple(repr(r.get(c)) for c in chosen + [k]) for r in recs}) > len(
            {tuple(repr(r.get(c)) for c in chosen) for r in recs}
        ):
            chosen.append(k)
    return chosen


def label_of(r: dict, fields: list[str], width: int = 48) -> str:
    parts = []
    for k in fields:
        v = r.get(k)
        if k == "in_place":
            parts.append("in-place" if v else "out-of-place")
        elif k in ("variant", "op", "function", "dtype", "redop"):
            parts.append(str(v))
        else:
            parts.append(f"{k}={v}")
    text = " ".join(parts) or str(r.get("variant") or r["op"])
    return text if len(text) <= width else text[: width - 1] + "…"


def series_by_label(recs: list[dict], fields: list[str]) -> OrderedDict:
    full = [label_of(r, fields, width=10**6) for r in recs]
    short = [label_of(r, fields) for r in recs]
    names = short if len(set(short)) == len(set(full)) else full  # never merge series by truncation
    out: OrderedDict = OrderedDict()
    for name, r in zip(names, recs):
        out.setdefault(name, []).append(r)
    return out


def extra_numeric_fields(recs: list[dict], varying_only: bool = False) -> list[str]:
    """Measured numbers an experiment adds beyond the shared schema (samples_per_s, efficiency, ...):
    float fields, and int fields with a unit suffix of a rate, share or time."""
    seen: OrderedDict = OrderedDict()
    for r in recs:
        for k, v in r.items():
            if k in MEASUREMENT_FIELDS or k in results.REQUIRED_FIELDS or k in ("src", "dst", "peer", "root"):
                continue
            if (
                isinstance(v, (int, float))
                and not isinstance(v, bool)
                and (isinstance(v, float) or k.endswith(("_per_s", "_pct", "_us", "_ms", "_s")))
            ):
                seen.setdefault(k, set()).add(v)
    fields = [k for k, vs in seen.items() if not varying_only or len(vs) > 1]
    # headline numbers first: rates, efficiency, overlap, speed-up
    first = ("_per_s", "efficiency", "overlap_pct", "speedup", "speed_up", "bubble")
    return sorted(fields, key=lambda k: (not any(w in k for w in first), fields.index(k)))


def is_sweep(recs: list[dict]) -> bool:
    """Some series of the group (per world size) was measured at two or more sizes."""
    by_world: dict = {}
    for r in recs:
        by_world.setdefault(r["world_size"], []).append(r)
    return any(
        len({r["size_bytes"] for r in s if r["size_bytes"] > 0}) >= 2
        for rs in by_world.values()
        for s in series_by_label(rs, varying_fields(rs)).values()
    )


def groups_by_experiment(recs: list[dict]) -> OrderedDict:
    """experiment -> (group key, backend, device, world size) -> its records, in the records' order. Sweeps
    and pair matrices are per world size; single-size groups (e.g. DDP scaling) keep every world size in
    one group (world size None), so that scaling reads off one figure."""
    per_world: dict = {}
    for r in recs:
        k = (r["experiment"], group_key(r), r["backend"], r["device"])
        per_world.setdefault(k, []).append(r)
    split_of = {k: is_pair_matrix(rs) or is_sweep(rs) for k, rs in per_world.items()}
    by_exp: OrderedDict = OrderedDict()
    for r in recs:
        k = (r["experiment"], group_key(r), r["backend"], r["device"])
        split = split_of[k]
        by_exp.setdefault(r["experiment"], OrderedDict()).setdefault(
            (group_key(r), r["backend"], r["device"], r["world_size"] if split else None), []
        ).append(r)
    return by_exp
