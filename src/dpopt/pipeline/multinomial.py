"""The default path's model for k >= 3 classes: one multinomial logistic regression, fitted
by DP-GD with a released curvature (:func:`dpopt.solvers.dp_gd.fit_multinomial_gd`).

Why not one-vs-rest. As epsilon grows the default path should converge to scikit-learn's
default model on the same features, and ``LogisticRegression(C=1)`` is multinomial for
k >= 3 classes: k one-vs-rest fits converge to another model (raw Adult with its 7-class
``marital-status`` as the target: one-vs-rest 0.837 at epsilon = 100, the multinomial model
0.843, scikit-learn's score). The privacy cost points the same way: a record
enters every one of the k binary fits, which share mu / sqrt(k) each, while its gradient in
the multinomial model has norm at most sqrt(2) r over all k classes together, so its
noise does not grow with k.

The step. DP-GD steps 1 / beta with beta >= the smoothness of the averaged loss. The
multinomial loss's Hessian is (1/n) sum_i (diag(p_i) - p_i p_i^T) (x) x_i x_i^T, whose
first factor has eigenvalues in [0, 1/2], so beta = lambda_max(X^T X / n) / 2 + alpha. The
public bound r^2 / 2 is up to d times too large, and steps that much too short need that
many more noisy steps; so the curvature of X is released first, as for least squares
where AdaSSP declines (:mod:`dpopt.pipeline.curvature`: a noisy Gram matrix, its share of
the model's mu^2 from public sizes), and the run length follows DP-GD's error bound at that
beta (:func:`multinomial_run_length`).

Privacy. The scaling's releases, the curvature's Gaussian and the T Gaussian steps are
Gaussian mechanisms whose mu^2 add up to the plan's mu^2: the whole fit is mu-GDP, its
(epsilon, delta) read exactly from the records (accountant ``exact``).

Where it runs: where the binary default would be objective perturbation (the
logistic loss with an L2 or no penalty), on features scaled by their private bounds and
centred. Gradient steps need a well-conditioned Gram matrix: rows normalized to one norm
(the plan's scaling when too few rows resolve per-feature bounds) or sparse columns left
uncentred share one dominant direction, the discriminating directions have eigenvalues
far below beta, and the few steps the budget allows stay near the constant (on ``iris``,
90 training rows at epsilon = 4, the held-out choice then released a class in every seed,
against the model in three of five with objective perturbation's exact minimizer). Those
fits keep one-vs-rest (:mod:`dpopt.pipeline.multiclass`). Chunked data run the same
releases, each step's gradient summed chunk by chunk.
"""

from __future__ import annotations

import math
import time

import numpy as np

from dpopt.pipeline.curvature import curvature_step
from dpopt.privacy import Gaussian, epsilon_of
from dpopt.solvers._base import FitResult
from dpopt.solvers.dp_gd import fit_multinomial_gd, multinomial_gradient_bound

__all__ = ["multinomial_applies", "fit_multinomial", "multinomial_step", "multinomial_run_length",
           "MAX_PASSES"]


def multinomial_applies(solver, centred):
    """Whether the default path fits k >= 3 classes as one multinomial model: where the
    binary default is objective perturbation (logistic loss, L2 or no penalty), on
    ``centred`` features (per-feature bounds, then centred: module docstring)."""
    return solver == "objective-perturbation" and centred


def multinomial_step(problem, mus, row_bound, rng):
    """(step, passes, beta, record): beta = lambda / 2 + alpha from the released curvature
    lambda (:func:`dpopt.pipeline.curvature.curvature_step`, which takes its share out of
    ``mus["model"]``), T = :func:`multinomial_run_length` at that beta and the steps' clip
    (module docstring)."""
    alpha = float(problem.penalty.alpha) if problem.penalty.name == "l2" else 0.0
    lam, record = curvature_step(problem, mus, row_bound, rng)
    beta = lam / 2.0 + alpha
    clip = multinomial_gradient_bound(_row_bound(problem, row_bound))
    passes = multinomial_run_length(problem.n_samples, mus["model"], beta, clip)
    return 1.0 / beta, passes, beta, record


def _row_bound(problem, R):
    """r, the bound on a scaled row with its intercept coordinate (R without one): the bound
    the steps clip at and the run length reads."""
    return math.hypot(R, 1.0) if problem.fit_intercept else R


#: The longest run (one step costs two products of X with a (d, k) matrix: 1,000 steps on
#: 10^5 rows of 10 features and 5 classes take about a second).
MAX_PASSES = 1000


def multinomial_run_length(n, mu, beta, clip):
    """T for the multinomial model: :func:`dpopt.solvers._common.smooth_run_length`'s
    balance T = beta D n mu / (2 sqrt(2) C sqrt(dim)) for the average of the run's second
    half, with the optimum's norm D = sqrt(dim) instead of 1 (dim = k d): on the scaled
    domain every feature spans a range of order one, so a coefficient of order one moves a
    class's logit by order one over it, and the k d coefficients together have norm of
    order sqrt(k d): a weakly regularized logistic model's logits are not bounded. (Least
    squares keeps D = 1: its target is clipped to [-1, 1], so are its fitted values;
    docs/default_path.md.) sqrt(dim) cancels: T = beta n mu / (2 sqrt(2) C), C = ``clip``
    the gradient's bound sqrt(2) r, clamped to [5, :data:`MAX_PASSES`]."""
    return int(min(MAX_PASSES, max(5, round(beta * n * mu / (2.0 * math.sqrt(2.0) * clip)))))


def fit_multinomial(problem, labels, n_classes, *, records, mus, R, rng, delta, delta_total,
                    labelled=None):
    """The multinomial model on the scaled ``problem`` (its X and penalty; its labels are
    not read) with class indices ``labels``: the curvature release, then DP-GD
    (:func:`dpopt.solvers.dp_gd.fit_multinomial_gd`). ``records``: the releases before
    (the table layer's and the scaling's). Chunked data: ``problem`` and ``labelled`` are
    chunked problems, ``labelled``'s target the class indices, and every step's gradient is
    summed over the chunks (:func:`dpopt.solvers.dp_gd.multinomial_gradient`). Returns
    (FitResult of coef (k, p) and intercept (k,) on the scaled features, its records the
    whole composition; plan entries)."""
    start = time.perf_counter()
    step, passes, beta, curvature = multinomial_step(problem, mus, R, rng)
    alpha = float(problem.penalty.alpha) if problem.penalty.name == "l2" else 0.0
    rows, labels = ((labelled, None) if problem.is_chunked
                    else (problem.X_rows, np.asarray(labels)))
    W, steps, params = fit_multinomial_gd(
        rows, labels, n_classes, mu=mus["model"], passes=passes,
        step=step, row_bound=_row_bound(problem, R), alpha=alpha,
        fit_intercept=problem.fit_intercept, rng=rng)
    mechanisms = list(records) + [curvature] + steps
    exact = all(type(m) is Gaussian for m in mechanisms)  # else the PLD of the composition
    accountant = "exact" if exact else "pld"
    total = epsilon_of(mechanisms, delta, accountant=accountant)
    coef, intercept = ((W[:-1].T.copy(), W[-1].copy()) if problem.fit_intercept
                       else (W.T.copy(), np.zeros(n_classes)))
    result = FitResult(coef=coef, intercept=intercept, w=W.T.copy(),
                       solver=f"dp-gd (multinomial, {n_classes} classes)", epsilon=float(total),
                       delta=float(delta_total), adjacency="replace-one", accountant=accountant,
                       noise_multiplier=float(steps[0].noise_multiplier),
                       mechanisms=mechanisms, n_iter=passes, passes=float(passes),
                       checkpoints=None, checkpoint_passes=None, checkpoint_times=None,
                       params=dict(params), time=time.perf_counter() - start)
    plan = {"solver": "dp-gd", "multinomial": True, "curvature": beta,
            "model_options": {"passes": passes, "step": step, "clip": params["clip"]}}
    return result, plan
