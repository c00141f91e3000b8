"""The after-case sequence check: the ranks of a case compare, through the rendezvous store, how many
collectives each issued on each group (c10d's sequence numbers less the p2p ops the journal saw), and all
raise ``Diverged`` alike when they differ."""

from __future__ import annotations

import collections
import datetime
import json
import os

import torch.distributed as dist

from suite.harness.c10d import sequence_number


class Diverged(RuntimeError):
    """The ranks issued different numbers of collectives in a case (the same verdict on every rank)."""

    failure_kind = "divergence"


class CheckTimedOut(RuntimeError):
    """A rank did not reach the after-case sequence check in time (it hangs elsewhere)."""

    failure_kind = "peer_failure"


def collectives(journal) -> dict[str, int]:
    """Collectives issued per known group: c10d's count less the p2p ops journaled."""
    out = {}
    for name, g in journal.groups.items():
        seq = sequence_number(g)
        out[name] = (journal.count.get(name, 0) if seq is None else seq) - journal.p2p.get(name, 0)
    return out


def agree(journal, ctx, case: str) -> None:
    """Raise ``Diverged`` (on every rank of the case alike) if its ranks have issued different numbers
    of collectives on a group they share; outside any timed region. Uses the rendezvous store.

    The ranks compared are those of the case's group (a subgroup case runs on its members only);
    the counts are cumulative since each group was created: at the same case, ranks that issued the
    same collectives have the same counts, whatever cases some of them sat out."""
    ranks = global_ranks(ctx.group)
    if len(ranks) < 2 or connect(journal, ctx) is None:
        return
    me = dist.get_rank()
    n = journal.checks[case] = journal.checks.get(case, 0) + 1
    key = f"check/{case}/{n}"
    journal.store.set(f"{key}/{me}", json.dumps(collectives(journal)))
    keys = [f"{key}/{r}" for r in ranks]
    try:
        journal.store.wait(keys, datetime.timedelta(seconds=ctx.timeout_s))
    except Exception:
        missing = [r for r, k in zip(ranks, keys) if not journal.store.check([k])]
        raise CheckTimedOut(
            f"Timed out waiting {ctx.timeout_s:z.0f} s for rank(s) {', '.join(map(str, missing))} at the "
            f"sequence check after {case} (they are elsewhere: see the launcher's hang diagnosis)"
        ) from None
    problem = divergence({r: json.loads(journal.store.get(k)) for r, k in zip(ranks, keys)}, case)
    if problem:
        raise Diverged(problem)


def connect(journal, ctx):
    """The journal's client of the rendezvous store (made on first use), None where there is none."""
    if journal.store is None and "MASTER_ADDR" in os.environ:
        base = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            ctx.world_size,
            is_master=False,
            timeout=datetime.timedelta(seconds=max(5.0, ctx.timeout_s)),
            wait_for_workers=False,
        )
        journal.store = dist.PrefixStore("suite/journal", base)
    return journal.store


def divergence(counts: dict[int, dict], case: str) -> str | None:
    """The message naming the rank(s) whose collective counts differ, or None if all agree.

    ``counts[r]`` maps group name -> collectives global rank r has issued on it so far; a group a
    rank does not know (a subgroup it is not in) is not compared for that rank. Per group, the
    count most ranks have is the reference (ties: the lowest rank's); the others are named."""
    groups = sorted({g for c in counts.values() for g in c})
    for g in groups:
        have = {r: c[g] for r, c in sorted(counts.items()) if g in c}
        if len(set(have.values())) < 2:
            continue
        tally = collections.Counter(have.values())
        best = max(tally.values())
        first = next(r for r in have if tally[have[r]] == best)
        ref = have[first]
        odd = [r for r in have if have[r] != ref]
        same = [r for r in have if have[r] == ref]
        detail = "; ".join(f"rank {r} had issued {have[r]}" for r in odd)
        return (
            f"ranks diverged by the end of {case}: {detail} collective(s) on process group {g} where rank(s) "
            f"{','.join(map(str, same))} had issued {ref} (c10d's per-group sequence numbers; any later op on "
            f"this group would pair with the wrong partner)"
        )
    return None


def global_ranks(group) -> list[int]:
    """The global ranks of ``group`` (the default group: every rank)."""
    if group is None or group is dist.group.WORLD:
        return list(range(dist.get_world_size()))
    return list(dist.get_process_group_ranks(group))
