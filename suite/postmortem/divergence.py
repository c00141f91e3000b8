"""Which rank diverged: the first sequence number at which the ranks' journals differ, and the rank that caused
it (suite/postmortem/hang.py's verdict). Pure: the per-rank states ``hang.rank_state`` gives, dumps or rings alike.

At the first op of a process group that the ranks issued differently (another op, or the same op with another
shape or dtype; p2p ops, asymmetric by design, are not compared), the rank to blame is, in this order:

1. at 3 or more ranks, the odd one out: every rank outside the one largest group of alike ops;
2. the rank whose op there is unusual: its run of ops ending there that the journals held before is the
   shortest, at least the op after the one before it (a skipped op leaves two barriers in a row where a
   barrier and the op always alternated, an extra one two ops where one always came, a replaced one an op
   or size not seen before);
3. the rank with one call of the case's op fewer within the case (the case's most issued op and shape, then
   op name, in the journals' tails; then the journals' counts of the whole case): it skipped or replaced it;
4. none: the verdict says it cannot tell.
"""

from __future__ import annotations

import collections
import json

from suite import op_table

P2P = op_table.P2P
ANY_SHAPE = op_table.of_family("all_to_all")
"""Collectives whose first tensor may differ in shape between ranks (uneven splits): compared by op alone."""
RUN_MAX = 8
"""The longest run of ops compared in step 2."""


def key(e: dict) -> tuple:
    """What must be alike on every rank at one sequence number: the op, its first tensor's shape and dtype."""
    if e.get("op") in ANY_SHAPE:
        return (e.get("op"),)
    return (e.get("op"), json.dumps(e.get("shape")), e.get("dtype"))


def _by_seq(s: dict) -> dict[int, dict]:
    return {
        e["seq"]: e
        for e in s["tail"]
        if e.get("group") == s["group"] and e.get("seq") is not None and e.get("state") != "rejected"
    }


def first_difference(states: list[dict]) -> tuple[int, dict[int, dict]] | None:
    """(seq, rank -> its entry there) at the lowest sequence number where two ranks' entries differ; None if
    none does in what their journals hold."""
    by_rank = {s["rank"]: _by_seq(s) for s in states}
    for q in sorted(set().union(*by_rank.values())):
        at = {r: m[q] for r, m in by_rank.items() if q in m}
        if len(at) > 1 and not all(e.get("op") in P2P for e in at.values()) and len({key(e) for e in at.values()}) > 1:
            return q, at
    return None


def culprits(states: list[dict], seq: int, at: dict[int, dict]) -> tuple[list[int], str]:
    """The ranks that diverged at ``seq`` and how that was told (``odd one out``, ``unusual``, ``fewer``), or
    ([], why it cannot be told)."""
    groups: dict = collections.defaultdict(list)
    for r, e in sorted(at.items()):
        groups[key(e)].append(r)
    sizes = sorted((len(g) for g in groups.values()), reverse=True)
    if len(at) >= 3 and sizes[0] > sizes[1]:
        ref = max(groups.values(), key=len)
        return sorted(r for r in at if r not in ref), "odd one out"
    by_rank = {s["rank"]: _by_seq(s) for s in states if s["rank"] in at}
    counted = {s["rank"]: s.get("case_ops") or {} for s in states if s["rank"] in at}
    for how, score in (
        ("unusual", _familiar(by_rank, seq)),
        ("fewer", _case_op_calls(by_rank, seq, at)),
        ("fewer", _case_ops(counted)),
    ):
        odd = _below_the_rest(groups, score)
        if odd:
            return odd, how
    return [], "each rank issued as many of the case's op, none of the ops there is less usual than another"


def _below_the_rest(groups: dict, score: dict[int, int]) -> list[int]:
    """The ranks of the groups whose score is below every other group's (a group scores its lowest rank's)."""
    per = {k: min(score[r] for r in rs) for k, rs in groups.items()}
    top = max(per.values())
    low = [k for k, v in per.items() if v < top]
    return sorted(r for k in low for r in groups[k]) if low and len(low) < len(per) else []


def _familiar(by_rank: dict[int, dict], seq: int) -> dict[int, int]:
    """Per rank: the longest run of its ops ending at ``seq`` (at most RUN_MAX) that some rank's journal holds
    ending before ``seq``; 0 below two ops (the op after the one before it)."""
    runs = {r: [key(m[q]) for q in sorted(m) if q <= seq] for r, m in by_rank.items()}
    seen: set = set()
    for m in by_rank.values():
        before = [key(m[q]) for q in sorted(m) if q < seq]
        for n in range(1, RUN_MAX + 1):
            seen.update(tuple(before[i : i + n]) for i in range(len(before) - n + 1))
    out = {}
    for r, run in runs.items():
        n = 0
        while n < min(RUN_MAX, len(run)) and tuple(run[len(run) - n - 1 :]) in seen:
            n += 1
        out[r] = n if n >= 2 else 0  # an op seen somewhere, never after the op before it, is no pattern
    return out


def _case_op_calls(by_rank: dict[int, dict], seq: int, at: dict[int, dict]) -> dict[int, int]:
    """Per rank: its calls of the case's op (the most issued op and shape of the case at ``seq``, over every
    rank; where that ties, the op name) in the sequence numbers every rank's journal still holds, up to ``seq``."""
    case = next((e["case"] for e in at.values() if e.get("case")), "")  # a rank past the case's end is in none
    low = max((min(m) for m in by_rank.values() if m), default=seq)
    mine = {r: [m[q] for q in m if low <= q <= seq and m[q].get("case") == case] for r, m in by_rank.items()}
    for what in (key, lambda e: e.get("op")):
        tally = collections.Counter(what(e) for es in mine.values() for e in es)
        if not tally:
            break
        (top, n), *rest = tally.most_common(2) + [(None, -1)]
        if n > rest[0][1]:
            return {r: sum(what(e) == top for e in es) for r, es in mine.items()}
    return {r: 0 for r in by_rank}


def _case_ops(counted: dict[int, dict]) -> dict[int, int]:
    """Per rank: its calls of the case's most issued op over the whole case, as the journal counted them (what
    the tails no longer hold)."""
    total: collections.Counter = collections.Counter()
    for c in counted.values():
        total.update(c)
    if not total:
        return {r: 0 for r in counted}
    op = total.most_common(1)[0][0]  # a tie: the op the lowest rank issued first
    return {r: c.get(op, 0) for r, c in counted.items()}
