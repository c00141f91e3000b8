"""Which algorithm the backend runs: Gloo's from its sources, NCCL's from NCCL_ALGO and its debug lines
(suite.model's docstring)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from suite import op_table
from suite.common.backends.registry import record_of

GLOO = {f.name: f.model.gloo for f in op_table.MODELLED}
"""Gloo's algorithm per op, read from its sources (gloo main, torch's ProcessGroupGloo.cpp): the op table's
(suite/op_table.py ``Model.gloo``)."""

NCCL_ALGO_NAMES = {"ring": "ring", "tree": "tree", "0": "tree", "1": "ring"}
"""NCCL's names (NCCL_ALGO values, debug lines; the numbers of older NCCL's TUNING lines:
NCCL_ALGO_TREE 0, NCCL_ALGO_RING 1) of the algorithms modelled here."""
NCCL_OPS = {f.model.nccl: f.name for f in op_table.MODELLED if f.model.nccl is not None}
"""NCCL's name of each op in its debug lines -> the op (the op table's ``Model.nccl``)."""
_NCCL_LINE = re.compile(r"(?:(\w+):\s+)?(\d+) Bytes -> Algo (\w+) proto (\w+)")


def nccl_debug_choices(text: str) -> dict:
    """{(op, size_bytes): NCCL algorithm name} from NCCL debug output (TUNING/COLL lines)."""
    out = {}
    for m in _NCCL_LINE.finditer(text or ""):
        op = NCCL_OPS.get((m.group(1) or "").lower())
        if op:
            out[(op, int(m.group(2)))] = m.group(3).lower()
    return out


@dataclass(frozen=True, kw_only=True)
class Choice:
    algorithm: str | None
    """The model of what the backend runs; None when the run cannot tell."""
    how: str
    """How that was found (source cited, env var, debug line) or why it is unknown."""
    check: str = ""
    """What the run's own measurements say of it (``check_algorithms``)."""


def backend_algorithm(
    backend: str,
    op: str,
    size_bytes: int,
    recs: Sequence[dict] = (),
    debug_text: str = "",
    check: Mapping | None = None,
) -> Choice:
    """The algorithm ``backend`` runs for ``op`` at ``size_bytes``: Gloo's from its sources (checked
    against the run by ``check_algorithms`` when given), NCCL's from NCCL_ALGO / its debug lines."""
    chk = (check or {}).get(op, "")
    choice = record_of(backend).call("model_choice", op, size_bytes, recs, debug_text, chk)
    return choice or Choice(algorithm=None, how=f"no algorithm table for backend {backend!r}", check=chk)


def gloo_choice(op: str, size_bytes: int, recs: Sequence[dict], debug_text: str, chk: str) -> Choice:
    """Gloo's algorithm for ``op``: from its sources, whatever the size (its backend record names this)."""
    alg, src = GLOO[op]
    return Choice(algorithm=alg, how=f"gloo source: {src}", check=chk)


def nccl_choice(op: str, size_bytes: int, recs: Sequence[dict], debug_text: str, chk: str) -> Choice:
    """NCCL's algorithm for ``op`` at ``size_bytes``: from its debug lines, NCCL_ALGO, or its defaults (its backend
    record names this)."""
    if op == "barrier":
        return Choice(algorithm="ring", how="NCCL's barrier is an all_reduce of one element (torch ProcessGroupNCCL)")
    text = debug_text + "".join(str(r.get("nccl_debug") or "") for r in recs)
    seen = nccl_debug_choices(text)
    if seen:
        sizes = sorted(s for (o, s) in seen if o == op)
        if sizes:
            near = min(sizes, key=lambda s: abs(math.log((s or 1) / max(size_bytes, 1))))
            name = seen[(op, near)]
            alg = NCCL_ALGO_NAMES.get(name)
            return Choice(
                algorithm=alg,
                how=f"NCCL debug line: {op} {near} B -> Algo {name}" + ("" if alg else " (not modelled here)"),
                check=chk,
            )
    forced = {str(r.get("nccl_algo")) for r in recs if r.get("nccl_algo") not in (None, "", "default")}
    if len(forced) == 1:
        val = forced.pop()
        alg = NCCL_ALGO_NAMES.get(val.lower())
        if op != "all_reduce" and alg == "tree":
            alg = "ring"  # NCCL never disables ring for other ops (tuning.cc); tree is all_reduce's only
        return Choice(
            algorithm=alg,
            how=f"NCCL_ALGO={val} (recorded with the run)" + ("" if alg else ": not modelled here"),
            check=chk,
        )
    if op != "all_reduce":
        return Choice(
            algorithm="ring",
            how="NCCL: ring is its algorithm for this op without NVLS/CollNet/PAT "
            "(no NCCL_ALGO or debug line recorded)",
            check=chk,
        )
    return Choice(
        algorithm=None,
        how="NCCL picks ring or tree per size from its tuning model and the run did not "
        "record which (rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING)",
        check=chk,
    )
