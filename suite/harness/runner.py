"""The harness: runs every declared case (suite/case.py) the same way.

    context -> skip? -> resolve -> support probe -> build -> run once -> check ->
    rebuild one buffer set per in-flight op -> warm up -> time -> reset in-place inputs, one
    untimed op -> check every timed buffer set -> reduce across ranks -> derive -> record

``Harness.run`` returns the Measurement and the record; the pytest bridge
(suite/harness/pytest/plugin.py) hands them to pytest-benchmark and fails the case when
``n_wrong > 0``. Every cross-rank decision (skip after a probe, n_wrong) is made by
every rank alike, so the ranks never part ways.

The suite's own case-level fault injection is applied here; every switch's grammar and
validation is ``suite/common/faults.py`` (names are matched by ``Case.answers_to``: an experiment,
op, label, identity value, or ``all``):

- ``SUITE_INJECT_CORRUPTION=[<fault>:]<name>[,<name>...][@timed]``: after the check run
  (or, with ``@timed``, after the timed region, in the last in-flight buffer set) every
  rank that holds an output damages it; the check must count it. ``<fault>``:
  ``flip`` (the default) adds 1 to the first element; ``misroute`` delivers the right
  values to the wrong place, as a routing bug does: outputs of one shape (chunks, messages)
  each take the next one's contents, or one output's world-size parts each take the next
  part's (suite/harness/plant/corruptions.py: the planted backend's misroute class).
- ``SUITE_INJECT_DELAY=<rank>:<seconds>[:<name>][@after|@before]``: that rank sleeps
  after each timed op completes (``@after``, the default: inside its sample, a rank slow
  in or after the op; the record must name it as ``last_done_rank``), or before each
  timed sample's op call (``@before``: a slow rank that arrives late, so every rank
  waits for it inside the op and all finish at once; the record must name it as
  ``late_arrival_rank``).
- ``SUITE_INJECT_MISMATCH=<name>``: the last rank issues one extra 1-element
  all_reduce before the case (a collective the others do not call);
  TORCH_DISTRIBUTED_DEBUG=DETAIL must name the mismatch.
- ``SUITE_INJECT_DIVERGE=<action>:<rank>:<k>[:<name>][@below]``: that rank's k-th call (1-based, counted
  over the calls the harness makes of matching cases' ops) does something else: ``skip`` (issues
  nothing), ``other`` (a 1-element broadcast instead), ``size`` (an all_reduce one element longer),
  ``sleep`` (sleeps an hour outside any op), ``recv`` (a recv from the next rank, which never
  sends), ``stray`` (the call, then after the case's last op one more of it, async and never waited
  for: what a library can leave behind), ``extra`` (the call twice). With ``@below``, k counts the
  rank's calls of the case's op in torch.distributed from the case's set-up (suite/harness/plant/below.py
  ``Below``). The after-case sequence check or the launcher's hang diagnosis must name that rank.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import os
import time
from collections.abc import Mapping

import torch
import torch.distributed as dist

from suite import results
from suite.harness import checks, journal, verify
from suite.harness.plant import backend as faulty_backend, below, corruptions, mode as fault_mode
from suite.common import faults

import suite.harness.journal.check as journal_check
from suite.case import Buffers, Case, Session, each, support_reason, wait_all
from suite.common.config import BenchConfig
from suite.common.switches import switch
from suite.harness.dist import DistContext
from suite.errors import CaseSkipped
from suite.harness.phases import Phases
from suite.harness.timing import measure
from suite.measurement import Measurement


JOURNAL_PROVENANCE = (
    "measured: seconds the op journal (suite/harness/journal/) adds to each op it records, on this rank, once per "
    "session (journal.record_cost_s: a no-op wrapped as every torch.distributed function is, less the bare call). "
    "A host-clock sample does not include it where the journal records the timed ops per block of samples, outside "
    "them (suite/harness/journal/quiet.py: the ops follow the warm-up's pattern, no fault is planted in the call); "
    "elsewhere (CUDA, a planted fault, no warm-up) each timed sample includes it once per op issued"
)


class Harness:
    """One per session: the group, the run's config, and what probes found out."""

    def __init__(
        self,
        ctx: DistContext,
        cfg: BenchConfig,
        *,
        env: Mapping[str, str] | None = None,
        keep_rank_samples: bool = False,
        phases: Phases | None = None,
    ):
        self.ctx, self.cfg = ctx, cfg
        self.env = os.environ if env is None else env
        self.keep_rank_samples = keep_rank_samples
        self.phases = Phases() if phases is None else phases
        self._support: dict = {}
        self._journal_s: float | None = None
        self._seeds = itertools.count(1)  # one per check repetition (DistContext.seed)
        self._below = below.Below()  # SUITE_INJECT_DIVERGE=...@below, armed at each case's set-up
        self._planting = fault_mode.Planting()  # SUITE_INJECT_BACKEND over plain Gloo: what its faults keep
        self.session = Session(cfg, measure=lambda ctx, call: measure(ctx, cfg, call, mode="blocking"))

    # --- the protocol ----------------------------------------------------------------------------

    def run(self, case: Case) -> tuple[Measurement, dict]:
        started = time.monotonic()  # precision mode's time cap covers the whole case
        phase, cfg = self.phases, self.cfg
        ctx, case = self._set_up(case)
        whole = ctx.whole or ctx  # a case on a partition of the world is timed, checked and recorded across it
        timing, mode = case.timing, case.timing.mode or cfg.timing_mode
        checked = case.unchecked is None
        built: list[Buffers] = []

        def build() -> Buffers:
            with phase("build"):
                b = case.build(ctx, self.session)
            built.append(b)
            return b

        planted, planted_field = faulty_backend.planted_in(case, self.env)
        arm = functools.partial(faulty_backend.armed_call, planted, planting=self._planting)
        try:
            # 1. correctness from fresh inputs, outside the timed region
            wrong_once, fields, found, earlier = self._check_run(ctx, case, build, built, arm)
            if case.around is not None:  # what `around` measures (peak memory) must not see the check run's
                gc.collect()  # buffers: a DDP model sits in reference cycles
            # 2. one buffer set per in-flight op, timed
            depth = cfg.pipeline_depth if mode in ("pipelined", "cuda_graph") else 1
            # one buffer set per op in flight (pipelined) or per op in the captured graph (cuda_graph)
            ctx.seed = next(self._seeds)  # new data: a buffer the check run left behind is wrong here
            sets = [build() for _ in range(depth)]
            around = case.around(ctx) if case.around is not None else contextlib.nullcontext()
            if phase.timeline is not None:  # its samples are steps: the trace draws compute between their ops
                phase.timeline.steps = case.bytes.time_includes
            calls, delay = self._timed_calls(ctx, case, sets, arm)
            with around:
                m = measure(
                    whole,
                    cfg,
                    calls,
                    mode=mode,
                    iters=None if timing.max_iters is None else min(cfg.iters, timing.max_iters),
                    warmup_iters=timing.warmup,
                    reset=each(b.reset for b in sets),
                    before_sample=each(b.before_sample for b in sets),
                    before_op=_delay_before(delay),
                    keep_rank_samples=self.keep_rank_samples or timing.keep_rank_samples,
                    started_at=started,
                    rank_fields_of=timing.rank_fields_of,
                    phases=phase,
                    journal_per_sample=all(c is b.call for c, b in zip(calls, sets)),
                )
                ctx.sync_device()
            if getattr(self, "_stray", None) is not None:
                self._stray, stray = None, self._stray
                stray()  # SUITE_INJECT_DIVERGE=stray: an op left in flight, after this case's last one
            if journal.current() is not None:  # the ranks issued the same collectives (not a collective itself)
                with phase("sequence_check"):
                    journal_check.agree(journal.current(), ctx, case.label)
            # 3. the buffers that were timed hold exactly one op's result (reset, one untimed op)
            self._corrupt(ctx, case, sets[-1], timed=True)
            with phase("check"):
                wrong_timed, said = checks.examine_sets(sets if checked else [], case.op, earlier)
                found += said
            with phase("gather"):
                totals = verify.global_wrong_many([wrong_once, wrong_timed], whole.group, ctx.device)
                if sum(totals):  # every rank alike: what each found, in words
                    fields["wrong_found"] = checks.found_by_rank(whole, found)
            if planted_field is not None:  # a record made under the planted faults says so
                fields["planted_fault"] = planted_field
            m = m.scaled(timing.divisor)
            with phase("record"):
                if sets[-1].derive is not None:
                    fields.update(sets[-1].derive(m, around, self.session))
            if m.group_ranks is not None:
                fields["group_ranks"] = m.group_ranks  # the global rank of each rank_median_us entry
            n_sets = len(sets)
        finally:
            for b in built:
                _release(b)
        record_started = time.perf_counter()
        rec = self._record(ctx, case, m, fields, totals if checked else None, n_sets)
        phase.add("record", time.perf_counter() - record_started, started=record_started)
        return m, rec

    # --- support probes ----------------------------------------------------------------------------

    def _supported(self, ctx: DistContext, case: Case) -> str | None:
        """None if the backend runs this form of the op, else the reason (agreed by every rank)."""
        key = (id(ctx.group), ctx.backend, ctx.device.type, case.op, case.support)
        if key not in self._support:
            head, *rest = case.support or (case.op,)
            what = f"{head} ({', '.join(map(str, rest))})" if rest else str(head)
            probe = (lambda: case.probe(ctx)) if case.probe is not None else (lambda: case.build(ctx, self.session))
            self._support[key] = support_reason(ctx, probe, what)
        return self._support[key]

    # --- the suite's own fault injection -------------------------------------------------------------

    def _corrupt(self, ctx: DistContext, case: Case, b: Buffers, *, timed: bool) -> None:
        """Plant SUITE_INJECT_CORRUPTION's fault in ``b`` when it names this case and phase."""
        inj = switch("SUITE_INJECT_CORRUPTION", self.env)
        if inj is None:
            return
        if (inj.when == "timed") != timed or not faults.targets(inj.name, case):
            return
        if inj.fault == "misroute":
            corruptions.misroute(list(b.outputs()), ctx.world_size)
        else:
            corruptions.flip(list(b.outputs()))

    def _delay(self, ctx: DistContext, case: Case) -> tuple[float, str] | None:
        """(seconds, "after" | "before") when SUITE_INJECT_DELAY delays this rank in this case, else None."""
        inj = switch("SUITE_INJECT_DELAY", self.env)
        if inj is None:
            return None
        if inj.rank != ctx.rank or not faults.targets(inj.name, case):
            return None
        return inj.seconds, inj.when

    def _diverging(self, ctx: DistContext, case: Case, call):
        inj = switch("SUITE_INJECT_DIVERGE", self.env)
        if inj is None or inj.when == "below":  # planted below the harness: below.Below
            return call
        if inj.rank != ctx.rank or not faults.targets(inj.name, case):
            return call
        action, k = inj.action, inj.k

        def diverge(async_op: bool):
            self._calls = getattr(self, "_calls", 0) + 1
            if self._calls != k:
                return call(async_op)
            if action == "sleep":
                time.sleep(3600)
            elif action == "other":
                dist.broadcast(torch.zeros(1, device=ctx.device), src=0, group=ctx.group)
            elif action == "size":
                dist.all_reduce(torch.zeros(case.bytes.count + 1, device=ctx.device), group=ctx.group)
            elif action == "stray":
                self._stray = lambda: call(True)
                return call(async_op)
            elif action == "extra":
                wait_all(call(False))
                return call(async_op)
            elif action == "recv":
                dist.recv(torch.zeros(1, device=ctx.device), src=(ctx.rank + 1) % ctx.world_size, group=ctx.group)
            return None

        return diverge

    def _timed_calls(self, ctx: DistContext, case: Case, sets: list[Buffers], arm) -> tuple[list, tuple | None]:
        """The timed calls, one per buffer set, with the faults this rank plants in them, and the delay planted
        before the op (None). A call with a fault may issue other ops than the warm-up's: where any is planted,
        the journal records the timed ops one by one (``measure``'s ``journal_per_sample``)."""
        delay = self._delay(ctx, case)
        return [self._diverging(ctx, case, _delayed_after(ctx, arm(b.call), delay)) for b in sets], delay

    def _maybe_mismatch(self, ctx: DistContext, case: Case) -> None:
        inj = switch("SUITE_INJECT_MISMATCH", self.env)
        if inj is not None and faults.targets(inj.name, case) and ctx.rank == ctx.world_size - 1:
            dist.all_reduce(torch.zeros(1, device=ctx.device), group=ctx.group)

    def _set_up(self, case: Case) -> tuple[DistContext, Case]:
        """The case's context and its resolved self, or CaseSkipped (its own skip, or a support probe's)."""
        phase, cfg = self.phases, self.cfg
        with phase("setup"):
            ctx = case.context(self.ctx, self.session) if case.context is not None else self.ctx
            self._below.arm(switch("SUITE_INJECT_DIVERGE", self.env), ctx, case)
            if case.skip is not None:
                reason = case.skip(ctx, cfg)
                if reason:
                    raise CaseSkipped(reason)
            if case.resolve is not None:
                case = case.resolve(case, ctx, cfg, self.session)
        if case.support is not None:
            with phase("probe"):
                reason = self._supported(ctx, case)
            if reason:
                raise CaseSkipped(reason)
        with phase("setup"):
            self._maybe_mismatch(ctx, case)
        return ctx, case

    def _check_run(self, ctx: DistContext, case: Case, build, built: list, arm) -> tuple[int, dict, list[str], list]:
        """One untimed op on fresh inputs (a seed of its own), checked: (this rank's wrong elements, the buffers'
        fields, what was wrong in words, a sample of its outputs); its buffers released (``built`` loses them).
        ``arm(call)``: the call as the case's calls are made (under the planted faults, armed)."""
        phase, checked = self.phases, case.unchecked is None
        ctx.seed, ctx.check_run = next(self._seeds), True
        try:
            once = build()
        finally:
            ctx.check_run = False
        if checked and once.check is None:
            raise ValueError(f"case {case.label} is checked (no `unchecked` reason) but its Buffers have no check")
        before = checks.inputs_before(once) if checked else []
        with phase("check_run"):
            wait_all(arm(once.call)(False))
            ctx.sync_device()
        self._corrupt(ctx, case, once, timed=False)
        wrong_once, found, earlier = 0, [], []
        if checked:
            with phase("check"):
                wrong_once, found = checks.examine(once, case.op, before)
                earlier = [] if once.unseeded else checks.outputs_sample(once)
        fields = dict(once.fields)
        _release(once)
        built.remove(once)
        return wrong_once, fields, [f"check run: {f}" for f in found], earlier

    def _record(self, ctx: DistContext, case: Case, m: Measurement, fields: dict, totals, n_sets: int) -> dict:
        """The case's record (results.make_record); ``totals``: every rank's wrong elements after the check run
        and after the timed samples, None where the case is not checked."""
        provenance = dict(case.provenance)
        if journal.current() is not None:  # what recording each op costs, inside every timed sample
            if self._journal_s is None:
                self._journal_s = journal.record_cost_s()
            fields["journal_us_per_op"] = round(self._journal_s * 1e6, 3)
            provenance["journal_us_per_op"] = JOURNAL_PROVENANCE
        extra = _merge_fields(
            {k: v for k, v in case.identity.items() if k != "in_place"}, dict(case.fields), fields, label=case.label
        )
        return results.make_record(
            case=results.RecordCase(
                experiment=case.experiment,
                op=case.op,
                backend=ctx.backend,
                device=ctx.device.type,
                world_size=ctx.world_size,
                in_place=bool(case.identity.get("in_place", False)),
            ),
            size=case.bytes,
            m=m,
            check=results.CheckOutcome(
                wrong=None if totals is None else (totals[0], totals[1]),
                buffer_sets=0 if totals is None else n_sets,
                unchecked_reason=case.unchecked,
            ),
            provenance=provenance,
            fields={
                "identity": sorted(case.identity),
                "label": case.record_label or case.label,
                "size_definition": case.bytes.definition,
                "time_normalisation": case.timing.normalisation,
                "time_divisor": case.timing.divisor,
                "requested_timing_mode": self.cfg.timing_mode,
                "hosts": len(set(ctx.hostnames)),
                **extra,
            },
        )


def _delayed_after(ctx: DistContext, call, delay: tuple[float, str] | None):
    """``call``, then a sleep inside the op's sample (a rank slow in or after the op), when asked."""
    if delay is None or delay[1] != "after":
        return call
    seconds = delay[0]

    def slow(async_op: bool):
        wait_all(call(async_op))
        ctx.sync_device()
        time.sleep(seconds)
        return None

    return slow


def _delay_before(delay: tuple[float, str] | None):
    """A sleep between the sample's barrier and the op call (a rank that arrives late), when asked."""
    if delay is None or delay[1] != "before":
        return None
    seconds = delay[0]
    return lambda: time.sleep(seconds)


def _merge_fields(identity: dict, declared: dict, built: dict, *, label: str) -> dict:
    """A case's identity, declared and rank-time fields as one dict; a name in two of them is a
    declaration error (one of the values would be lost)."""
    seen: dict = {}
    for part in (identity, declared, built):
        both = set(seen) & set(part)
        if both:
            raise ValueError(
                f"case {label}: field(s) {', '.join(sorted(both))} declared twice "
                "(identity, Case.fields and Buffers.fields/derive must not overlap)"
            )
        seen.update(part)
    return seen


def _release(b: Buffers) -> None:
    """Call a buffer set's release once (the harness may reach it twice: done, and in finally)."""
    if b.release is not None:
        release, b.release = b.release, None
        release()
