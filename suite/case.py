"""The case protocol: what an experiment declares. The harness (suite/harness/runner.py) does the rest.

An experiment's ``cases.py`` (``experiments/<name>/``) declares its cases and nothing about how they are
run; its ``__init__.py`` declares the experiment itself (``ExperimentSpec``, at the end of this module)::

    def my_cases(cfg: BenchConfig, world_size: int) -> list[Case]:
        return [Case(experiment="mine", op="all_reduce", label=..., identity={...},
                     bytes=Bytes(size_bytes=..., count=..., dtype="float32", bw_op="all_reduce"),
                     build=lambda ctx, session: Buffers(call=..., check=..., outputs=...))]

    test_mine = experiment_test(my_cases)

Every case then runs the same way (suite/harness/runner.py): skip? → support probe →
build → run once → check → rebuild one buffer set per in-flight op → warm up →
time → check every timed buffer set → reduce across ranks → record → submit.

- ``identity``: the fields that name the case; ``make compare`` matches runs on them
  (and on experiment/op/backend/device/world_size), never on measured fields.
- ``bytes``: which bytes count as ``size_bytes`` and which op-table entry gives the
  busbw factor (suite/metrics.py, the one op table).
- ``timing``: how it is timed where that is not the run's (``Timing``: a fixed mode, a divisor and
  what the divided time means, fewer iterations, every rank's samples kept).
- ``build(ctx, session)`` -> ``Buffers``: the inputs on this rank, the call (``call(async_op)``),
  the exact check (wrong elements on this rank), the outputs (for the suite's own
  fault injection), and ``reset`` for ops that consume their inputs in place.
- ``unchecked``: a case with genuinely nothing to check says why; the record then has
  ``checked: false`` and that reason, never a silent ``n_wrong = 0``.

This module imports neither pytest nor the harness: ``import experiments.<name>`` works
anywhere.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from suite.errors import CaseFailed, CaseSkipped, NeedsRanks, StepNotTaken  # noqa: F401  (part of the public case API)

OpFn = Callable[[bool], object]


class Session:
    """What lives as long as the process group: things a case builds once and shares
    (extra process groups, a probe's result, a baseline measurement). Passed to
    ``Case.context``, ``Case.resolve`` and ``Case.derive``; no module-level caches."""

    def __init__(self, cfg=None, measure: Callable | None = None) -> None:
        self.cfg = cfg
        """The run's validated BenchConfig."""
        self._memo: dict = {}
        self._measure = measure

    def once(self, key, factory: Callable[[], object]):
        """``factory()`` the first time ``key`` is asked for, the same object afterwards."""
        if key not in self._memo:
            self._memo[key] = factory()
        return self._memo[key]

    def baseline(self, key, ctx, make_call: Callable[[], OpFn]):
        """A measurement other cases are compared with (e.g. a step without communication): the
        one ``keep_baseline`` stored under ``key`` (a case's own timed run), else taken now, once, by
        the harness's timing loop (blocking, the run's iterations) on ``make_call()``."""
        if self._measure is None:
            raise RuntimeError("this session has no harness to measure with")
        return self.once(("baseline", key), lambda: self._measure(ctx, make_call()))

    def keep_baseline(self, key, m) -> None:
        """Offer a case's own Measurement as the baseline ``key`` (kept if none is stored yet)."""
        self.once(("baseline", key), lambda: m)


@dataclass(frozen=True, kw_only=True)
class Bytes:
    """The byte model of a case: what ``size_bytes`` is and which busbw factor applies."""

    size_bytes: int
    """Bytes that count for algbw = size_bytes / time."""
    count: int
    """Elements (size_bytes / element size)."""
    dtype: str
    """Element type name, or "none"."""
    bw_op: str | None
    """Op-table key of the busbw factor (suite.metrics); None: no bus bandwidth for this case."""
    definition: str = "the whole buffer of the collective (nccl-tests S)"
    """What size_bytes is, in words (recorded)."""
    time_includes: str | None = None
    """The computation the timed interval includes besides communication (e.g. "forward, backward and
    optimizer step"); None: communication only. With compute in the time, size / time is an effective
    rate of the whole step: the record carries ``effective_busbw_gbps``, never an nccl-tests busbw."""


@dataclass
class Buffers:
    """One buffer set of a case on this rank, as ``Case.build`` returns it."""

    call: OpFn
    """Issue the op once (argument: async_op); returns a Work, a list of them, or None."""
    check: Callable[[], int] | None = None
    """Wrong elements on this rank against the exact expected result (0 where this rank holds no result)."""
    outputs: Callable[[], Sequence] = lambda: ()
    """This rank's checked output tensors (the fault-injection target; those made by ``verify.output`` start as
    poison inside guard bands, which the harness checks)."""
    unseeded: bool = False
    """The outputs do not follow ``ctx.seed`` (the check run and the timed sets start from the same state), so one
    that equals the check run's is not named stale."""
    inputs: Callable[[], Sequence] = lambda: ()
    """The inputs an out-of-place op must leave as they were (the harness compares them after the check run)."""
    reset: Callable[[], None] | None = None
    """Restore inputs the op consumes in place. The harness runs it once after the timed samples, then one
    more untimed op, so the buffers checked hold exactly one op's result; the timed samples run back to back
    on whatever the buffers hold, as a training loop would."""
    before_sample: Callable[[], None] | None = None
    """Runs before each timed sample, outside it (e.g. reading DDP's logger); it must not write the op's buffers."""
    fields: dict = field(default_factory=dict)
    """Fields known only on a rank (e.g. which links cross nodes); must be the same on every rank."""
    derive: Callable[..., dict] | None = None
    """derive(m, around, session) -> fields computed from this case's own timed Measurement ``m``
    (e.g. samples/s from its median, DDP's logger of the timed module, the peak memory that
    ``Case.around`` saw); called on the last timed buffer set, on every rank alike (it may use
    collectives). Name each formula in ``Case.provenance``."""
    release: Callable[[], None] | None = None
    """Undo what build did to the process (e.g. CPU pinning); called once the harness is done with
    this buffer set, also when the case fails or skips."""


@dataclass(frozen=True, kw_only=True)
class Timing:
    """How a case is timed: what the harness's timing loop (suite/harness/timing.py) and the record's time
    fields take from the case, and nothing else. Changing one (``dataclasses.replace(case.timing, ...)``)
    changes the time a case reports, never what it runs or checks."""

    mode: str | None = None
    """A fixed timing mode (e.g. blocking for a pattern that completes inside one call); None: the run's."""
    divisor: float = 1
    """Samples are divided by this (e.g. 2 for one-way latency from a round trip)."""
    normalisation: str = "none: time of one op"
    """What the divided time is, in words (recorded as ``time_normalisation``)."""
    max_iters: int | None = None
    """Cap on timed iterations (a context measurement, e.g. a barrier beside a probe table)."""
    warmup: int | None = None
    """Warm-up iterations instead of the run's."""
    keep_rank_samples: bool = False
    """Record every rank's own time of every sample (``rank_samples_us``), not only the per-rank medians
    (the doctor's straggler and per-rank distributions need them)."""
    rank_fields_of: tuple[int, ...] | None = None
    """The ranks (positions in the case's group) whose own times the per-rank fields report, e.g. a pair
    pattern's two ranks, or ping-pong's initiator alone (its clock, as OSU times it); the others take no
    part and are in none of them (the sample is still the maximum over every rank). None: every rank."""


@dataclass(frozen=True, kw_only=True)
class Case:
    """One concrete measurement, declared: what it is (``experiment`` to ``names``), how it is timed
    (``timing``), and the hooks the harness calls (``build`` to ``resolve``)."""

    experiment: str
    op: str
    """Recorded ``op``."""
    label: str
    """Unique within the experiment; the test id."""
    record_label: str | None = None
    """The ``label`` recorded (tables show it) when it differs from the test id ``label``."""
    identity: Mapping[str, object] = field(default_factory=dict)
    """The fields that name the case (recorded; ``make compare`` matches on them). Empty: only the fields every
    case has (experiment, op, dtype, size, and the run's backend, device, world size and timing)."""
    bytes: Bytes
    unchecked: str | None = None
    """Why this case has nothing to check (None: it is checked)."""
    fields: Mapping[str, object] = field(default_factory=dict)
    """Descriptive fields recorded with the case (not identity)."""
    provenance: Mapping[str, str] = field(default_factory=dict)
    """How each case-specific number was obtained: "measured: ...", "derived: <formula>", "modelled: <model>"."""
    names: tuple[str, ...] = ()
    """Extra names the suite's fault injection answers to (besides experiment, op, label, identity values)."""

    timing: Timing = Timing()
    """How it is timed, where that differs from the run's (``Timing()``: the run's timing loop as it is)."""

    build: Callable[..., Buffers]
    """build(ctx, session) -> Buffers on this rank; ``session`` (a ``Session``) holds what cases share for as
    long as the process group lives (a reference trainer, a mesh, a baseline), so a builder that needs it
    gets it here rather than through ``resolve``."""
    skip: Callable[..., str | None] | None = None
    """skip(ctx, cfg) -> reason, or None to run. Must decide alike on every rank."""
    support: tuple | None = None
    """Cases with the same key share one support probe (a tiny build run once); None: no probe.
    The first element names what is probed in the skip reason ("gloo does not support <it> (<rest>)")."""
    probe: Callable[..., Buffers] | None = None
    """probe(ctx) -> a tiny Buffers whose call tells whether the backend supports this form."""
    context: Callable[..., object] | None = None
    """context(ctx, session) -> the DistContext this case runs on (default: the session's); may raise
    CaseSkipped (the same on every rank)."""
    around: Callable[..., object] | None = None
    """around(ctx) -> a context manager entered around warm-up and the timed samples (e.g. peak memory);
    ``Buffers.derive`` gets it."""
    resolve: Callable[..., "Case"] | None = None
    """resolve(case, ctx, cfg, session) -> the concrete case (e.g. ``dataclasses.replace(case, ...)``), for a
    case whose size or fields are found at run time (e.g. by a probe); may raise CaseSkipped or CaseFailed
    (the same on every rank). Not for binding the session: ``build`` gets it."""

    def answers_to(self, name: str) -> bool:
        """Whether fault-injection target ``name`` selects this case."""
        own = {self.experiment, self.op, self.label, *self.names}
        own |= {str(v) for v in self.identity.values()}
        return name in ("all",) or name in own


def restorer(*tensors) -> Callable[[], None]:
    """A ``Buffers.reset`` for ops that consume their inputs in place: keeps a pristine copy of each
    tensor now and copies it back on every call."""
    saved = [(t, t.clone()) for t in tensors]

    def reset() -> None:
        for t, src in saved:
            t.copy_(src)

    return reset


def each(hooks) -> Callable[[], None] | None:
    """One hook that calls every one of ``hooks`` that is not None, in order; None when none is (the buffer
    sets of a sample, the parts of a step, as one ``reset`` or ``before_sample``)."""
    fns = [h for h in hooks if h is not None]
    if not fns:
        return None

    def call_each() -> None:
        for h in fns:
            h()

    return call_each


def wait_all(work) -> None:
    """Wait for what an op returned: a Work, a list of them (nested), or None (it was synchronous)."""
    if work is None:
        return
    if isinstance(work, (list, tuple)):
        for w in work:
            wait_all(w)
        return
    work.wait()


def support_reason(
    ctx, factory: Callable[[], Buffers], what: str, *, reraise: tuple[type[BaseException], ...] = ()
) -> str | None:
    """Run ``factory().call`` once (a tiny op) and agree across ranks whether it worked:
    None if every rank ran it, else the backend's own words (or "on another rank"). Errors of a
    type in ``reraise`` (a bug in the suite, not a limit of the backend) are raised, not reported."""
    reason = None
    try:
        b = factory()
        try:
            wait_all(b.call(False))
            ctx.sync_device()
        finally:
            if b.release is not None:
                b.release()
    except Exception as e:  # the backend's own words become the reason
        if isinstance(e, reraise):
            raise
        reason = (
            f"{ctx.backend} does not support {what}: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        )
    if not ctx.agree_all(reason is None) and reason is None:
        reason = f"{ctx.backend} does not support {what} on another rank"
    return reason


def experiment_test(provider: Callable[..., list[Case]]):
    """A pytest test function that runs every case ``provider(cfg, world_size)`` declares.

    The pytest bridge (suite/harness/pytest/plugin.py) parametrizes it with the cases and hands it
    the harness; the function body is the harness's, not the experiment's.
    """

    def test(suite_case: Case, harness) -> None:
        harness.run(suite_case)

    test.suite_cases = provider
    test.__doc__ = provider.__doc__
    return test


def collected(module: str) -> Callable[..., list[Case]]:
    """``(cfg, world_size) -> list[Case]``: every case the ``experiment_test`` functions of ``module``
    declare (what pytest runs when it collects that file). ``module`` is imported on the first call, not
    now, so that a spec naming it stays light to import."""

    def cases(cfg, world_size: int) -> list[Case]:
        mod = importlib.import_module(module)
        tests = [v for k, v in vars(mod).items() if k.startswith("test") and hasattr(v, "suite_cases")]
        return [c for t in tests for c in t.suite_cases(cfg, world_size)]

    cases.__qualname__ = f"collected({module!r})"
    return cases


def later(target: str) -> Callable:
    """A function that imports ``"package.module:function"`` when first called and calls it: a spec's hook
    whose module is heavy (torch, numpy, plots) stays out of what reading the spec imports."""
    module, _, name = target.partition(":")

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__qualname__ = f"later({target!r})"
    return call


def module_doc(path) -> str | None:
    """A module's docstring, read without importing it: a spec whose table module is heavy (it imports the
    workloads, hence torch) names its how-to-read text while the table stays a ``later`` hook."""
    with open(path) as fh:
        return ast.get_docstring(ast.parse(fh.read()), clean=False)


@dataclass(frozen=True, kw_only=True)
class ExperimentSpec:
    """What the core knows of one experiment: the folder ``experiments/<name>/`` defines it as ``SPEC`` in
    its ``__init__.py`` (``suite.registry.discover`` finds it), and the core reads nothing else of it.

    The folder's fixed files: ``__init__.py`` (the SPEC), ``cases.py`` (the declarations and their
    ``experiment_test`` functions: the file the launcher hands to pytest), and where it has them
    ``settings.py``, ``table.py`` and a ``README.md``.

    Light to read: offline code (report, compare, tables) reads specs and must not import
    torch.distributed through them. So ``__init__.py`` imports only light modules (its settings and
    table: dataclasses and formatting), and every hook that needs torch or a large module is resolved
    when it is called: ``cases`` by ``collected("experiments.<name>.cases")``, heavy hooks by
    ``later("module:function")`` (both in this module).
    """

    name: str
    """The folder's name and the records' ``experiment`` field."""
    cases: Callable[..., list[Case]]
    """cases(cfg, world_size) -> every case of the experiment (resolved lazily; see above)."""
    settings: type | None = None
    """A frozen, keyword-only dataclass of the experiment's knobs, nested in BenchConfig as the field
    ``<name>``; each field's environment (= make) variable in ``field(metadata={"env": "DDP_PARAMS"})``.
    Its ``validate(self)`` method, if any, raises ConfigError naming the knob to change."""
    table: Callable[[list[dict]], str] | None = None
    """table(records) -> its text tables; None: the core's generic table per op."""
    guide: str | None = None
    """How to read its tables (a note above them in the report); None: nothing to add."""
    in_all: bool = True
    """Whether EXPERIMENTS=all runs it (a health check that is no benchmark: False)."""
    min_world_size: int = 1
    """Fewer ranks than this are rejected before any rank starts, with ``needs_ranks_because``."""
    needs_ranks_because: str = ""
    """Why it needs ``min_world_size`` ranks (the first half of the error line)."""
    check_world: Callable[[object, int, object], None] | None = None
    """check_world(settings, world_size, cfg): raises ConfigError (one line naming the knob) where its settings
    cannot run at this world size or name user code that does not load; the launcher calls it before any rank
    starts (exit 2), with the run's whole config (``cfg``: a knob of another experiment it reads, as recovery
    reads SHARDED_MODEL). Checks that need no world size belong in the settings' ``validate``."""
    report_order: int = 0
    """Its place among the report's sections (lower first; equal: the order of the records)."""
    library_collectives: bool = False
    """Its sweeps time the library's own collectives: the report's link fits prefer them, and its peak
    bus bandwidths lead the summary."""
    report_section: Callable[..., object] | None = None
    """report_section(run, plot_name, memo) -> the report's Section for its records, instead of the
    generic one (``memo``: a dict shared with ``summary`` within one report)."""
    summary: Callable[..., tuple[str, str]] | None = None
    """summary(run, memo) -> a (what, finding) row of the report's first screen, also for a run
    without its records (then it says how to get them)."""
    headline: Callable[..., object] | None = None
    """headline(run, records) -> a suite.report.headline.Clause: what its records measured and show, the
    measured part of its sentence in the run's headline (the core adds the wrong count); None, or a hook
    that returns None: the core's sentence (the peak bus bandwidth against the link's rate, or its highest)."""
    glance: Callable[..., object] | None = None
    """glance(run, records) -> a suite.report.glance.Picture: its first picture at the top of the report, with
    the one line that says what to see (its PNG None: a caption alone, saying why there is nothing to draw);
    None: its own section's first figure, if it draws its own section, else nothing there."""
    verdict: Callable[..., int] | None = None
    """verdict(run_dir) -> the run's exit status, called by the launcher after a successful run that
    included the experiment (a health check: EXIT_FINDING when something is wrong)."""
    step_model: Callable[[], object] | None = None
    """step_model() -> its suite.model.step.StepModel: the training step it measures, predicted at N ranks by
    make predict and checked by make validate-predict (resolved lazily: ``later("<pkg>.model:step_model")``)."""
    link_points: Callable[[dict], bool] | None = None
    """link_points(record) -> whether the record times the library's collective alone, so that suite.model's
    link fits may use it (the ``library_collectives`` experiments first; the others only where those have
    none); None: none of its records."""
