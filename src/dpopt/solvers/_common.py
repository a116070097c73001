"""Pieces several solver families share (the skglm ``solvers/common.py`` idea).

Nothing here is an algorithm: constants read from the data (and the
:class:`~dpopt.PrivacyLeakWarning` that goes with reading them), clipping thresholds and
their check, the sensitivity of a clipped mean under an adjacency, a kernel's set-up from a
problem, Poisson batches, and the accountant names each family accepts. No solver module
imports a sibling: what two of them need lives here.

Privacy conventions used by every helper:

* **Adjacency.** Replace-one (the default, the papers' convention) moves one record
  anywhere, so a mean of n values clipped to norm C moves by at most 2C/n; add-remove
  (one record added or removed, n fixed as public) moves it by C/n.
  :func:`adjacency_factor` is the only place this factor 2 is written.
* **Constants from the data.** ``smoothness="exact"`` (and the other ``"exact"`` knobs)
  read the private data without paying for it: the helpers below warn with
  :class:`~dpopt.PrivacyLeakWarning` (the diffprivlib convention); a public value given
  by the user is only validated. An all-zero X (every constant zero) raises one
  ``ValueError`` naming the option to pass instead.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import check_choice, check_scalar
from dpopt.data.losses import get_loss
from dpopt.data.steps import coordinate_steps  # noqa: F401 (the solvers import it from here)
from dpopt.kernels.cd import CDWork
from dpopt.kernels.sampling import poisson_batches  # noqa: F401 (the solvers import it from here)
from dpopt.privacy import ADJACENCIES
from dpopt.solvers._base import Option, positive, positive_int

# ---------------------------------------------------------------------------
# accountant names, per kind of composition

#: Homogeneous Gaussian steps (dp-cd, dp-rbcd): dp_accounting's PLD (``"exact"`` and
#: ``"pld"``), RDP, or the paper's closed form.
GAUSSIAN_ACCOUNTANTS = ("exact", "pld", "rdp", "paper")
#: Gaussian steps composed with report-noisy-max selections (dp-gcd).
SELECTION_ACCOUNTANTS = ("auto", "pld", "rdp", "paper")
#: Poisson-subsampled Gaussian steps (dp-sgd).
SUBSAMPLED_ACCOUNTANTS = ("pld", "rdp")
#: Losses with a finite smoothness constant (the gradient methods that need one).
SMOOTH_LOSSES = ("squared", "logistic", "huber")
#: zCDP budgets (heavy-tailed family): rho converted by the zCDP bound or Gaussian DP.
ZCDP_ACCOUNTANTS = ("zcdp", "exact")


# ---------------------------------------------------------------------------
# sensitivity under an adjacency


def adjacency_factor(adjacency: str = "replace-one") -> float:
    """How far one neighbouring record moves a sum of values of norm <= C, in units of C:
    2 under replace-one (C out, C in), 1 under add-remove."""
    check_choice(adjacency, "adjacency", ADJACENCIES)
    return 2.0 if adjacency == "replace-one" else 1.0


def mean_sensitivity(clip, n_samples, adjacency="replace-one"):
    """Sensitivity of a mean of ``n_samples`` values clipped to ``clip`` (scalar or
    per-coordinate array): 2C/n under replace-one, C/n under add-remove."""
    return adjacency_factor(adjacency) * clip / n_samples


def mean_noise_std(noise_multiplier, clip, n_samples, adjacency="replace-one"):
    """sigma = z * sensitivity of a clipped mean, computed as ``z * 2 * C / n`` (the
    association every solver used, so results stay bit for bit)."""
    return noise_multiplier * adjacency_factor(adjacency) * clip / n_samples


# ---------------------------------------------------------------------------
# clipping thresholds


def check_clip(epsilon, clip):
    """C > 0; ``inf`` (no clipping, unbounded sensitivity) only when epsilon is inf."""
    clip = check_scalar(clip, "clip", low=0.0, low_open=True, allow_inf=True)
    if math.isinf(clip) and not math.isinf(epsilon):
        raise ValueError("clip must be finite when epsilon is finite (unbounded sensitivity)")
    return clip


def coordinate_clips(M, clip):
    """C_j = C sqrt(M_j / sum_k M_k), so that ||(C_j)_j||_2 = C (DP-CD, Section 5.1); 0 where
    M_j = 0 (such a coordinate never moves, see :func:`coordinate_steps`)."""
    total = M.sum()
    if total <= 0:
        raise _all_zero("smoothness")
    return np.where(M > 0, clip * np.sqrt(M / total), 0.0)


# ---------------------------------------------------------------------------
# constants from the data


def _all_zero(option):
    return ValueError(f"every smoothness constant of the data is zero (X is all zeros?): "
                      f"nothing can be derived from it; pass {option}=<value> explicitly")


def _leak(reading, option, stacklevel):
    warnings.warn(f"{reading} from the private data without privacy; pass "
                  f"{option}=<value> (public knowledge) to avoid this", PrivacyLeakWarning,
                  stacklevel=stacklevel + 1)


def check_vector(value, name, dim):
    """A finite float array of shape (dim,), or a ValueError naming ``name``."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of {dim} numbers, got {value!r}") from None
    if arr.shape != (dim,):
        raise ValueError(f"{name} must have shape ({dim},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def coordinate_smoothness(problem, smoothness):
    """M_j = c ||X_j||^2 / n: ``"exact"`` (from the data, warns) or a public array."""
    if isinstance(smoothness, str):
        check_choice(smoothness, "smoothness", ("exact",))
        _leak("smoothness='exact' reads the coordinate smoothness constants M_j", "smoothness", 3)
        return problem.coordinate_smoothness()
    M = check_vector(smoothness, "smoothness", problem.dim)
    if np.any(M < 0):
        raise ValueError("smoothness must be non-negative")
    return M


def global_smoothness(problem, smoothness):
    """beta = c ||X||_2^2 / n, the smoothness of the average loss: ``"exact"`` (from the
    data, warns; infinite for a non-smooth loss) or a public float > 0."""
    if isinstance(smoothness, str):
        check_choice(smoothness, "smoothness", ("exact",))
        _leak("smoothness='exact' reads the global smoothness beta", "smoothness", 3)
        if not problem.loss.smooth:
            raise ValueError(f"the {problem.loss.name} loss is not smooth (no finite smoothness "
                             f"constant): pass smoothness=<beta>")
        beta = problem.global_smoothness()
        if beta <= 0:
            raise _all_zero("smoothness")
        return beta
    return check_scalar(smoothness, "smoothness", low=0.0, low_open=True)


def per_sample_smoothness(problem, smoothness):
    """L with every l(x_i^T .; y_i) L-smooth: ``"exact"`` = c max_i ||x_i||^2 (from the
    data, warns) or a public float > 0 (e.g. 0.25 for the logistic loss, ||x_i|| <= 1)."""
    if isinstance(smoothness, str):
        check_choice(smoothness, "smoothness", ("exact",))
        _leak("smoothness='exact' reads the per-sample smoothness c max_i ||x_i||^2", "smoothness",
              3)
        L = problem.loss.curvature * float(np.max(problem.row_norms) ** 2)
        if L <= 0:
            raise _all_zero("smoothness")
        return L
    return check_scalar(smoothness, "smoothness", low=0.0, low_open=True)


def max_row_nnz(problem, *, warn_option=None) -> int:
    """omega: the largest number of non-zeros in a row (p for dense data, public). For
    sparse data it is read from the private data: warns when ``warn_option`` names the
    option that would avoid it."""
    if not problem.is_sparse:
        return problem.dim
    if warn_option is not None:
        _leak(f"{warn_option} (the largest number of non-zeros in a row) is read", warn_option, 3)
    return problem.max_row_nnz()


# ---------------------------------------------------------------------------
# kernel set-up


def cd_work(problem, z):
    """A :class:`~dpopt.kernels.cd.CDWork` on the problem's columns and penalty, holding the
    margins ``z`` = X w (DP-CD's passes and DP-RBCD's passes of singletons run on one)."""
    return CDWork(problem.X, problem.y, problem.loss.code, problem.loss.param,
                  problem.penalty.arrays, z)


# ---------------------------------------------------------------------------
# Poisson batches


# ---------------------------------------------------------------------------
# options several families share (each family takes them with its own default via .but())

STEP = Option("step", 1.0, positive, "gamma, the step scale (the family's docstring says "
              "what it multiplies)")
CLIP = Option("clip", 1.0, None, "C, the clipping threshold (``inf`` only with epsilon = inf; "
              "checked with epsilon by check_clip)")
SMOOTHNESS = Option("smoothness", "exact", None, "the smoothness constant(s) of the data: "
                    "public values, or ``\"exact\"`` read from the data (PrivacyLeakWarning)")
CHECKPOINT_EVERY = Option("checkpoint_every", 1, positive_int,
                          "record the iterate every this many passes / epochs / iterations")
PASSES = Option("passes", 10, positive_int, "run length in passes over the data")
BATCH_SIZE = Option("batch_size", None, None, "expected (Poisson) or fixed batch size; "
                    "default from n")


# ---------------------------------------------------------------------------
# settings on the default path's scaled domain (the solvers' DefaultUse.settings)

#: The longest run the default path's rules give (a cost clamp, not the bound's optimum;
#: docs/default_path.md, "Levers measured in session 35").
MAX_RUN_LENGTH = 200


def run_length(n, dim, mu, curvature_ratio=1.0):
    """T = (n mu / sqrt(dim))^(2/3), clamped to [5, ``MAX_RUN_LENGTH``]; times
    ``curvature_ratio``^(2/3) inside the clamp when the step's smoothness beta is known to
    be ``curvature_ratio`` times the domain's bound (the same trade-off at that beta).

    For a convex, L-Lipschitz, beta-smooth objective on a domain of radius D,
    noisy gradient descent with T steps of 1/beta has excess risk of order
    beta D^2 / T + L D sqrt(T dim) / (n mu) (optimisation plus the noise of T
    Gaussian steps of sensitivity 2L/n each at multiplier sqrt(T)/mu); equating
    the two gives T ~ (beta D n mu / (L sqrt(dim)))^(2/3). On the scaled domain
    beta D / L is of order one, so it is set to one. The clamp keeps a minimum
    of progress and a bounded cost.
    """
    return int(min(MAX_RUN_LENGTH, max(5, round((n * mu * curvature_ratio / math.sqrt(dim))
                                     ** (2.0 / 3.0)))))


def smooth_run_length(n, dim, mu, smoothness, clip):
    """T = beta n mu / (2 sqrt(2) C sqrt(dim)) for the average of DP-GD's iterates, clamped
    to [5, ``MAX_RUN_LENGTH``]: ``smoothness`` beta, ``clip`` C the per-sample gradient bound, D = 1.

    Gradient descent on a convex, beta-smooth F with steps 1 / beta and gradient noise xi_t
    of variance sigma^2 per coordinate: smoothness and convexity give
    F(x_{t+1}) - F* <= (beta / 2)(||x_t - x*||^2 - ||x_{t+1} - x*||^2) - <xi_t, x_{t+1} - x*>,
    and E <xi_t, x_{t+1} - x*> = -dim sigma^2 / beta (x_{t+1} holds -xi_t / beta; the rest of
    it is independent of xi_t). Summed over the run, the average iterate has
    E F(x_bar) - F* <= beta D^2 / (2T) + dim sigma^2 / beta, D = ||x_0 - x*||. T Gaussian
    releases of sensitivity 2C/n at mu / sqrt(T) each give sigma = 2C sqrt(T) / (n mu), so
    the bound is beta D^2 / (2T) + 4 dim C^2 T / (beta n^2 mu^2), least at
    T = beta D n mu / (2 sqrt(2) C sqrt(dim)), where it is 2 sqrt(2) D C sqrt(dim) / (n mu):
    the sqrt(d) / (n mu) rate of DP-GD on smooth objectives (Zhang, Zheng, Mou & Wang 2017,
    *Efficient private ERM for smooth objectives*, IJCAI), against (sqrt(d) / (n mu))^(2/3)
    for :func:`run_length`, whose bound charges each step's noise against D as if it pointed
    away from the optimum. D = 1 is the scaled domain's unit ball. The suffix average over the
    run's second half (Rakhlin, Shamir & Sridharan 2012) keeps that order at the bias of the
    second half, where the last iterate would keep the stationary noise of its last steps.
    Public numbers (or released ones) only."""
    T = smoothness * n * mu / (2.0 * math.sqrt(2.0) * clip * math.sqrt(dim))
    return int(min(MAX_RUN_LENGTH, max(5, round(T))))


#: |loss'(z; y)| on the scaled domain (targets and predictions in [-1, 1]: the squared
#: loss's residual is at most 2); Huber's is its threshold t.
_DERIVATIVE_BOUND = {"logistic": 1.0, "absolute": 1.0, "squared": 2.0}


def scaled_domain(loss, row_bound, T, huber_threshold=1.0):
    """``(G, c, r)`` on the default path's scaled domain (features in [0, 1] or [-1, 1],
    rows of norm <= R = ``row_bound``, targets in [-1, 1]): G bounds |loss'|, c bounds
    loss'' (the loss's curvature; the non-smooth absolute loss has none, and takes
    c = sqrt(T): then a step 1 / beta is the subgradient method's constant step
    D / (G sqrt(T)) with D = 1, Nesterov, *Introductory Lectures on Convex Optimization*,
    sec. 3.2.3), and r = sqrt(R^2 + 1) bounds a row with its intercept coordinate.
    Public numbers only."""
    G = huber_threshold if loss == "huber" else _DERIVATIVE_BOUND[loss]
    c = math.sqrt(T) if loss == "absolute" else get_loss(loss).curvature
    return G, c, math.sqrt(row_bound ** 2 + 1.0)
