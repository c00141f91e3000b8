"""Torch's warnings that the sharded inventory's step raises and its checks show harmless: each filtered where it is
raised (by category and message, in that step alone), named in the record (``torch_warnings_filtered``) and said
once per run, in one line under the table (``line``). Torch-free: the table imports it.

The inventory's step runs under ``CommDebugMode`` (experiments/sharded/inventory.py), whose module tracker
registers a global full backward pre-hook, and torch's hook machinery warns twice for it:

- ``backward_hook``: the hook of a module none of whose inputs needs a gradient (the model's first modules: the
  batch needs none) fires with the gradient of the module's output. That is what a backward pre-hook is given
  anyway; the tracker only reads it, to name the phase of each collective.
- ``fsdp2_view``: the hook hands each module's output on as a view (its autograd function's), so FSDP2 sees its
  root return a view and warns that an in-place op on it would skip the pre-backward all_gather. The step's
  loss takes the output out of place; had an all_gather been skipped, the step's backward all_gathers would
  fall short of theory's.

Every other warning passes on as raised. The timed steps run without the tracker: the built-in model warns of
neither there (its head's output is its own tensor, not a view), and a user model's own warning passes on.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Harmless:
    """One torch warning the inventory's step raises, and why its checks show it harmless."""

    key: str
    """Its name in the record's ``torch_warnings_filtered``."""
    category: type[Warning]
    message: str
    """How the warning's text begins."""
    why: str
    """What the line under the table says of it: the check that shows it harmless."""

    def matches(self, caught: warnings.WarningMessage) -> bool:
        return issubclass(caught.category, self.category) and str(caught.message).startswith(self.message)


BACKWARD_HOOK = Harmless(
    "backward_hook",
    UserWarning,
    "Full backward hook is firing when gradients are computed with respect to module outputs",
    "the hook of a module whose input needs no gradient gets its output's, which the tracker only reads",
)
FSDP2_VIEW = Harmless(
    "fsdp2_view",
    UserWarning,
    "FSDP2-wrapped module",
    "the view is that hook's, and the loss takes it out of place",
)
KNOWN = (BACKWARD_HOOK, FSDP2_VIEW)
PROVENANCE = (
    "measured: the torch warnings raised in the inventory's step for CommDebugMode's backward hooks, filtered there "
    "as harmless (experiments.sharded.quiet: what each is, and the check)"
)


def record_fields(keys: set[str]) -> dict:
    """A record's ``torch_warnings_filtered``: the warnings its inventory step filtered, if any."""
    return {"torch_warnings_filtered": sorted(keys)} if keys else {}


@contextlib.contextmanager
def filtered(seen: set[str], known: tuple[Harmless, ...] = KNOWN) -> Iterator[None]:
    """Run the block with the ``known`` warnings filtered, adding the key of each that was raised to ``seen``; every
    other warning raised in the block is passed on afterwards as it was raised (the filters in force then apply:
    ``-W error`` still raises it)."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for w in caught:
            hit = next((h for h in known if h.matches(w)), None)
            if hit is not None:
                seen.add(hit.key)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def line(records: list[dict]) -> str | None:
    """The one line under the table that names the warnings the records' inventory steps filtered
    (``torch_warnings_filtered``) and the check that shows them harmless; None when none was."""
    marked = [r for r in records if r.get("torch_warnings_filtered")]
    keys = {k for r in marked for k in r["torch_warnings_filtered"]}
    said = [h for h in KNOWN if h.key in keys]
    if not said:
        return None
    steps = [r for r in marked if r.get("op") != "comm_replay"]  # a replay case records no theory of its own
    differ = [str(r.get("label", r.get("strategy"))) for r in steps if r.get("inventory_matches_theory") is False]
    if differ:
        proof = f"NOT shown harmless: the inventory differs from theory in {', '.join(differ)}"
    elif steps and all(r.get("inventory_matches_theory") for r in steps):
        proof = "Harmless: the step's collectives, phases and backward all_gathers included, match theory's (=)"
    else:
        proof = "Not checked against theory (a user model's collectives are not modelled)"
    what = "; ".join(f'{h.category.__name__} "{h.message}...": {h.why}' for h in said)
    return f"# filtered in the inventory's step (CommDebugMode's backward hooks; not the timed steps): {what}. {proof}"
