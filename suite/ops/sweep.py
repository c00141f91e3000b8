"""The collective sweep: the op table (suite/ops/collectives.py) and a run's sizes, dtypes and reduce ops
turned into declared cases (suite/case.py), one per call, each with its exact check and its check's strength.
``collective_cases`` for a whole experiment (collectives), ``args_for`` and ``collective_case`` for one
that declares its own (backends' lanes, the doctor's probes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from suite.case import Buffers, Bytes, Case, CaseSkipped
from suite.harness import groups, verify
from suite.harness.dist import DistContext
from suite.common.config import BenchConfig
from suite.ops.collectives import BARRIER_UNCHECKED, FUNCTION_OF, REGISTRY, Args, Collective, dtype_of, elsize


def args_for(coll: Collective, cfg: BenchConfig, world_size: int, sizes: list[int] | None = None) -> list[Args]:
    """Every call of one collective for the run's sweep (identical on all ranks)."""
    if coll.variant == "barrier":
        return [Args(variant="barrier", dtype="none", redop=None, size_bytes=0, count=0, in_place=False, root=-1)]
    out, seen = [], set()
    for dtype in cfg.dtypes:
        el = elsize(dtype)
        for redop in cfg.redops if coll.reduces else (None,):
            for in_place in coll.in_place_forms:
                for size in cfg.sizes() if sizes is None else sizes:
                    count = size // el
                    if coll.chunked:
                        count = count // world_size * world_size
                    if count == 0 or (dtype, redop, in_place, count) in seen:
                        continue
                    seen.add((dtype, redop, in_place, count))
                    out.append(
                        Args(
                            variant=coll.variant,
                            dtype=dtype,
                            redop=redop,
                            size_bytes=count * el,
                            count=count,
                            in_place=in_place,
                            root=cfg.root if coll.rooted else -1,
                        )
                    )
    return out


def label_of(a: Args) -> str:
    parts = [a.variant]
    if a.redop:
        parts.append(a.redop)
    if a.variant != "barrier":
        parts += [a.dtype, f"{a.size_bytes}B", "inplace" if a.in_place else "oop"]
    return "-".join(parts)


def _skip(a: Args, rooted: bool):
    def skip(ctx: DistContext, cfg: BenchConfig) -> str | None:
        if rooted and a.root >= ctx.world_size:
            return f"root {a.root} not in world of {ctx.world_size}"
        if a.redop and not verify.exactly_checkable(a.redop, ctx.world_size, dtype_of(a.dtype)):
            return (
                f"no exact {a.redop} of {ctx.world_size} ranks in {a.dtype} (its integers end at "
                f"{verify.exact_limit(dtype_of(a.dtype))}): the result could not be checked"
            )
        return None

    return skip


CHECK_VALUES_PROVENANCE = (
    "modelled: distinct input values per element (suite/harness/verify.py value_range, from the dtype's exact-integer "
    "bound and the world size); one wrong element escapes the check with probability about 1/check_values"
)


def _with_check_strength(b: Buffers, a: Args, ctx: DistContext) -> Buffers:
    """Record how strong the exact check is: bfloat16 at many ranks leaves few exact values."""
    if a.variant != "barrier":
        b.fields["check_values"] = verify.value_range(a.redop or "none", ctx.world_size, dtype_of(a.dtype))
    return b


def collective_case(
    coll: Collective,
    a: Args,
    *,
    experiment: str,
    label: str | None = None,
    context: Callable | None = None,
    identity: dict | None = None,
    fields: dict | None = None,
    support: tuple = (),
) -> Case:
    """The declared case of one collective call (``identity``/``fields`` add the experiment's own)."""

    def probe(ctx: DistContext) -> Buffers:  # the same form at a few elements per rank
        n = max(ctx.world_size, 1) * 4
        return coll.build(dataclasses.replace(a, count=n, size_bytes=0), ctx)

    return Case(
        experiment=experiment,
        op=coll.op,
        label=label or label_of(a),
        identity={
            "variant": coll.variant,
            "redop": a.redop or "none",
            "in_place": a.in_place,
            "root": a.root,
            **(identity or {}),
        },
        bytes=Bytes(
            size_bytes=a.size_bytes,
            count=a.count,
            dtype=a.dtype,
            bw_op=coll.op,
            definition="the whole buffer of the collective (nccl-tests S)",
        ),
        build=lambda ctx, session: _with_check_strength(coll.build(a, ctx), a, ctx),
        unchecked=BARRIER_UNCHECKED if coll.variant == "barrier" else None,
        fields={"function": FUNCTION_OF.get(coll.variant, coll.variant), **(fields or {})},
        skip=_skip(a, coll.rooted),
        provenance={} if coll.variant == "barrier" else {"check_values": CHECK_VALUES_PROVENANCE},
        support=(a.variant, a.dtype, a.redop or "none", "inplace" if a.in_place else "oop", *support),
        probe=probe,
        context=context,
    )


def collective_cases(
    cfg: BenchConfig,
    world_size: int,
    *,
    experiment: str,
    registry: tuple[Collective, ...] = REGISTRY,
    sizes: list[int] | None = None,
    partition: tuple[str, list[list[int]]] | None = None,
) -> list[Case]:
    """Every declared case of ``registry`` for the run's sweep; ``partition`` = (name, parts): each case runs on
    this rank's part of the world instead (every part at once; ``_on_partition``)."""
    out = [
        collective_case(coll, a, experiment=experiment)
        for coll in registry
        for a in args_for(coll, cfg, world_size, sizes)
    ]
    return out if partition is None else [_on_partition(c, *partition) for c in out]


def _on_partition(case: Case, name: str, parts: list[list[int]]) -> Case:
    """``case`` on this rank's part of ``parts`` (groups.partition_context): ``group`` in its identity, its label
    ending in ``-<name>``, the parts in its record; skipped where the parts differ in size (a chunked op's count is
    a multiple of the world, not of unequal parts) or one is empty."""

    def context(ctx: DistContext, session) -> DistContext:
        if len({len(p) for p in parts}) != 1 or not all(parts):
            n = sum(map(len, parts))
            # the next even world of two equal, non-empty parts: the launcher's second pass runs the case there
            raise CaseSkipped(f"{name} groups need an even world (two equal parts), not {n} ranks", needs_ranks=n + 1)
        return groups.partition_context(ctx, session, parts)

    return dataclasses.replace(
        case,
        label=f"{case.label}-{name}",
        identity={**case.identity, "group": name},
        fields={**case.fields, "groups": parts, "table": f"{case.identity['variant']}-{name}"},
        context=context,
    )
