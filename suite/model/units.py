"""How the models write a time for people (µs, ms or s, three significant digits) and sum up their errors."""

import math
from collections.abc import Sequence


def fmt_time(us: float) -> str:
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.3g} µs"


def geomean_abs(errors: Sequence[float]) -> float | None:
    """Geometric mean of |error| (each floored at 1e-4, so an exact hit does not zero it)."""
    es = [max(abs(e), 1e-4) for e in errors if e is not None and math.isfinite(e)]
    return float(math.exp(sum(math.log(e) for e in es) / len(es))) if es else None
