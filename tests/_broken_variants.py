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
* ``CLIP_OFF[family]``: a context manager that disables per-sample clipping
  inside the family's solver module (the noise stays calibrated to the
  clipping threshold). ``None`` marks a family without per-sample clipping.
  Every private family needs an entry (tests/test_audit.py checks).
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
    """``fit`` for :func:`dpopt.audit.audit`: solver ``name`` with noise times ``factor``."""

    def fit(problem, *, random_state, **kw):
        return dpopt.solve(problem, name, random_state=ScaledNoiseGenerator(random_state, factor),
                           **kw)

    fit.__name__ = f"{name} (noise x {factor:g})"
    return fit


def _unclipped(module, attr, *clip_args):
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


@contextlib.contextmanager
def _patched(*managers):
    with contextlib.ExitStack() as stack:
        for m in managers:
            stack.enter_context(m())
        yield


def _clip_off_dp_cd():
    from dpopt.solvers import dp_cd

    # cd_steps(work, w, coords, noise, step, clip, sigma[, acc, weights])
    return _patched(_unclipped(dp_cd, "cd_steps", 5), _unclipped(dp_cd, "cd_steps_accumulate", 5))


def _clip_off_dp_gd():
    from dpopt.solvers import dp_gd

    return _patched(_unclipped(dp_gd, "full_gradient", "clip", "clips"))


def _clip_off_dp_sgd():
    from dpopt.solvers import dp_sgd

    # sgd_steps(X_rows, y, row_norms, loss_code, loss_param, prox, w, rows, bounds, noise,
    #           gamma, clip, sigma, batch_size)
    return _patched(_unclipped(dp_sgd, "sgd_steps", 11))


def _clip_off_dp_rbcd():
    from dpopt.solvers import dp_rbcd

    # _run_pass(problem, z, w, indptr, indices, noise, sigma, scale, incremental, step, M, clips)
    return _patched(_unclipped(dp_rbcd, "_run_pass", 11))


def _clip_off_dp_gcd():
    from dpopt.solvers import dp_gcd

    # clipped_gradient_from_derivs(X, d, clips)
    return _patched(_unclipped(dp_gcd, "clipped_gradient_from_derivs", 2))


def _clip_off_dp_svrg():
    from dpopt.solvers import dp_svrg

    # svrg_steps(X_rows, y, row_norms, loss_code, loss_param, prox, w, snap_weights, snap_grad,
    #            starts, idx, noise, inv_b, scale, eta, clip, wsum); the snapshot gradient:
    #            l2clip_weights(y, row_norms, loss_code, loss_param, z, clip)
    return _patched(_unclipped(dp_svrg, "svrg_steps", 15),
                    _unclipped(dp_svrg, "l2clip_weights", 5))


def _clip_off_dp_accmd():
    from dpopt.solvers import dp_accmd

    # l2clip_gradient(X, y, row_norms, loss_code, loss_param, z, clip)
    return _patched(_unclipped(dp_accmd, "l2clip_gradient", 6))


@contextlib.contextmanager
def _clip_off_heavy_tailed():
    """The oracles of the one-pass solvers read ``self.clip`` (the noise uses the mechanism's
    own copy); ht-subgradient's compiled kernel takes the clip as argument 11."""
    from dpopt.solvers import heavy_tailed as ht

    call = ht.GradientOracle.__call__

    def unclipped_call(self, *args, **kwargs):
        saved, self.clip = self.clip, np.inf
        try:
            return call(self, *args, **kwargs)
        finally:
            self.clip = saved

    ht.GradientOracle.__call__ = unclipped_call
    try:
        # subgradient_steps(X, y, norms, code, param, w, center, radius, dball, eta, lam, clip,
        #                   sigma, noise, l1, l2)
        with _unclipped(ht.subgradient, "subgradient_steps", 11)():
            yield
    finally:
        ht.GradientOracle.__call__ = call


def _clip_off_adassp():
    from dpopt.solvers import adassp

    # sufficient_statistics(X, y, row_bound, target_bound, fit_intercept): rows and targets
    # unclipped, the noise still calibrated to row_bound and target_bound
    return _patched(_unclipped(adassp, "sufficient_statistics", 2, 3, "row_bound",
                               "target_bound"))


def _clip_off_dp_frank_wolfe():
    from dpopt.solvers import dp_frank_wolfe as fw

    # clip_data(problem, coordinate_bound, target_bound); loss_weights(loss, state, y, U, ...)
    return _patched(_unclipped(fw, "clip_data", 1, 2), _unclipped(fw, "loss_weights", 3))


def _clip_off_objective_perturbation():
    from dpopt.solvers import objective_perturbation as op

    # clip_feature_rows(problem, bound)
    return _patched(_unclipped(op, "clip_feature_rows", 1))


#: family -> context manager factory disabling clipping (None: no per-sample clipping).
CLIP_OFF = {
    "dp-cd": _clip_off_dp_cd,
    "dp-gd": _clip_off_dp_gd,
    "dp-sgd": _clip_off_dp_sgd,
    "dp-rbcd": _clip_off_dp_rbcd,
    "dp-gcd": _clip_off_dp_gcd,
    "dp-svrg": _clip_off_dp_svrg,
    "dp-accmd": _clip_off_dp_accmd,
    "heavy-tailed": _clip_off_heavy_tailed,
    "adassp": _clip_off_adassp,
    "dp-frank-wolfe": _clip_off_dp_frank_wolfe,
    "objective-perturbation": _clip_off_objective_perturbation,
}


#: Solvers whose final model hides a noise / 4 error from the canary test, with the reason;
#: their clipping-disabled variant must then be caught (tests/test_audit.py checks).
_SVRG = ("the canary's clipped gradient is the same at the iterate and at the snapshot, so "
         "it cancels in the variance-reduced sampled term and only enters through the "
         "full-gradient term b g~ (sensitivity 2Cq), while the accountant also charges the "
         "sampled term's worst case (4C, a gradient that flips between snapshot and iterate); "
         "the noise / 4 bound stays at 1-1.9 < 2 (no canary here realises the 4C case)")
NOISE_SCALE_UNDETECTABLE = {
    "dp-svrg": _SVRG,
    "dp-svrg++": _SVRG,
    "ht-subgradient": "each phase projects onto a localization ball of radius about the noise "
                      "scale, so the 1-D model mostly lands on the boundary and only its sign "
                      "survives; the first phase reads the canary with probability 1/2, so the "
                      "likelihood ratio of any test is at most 3 (epsilon_lb <= log 3)",
}


def private_families():
    """{family: [solver names]} over the registered private solvers."""
    out: dict[str, list[str]] = {}
    for name in dpopt.available_solvers(private_only=True):
        out.setdefault(dpopt.get_solver(name).family, []).append(name)
    return out
