"""Empirical privacy audit: a statistical lower bound on the epsilon a solver really spends.

The audit plays the distinguishing game behind the definition of differential
privacy (Jagielski, Ullman, Oprea, "Auditing Differentially Private Machine
Learning: How Private is Private SGD?", NeurIPS 2020; Nasr, Song, Thakurta,
Papernot, Carlini, "Adversary Instantiation: Lower Bounds for Differentially
Private Machine Learning", IEEE S&P 2021):

1. Build two neighbouring datasets D0, D1 that differ in one worst-case record,
   the *canary* (:func:`canary_problems`). Under replace-one adjacency D1
   holds the canary where D0 holds its mirror image; under add-remove D1 holds
   the canary and D0 does not.
2. Run the solver ``n_runs`` times on each, with independent seeds, and map
   each output to a score (by default the projection of the model on the
   canary's direction).
3. On the first half of the runs choose a threshold test "D1 if score > t"
   (or "< t"); on the second, held-out half measure its false-positive rate
   FPR = P(test says D1 | D0) and false-negative rate FNR.
4. Any (epsilon, delta)-DP mechanism satisfies, for every test,
   ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >= 1 - delta``
   (Kairouz, Oh, Viswanath 2015, Thm 2.1). With Clopper-Pearson upper
   confidence bounds FPR_u, FNR_u (each at level 1 - (1 - confidence)/2, so
   that both hold jointly with probability >= ``confidence``),

       eps_lb = max( log((1 - delta - FPR_u) / FNR_u), log((1 - delta - FNR_u) / FPR_u), 0 )

   is a lower bound on the true epsilon with probability >= ``confidence``
   (Jagielski et al. 2020, Sec. 3; Nasr et al. 2021, eq. (2)).

A solver passes when ``eps_lb <= claimed epsilon``; a solver that adds too
little noise, or does not clip, gives ``eps_lb > claimed epsilon`` (the tests
check both directions: tests/test_audit.py).

The canary. Feature vector ``x = a e_1``, label ``y = b`` with b huge, so that
the per-sample gradient ``l'(x^T w; y) x`` points along -e_1 and is clipped to
the full threshold for the whole run; its mirror ``-a e_1`` (same label) has
the opposite clipped gradient, so replacing one by the other moves a clipped
sum by exactly 2C, the replace-one sensitivity. The other records are zero
(or, with ``n_features > 1``, live on the other coordinates), so they carry
no information about the canary. The data-dependent constants the solvers
may compute without privacy (smoothness, norms) are identical on D0 and D1,
so the audit silences their :class:`~dpopt.PrivacyLeakWarning`: it measures
the privacy of the optimisation itself.

The curvature canary (:func:`curvature_canary_problems`). The mirror pair leaves x x^T, so
every Hessian, unchanged; objective perturbation's privacy loss has a second term, the log
of the Jacobian ratio det(H_1) / det(H_0) <= 1 + kappa (the calibration's ``shift``), which
only records of different curvature exercise. There D1 holds ``a e_1`` with label 0, in the
quadratic zone of the Huber loss (curvature 1, gradient 0 at w = 0), and D0 the zero record:
the gradients agree at 0 and the Hessians differ by a^2 e_1 e_1^T. In one feature the
minimiser is -b_1 / (a^2 + n lambda) on D1 and -b_1 / (n lambda) on D0, so the densities at 0
differ by the factor 1 + a^2 / (n lambda) <= e^shift, and the test "D1 if |w_1| is small"
(statistic :func:`near_zero`) sees it. At the quick audit's budget and 2,000 runs per
dataset a calibration that undercounts kappa a thousandfold is caught (tests/test_audit.py);
the correct one's shift, 0.17 there, is far below the claim.

``AUDIT_OPTIONS`` holds, for every registered private solver, the options of
the quick audit (tiny problem, few passes); ``AUDIT_CANARY`` optional canary
settings (e.g. a loss the solver supports). Both are read from the solvers'
own declarations (``register_solver(..., audit=..., audit_canary=...)``), so a
new solver carries its audit configuration in its module. A test fails when a
registered private solver has none.

Command line: ``dpopt audit SOLVER [--epsilon E] [--runs N] [--seed S]``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

import dpopt
from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import check_choice, check_delta, check_positive_int, check_scalar
from dpopt.data import Problem
from dpopt.solvers import _base, available_solvers


class _DeclaredBySolvers(Mapping):
    """A read-only view of one audit attribute every solver declares beside itself
    (``register_solver(..., audit=..., audit_canary=...)``), keyed by solver name."""

    def __init__(self, attribute):
        self._attribute = attribute

    def _table(self):
        available_solvers()  # imports every solver module
        return {name: dict(getattr(spec, self._attribute))
                for name, spec in _base._REGISTRY.items()
                if spec.private and getattr(spec, self._attribute)}

    def __getitem__(self, name):
        return self._table()[name]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())


#: Solver options of the default (quick) audit, per registered private solver (declared by
#: each solver's ``register_solver(..., audit=...)``).
AUDIT_OPTIONS: Mapping[str, dict] = _DeclaredBySolvers("audit")

#: Optional keyword arguments of :func:`canary_problems`, per solver (``audit_canary=``).
AUDIT_CANARY: Mapping[str, dict] = _DeclaredBySolvers("audit_canary")

# Quick-audit budget: at (2, 1e-3) a Gaussian mechanism is 0.69-GDP, so 1000 runs per
# dataset leave the correct solvers far below 2 while a noise/4 variant (2.8-GDP) gives
# a lower bound near 3.5 (tests/test_audit.py, docs/privacy.md).
DEFAULT_EPSILON = 2.0
DEFAULT_DELTA = 1e-3
DEFAULT_RUNS = 1000


@dataclass(frozen=True)
class CanaryPair:
    """Two neighbouring problems and the direction the canary pushes the model along."""

    d0: Problem
    d1: Problem
    direction: np.ndarray
    adjacency: str


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    Attributes
    ----------
    solver : name of the audited solver.
    epsilon, delta, adjacency : the guarantee the solver claims (from its FitResult).
    epsilon_lb : empirical lower bound on epsilon, valid with probability >= ``confidence``.
    epsilon_point : the same formula with the observed rates instead of their
        upper confidence bounds (an estimate, not a bound).
    threshold, direction : the test (``"greater"``: "D1 if score > threshold").
    fpr, fnr : observed error rates of the test on the held-out runs.
    fpr_upper, fnr_upper : their Clopper-Pearson upper bounds.
    n_runs : runs per dataset (half choose the test, half measure it).
    confidence : joint confidence level of the two bounds.
    options : solver options used.
    """

    solver: str
    epsilon: float
    delta: float
    adjacency: str
    epsilon_lb: float
    epsilon_point: float
    threshold: float
    direction: str
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    n_runs: int
    confidence: float
    options: dict = field(default_factory=dict)

    @property
    def consistent(self) -> bool:
        """True when the lower bound does not contradict the claimed epsilon."""
        return self.epsilon_lb <= self.epsilon

    def summary(self) -> str:
        verdict = "consistent with" if self.consistent else "VIOLATES"
        return (f"{self.solver}: empirical epsilon lower bound {self.epsilon_lb:.3f} "
                f"({self.confidence:.0%} confidence; point estimate {self.epsilon_point:.3f}) "
                f"{verdict} the claimed ({self.epsilon:.4g}, {self.delta:.3g})-DP under "
                f"{self.adjacency} adjacency; {self.n_runs} runs per dataset, held-out "
                f"FPR {self.fpr:.4f} (<= {self.fpr_upper:.4f}), FNR {self.fnr:.4f} "
                f"(<= {self.fnr_upper:.4f})")


# ---------------------------------------------------------------------------
# neighbouring datasets


def canary_problems(*, n_samples=50, n_features=1, loss="squared", adjacency="replace-one",
                    scale=1.0, label=1e6) -> CanaryPair:
    """Neighbouring problems D0, D1 differing in one canary record (module docstring).

    Parameters
    ----------
    n_samples : int
        Records in D1 (D0 has the same number under replace-one, one fewer
        under add-remove).
    n_features : int
        The canary lives on feature 0; with more features the other records
        are unit vectors on features 1..p-1 with label 0 (a well-posed
        background problem that never touches feature 0).
    loss : "squared", "huber", "absolute" or "logistic"
        For ``"logistic"`` the labels are +1 and the canary's gradient stays
        clipped only while ``|w_0| < log(scale / C) / scale``; prefer the others.
    scale : float
        a, the canary's feature value.
    label : float
        b, the canary's label (regression losses): large, so that the
        canary's gradient a |a w_0 - b| exceeds any reasonable clipping threshold.
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    n_features = check_positive_int(n_features, "n_features")
    check_choice(loss, "loss", ("squared", "huber", "absolute", "logistic"))
    check_choice(adjacency, "adjacency", ("replace-one", "add-remove"))
    scale = check_scalar(scale, "scale", low=0.0, low_open=True)
    label = check_scalar(label, "label", low=0.0, low_open=True)
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2, got {n_samples}")
    X = np.zeros((n_samples, n_features))
    y = np.zeros(n_samples)
    for i in range(1, n_samples):
        if n_features > 1:
            X[i, 1 + (i - 1) % (n_features - 1)] = 1.0
    canary_label = 1.0 if loss == "logistic" else label
    if loss == "logistic":
        y[:] = 1.0
    y[0] = canary_label
    X1 = X.copy()
    X1[0, 0] = scale
    if adjacency == "replace-one":
        X0 = X.copy()
        X0[0, 0] = -scale
        d0 = Problem(X0, y, loss=loss)
    else:
        d0 = Problem(X[1:], y[1:], loss=loss)
    d1 = Problem(X1, y, loss=loss)
    direction = np.zeros(n_features)
    direction[0] = 1.0
    return CanaryPair(d0, d1, direction, adjacency)


def curvature_canary_problems(*, n_samples=50, scale=1.0) -> CanaryPair:
    """Neighbouring problems whose one differing record changes the Hessian and not the
    gradient at 0 (module docstring, "The curvature canary"): the Huber loss (threshold 1),
    D1 with the canary ``scale e_1`` and label 0, D0 with the zero record instead; every
    other record is zero. Replace-one neighbours; audit with ``statistic=near_zero`` and
    ``row_bound >= scale`` (the canary is then not clipped)."""
    n_samples = check_positive_int(n_samples, "n_samples")
    scale = check_scalar(scale, "scale", low=0.0, low_open=True)
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2, got {n_samples}")
    X0, y = np.zeros((n_samples, 1)), np.zeros(n_samples)
    X1 = X0.copy()
    X1[0, 0] = scale
    return CanaryPair(Problem(X0, y, loss="huber"), Problem(X1, y, loss="huber"),
                      np.ones(1), "replace-one")


def near_zero(result, direction) -> float:
    """-|w . direction|: large where the model stays near 0 (the curvature canary's test)."""
    return -abs(float(np.dot(result.w[: direction.size], direction)))


# ---------------------------------------------------------------------------
# statistics


def clopper_pearson_upper(k, n, level):
    """One-sided upper confidence bound, at ``level``, on p from k successes in n trials
    (Clopper & Pearson 1934); vectorised over ``k``."""
    k = np.asarray(k)
    out = np.ones(k.shape)
    inside = k < n
    out[inside] = stats.beta.ppf(level, k[inside] + 1, n - k[inside])
    return float(out) if out.ndim == 0 else out


def epsilon_lower_bound(fpr, fnr, delta) -> float:
    """max(log((1 - delta - fpr) / fnr), log((1 - delta - fnr) / fpr), 0) (module docstring)."""
    best = 0.0
    for a, b in ((fpr, fnr), (fnr, fpr)):
        num = 1.0 - delta - a
        if num <= 0:
            continue
        best = max(best, math.inf if b <= 0 else math.log(num / b))
    return best


def _bounds(s0, s1, thresholds, delta, level):
    """Confidence-corrected bound of the tests "D1 if score > t" for every t (vectorised)."""
    k0 = s0.size - np.searchsorted(np.sort(s0), thresholds, side="right")  # s0 > t
    k1 = np.searchsorted(np.sort(s1), thresholds, side="right")  # s1 <= t
    fu = clopper_pearson_upper(k0, s0.size, level)
    nu = clopper_pearson_upper(k1, s1.size, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fu, 0.0)) - np.log(nu)
        b = np.log(np.maximum(1.0 - delta - nu, 0.0)) - np.log(fu)
    eps = np.maximum(np.nan_to_num(np.maximum(a, b), nan=0.0, neginf=0.0), 0.0)
    return eps, k0 / s0.size, k1 / s1.size, fu, nu


def choose_test(s0, s1, delta, level, max_candidates=2000):
    """Threshold and direction maximising the confidence-corrected bound on (s0, s1)."""
    pooled = np.unique(np.concatenate([s0, s1]))
    if pooled.size > max_candidates:
        pooled = np.unique(np.quantile(pooled, np.linspace(0, 1, max_candidates)))
    best = (-1.0, 0.0, "greater")
    for sign, name in ((1.0, "greater"), (-1.0, "less")):
        eps = _bounds(sign * s0, sign * s1, sign * pooled, delta, level)[0]
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(pooled[i]), name)
    return best[1], best[2]


def empirical_epsilon(scores0, scores1, delta, *, confidence=0.95):
    """Lower bound on epsilon from the scores of runs on D0 and D1.

    The first half of each array chooses the test, the second half measures
    it; returns ``(epsilon_lb, epsilon_point, threshold, direction, fpr, fnr,
    fpr_upper, fnr_upper)``.
    """
    s0, s1 = np.asarray(scores0, dtype=np.float64), np.asarray(scores1, dtype=np.float64)
    if s0.ndim != 1 or s1.ndim != 1 or s0.size < 4 or s1.size < 4:
        raise ValueError("scores0 and scores1 must be 1-d with at least 4 runs each")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise ValueError("scores must be finite (did the solver diverge?)")
    confidence = check_scalar(confidence, "confidence", low=0.0, high=1.0, low_open=True,
                              high_open=True)
    level = 1.0 - (1.0 - confidence) / 2.0
    h0, h1 = s0.size // 2, s1.size // 2
    t, direction = choose_test(s0[:h0], s1[:h1], delta, level)
    e0, e1 = s0[h0:], s1[h1:]
    if direction == "less":
        e0, e1, t_eff = -e0, -e1, -t
    else:
        t_eff = t
    lb, fpr, fnr, fu, nu = (float(v[0]) for v in _bounds(e0, e1, np.array([t_eff]), delta,
                                                          level))
    point = epsilon_lower_bound(fpr, fnr, delta)
    return lb, point, t, direction, fpr, fnr, fu, nu


# ---------------------------------------------------------------------------
# the audit


def audit(solver, *, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
          problem_factory: Callable[[], CanaryPair] | None = None, canary: dict | None = None,
          statistic: Callable | None = None, random_state=0, confidence=0.95,
          **solver_options) -> AuditResult:
    """Empirical lower bound on the epsilon of ``solver`` (module docstring).

    Parameters
    ----------
    solver : str or callable
        A registered solver name, or ``fit(problem, *, epsilon, delta,
        random_state, **options) -> FitResult`` (e.g. a wrapper around
        :func:`dpopt.solve`; the tests audit deliberately broken variants this way).
    epsilon, delta : float
        The budget the solver is run with; the audit compares against the
        (epsilon, delta) the solver reports.
    n_runs : int
        Runs on each of the two datasets (half to choose the test, half to measure it).
    problem_factory : callable, optional
        ``() -> CanaryPair``; default :func:`canary_problems` with ``canary``
        (merged over ``AUDIT_CANARY[solver]``).
    statistic : callable, optional
        ``(FitResult, direction) -> float``; default the projection ``w . direction``.
    random_state : int or SeedSequence
        Root seed; run k on dataset b gets its own spawned seed.
    confidence : float
        Joint confidence of the two Clopper-Pearson bounds.
    **solver_options
        Override ``AUDIT_OPTIONS[solver]``.
    """

    name, fit = _resolve_solver(solver)
    epsilon = check_scalar(epsilon, "epsilon", low=0.0, low_open=True)
    delta = check_delta(delta)
    n_runs = check_positive_int(n_runs, "n_runs")
    if n_runs < 4:
        raise ValueError(f"n_runs must be >= 4, got {n_runs}")
    options = {**AUDIT_OPTIONS.get(name, {}), **solver_options}
    if problem_factory is None:
        kwargs = {**AUDIT_CANARY.get(name, {}), **(canary or {})}
        pair = canary_problems(**kwargs)
    else:
        pair = problem_factory()
    statistic = statistic or (lambda res, u: float(np.dot(res.w[: u.size], u)))
    if isinstance(random_state, np.random.SeedSequence):
        root = random_state
    elif isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) \
            and random_state >= 0:
        root = np.random.SeedSequence(int(random_state))
    else:
        raise ValueError(f"random_state must be a non-negative int or a SeedSequence, "
                         f"got {random_state!r}")
    seeds = root.spawn(2 * n_runs)
    scores = np.empty((2, n_runs))
    claimed = None
    with warnings.catch_warnings():
        # identical on both datasets by construction (module docstring)
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        for b in (1, 0):  # D1 first: a mismatched adjacency is reported before D0 is used
            problem = (pair.d0, pair.d1)[b]
            for k in range(n_runs):
                res = fit(problem, epsilon=epsilon, delta=delta, random_state=seeds[b * n_runs + k],
                          **options)
                scores[b, k] = statistic(res, pair.direction)
                claimed = _check_claim(claimed, res, pair.adjacency)
    lb, point, t, direction, fpr, fnr, fu, nu = empirical_epsilon(
        scores[0], scores[1], claimed[1], confidence=confidence)
    return AuditResult(solver=name, epsilon=claimed[0], delta=claimed[1], adjacency=claimed[2],
                       epsilon_lb=lb, epsilon_point=point, threshold=t, direction=direction,
                       fpr=fpr, fnr=fnr, fpr_upper=fu, fnr_upper=nu, n_runs=n_runs,
                       confidence=confidence, options=options)


def _resolve_solver(solver):
    if isinstance(solver, str):
        spec = dpopt.get_solver(solver)
        if not spec.private:
            raise ValueError(f"solver {solver!r} is not private: nothing to audit")

        def fit(problem, **kw):
            return dpopt.solve(problem, solver, **kw)

        return solver, fit
    if callable(solver):
        return getattr(solver, "__name__", "custom"), solver
    raise ValueError(f"solver must be a registered name or a callable, got {solver!r}")


def _check_claim(claimed, res, adjacency):
    now = (float(res.epsilon), float(res.delta), res.adjacency)
    if not math.isfinite(now[0]):
        raise ValueError("the solver reported epsilon = inf: nothing to audit")
    if res.adjacency != adjacency:
        raise ValueError(f"the solver's guarantee is under {res.adjacency} adjacency but the "
                         f"canary datasets are {adjacency} neighbours")
    if claimed is None:
        return now
    if claimed[1:] != now[1:]:
        raise ValueError(f"the solver reported different guarantees across runs: {claimed} "
                         f"and {now}")
    # epsilon may differ slightly between D0 and D1 when a solver calibrates on n, which
    # changes under add-remove (DP-SGD's sampling rate b / n): compare with the largest claim
    return (max(claimed[0], now[0]),) + now[1:]
