"""The check rule the training experiments share: S steps of distributed SGD against single-process SGD on the
same global batches, when a correct step differs from the reference's only by roundoff.

Per step, a gradient averaged over R terms whose order or rounding differs from the reference's moves by at most
2R x (u x max|g| + a) (u the unit roundoff of the dtype it is summed or travels in, a the absolute error of its
subnormals), the update by lr times that, and the update's float32 rounding by one ulp of the parameter (x 2 for
safety): the step term e = lr x 2R x (u x max|g| + a) + 2 x 2^-24 x max|p|. After S steps each element x (or
tensor) may lie 2 x S x e(x) from the reference, plus S x (S - 1) x e(largest) for the earlier steps' differences
carried into every later gradient (the layers are coupled; none after one step). Where a correct step equals the
reference's bit for bit, the rule is ``exact``. The experiments decide R, u, a and exactness (experiments/ddp/
check.py, experiments/sharded/check.py); the arithmetic and the words are here, once.
"""

from __future__ import annotations

from dataclasses import dataclass

U32 = 2.0**-24
"""Unit roundoff of float32."""
U_BF16 = 2.0**-8
"""Unit roundoff of bfloat16."""
STRONG = 0.5
"""A tensor is compared while its bound is below this fraction of what a gradient scaled by 2 moves it."""


def _largest(x):
    """The largest of a tensor of per-element maxima (a plain number stays as it is)."""
    return x.max() if hasattr(x, "max") else x


@dataclass(frozen=True)
class SgdRule:
    """How a synchronised step's parameters are compared with single-process training (module docstring)."""

    world: int
    terms: int
    """R: the terms whose order or rounding differs from the reference's."""
    u: float
    lr: float
    exact: bool
    """True: a correct step equals the reference bit for bit; the check is ``==``."""
    why: str
    """Why it is not exact, in a few words (the record's ``check_rule`` quotes it)."""
    abs_err: float = 0.0
    """a: the absolute error of a wire dtype's subnormals (float16 on the wire: 2^-24)."""
    per: str = "element"
    """What one bound covers: an element (max|g| and max|p| per element) or a parameter tensor."""

    FORMULA = "2 x S x e(x) + S x (S - 1) x e(largest), e(x) = lr x 2R x (u x max|g_x| + a) + 2 x 2^-24 x max|p_x|"

    def step_term(self, g_max, p_max):
        """e: what one step's reduction and update may move a parameter by (numbers, or tensors per element)."""
        return self.lr * 2 * self.terms * (self.u * g_max + self.abs_err) + 2 * U32 * p_max

    def tol(self, steps: int, g_max, p_max, largest=None):
        """The bound after ``steps`` steps (0 where exact); per element when max|g| and max|p| are tensors of
        elements. ``largest``: the step term of the largest tensor, when the caller has it (``tols``); else the
        step term of the largest max|g| and the largest max|p| (at least as large)."""
        if self.exact:
            return 0.0
        if largest is None:
            largest = self.step_term(_largest(g_max), _largest(p_max))
        return 2 * steps * self.step_term(g_max, p_max) + steps * (steps - 1) * largest

    def tols(self, steps: int, g_max: list[float], p_max: list[float]) -> list[float]:
        """The bound per parameter tensor after ``steps`` steps, each tensor's max|g| and max|p| given."""
        if self.exact:
            return [0.0] * len(g_max)
        largest = max((self.step_term(g, p) for g, p in zip(g_max, p_max)), default=0.0)
        return [self.tol(steps, g, p, largest) for g, p in zip(g_max, p_max)]

    def coefficients(self, steps: int, g_largest: float, p_largest: float) -> tuple[float, float, float]:
        """(cg, c1, cp) with ``tol`` = cg x max|g| + c1 + cp x max|p| per element after ``steps`` steps, given the
        largest max|g| and max|p| (a bound that sums the tolerance over a row takes it apart this way)."""
        if self.exact:
            return 0.0, 0.0, 0.0
        s = steps
        carried = s * (s - 1) * self.step_term(g_largest, p_largest)
        return (
            2 * s * self.lr * 2 * self.terms * self.u,
            2 * s * self.lr * 2 * self.terms * self.abs_err + carried,
            2 * s * 2 * U32,
        )

    def comparable(self, moved: list[float], tols: list[float]) -> list[bool]:
        """Per parameter tensor: whether its bound still tells a wrong step from a right one: below ``STRONG`` of
        what a gradient scaled by 2 adds to it, which (to first order) is how far the reference's own steps moved
        it (SGD at twice the rate moves it twice as far). A tensor whose bound is not would pass such a fault by
        construction: it is not compared, and ``describe`` says so. Exact rules compare every tensor."""
        if self.exact:
            return [True] * len(tols)
        return [tol < STRONG * m for tol, m in zip(tols, moved)]

    def describe(self, steps: int, tol: float, compared: int | None = None, tensors: int | None = None) -> str:
        """The rule in words, as the record's ``check_rule`` holds it."""
        if self.exact:
            return "exact"
        out = f"tol per {self.per}, up to {tol:z.2g} ({self.why}, {self.world} ranks, {steps} steps)"
        if compared is not None and tensors is not None and compared < tensors:
            out += (
                f"; {tensors - compared} of {tensors} parameter tensors not compared: after {steps} steps their "
                "bound would pass a gradient scaled by 2 (each was compared after the check step)"
            )
        return out
