"""Deliberately broken solver variants, used to show that the audit has power.

Test-only code (also imported by benchmarks/audit_table.py); the library never
ships these. Two kinds:

* ``noise_scaled(name, factor)``: any registered solver run with a
  :class:`ScaledNoiseGenerator`, a ``numpy.random.Generator`` whose noise
  draws (normal, Laplace, Gumbel, exponential) are multiplied by ``factor``.
  Every solver draws its noise from the Generator it is given (DESIGN.md,
  invariant 6), so this weakens any solver without touching its code; a new
  solver that draws noise some other way makes the power test fail, which is
  the point.
* clipping off: :func:`unclipping` builds a context manager that disables per-sample
  clipping inside a family's solver module (the noise stays calibrated to the clipping
  threshold); each family's test module declares it with ``_declarations.clip_off``
  (or ``no_clipping``), and tests/test_audit.py checks that every private family has one.
"""

from __future__ import annotations

import contextlib

import numpy as np

import dpopt


class ScaledNoiseGenerator(np.random.Generator):
    """A Generator whose noise draws are ``factor`` times what they should be."""

    def __init__(self, seed, factor):
        super().__init__(np.random.PCG64(seed))
        self.factor = float(factor)

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        return super().standard_normal(size, dtype=dtype) * self.factor

    def normal(self, loc=0.0, scale=1.0, size=None):
        return super().normal(loc, np.asarray(scale) * self.factor, size)

    def laplace(self, loc=0.0, scale=1.0, size=None):
        return super().laplace(loc, np.asarray(scale) * self.factor, size)

    def gumbel(self, loc=0.0, scale=1.0, size=None):
        return super().gumbel(loc, np.asarray(scale) * self.factor, size)

    def exponential(self, scale=1.0, size=None):
        return super().exponential(np.asarray(scale) * self.factor, size)

    def standard_exponential(self, size=None, dtype=np.float64, method="zig", out=None):
        return super().standard_exponential(size, dtype=dtype, method=method) * self.factor


def noise_scaled(name, factor=0.25):
    """``fit`` for :func:`dpopt.api.audit.audit`: solver ``name`` with noise times ``factor``."""

    def fit(problem, *, random_state, **kw):
        return dpopt.solve(problem, name, random_state=ScaledNoiseGenerator(random_state, factor),
                           **kw)

    fit.__name__ = f"{name} (noise x {factor:g})"
    return fit


def unclipped(module, attr, *clip_args):
    """Patch ``module.attr`` so that its clipping-threshold arguments (positions as ints,
    keywords as strings) are replaced by infinity."""
    orig = getattr(module, attr)

    def inf_like(v):
        return np.full_like(v, np.inf, dtype=np.float64) if np.ndim(v) else np.inf

    def patched(*args, **kwargs):
        args = list(args)
        for a in clip_args:
            if isinstance(a, int) and a < len(args):
                args[a] = inf_like(args[a])
            elif isinstance(a, str) and kwargs.get(a) is not None:
                kwargs[a] = inf_like(kwargs[a])
        return orig(*args, **kwargs)

    @contextlib.contextmanager
    def manager():
        setattr(module, attr, patched)
        try:
            yield
        finally:
            setattr(module, attr, orig)

    return manager


def unclipping(module, **calls):
    """A context-manager factory (for ``_declarations.clip_off``) patching every
    ``module.<attr>`` of ``calls`` (``attr=(clip argument positions or names)``) with
    :func:`unclipped`."""

    @contextlib.contextmanager
    def manager():
        with contextlib.ExitStack() as stack:
            for attr, clip_args in calls.items():
                stack.enter_context(unclipped(module, attr, *clip_args)())
            yield

    return manager


def private_families():
    """{family: [solver names]} over the registered private solvers."""
    out: dict[str, list[str]] = {}
    for name in dpopt.available_solvers(private_only=True):
        out.setdefault(dpopt.get_solver(name).family, []).append(name)
    return out
