"""Another CPU's last bits, on this one: a check that no test depends on one CPU's floating point.

    FP_NOISE=h1 PYTHONPATH=scripts/fp_noise:. python -m pytest tests/unit

Python imports this module at start-up from ``PYTHONPATH`` (every process: the test's and the ranks' it
launches). With ``FP_NOISE`` set (``up``, ``down`` or ``h<seed>``) it changes, by one unit in the last place,
the results that differ between CPUs and libraries, and nothing else:

- transcendental functions (numpy's ``log``, ``exp``, ``power``, ... and Python's ``math``): numpy computes
  them with AVX-512 code on one CPU and another library on another (on this machine 263 of a million
  ``np.log`` results differ with AVX-512 switched off), and macOS's libm is not glibc's. A result that is
  an integer (``log(1)``, ``exp(0)``, ``2 ** 3``) stays exact, as every library keeps it;
- dense linear algebra (``lstsq``, ``solve``, ``qr``, ...): OpenBLAS picks its kernels per CPU, MKL and
  Accelerate are others. Its float inputs move by one ulp: a backward-stable result on another kernel is the
  exact result of a nearby input. ``dot``, ``einsum`` and ``matmul`` results move by one ulp (another
  summation order).

``up`` and ``down`` move every such number one way; ``h<seed>`` moves each by -1, 0 or +1 ulp as a hash of
its bits decides, so the same input always gives the same output within and across processes (a real CPU
is deterministic too). Additions, multiplications, ``sqrt``, sums, means and medians are IEEE operations in
a fixed order and agree on every CPU: they are left alone. torch is not touched: run the tests with
``ATEN_CPU_CAPABILITY=avx2`` (or ``default``) and ``OMP_NUM_THREADS`` 1 and 4 for it (docs/tests.md).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import math
import os
import struct
import sys

MODE = os.environ.get("FP_NOISE", "")
_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def _seed() -> int:
    return (int(MODE[1:] or "1") * 0x5851F42D4C957F2D) & _MASK if MODE.startswith("h") else 0


def _step(bits: int) -> int:
    """-1, 0 or +1: which neighbour a result with these bits becomes."""
    if MODE in ("up", "down"):
        return 1 if MODE == "up" else -1
    return ((((bits ^ _seed()) * _MIX) & _MASK) >> 62) % 3 - 1


def _nudge_float(x):
    if not isinstance(x, float) or not math.isfinite(x) or x == int(x):
        return x
    s = _step(struct.unpack("<Q", struct.pack("<d", x))[0])
    return math.nextafter(x, math.copysign(math.inf, s)) if s else x


MATH = ("log", "log2", "log10", "log1p", "exp", "exp2", "expm1", "pow", "sin", "cos", "tan", "asin", "acos")
MATH += ("atan", "atan2", "sinh", "cosh", "tanh", "lgamma", "gamma", "erf", "erfc", "cbrt")
UFUNCS = ("log", "log2", "log10", "log1p", "exp", "exp2", "expm1", "power", "float_power", "sin", "cos", "tan")
UFUNCS += ("arctan", "arcsin", "arccos", "sinh", "cosh", "tanh", "arcsinh", "arctanh", "cbrt")
PRODUCTS = ("dot", "einsum", "matmul", "inner", "tensordot", "vdot")
LINALG = ("lstsq", "solve", "qr", "inv", "pinv", "svd", "eigh", "eig", "cholesky", "det", "slogdet")


def _patch_math() -> None:
    for name in MATH:
        if (f := getattr(math, name, None)) is not None:
            setattr(math, name, lambda *a, _f=f: _nudge_float(_f(*a)))


def _patch_numpy(np) -> None:
    def steps(a):
        if MODE in ("up", "down"):
            return np.full(a.shape, 1 if MODE == "up" else -1, dtype=np.int8)
        with np.errstate(over="ignore"):
            h = (a.view(np.uint64) ^ np.uint64(_seed())) * np.uint64(_MIX)
        return ((h >> np.uint64(62)) % np.uint64(3)).astype(np.int8) - 1

    def nudge(a, keep_integers: bool = True):
        if isinstance(a, tuple):
            return tuple(nudge(x, keep_integers) for x in a)
        arr = np.asarray(a)
        if arr.dtype != np.float64 or arr.size == 0:
            return a
        arr = np.array(arr, dtype=np.float64)
        keep = ~np.isfinite(arr) | (arr == 0)
        if keep_integers:
            with np.errstate(invalid="ignore"):
                keep |= arr == np.round(arr)
        s = np.where(keep, 0, steps(arr))
        out = np.where(s > 0, np.nextafter(arr, np.inf), np.where(s < 0, np.nextafter(arr, -np.inf), arr))
        return out if isinstance(a, np.ndarray) or np.ndim(a) else np.float64(out)

    class Ufunc:
        """A ufunc whose call nudges its result; its methods (``outer``, ``reduce``, ...) are the ufunc's."""

        def __init__(self, f):
            self._f = f

        def __call__(self, *a, **k):
            r = self._f(*a, **k)
            out = k.get("out")
            if out is not None:
                o = out[0] if isinstance(out, tuple) else out
                if isinstance(o, np.ndarray) and o.dtype == np.float64:
                    o[...] = nudge(o)
                return r
            return nudge(r)

        def __getattr__(self, name):
            return getattr(self._f, name)

    def on_inputs(f):
        return lambda *a, **k: f(*(nudge(x, False) if isinstance(x, np.ndarray) else x for x in a), **k)

    for name in UFUNCS + PRODUCTS:
        setattr(np, name, Ufunc(getattr(np, name)))
    for name in LINALG:
        setattr(np.linalg, name, on_inputs(getattr(np.linalg, name)))
    np.polyfit = on_inputs(np.polyfit)


class _AfterNumpy(importlib.abc.MetaPathFinder):
    """Patches numpy once it has finished importing (patching it half-imported breaks its own imports)."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "numpy":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("numpy")
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _patch_numpy(module)

        spec.loader.exec_module = exec_module
        return spec


if MODE:
    if MODE not in ("up", "down") and not (MODE.startswith("h") and MODE[1:].isdigit()):
        sys.stderr.write(f"error: FP_NOISE={MODE!r}: use up, down or h<seed> (h1, h2, ...)\n")
        os._exit(2)
    _patch_math()
    sys.meta_path.insert(0, _AfterNumpy())
