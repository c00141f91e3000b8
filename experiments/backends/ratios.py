"""The ratios a side-by-side record carries: its lane's time over each lane that ran the same op, dtype and size
before it in this run (the lanes run in order: the first lane, then the others, the bare MPI lane last), with the
95% interval of make compare's within-run bootstrap. Computed on the ranks from the cases' own samples, so every
record states them; the table, headline and report read them."""

from __future__ import annotations

import dataclasses

from suite.api import Case, Session, ratio_interval

CONFIDENCE = 0.95

RATIO_PROVENANCE = (
    "derived: median(samples_us) of this case over that of the same op, dtype and size on each lane timed before "
    "it in this run with the same timing mode; ci_low, ci_high: the 95% percentile interval of a bootstrap that "
    "resamples both cases' samples (suite.report.compare.stats.ratio_interval, fixed seed); the run-to-run "
    "variation is not in it (REPEAT=k and make compare measure that)"
)


def _timed(session: Session) -> dict:
    """(op, dtype, size) -> lane -> its Measurement, for the cases timed so far in this session."""
    return session.once("backends.compared", dict)


def ratios_over(m, earlier: dict) -> list[dict]:
    """``m``'s time over each of ``earlier`` (lane -> Measurement) that was timed the same way."""
    out = []
    for lane, base in earlier.items():
        if (base.timing_mode, base.ops_per_sample) != (m.timing_mode, m.ops_per_sample):
            continue
        ratio, lo, hi = ratio_interval(base.samples_s, m.samples_s, CONFIDENCE)
        out.append({"over": lane, "ratio": ratio, "ci_low": lo, "ci_high": hi, "confidence": CONFIDENCE})
    return out


def compared(case: Case) -> Case:
    """``case`` (a side-by-side case of one lane) whose record carries ``ratios`` over the lanes timed before it."""
    row = (case.identity["variant"], case.bytes.dtype, case.bytes.size_bytes)
    lane, build = case.fields["lane"], case.build

    def built(ctx, session: Session):
        b = build(ctx, session)
        own = b.derive

        def derive(m, around, session: Session) -> dict:
            out = dict(own(m, around, session)) if own is not None else {}
            earlier = _timed(session).setdefault(row, {})
            out["ratios"] = ratios_over(m, {k: v for k, v in earlier.items() if k != lane})
            earlier[lane] = m
            return out

        return dataclasses.replace(b, derive=derive)

    return dataclasses.replace(case, build=built, provenance={**case.provenance, "ratios": RATIO_PROVENANCE})
