"""How the models write a time for people (µs, ms or s, three significant digits) and sum up their errors."""

import math
from collections.abc import Sequence

from suite.metrics import format_time_us as fmt_time  # noqa: F401  (the models' name for it)


def geomean_abs(errors: Sequence[float]) -> float | None:
    """Geometric mean of |error| (each floored at 1e-4, so an exact hit does not zero it)."""
    es = [max(abs(e), 1e-4) for e in errors if e is not None and math.isfinite(e)]
    return float(math.exp(sum(math.log(e) for e in es) / len(es))) if es else None
