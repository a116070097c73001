"""Synthetic problems from the DP-ERM papers, plus imbalanced and heavy-tailed designs.

Every generator takes ``random_state`` (None, an int, a SeedSequence or a
``numpy.random.Generator``; see :func:`dpopt._core.validation.check_random_state`),
draws everything from that one generator in a fixed order, and returns float64
arrays ``(X, y)``, or ``(X, y, coef)`` with ``return_coef=True``. The same seed
gives bit-identical arrays (DESIGN.md, invariant 6). Classification labels are
float64 in {-1.0, +1.0}, the convention of :mod:`dpopt.data`.

Where a paper leaves a detail open, the choice made here is written in the
"Choices" part of the docstring.
"""

from __future__ import annotations

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_random_state, check_scalar

__all__ = [
    "make_sparse_lasso",
    "make_square",
    "make_quasi_sparse_logistic",
    "make_log1",
    "make_log2",
    "make_imbalanced",
    "make_heavy_tailed",
]

_LOSSES = ("squared", "logistic")
_DISTRIBUTIONS = ("student-t", "pareto", "gaussian")
_TARGETS = ("linear", "logistic")
_HEAVY_PARTS = ("features", "noise", "both")


# --------------------------------------------------------------------------- helpers


def _check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def _signs(z):
    """Labels in {-1.0, +1.0}; an exact zero (probability 0) goes to +1."""
    return np.where(z >= 0.0, 1.0, -1.0)


def _out(X, y, coef, return_coef):
    return (X, y, coef) if return_coef else (X, y)


# --------------------------------------------------------------------------- sparse LASSO


def make_sparse_lasso(n_samples=1000, n_features=1000, n_informative=10, noise=1.0, *,
                      random_state=None, return_coef=False):
    """The "Sparse LASSO" regression problem of the DP-CD paper.

    Source: Mangold, Bellet, Salmon, Tommasi, "Differentially Private Coordinate
    Descent for Composite Empirical Risk Minimization", ICML 2022, Section 6:
    n = p = 1000 independent standard normal features; "the labels are then
    computed as a noisy sparse linear combination of a subset of 10 active
    features". The DP-GCD paper's "square" problem is the same design
    (:func:`make_square`).

    Parameters
    ----------
    n_samples, n_features : int
        Size of ``X`` (paper: 1000 x 1000).
    n_informative : int
        Number of active features, at most ``n_features`` (paper: 10).
    noise : float
        Standard deviation of the Gaussian noise added to ``X @ coef``.
    random_state : None, int, SeedSequence or numpy Generator
    return_coef : bool
        Also return the true coefficient vector.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    coef : ndarray of shape (n_features,), only with ``return_coef=True``

    Choices (the paper gives no coefficient values, noise level or seed)
    ----------------------------------------------------------------------
    - The active set is a uniformly random subset of the columns.
    - Active coefficients are ``100 * Uniform(0, 1)``, the convention of
      scikit-learn's ``make_regression``. Small coefficients (e.g. +-1 or
      N(0, 1)) cannot be right: with the DP-GCD paper's objective
      (1/n)||y - Xw||^2 + 30 ||w||_1 they give an all-zero solution, whereas the
      paper reports 7 non-zeros; coefficients of this size give 6 to 10.
    - The noise is Gaussian with standard deviation ``noise`` (default 1.0).
    - Draw order: X, active set, coefficients, noise.
    """
    n = check_positive_int(n_samples, "n_samples")
    p = check_positive_int(n_features, "n_features")
    k = check_positive_int(n_informative, "n_informative")
    if k > p:
        raise ValueError(f"n_informative must be <= n_features={p}, got {k}")
    noise = check_scalar(noise, "noise", low=0.0)
    _check_bool(return_coef, "return_coef")
    rng = check_random_state(random_state)
    X = rng.standard_normal((n, p))
    support = rng.choice(p, size=k, replace=False)
    coef = np.zeros(p)
    coef[support] = 100.0 * rng.uniform(size=k)
    y = X @ coef + noise * rng.standard_normal(n)
    return _out(X, y, coef, return_coef)


def make_square(n_samples=1000, n_features=1000, n_informative=10, noise=1.0, *,
                random_state=None, return_coef=False):
    """The DP-GCD paper's "square" LASSO problem (n = p = 1000, 10 non-zeros).

    Source: Mangold, Bellet, Salmon, Tommasi, "High-Dimensional Private Empirical
    Risk Minimization by Greedy Coordinate Descent", AISTATS 2023, Section 5:
    "The square dataset is generated similarly [to log1/log2], with
    X in R^{1000 x 1000} and w_true having only 10 non-zero values", solved as
    LASSO with lambda = 30 (figure captions call it "sparse"). It is the DP-CD
    paper's "Sparse LASSO" design, so this calls :func:`make_sparse_lasso`; see
    there for the choices (coefficient values, noise level) the paper leaves open.
    """
    return make_sparse_lasso(n_samples, n_features, n_informative, noise,
                             random_state=random_state, return_coef=return_coef)


# --------------------------------------------------------------------------- log1 / log2


def make_quasi_sparse_logistic(n_samples=1000, n_features=100, sigma=1.0, noise=1.0, *,
                               random_state=None, return_coef=False):
    """Binary classification with a log-normal (quasi-sparse) true coefficient vector.

    Source: the DP-GCD paper (Mangold et al., AISTATS 2023), Section 5: X has
    unit-variance normally-distributed columns, ``y = X w_true + eps`` with
    Gaussian ``eps``, and ``w_true`` drawn from a log-normal distribution with
    mu = 0 and the given sigma, which makes ``w_true`` quasi-sparse (a few
    entries dominate). :func:`make_log1` (sigma = 1) and :func:`make_log2`
    (sigma = 2) are the paper's two instances.

    Parameters
    ----------
    n_samples, n_features : int
        Paper: 1000 x 100.
    sigma : float > 0
        Shape parameter of the log-normal coefficients.
    noise : float >= 0 or "coef-norm"
        Standard deviation of ``eps``; ``"coef-norm"`` sets it to ||w_true||_2, so the
        signal X w_true and the noise have the same variance (signal-to-noise ratio 1).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) with values in {-1.0, +1.0}
    coef : ndarray of shape (n_features,), only with ``return_coef=True``

    Choices (the paper is silent on these)
    --------------------------------------
    - The real-valued response is turned into labels with its sign,
      ``y = sign(X w_true + eps)`` (the paper fits a logistic loss to it).
    - ``eps ~ N(0, noise^2)`` with ``noise = 1.0`` by default.
    - Features are i.i.d. N(0, 1) (unit variance, as stated; not standardized
      afterwards). All coefficients are positive, as log-normal draws are.
    - Draw order: X, coefficients, noise.
    """
    n = check_positive_int(n_samples, "n_samples")
    p = check_positive_int(n_features, "n_features")
    sigma = check_scalar(sigma, "sigma", low=0.0, low_open=True)
    if not (isinstance(noise, str) and noise == "coef-norm"):
        noise = check_scalar(noise, "noise", low=0.0)
    _check_bool(return_coef, "return_coef")
    rng = check_random_state(random_state)
    X = rng.standard_normal((n, p))
    coef = rng.lognormal(mean=0.0, sigma=sigma, size=p)
    if isinstance(noise, str):
        noise = np.linalg.norm(coef)
    y = _signs(X @ coef + noise * rng.standard_normal(n))
    return _out(X, y, coef, return_coef)


def make_log1(n_samples=1000, n_features=100, noise=1.0, *, random_state=None,
              return_coef=False):
    """The DP-GCD paper's "log1" problem: log-normal coefficients with sigma = 1.

    Solved in the paper as logistic regression with an L2 penalty, lambda = 1e-3.
    See :func:`make_quasi_sparse_logistic` for the design and the choices made.
    """
    return make_quasi_sparse_logistic(n_samples, n_features, 1.0, noise,
                                      random_state=random_state, return_coef=return_coef)


def make_log2(n_samples=1000, n_features=100, noise=1.0, *, random_state=None,
              return_coef=False):
    """The DP-GCD paper's "log2" problem: log-normal coefficients with sigma = 2.

    With sigma = 2 the coefficients are more imbalanced than in "log1". Solved
    in the paper as logistic regression with an L2 penalty, lambda = 1e-3. See
    :func:`make_quasi_sparse_logistic` for the design and the choices made.
    """
    return make_quasi_sparse_logistic(n_samples, n_features, 2.0, noise,
                                      random_state=random_state, return_coef=return_coef)


# --------------------------------------------------------------------------- imbalanced


def make_imbalanced(n_samples=1000, n_features=20, scale_ratio=100.0, loss="squared",
                    noise=1.0, *, random_state=None, return_coef=False):
    """Linear data whose feature columns have strongly imbalanced scales.

    Motivation: the DP-CD paper (Mangold et al., ICML 2022, Sections 3.4 and 6)
    shows coordinate descent gains most when the coordinate-wise smoothness
    constants M_j, proportional to the mean of x_ij^2, are imbalanced, as in raw
    California or Electricity. This generator produces that situation with a
    known scale profile.

    Design: draw standardized features ``Z ~ N(0, 1)`` and coefficients
    ``b ~ N(0, 1)``, form the response ``Z b + eps`` with ``eps ~ N(0, noise^2)``,
    then rescale column j of Z by ``s_j = scale_ratio ** (j / (p - 1))``, a
    geometric sequence from 1 to ``scale_ratio``. So ``X = Z diag(s)`` and the
    true coefficients are ``coef = b / s``: the imbalance is a change of units,
    and standardizing X recovers a balanced problem. M_j grows like s_j^2.

    Parameters
    ----------
    n_samples, n_features : int
    scale_ratio : float >= 1
        Ratio of the largest to the smallest column scale (1 means balanced).
    loss : {"squared", "logistic"}
        ``"squared"``: y is the real response. ``"logistic"``: y is its sign,
        in {-1.0, +1.0}.
    noise : float >= 0

    Returns
    -------
    X, y, and with ``return_coef=True`` also ``coef`` (true coefficients in the
    units of X, i.e. ``b / s``).

    Choices: the scale profile (geometric, increasing with the column index,
    not shuffled), the coefficient law and the noise level are ours; no paper
    specifies an imbalanced synthetic design. Draw order: Z, b, noise.
    """
    n = check_positive_int(n_samples, "n_samples")
    p = check_positive_int(n_features, "n_features")
    ratio = check_scalar(scale_ratio, "scale_ratio", low=1.0)
    check_choice(loss, "loss", _LOSSES)
    noise = check_scalar(noise, "noise", low=0.0)
    _check_bool(return_coef, "return_coef")
    rng = check_random_state(random_state)
    Z = rng.standard_normal((n, p))
    b = rng.standard_normal(p)
    response = Z @ b + noise * rng.standard_normal(n)
    scales = ratio ** (np.arange(p) / (p - 1)) if p > 1 else np.ones(1)
    X = Z * scales
    y = response if loss == "squared" else _signs(response)
    return _out(X, y, b / scales, return_coef)


# --------------------------------------------------------------------------- heavy tails


def _draw(rng, distribution, tail_index, size):
    """Centred draws from ``distribution``; see :func:`make_heavy_tailed`."""
    if distribution == "gaussian":
        return rng.standard_normal(size)
    if distribution == "student-t":
        return rng.standard_t(tail_index, size)
    # Symmetrized Lomax (Pareto II): random sign times rng.pareto(tail_index).
    magnitude = rng.pareto(tail_index, size)
    return np.where(rng.random(size) < 0.5, -magnitude, magnitude)


def _check_finite_draws(X, e, tail_index):
    with np.errstate(over="ignore", invalid="ignore"):
        big = np.abs(X).max(initial=0.0) * X.shape[1] + np.abs(e).max(initial=0.0)
    if not np.isfinite(big) or big > 1e150:
        raise ValueError(f"tail_index={tail_index!r} is too small: the draws overflow float64")


def make_heavy_tailed(n_samples=1000, n_features=10, distribution="student-t", tail_index=3.0,
                      target="linear", outlier_fraction=0.0, *, noise=1.0, heavy="both",
                      outlier_scale=10.0, random_state=None, return_coef=False):
    """Linear or logistic data with heavy-tailed features and/or noise.

    Motivation: the heavy-tailed DP stochastic optimization paper (Lowy and
    Razaviyayn, "Private Stochastic Optimization with Large Worst-Case Lipschitz
    Parameter") assumes only that the k-th moment of the gradient norm is finite.
    It has no experiments; its notes suggest Student-t or Pareto features whose
    tail index is just above k. For a linear model the gradient is
    l'(x^T w; y) x, so heavy-tailed features or residuals give heavy-tailed
    gradients.

    Parameters
    ----------
    n_samples, n_features : int
    distribution : {"student-t", "pareto", "gaussian"}
        Law of the heavy-tailed parts. ``"student-t"``: Student t with
        ``tail_index`` degrees of freedom. ``"pareto"``: symmetrized Lomax
        (Pareto II), a random sign times ``numpy.random.Generator.pareto``, with
        P(|x| > t) = (1 + t)^(-tail_index). ``"gaussian"``: N(0, 1), a light-tailed
        control (``tail_index`` is then not used). For both heavy laws, moments of
        order k are finite exactly when k < tail_index.
    tail_index : float > 0
    target : {"linear", "logistic"}
        ``"linear"``: ``y = X coef + noise * e``. ``"logistic"``:
        ``y = sign(X coef + noise * e)`` in {-1.0, +1.0}.
    outlier_fraction : float in [0, 1]
        Fraction of rows (``round(outlier_fraction * n_samples)``, chosen
        uniformly at random) turned into gross outliers after y is computed: their
        features are multiplied by ``outlier_scale`` (so they no longer fit the
        model), and for ``target="logistic"`` their labels are also flipped.
    noise : float >= 0
        Scale of the noise ``e``.
    heavy : {"features", "noise", "both"}
        Which parts follow ``distribution``; the other part is N(0, 1).
    outlier_scale : float >= 1
    return_coef : bool

    Choices: the true coefficients are a uniformly random unit vector (so they
    lie in the unit ball, the bounded domain of the paper); the draws are not
    rescaled to unit variance (Student t has variance v/(v-2), infinite for
    v <= 2). Draw order: X, coef, noise, outlier rows.
    """
    n = check_positive_int(n_samples, "n_samples")
    p = check_positive_int(n_features, "n_features")
    check_choice(distribution, "distribution", _DISTRIBUTIONS)
    tail_index = check_scalar(tail_index, "tail_index", low=0.0, low_open=True)
    check_choice(target, "target", _TARGETS)
    noise = check_scalar(noise, "noise", low=0.0)
    frac = check_scalar(outlier_fraction, "outlier_fraction", low=0.0, high=1.0)
    check_choice(heavy, "heavy", _HEAVY_PARTS)
    outlier_scale = check_scalar(outlier_scale, "outlier_scale", low=1.0)
    _check_bool(return_coef, "return_coef")
    rng = check_random_state(random_state)

    x_law = distribution if heavy in ("features", "both") else "gaussian"
    e_law = distribution if heavy in ("noise", "both") else "gaussian"
    X = _draw(rng, x_law, tail_index, (n, p))
    g = rng.standard_normal(p)
    coef = g / np.linalg.norm(g)
    e = _draw(rng, e_law, tail_index, n)
    _check_finite_draws(X, e, tail_index)
    response = X @ coef + noise * e
    y = response if target == "linear" else _signs(response)
    n_out = int(round(frac * n))
    if n_out:
        rows = rng.choice(n, size=n_out, replace=False)
        X[rows] *= outlier_scale
        if target == "logistic":
            y[rows] = -y[rows]
    return _out(X, y, coef, return_coef)
