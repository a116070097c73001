"""DP-GD: full-batch noisy clipped proximal gradient descent (baseline).

    w <- prox_{Gamma psi}( w - Gamma (g(w) + eta) ),   eta ~ N(0, sigma^2 I)

with g the average of clipped per-sample gradients, either L2 clipping to C
(``clipping="l2"``, the DP-SGD convention) or coordinate-wise clipping to
C_j = C sqrt(M_j / sum_k M_k) (``"coordinate"``, as DP-CD; ||(C_j)||_2 = C).
Both make ||g(D) - g(D')||_2 <= 2C/n under replace-one adjacency, so
sigma = z 2C/n and T steps are a homogeneous Gaussian composition
(Gaussian-DP accountant, exact). Step: ``step_rule="global"`` uses
Gamma = (gamma / beta) I with beta the global smoothness; ``"eso"`` uses
Gamma = diag(gamma / (min(p, omega) M_j)) with omega the largest number of
non-zeros in a row (the ESO step of the full sampling in DP-RBCD). Every rule is
post-processing of the noisy gradients: privacy does not depend on the step.
``output="last"`` returns the last iterate x_T (Wang, Ye, Xu 2017, Theorem 6.2:
PL objectives); ``"random"`` returns x_tau with tau uniform on {0, ..., T-1}
(Theorem 6.3, general smooth non-convex objectives: the bound is on the average
of E||grad F(x_t)||^2 over t = 0..T-1; the paper's "uniformly sampled from
{0, ..., m-1}" is a typo for T); ``"average"`` the average of x_1, ..., x_T (a run
that continues another from ``init``); ``"suffix"`` returns the average of x_t over
t = floor(T/2) + 1, ..., T (suffix averaging, Rakhlin, Shamir & Sridharan 2012: the
convex bound on the average iterate, :func:`~dpopt.solvers._common.smooth_run_length`,
at the bias of the run's second half). ``params["tau"]`` is the index returned (T for
"last", "suffix" and "average"). Every output is post-processing of the released gradients. The
checkpoints record the iterates themselves, so with "random" or "suffix" the last one is x_T,
not the returned w.

Speed: each step is one sweep over a row-major copy of X (margins, clipping
and gradient fused, :func:`dpopt.kernels.grad.full_gradient`), instead of the
two sweeps X w and X^T v. Random draws: with ``output="random"`` first
``rng.integers(0, passes)`` (tau), then ``rng.standard_normal(dim)`` per step.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt._core.validation import check_positive_int, check_scalar
from dpopt.data.chunked import _native_design
from dpopt.data.statistics import row_sq_norms
from dpopt.privacy import Gaussian, calibrate_gaussian
from dpopt.solvers._base import Checkpoints, DefaultUse, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    PASSES,
    SMOOTHNESS,
    STEP,
    check_clip,
    coordinate_clips,
    coordinate_smoothness,
    global_smoothness,
    max_row_nnz,
    mean_noise_std,
    run_length,
    scaled_domain,
    smooth_run_length,
)


def gd_steps(problem, step, step_rule, smoothness):
    """The diagonal of Gamma for the chosen rule (see module docstring)."""
    if step_rule == "global":
        return np.full(problem.dim, step / global_smoothness(problem, smoothness))
    M = coordinate_smoothness(problem, smoothness)
    out = np.zeros(problem.dim)
    scale = min(problem.dim, max_row_nnz(problem))
    np.divide(step, scale * M, out=out, where=M > 0)
    return out


OPTIONS = (
    PASSES.but(doc="T, the number of full-gradient steps (one per pass)"),
    STEP.but(doc="gamma: Gamma = gamma / beta (global) or gamma / (min(p, omega) M_j) (eso)"),
    CLIP.but(doc="C, the L2 or overall coordinate clipping threshold"),
    Option("clipping", "l2", one_of("l2", "coordinate"), "per-sample L2 or coordinate clipping"),
    Option("step_rule", "global", one_of("global", "eso"), "global or ESO step (module docstring)"),
    SMOOTHNESS.but(doc='"exact" (warns), beta (global) or the M_j (eso / coordinate clipping)'),
    Option("output", "last", one_of("last", "random", "suffix", "average"),
           "last iterate, x_tau with tau uniform, the average of the run's second half, or "
           "of all its iterates x_1..x_T"),
    Option("init", None, None, "the first iterate x_0 (zeros if None): public, or a private "
           "output (post-processing)"),
    CHECKPOINT_EVERY,
)


def check_init(init, dim):
    """``init`` as a float64 copy, or a ValueError naming it (not a finite vector of ``dim``)."""
    try:
        w = np.array(init, dtype=np.float64)
    except (TypeError, ValueError):
        w = np.full(1, np.nan)
    if w.shape != (dim,) or not np.all(np.isfinite(w)):
        raise ValueError(f"init must be a finite vector of length {dim} (the problem's dim), "
                         f"got {init!r:.60}")
    return w


def suffix_start(passes):
    """The first step t of the suffix average over a run of ``passes`` steps: floor(T/2) + 1
    (the run's second half, T itself included)."""
    return passes // 2 + 1


def default_settings(*, loss, n, dim, mu, row_bound, alpha=0.0, huber_threshold=1.0,
                     curvature=None, penalty="none", **public):
    """DP-GD on the default path's scaled domain (:func:`~dpopt.solvers._common.scaled_domain`):
    steps of 1 / beta with beta = c r^2 + alpha (a global smoothness bound), clip = G r, the
    largest per-sample gradient norm on the domain (clipping binds only on rows whose norm the
    row bound r does not cover). Public numbers only.

    ``curvature``: a released bound on the loss's curvature, lambda_max(X^T X / n) for the
    squared loss (:mod:`dpopt.pipeline.curvature`); then beta = curvature + alpha
    (post-processing of the release: privacy does not depend on the step).

    Smooth losses (squared, Huber, logistic) return the suffix average of
    T = :func:`~dpopt.solvers._common.smooth_run_length` steps, the run length at which the
    convex bound on the average iterate balances bias and noise at this beta and clip.
    ``penalty`` "l1" or "elastic_net" keeps the last iterate and
    :func:`~dpopt.solvers._common.run_length`'s T at that beta: an average of prox outputs
    has no exact zeros, and the point of those penalties is a sparse model. The absolute
    loss is not smooth: the subgradient steps of ``run_length``, last iterate."""
    if loss == "absolute":
        T = run_length(n, dim, mu)
        G, c, r = scaled_domain(loss, row_bound, T)
        return {"passes": T, "step": 1.0, "clip": G * r,
                "smoothness": max(c * r ** 2 + alpha, 1e-12)}
    G, c, r = scaled_domain(loss, row_bound, 1, huber_threshold)
    beta = max((c * r ** 2 if curvature is None else curvature) + alpha, 1e-12)
    if penalty in ("l1", "elastic_net"):
        lipschitz = max(1.0, 2.0 / G) if loss == "huber" else 1.0  # the squared loss's 2 / t
        T = run_length(n, dim, mu, beta / (c * r ** 2) * lipschitz)
        return {"passes": T, "step": 1.0, "clip": G * r, "smoothness": beta}
    return {"passes": smooth_run_length(n, dim, mu, beta, G * r), "step": 1.0, "clip": G * r,
            "smoothness": beta, "output": "suffix"}


@register_solver("dp-gd", description="DP proximal gradient descent, full batch (baseline)",
                 family="dp-gd", options=OPTIONS, run_length="passes", audit={"passes": 10},
                 distributed=True,
                 mechanism="Gaussian noise on the full clipped gradient, one release per pass",
                 sensitivity="2 C / n (L2 or coordinate-wise clipping)",
                 default_path=DefaultUse(
                     default_settings, rank=0,
                     why="fallback: DP gradient descent with the rules of "
                         "dpopt.pipeline.default_path.rules",
                     losses=("squared", "logistic", "huber", "absolute"),
                     penalties=("none", "l1", "l2", "elastic_net", "box", "non_negative")))
def fit_dp_gd(problem, *, epsilon, delta, rng, passes=10, step=1.0, clip=1.0, clipping="l2",
              step_rule="global", smoothness="exact", output="last", init=None,
              checkpoint_every=1):
    """Fit with DP-GD; one pass = one full-gradient step (see module docstring).

    ``smoothness``: ``"exact"`` (non-private, warns), a float beta for
    ``step_rule="global"``, or an array of M_j for ``"eso"`` / coordinate clipping.
    """
    passes = check_positive_int(passes, "passes")
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    gamma = gd_steps(problem, step, step_rule, smoothness)
    if clipping == "coordinate":
        clips = coordinate_clips(coordinate_smoothness(problem, smoothness), clip)
    cal = calibrate_gaussian(epsilon, delta, passes)
    sigma = 0.0 if math.isinf(clip) else mean_noise_std(cal.noise_multiplier, clip, problem.n_samples)
    pen = problem.penalty

    w = problem.zeros() if init is None else check_init(init, problem.dim)
    ck = Checkpoints()
    ck.record(w, 0)
    # Theorem 6.3 bounds the average of E||grad F(x_t)||^2 over t = 0..T-1: draw tau there
    # (data-independent, so it is drawn first and only x_tau is kept).
    tau = int(rng.integers(0, passes)) if output == "random" else passes
    out = w.copy()
    suffix_from = 1 if output == "average" else suffix_start(passes)
    total = problem.zeros()
    for t in range(1, passes + 1):
        g = problem.clipped_gradient(w, clips=clips) if clipping == "coordinate" else \
            problem.clipped_gradient(w, clip=clip)
        noise = rng.standard_normal(problem.dim)
        w = pen.prox(w - gamma * (g + sigma * noise), gamma)
        if t == tau:
            out = w.copy()
        if output in ("suffix", "average") and t >= suffix_from:
            total += w
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w, t)
    w = total / (passes - suffix_from + 1) if output in ("suffix", "average") else out
    return make_result(problem, w, solver="dp-gd", calibration_or_spent=cal,
                       mechanisms=[Gaussian(cal.noise_multiplier, passes)], n_iter=passes,
                       passes=passes, checkpoints=ck,
                       params={"passes": passes, "step": step, "clip": clip, "clipping": clipping,
                               "step_rule": step_rule, "output": output, "tau": tau})


# ---------------------------------------------------------------------------
# the multinomial (softmax) loss: k >= 3 classes in one model


def softmax(margins):
    """Row-wise softmax of (n, k) margins, in place (shifted by each row's maximum: no
    overflow); returns them. In place because it runs on every step: scipy.special.softmax
    allocates and took 4.0 ms against 2.0 ms on 26,000 x 6 margins."""
    margins -= margins.max(axis=1, keepdims=True)
    np.exp(margins, out=margins)
    margins /= margins.sum(axis=1, keepdims=True)
    return margins


def multinomial_gradient_bound(row_bound):
    """C = sqrt(2) r, r = ``row_bound``: the largest per-record gradient norm of the
    multinomial loss. Its gradient in W (d x k) is x (p - e_y)^T, of Frobenius norm
    ||x|| ||p - e_y|| <= r sqrt(2) (p - e_y has squared norm sum_j p_j^2 + 1 - 2 p_y <= 2),
    whatever k."""
    return math.sqrt(2.0) * float(row_bound)


def multinomial_clipped_gradient(X, labels, W, clip, norms=None):
    """(1/n) sum_i of the per-record gradients x_i (p_i - e_{y_i})^T of the multinomial
    loss at W (d x k), each scaled down to Frobenius norm at most ``clip``; the rows of X
    include the intercept column when there is one (``norms``: their norms, computed when
    None). A record whose label is none of the k classes (a negative index: a label the
    private selection did not keep) has no term in the softmax loss and contributes 0
    (still n in the mean: n is public). Non-private (the noise is added by
    :func:`fit_multinomial_gd`)."""
    n = X.shape[0]
    residual = softmax(np.array(X @ W, dtype=np.float64))
    known = labels >= 0
    residual[known, labels[known]] -= 1.0
    residual[~known] = 0.0
    norms = (np.sqrt(row_sq_norms(X)) if norms is None else norms) * np.sqrt(
        np.einsum("ij,ij->i", residual, residual))
    over = norms > clip
    residual[over] *= (clip / norms[over])[:, None]
    return np.asarray(X.T @ residual) / n


def _chunk_multinomial_gradient(xb, yb, *, W, clip, fit_intercept):
    """The sum of one chunk's clipped per-record gradients (flattened; runs on the
    workers), its labels the chunk's target (class indices)."""
    X = _native_design(xb, fit_intercept)
    mean = multinomial_clipped_gradient(X, yb[:, 0].astype(np.int64), W, clip)
    return (mean * X.shape[0]).ravel()[None, :]


def multinomial_gradient(X, labels, W, clip, norms=None):
    """:func:`multinomial_clipped_gradient` over the records of X: rows in memory with
    ``labels``, or a :class:`~dpopt.data.chunked.ChunkedProblem` whose target holds the class
    indices (``labels`` None), summed chunk by chunk: the same mean, to rounding. ``norms``:
    the in-memory rows' norms, computed once by the caller."""
    if getattr(X, "is_chunked", False):
        total = X._reduce(_chunk_multinomial_gradient, W.size, W=W, clip=clip,
                          fit_intercept=X.fit_intercept)
        return total.reshape(W.shape) / X.n_samples
    return multinomial_clipped_gradient(X, labels, W, clip, norms)


def fit_multinomial_gd(X, labels, n_classes, *, mu, passes, step, row_bound, alpha=0.0,
                       fit_intercept=True, rng):
    """DP-GD on the multinomial logistic loss (softmax cross-entropy, scikit-learn's
    multinomial ``LogisticRegression``) over k = ``n_classes`` classes: one model
    W (d x k), d counting the intercept's column when ``fit_intercept`` (last row of X's
    columns; unpenalized).

        W <- W - step (g(W) + alpha W_feat + N(0, sigma^2 I)),

    returning the mean of the iterates of the run's second half (t = floor(T/2) + 1..T, as
    ``output="suffix"`` of :func:`fit_dp_gd`; post-processing), with
    g the mean of the per-record gradients clipped to C = :func:`multinomial_gradient_bound`
    (``row_bound``) in Frobenius norm, which never binds on rows of norm <= ``row_bound``.

    Privacy (replace-one adjacency). Replacing one record moves g by at most 2 C / n in
    Frobenius norm, so each step with sigma = z 2 C / n is a Gaussian mechanism of
    multiplier z; T = ``passes`` steps at z = sqrt(T) / mu compose to exactly mu-GDP
    (Dong, Roth & Su 2022, Cor. 3.3), recorded as ``Gaussian(z, T)``. The clip is fixed by
    public numbers and the step is post-processing. Unlike one-vs-rest, whose k binary
    fits each see every record and share mu / sqrt(k), the noise does not grow with k:
    a record's gradient over all k classes has norm <= sqrt(2) r.

    ``X``: the design rows (the intercept's column last when ``fit_intercept``) with the
    class indices ``labels``, or a :class:`~dpopt.data.chunked.ChunkedProblem` of the scaled
    chunks whose target holds them (``labels`` None; its own ``fit_intercept``).

    Returns (W, records, params)."""
    chunked = getattr(X, "is_chunked", False)
    n, d = (X.n_samples, X.dim) if chunked else X.shape
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu!r}")
    passes = check_positive_int(passes, "passes")
    labels = None if chunked else np.asarray(labels, dtype=np.int64)
    clip = multinomial_gradient_bound(row_bound)
    z = math.sqrt(passes) / mu
    sigma = mean_noise_std(z, clip, n)
    penalized = np.ones((d, 1))
    if fit_intercept:
        penalized[-1] = 0.0
    W = np.zeros((d, n_classes))
    suffix_from, total = suffix_start(passes), np.zeros_like(W)
    norms = None if chunked else np.sqrt(row_sq_norms(X))
    for t in range(1, passes + 1):
        g = multinomial_gradient(X, labels, W, clip, norms)
        W = W - step * (g + alpha * penalized * W + sigma * rng.standard_normal(W.shape))
        if t >= suffix_from:
            total += W
    W = total / (passes - suffix_from + 1)
    return W, [Gaussian(z, passes)], {"passes": passes, "step": step, "clip": clip,
                                       "sigma": sigma, "alpha": alpha}
