"""One training case's watch on one rank: its steps' own times, sent to rank 0 every ``EVERY`` steps, where the
detector (suite/watch/detect.py) names a rank, a node or a link that turned slow, while the case still runs.

Per step and per rank (``Watch.wrap``, inside the timed step: three clock reads, a list append, and one clock read
per parameter as its gradient is accumulated):

- ``compute``: from the start of the module's first forward in the step (a forward pre-hook) to this rank's last
  gradient accumulated (a hook on every parameter). Under DDP that is this rank's own forward and backward: DDP
  broadcasts its buffers (BatchNorm's) before it calls the module's forward, a wait for the slowest rank that would
  make every rank look as slow as it; its all-reduces run beside the backward on their own thread and only the
  step's end waits for them. Under a strategy that communicates inside forward or backward (FSDP2,
  tensor or sequence parallel, a pipeline) it also holds the waits there; where no gradient hook fires (a sharded
  parameter whose gradient the strategy assigns) it runs to the step's end.
- ``lateness``: the rank's arrival at the step's last gradient all-reduce (DDP issues a bucket's all-reduce when
  its last gradient is accumulated; the step waits for the last) less the earliest rank's, each measured from its
  own first forward's start, which follows the harness's barrier (and DDP's buffer broadcast): no clocks compared
  across hosts.

After ``EVERY`` steps, then as many as keep the exchange at ``COST_PCT`` of the step (``EVERY``..``EVERY_MAX``, and at
most ``GAP_S`` of steps at the last exchange's speed), or sooner where the steps turned slower (``Cadence``: every
``CHECK_S`` of steps or more, as many as keep a check's measured cost at ``CHECK_PCT`` of the step, the ranks learn, a
check later, the longest time any of them has spent since the last exchange),
before the next timed sample and outside it (``before_sample``), the ranks all_gather their
rows as one float64 tensor on a Gloo group (the case's own where it is Gloo, else one Gloo side group per session) and
rank 0 feeds them to the detector (with each rank's host's CPU counters: suite/watch/foreign.py, ``foreign load``):
a step per point, or where steps are shorter than ``POINT_S`` each rank's median over a block of steps (the
flag's steps are then the block's first and last). A flag is one line on rank 0's terminal
(suite/watch/console.py), a marker on rank 0's track of the run's timeline, and an entry of the case's record's
``slowdowns``. ``watch_cost_pct`` is the checks', the exchanges' and the detection's time per step while the steps run,
on rank 0, over its median step (``CHECK_PCT`` and ``COST_PCT`` aim at 0.8% together): an upper bound, since the
all_gather's time holds the wait for the last rank to reach it, which the harness's barrier before the next step would
otherwise hold. The last exchange, after the last step (with the
record's other derived fields), is ``watch_final_ms``, apart.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from suite.watch import console, detect, foreign, links, pauses, replay

EVERY = 10
"""Steps before the first exchange, and the fewest between two."""
EVERY_MAX = 1000
"""The most steps between two exchanges."""
GAP_S = 2.0
"""The most time of steps between two exchanges (at least ``EVERY`` steps): what a flag may wait for the detector to
see its steps. One exchange held up (a rank paused as it reached it: seconds) would otherwise set the next one a
thousand steps later, past the run's end."""
CHECK = 5
"""The fewest steps between two checks of the time since the last exchange (``Cadence``)."""
CHECK_S = 0.1
"""The least time of steps between two checks, at the last exchange's median step. A check per ``CHECK`` steps of
1.3 ms cost 4 to 14% of them on a loaded 2-core machine."""
CHECK_PCT = 0.3
"""The checks' share of the step time aimed at: a check reads the all_reduce the check before started and starts one
of one number, and what that costs is measured as the run goes (each rank's mean over its checks so far, the largest
over the ranks): after each exchange the steps between two checks are as many as keep that mean at this percentage
of the median step, and at least ``CHECK_S`` of steps and ``CHECK`` steps (``check_every``). A check's time is no
constant: the call alone is a few hundred µs on a loaded 2-core machine, and now and then it waits milliseconds for
a rank the host held back; at a check per 0.1 s of steps, checks alone came to 0.6% of steps of 28 ms there. The first
check, which often waits for a peer still setting up, is left out of the mean once there are others."""
CHECK_MAX_S = 0.5
"""The most time of steps between two checks, at the last exchange's median step: a slowdown's first exchange comes
within ``GAP_S`` and two checks' steps (at the slowed speed), so a check held up once must not space them by seconds.
It bounds ``CHECK_PCT`` only where a check costs more than 1.5 ms on the mean (``CHECK_PCT`` of 0.5 s)."""
COST_PCT = 0.5
"""The exchanges' share of the step time aimed at: after each, the steps to the next are as many as keep the
exchanges' mean cost so far (the largest any rank measured; the first exchange, which meets the group's first
collective, left out once there are others) at this percentage of the median step, within EVERY..EVERY_MAX and at
most ``GAP_S`` of steps. With ``CHECK_PCT``, the watch's exchanges and checks together aim at 0.8% of the median step;
an exchange that costs more than ``COST_PCT`` of ``GAP_S`` (10 ms) is spaced by ``GAP_S`` instead, and the record's
``watch_cost_pct`` says what the run paid."""
POINT_S = 0.05
"""The least time one point of the detector's series covers: steps shorter than that are taken in blocks of as many
as make it up (each rank's median over the block), so that the detection's cost per step stays small beside the
step; the block is set from the median of the steps after the first exchange's (the first are slower: warm-up), and
set again from each later exchange's median step where that makes it ``REBLOCK`` times smaller or larger (``block``)."""
REBLOCK = 2
"""How many times smaller or larger the block an exchange's steps ask for must be for the block to change. A block set
once from the first steps held a slowdown many times over to its few points: a rank cut to 0.05 CPU (steps of 20 ms
to 400 ms, blocks of 3) had 16 points in a 20 s stretch, and the 12 points since the onset a flag needs took 14 s.
The factor keeps a host's load, which moves the step by less, from changing the block at every exchange."""
_ROW = 5  # start clock, compute, step, this rank's mean cost of an exchange and of a check so far


class Cadence:
    """When the ranks exchange, the same step on every rank (the exchange is a collective): after ``every`` steps
    (``next_every``, set at each exchange from the steps before it), or at a check, every ``check`` steps
    (``check_every``: a check's measured cost at ``CHECK_PCT`` of the step, at least ``CHECK_S`` of steps at the last
    exchange's speed), where the longest time any rank had spent
    since the last exchange, at the check before, and what it grew by since the check before that (the time now,
    about), reach ``GAP_S``.

    ``every`` alone is a count of steps at the speed of the steps before: a rank that turns 15 times slower (cut to
    0.05 CPU) made the first exchange after its onset come 15 times later (38 steps, a bench trial's spacing here, of
    20 ms each 15 times longer: 11 s), and its flag with it. A rank's own clock cannot decide alone (the ranks would
    part at the collective); so at each check each rank starts an all_reduce of its time since the last exchange (its
    maximum over the ranks), without waiting for it, and reads it at the next check, when it has long arrived:
    nothing waits on the peers, and an exchange comes about ``GAP_S`` after the last, within a check's steps, however
    much slower the steps turned."""

    def __init__(self) -> None:
        self.pending: Callable[[], float] | None = None
        self.read = 0.0  # the time the last check read (0: none since the last exchange)
        self.check = CHECK  # steps between two checks (set at each exchange: ``check_every``)
        self.checks = 0  # the checks made

    def due(self, rows: int, every: int, elapsed_s: float, reduce: Callable[[float], Callable[[], float]]) -> bool:
        """Whether to exchange now: ``rows`` steps since the last exchange, ``elapsed_s`` seconds since it on this
        rank; ``reduce(x)`` starts the maximum of ``x`` over the ranks and returns what waits for it."""
        if rows >= every:
            return True
        if rows == 0 or rows % self.check:
            return False
        self.checks += 1
        late = False
        if self.pending is not None:  # the time at the check before, and as much again: the time now, about
            now = self.pending()
            late, self.read = 2 * now - self.read >= GAP_S, now
        self.pending = None if late else reduce(elapsed_s)
        return late

    def settle(self) -> None:
        """The check in flight waited for (at an exchange, and after the last step: no collective left behind)."""
        if self.pending is not None:
            self.pending()
        self.pending, self.read = None, 0.0


class Watch:
    def __init__(self, ctx, session, module, every: int = EVERY) -> None:
        self.ctx, self.session, self.every = ctx, session, every
        self.rows: list[tuple[float, ...]] = []
        self.last_grad: float | None = None
        self.hooks = [p.register_post_accumulate_grad_hook(self._grad) for p in module.parameters() if p.requires_grad]
        self.forward_at: float | None = None
        self.hooks.append(module.register_forward_pre_hook(self._forward))
        self.ranks = dist.get_process_group_ranks(ctx.group)
        self.rank0 = ctx.rank == self.ranks[0]
        self.nodes: dict[str, tuple[int, ...]] = {}
        for r in self.ranks:
            name = f"node{ctx.node_of(r)}"
            self.nodes[name] = (*self.nodes.get(name, ()), r)
        self.feed = replay.Points(self.ranks, self.nodes)  # the detectors, and the series kept for a replay
        self.starts: list[float] = []  # rank 0's clock at each step's start
        self.steps: list[float] = []  # rank 0's step times
        self.computes: list[list[float]] = []  # per step: each rank's compute (s), in the order of ``ranks``
        self.held: list[list[float]] = []  # per step: each rank's own time (pauses.held)
        self.block = self.fed = 0  # steps per point of the detector's series; steps fed to it
        self.points: list[int] = []  # each point's first step, then one past the last point's last step
        self.flags: list[dict] = []
        self.gather_s = self.detect_s = self.final_s = 0.0  # the exchanges' time while the steps run, the last's (s)
        self.check_s = self.idle_s = 0.0  # the checks' time, and the other calls' (a count and a modulo)
        self.checks = 0  # the checks that did not exchange (those that did count with the exchange)
        self.first_check = 0.0  # the first one's time (s)
        self.costs: list[float] = []  # each exchange's time on this rank (s), the last excepted
        self.mine = (0.0, 0.0)  # this rank's mean exchange and mean check so far (s): what its rows carry
        self.sent = 0
        self.host = foreign.Host(len(self.ranks))  # the CPU outside the run on each rank's host (rank 0)
        self.pace, self.fed_at = links.Pace(), []  # the job's step per exchange (every rank); points fed by each
        self.cadence, self.since = Cadence(), time.perf_counter()  # when to exchange; the last exchange's end

    def _grad(self, _param) -> None:
        self.last_grad = time.perf_counter()

    def _forward(self, _module, _args) -> None:
        if self.forward_at is None:  # the step's first forward (accumulation runs several)
            self.forward_at = time.perf_counter()

    def wrap(self, call: Callable) -> Callable:
        """``call`` timed: its start, its compute (to the last gradient) and its end on this rank."""
        clock = time.perf_counter

        def watched(*args):
            self.last_grad = self.forward_at = None
            t0 = clock()
            out = call(*args)
            t1 = clock()
            self.rows.append((t0, (self.last_grad or t1) - (self.forward_at or t0), t1 - t0, *self.mine))
            return out

        return watched

    def before_sample(self) -> None:
        t = time.perf_counter()
        checks = self.cadence.checks
        if self.cadence.due(len(self.rows), self.every, t - self.since, self._reduce):
            self.exchange()
        elif self.cadence.checks > checks:  # a check: reading the last all_reduce, starting the next
            took = time.perf_counter() - t
            self.check_s += took
            self.checks += 1
            self.first_check = self.first_check or took
            later = self.check_s - self.first_check
            self.mine = (self.mine[0], later / (self.checks - 1) if self.checks > 1 else took)
        else:
            self.idle_s += time.perf_counter() - t

    def _reduce(self, x: float) -> Callable[[], float]:
        """``x``'s maximum over the ranks, started (not waited for): what waits for it and returns it."""
        value = torch.tensor([x], dtype=torch.float64)
        work = dist.all_reduce(value, op=dist.ReduceOp.MAX, group=self._group(), async_op=True)
        return lambda: (work.wait(), float(value[0]))[1]

    def _group(self):
        from suite.harness import groups  # the one home of new_group

        if dist.get_backend(self.ctx.group) == groups.GLOO:
            return self.ctx.group
        side = lambda: groups.partition_group([self.ranks], self.ctx.rank, groups.GLOO, groups.timeout_of(self.ctx))  # noqa: E731
        return self.session.once(("watch", "gloo", tuple(self.ranks)), side)

    def exchange(self, final: bool = False) -> None:
        """Every rank's rows since the last exchange to every rank (one all_gather), the detector on rank 0;
        ``final``: after the last step (its time is not the steps' cost)."""
        t = time.perf_counter()
        self.cadence.settle()
        mine, self.rows = self.rows, []
        sent = [*mine, foreign.sample()]  # the rows, then this rank's CPU counters (foreign.py)
        gathered = [torch.empty(len(sent), _ROW, dtype=torch.float64) for _ in self.ranks]
        dist.all_gather(gathered, torch.tensor(sent, dtype=torch.float64), group=self._group())
        t_gathered = time.perf_counter()
        samples, gathered = [g[-1].tolist() for g in gathered], [g[:-1] for g in gathered]
        if self.rank0:
            self.host.add(samples)
            self._feed(gathered)
        # the same on every rank: from what every rank received
        median = float(torch.cat([g[:, 2] for g in gathered]).median())
        self.every = next_every(max(float(g[-1, 3]) for g in gathered), median)
        self.cadence.check = check_every(median, max(float(g[-1, 4]) for g in gathered))
        self.sent += len(mine)
        self.fed_at.append(max(0, len(self.points) - 1))
        if self.pace.due(median, len(self.nodes)) and not final:  # every rank alike: the same rows
            self._probe()
        now = self.since = time.perf_counter()
        if final:
            self.final_s = now - t
            return
        self.gather_s += t_gathered - t
        self.detect_s += now - t_gathered
        self.costs.append(now - t)
        self.mine = (statistics.fmean(self.costs[1:] or self.costs), self.mine[1])

    def _probe(self) -> None:
        """Every rank: the node leaders' link probe (links.py); what it names flagged on rank 0."""
        table = links.probe(self.nodes, self.ctx.rank, self._group())
        hit = links.named(table)  # the same table on every rank: the same answer
        self.pace.done = hit is not None
        last = len(self.points) - 2  # the last point fed
        if hit is not None and self.rank0 and last >= 0:
            onset = min(self.fed_at[-1 - links.SLOW_EXCHANGES], last)
            self._flagged([links.flag(table, hit, self.nodes, (onset, last), self.pace.ratio())])

    def _feed(self, gathered: list[torch.Tensor]) -> None:
        """Rank 0: the steps just received into the series; each ``block`` of them one point of the detector."""
        me = self.ranks.index(self.ctx.rank)
        rows = [g.tolist() for g in gathered]  # per rank (its position): its rows
        for i in range(len(rows[me])):
            self.starts.append(rows[me][i][0])
            self.steps.append(rows[me][i][2])
            self.computes.append([r[i][1] for r in rows])
            self.held.append(pauses.held(self.computes[-1], [r[i][2] for r in rows]))
        if self.block == 0 and len(self.steps) > EVERY:  # from the steps after the first exchange's (warmer)
            self.block = block(statistics.median(self.steps[EVERY:]))
        elif self.block:
            self.block = block(statistics.median(self.steps[-len(rows[me]) :]), self.block)
        if self.block == 0:
            return
        while len(self.computes) - self.fed >= self.block:
            chunk = slice(self.fed, self.fed + self.block)
            self.points[-1:] = [self.fed, self.fed + self.block]
            compute = [statistics.median(c[k] for c in self.computes[chunk]) for k in range(len(self.ranks))]
            held = [statistics.fmean(c[k] for c in self.held[chunk]) for k in range(len(self.ranks))]
            flags = self.feed.add(self.fed, self.starts[self.fed] - self.starts[0], compute, held, self.host.now)
            self.fed += self.block
            if flags:
                self._flagged(flags)

    def _flagged(self, flags: list[detect.Flag]) -> None:
        now = time.perf_counter()
        unix = time.time() - now
        at = self.points
        for f in flags:  # the detector's points back to steps
            onset, detected = at[f.onset], at[f.detected + 1] - 1
            before = onset - at[max(0, f.onset - f.before)]
            f = dataclasses.replace(f, onset=onset, detected=detected, before=before, after=detected + 1 - onset)
            after_s = now - self.starts[f.onset]
            entry = console.entry(f, self.starts[f.onset] + unix, now + unix, after_s, self._late(f))
            self.flags.append(entry)
            console.say(detect.line(f, after_s))
            console.mark(f"slow: {f.target}", now, {"line": detect.line(f, after_s), **entry})

    def _lateness(self, k: int, steps: range) -> float:
        """The median over ``steps`` of rank position ``k``'s compute less the earliest rank's (s)."""
        return statistics.median(self.computes[t][k] - min(self.computes[t]) for t in steps)

    def _late(self, f: detect.Flag) -> float:
        """The flagged ranks' median lateness since the onset (s)."""
        steps = range(f.onset, f.detected + 1)
        return statistics.median(self._lateness(self.ranks.index(r), steps) for r in f.ranks)

    def finish(self) -> dict:
        """The record's fields, the same on every rank (collectives: every rank calls it, after the timed steps)."""
        if self.rows:
            self.exchange(final=True)
        self.cadence.settle()
        for h in self.hooks:
            h.remove()
        out = [{"slowdowns": self.flags, **self._cost(), "watch_series": self.feed.kept()} if self.rank0 else None]
        dist.broadcast_object_list(out, src=self.ranks[0], group=self._group())
        return out[0]

    def _cost(self) -> dict:
        step = statistics.median(self.steps) if self.steps else 0.0
        n = max(self.sent, 1)
        per_step = (self.gather_s + self.detect_s + self.check_s + self.idle_s) / n
        checks = self.checks
        return {
            "watch_every": self.every,
            "watch_steps": self.sent,
            "watch_cost_us_per_step": round(per_step * 1e6, 1),
            "watch_cost_pct": round(100 * per_step / step, 3) if step > 0 else None,
            "watch_gather_us_per_step": round(self.gather_s / n * 1e6, 1),
            "watch_detect_us_per_step": round(self.detect_s / n * 1e6, 1),
            "watch_check_us_per_step": round((self.check_s + self.idle_s) / n * 1e6, 1),
            "watch_checks": checks,
            "watch_check_us": round(self.check_s / checks * 1e6, 1) if checks else None,
            "watch_check_every": self.cadence.check,
            "watch_exchanges": len(self.costs),
            "watch_exchange_us": round(statistics.fmean(self.costs) * 1e6, 1) if self.costs else None,
            "watch_final_ms": round(self.final_s * 1e3, 3),
            "watch_block": self.block,
            **self.host.fields(),
            "watch_lateness_ms": {
                str(r): round(1e3 * self._lateness(k, range(len(self.computes))), 3) for k, r in enumerate(self.ranks)
            }
            if self.computes
            else {},
        }


def block(step_s: float, now: int = 0) -> int:
    """Steps per point of the detector's series where the median step is ``step_s``: as many as make ``POINT_S``;
    ``now``, the block so far, kept unless that is ``REBLOCK`` times smaller or larger."""
    want = max(1, math.ceil(POINT_S / max(step_s, 1e-9)))
    return now if now and now / REBLOCK < want < now * REBLOCK else want


def check_every(step_s: float, cost_s: float = 0.0) -> int:
    """Steps between two checks (``Cadence``) where the median step is ``step_s`` and a check costs ``cost_s`` (the
    ranks' measured mean): as many as keep ``cost_s`` at ``CHECK_PCT`` of the step, at least ``CHECK_S`` of steps and
    ``CHECK`` steps, at most ``CHECK_MAX_S`` of steps (where that is more than ``CHECK`` steps)."""
    step_s = max(step_s, 1e-9)
    want = max(math.ceil(CHECK_S / step_s), math.ceil(cost_s / (CHECK_PCT / 100 * step_s)))
    return max(CHECK, min(want, math.floor(CHECK_MAX_S / step_s)))


def next_every(cost_s: float, step_s: float) -> int:
    """Steps to the next exchange: as many as keep ``cost_s`` (the last exchange's) at ``COST_PCT`` of ``step_s`` (the
    median step), within ``EVERY``..``EVERY_MAX`` and at most ``GAP_S`` of steps."""
    if step_s <= 0:
        return EVERY_MAX
    most = min(EVERY_MAX, max(EVERY, math.ceil(GAP_S / step_s)))
    return min(max(math.ceil(cost_s / (COST_PCT / 100 * step_s)), EVERY), most)


def attach(b, ctx, session, module, every: int = EVERY):
    """``b`` (a training case's ``Buffers``) watched: its call timed, the exchange before each sample, and the
    watch's fields (``slowdowns``, its cost) added to its derived ones, the watch's last exchange first (a DDP
    case's derive runs its baseline steps: a minute on a loaded host, which a flag would otherwise wait for)."""
    w = Watch(ctx, session, module, every)
    b.call = w.wrap(b.call)
    before = b.before_sample
    b.before_sample = w.before_sample if before is None else (lambda: (before(), w.before_sample()))
    derive = b.derive

    def derived(m, around, s):
        fields = w.finish()  # first: the last steps' flags raised now, not after the derive's baseline runs
        return (derive(m, around, s) if derive is not None else {}) | fields

    b.derive = derived
    return b
