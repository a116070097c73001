"""Empirical audits of the default path's single releases: the held-out selection's scores, a
regressor's constant on all rows, the score gaps' histogram, the target's histogram
released again and pooled, the indicator test, DP-GD's curvature and intercept step, the
re-centring and the one-vs-rest class scores. Each runs the fit's own release on
neighbouring data that differ in one canary record (the worst case of its stated
sensitivity) at mu = gdp_mu(epsilon, delta), and reads an empirical lower bound on epsilon
from the distinguishing test of :mod:`dpopt.api.audit`
(:func:`~dpopt.api.audit.empirical_epsilon`). ``noise_scale`` < 1 is a broken variant, for
the tests: a bound above the claim catches it.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from dpopt._core.validation import check_delta, check_positive_int, check_scalar
from dpopt.api.audit import (
    DEFAULT_DELTA,
    DEFAULT_EPSILON,
    DEFAULT_RUNS,
    AuditResult,
    empirical_epsilon,
)
from dpopt.data import Problem
from dpopt.pipeline.constant import release_constant, release_in_pieces, wider_estimate
from dpopt.pipeline.curvature import noisy_gram, noisy_mean_residual, noisy_spread_mean
from dpopt.pipeline.held_out import gap_counts, noisy_gap_counts
from dpopt.pipeline.inference import RESIDUAL_BOUND, release_gram
from dpopt.pipeline.multiclass_selection import noisy_class_scores
from dpopt.pipeline.scaling import InMemoryData, recentre
from dpopt.pipeline.selection import noisy_scores
from dpopt.preprocessing._bounds import DEFAULT_GRID
from dpopt.preprocessing._cells import text_codes
from dpopt.preprocessing._indicators import other_value_counts, private_indicators
from dpopt.preprocessing._refine import pooled_counts
from dpopt.preprocessing.far_ends import noisy_beyond, target_histogram
from dpopt.preprocessing.feature_maps import Scaling, TargetScaling
from dpopt.preprocessing.tables import plan_table
from dpopt.preprocessing.target_coding import (
    beyond_noise,
    coding_sigma,
    noisy_bucket_sums,
    resolvable,
)
from dpopt.privacy import gdp_epsilon, gdp_mu
from dpopt.solvers.adassp import (
    DEFAULT_SPLIT,
    SURE_SPLIT,
    adassp_from_statistics,
    calibrate_adassp,
)
from dpopt.solvers.dp_gd import fit_multinomial_gd

__all__ = ["audit_selection", "audit_constant", "audit_gap_histogram",
           "audit_pooled_histogram", "audit_indicator_counts", "audit_curvature",
           "audit_intercept_step", "audit_residual_spread", "audit_far_end_count",
           "audit_recentre", "audit_class_scores", "audit_target_codes",
           "audit_coding_check", "audit_multinomial_step", "audit_adassp_gram",
           "audit_adassp_eigenvalue", "audit_inference_gram"]


# ---------------------------------------------------------------------------
# the default path's held-out selection (dpopt.pipeline.selection)


def _release_claim(epsilon, delta, n_runs):
    """The checked (epsilon, delta, n_runs) of a single-release audit and mu =
    gdp_mu(epsilon, delta), the Gaussian-DP parameter the release runs at."""
    epsilon = check_scalar(epsilon, "epsilon", low=0.0, low_open=True)
    delta = check_delta(delta)
    n_runs = check_positive_int(n_runs, "n_runs")
    return epsilon, delta, n_runs, gdp_mu(epsilon, delta)


def audit_selection(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                    n_validation=50, n_columns=2, random_state=0, confidence=0.95,
                    noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the selection's score release
    (:func:`dpopt.pipeline.selection.noisy_scores`), the only output of :mod:`dpopt.pipeline.selection` that
    reads the held-out records.

    Neighbouring validation sets of ``n_validation`` records: every per-record score is 0,
    except the canary's, which is 1 in every one of the ``n_columns`` columns on D1 and 0
    on D0 (the worst case: every mean moves by the full 1/m). The release runs at
    mu = gdp_mu(epsilon, delta), the claim is (epsilon, delta); the statistic is the sum of
    the noisy means (along the shift). ``noise_scale`` < 1 is a broken variant, for the
    tests only (it multiplies the noise)."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    d0 = np.zeros((n_validation, n_columns))
    d1 = d0.copy()
    d1[0] = 1.0
    scores = _projected_runs(noisy_scores, d0, d1, np.ones(n_columns), mu, n_runs,
                             noise_scale, np.random.default_rng(random_state))
    return _release_audit("selection (held-out score release)", scores, mu, delta, confidence,
                          {"n_validation": n_validation, "n_columns": n_columns,
                           "noise_scale": noise_scale})


def _projected_runs(release, d0, d1, direction, mu, n_runs, noise_scale, rng):
    """(2, n_runs) statistics of a release of per-record score means on D0 and D1: the noisy
    means (their noise times ``noise_scale``) projected on ``direction``."""
    scores = np.empty((2, n_runs))
    for b, per in enumerate((d0, d1)):
        exact = per.mean(axis=0)
        for k in range(n_runs):
            noisy = release(per, mu, rng)[0]
            scores[b, k] = float(direction @ (exact + noise_scale * (noisy - exact)))
    return scores


def _release_audit(solver, scores, mu, delta, confidence, options):
    """The :class:`AuditResult` of a mu-GDP release from its scores on D0 and D1."""
    lb, point, t, direction, fpr, fnr, fu, nu = empirical_epsilon(
        scores[0], scores[1], delta, confidence=confidence)
    return AuditResult(solver=solver, epsilon=gdp_epsilon(mu, delta), delta=delta,
                       adjacency="replace-one", epsilon_lb=lb, epsilon_point=point,
                       threshold=t, direction=direction, fpr=fpr, fnr=fnr, fpr_upper=fu,
                       fnr_upper=nu, n_runs=scores.shape[1], confidence=confidence,
                       options=options)


def audit_constant(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                   n=50, random_state=0, confidence=0.95, noise_scale=1.0,
                   pieces=False) -> AuditResult:
    """Empirical lower bound on the epsilon of a regressor's constant on all rows
    (:func:`dpopt.pipeline.constant.release_constant`: the mean of n targets scaled into
    [-1, 1], N(0, (2 / mu)^2) on their sum). Neighbouring target sets of ``n`` records, all
    0 except the canary, at -1 on D0 and +1 on D1 (the worst case: the sum moves by 2). The
    release runs at mu = gdp_mu(epsilon, delta) through the fit's code, with the identity
    as the target scale; the statistic is the noisy mean. ``pieces``: the same mean released
    in pieces (:func:`~dpopt.pipeline.constant.release_in_pieces`, the model's range [-0.5,
    0.5] inside [-1, 1]: the canary moves all three), the statistic their sum.
    ``noise_scale`` < 1 is a broken variant, for the tests only (it multiplies the noise)."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    identity = SimpleNamespace(transform=lambda v: v)
    inner, wide = (TargetScaling.from_bounds(v, -v, shift=True) for v in (-0.5, -1.0))
    rng = np.random.default_rng(random_state)
    scores = np.empty((2, n_runs))
    for b, canary in enumerate((-1.0, 1.0)):
        y = np.zeros(n)
        y[0] = canary
        for k in range(n_runs):
            data = InMemoryData(np.empty((n, 0)), y)
            rows = release_in_pieces(inner, wide, data, mu, rng)[0] if pieces else None
            noisy = (wider_estimate(rows, inner, rows[:2])[0] if pieces
                     else release_constant(identity, data, mu, rng)[0])
            scores[b, k] = y.mean() + noise_scale * (noisy - y.mean())
    return _release_audit("constant on all rows (held-out choice, regression)", scores, mu, delta,
                          confidence, {"n": n, "noise_scale": noise_scale, "pieces": pieces})


def audit_gap_histogram(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                        n_validation=50, random_state=0, confidence=0.95,
                        noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of a regressor's held-out histogram of score
    gaps (:func:`dpopt.pipeline.held_out.noisy_gap_counts`, which gives the paired
    difference's clip). Neighbouring held-out sets of ``n_validation`` records of one
    feature and y = 1, a model f(x) = 1 - 2x against the constant 1: every record at x = 0
    (gap 0) except the canary, at 0 on D0 and 1 on D1 (f = -1: squared error 4 against 0,
    gap 1; one unit leaves the [0, 1e-3] bin and enters the top one). The release runs at
    mu = gdp_mu(epsilon, delta) through the fit's code; the statistic is the top bin's noisy
    count less the first's. ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    identity = SimpleNamespace(transform=lambda v: v)
    cands = [("model", -2.0 * np.ones(1), 1.0), ("constant", np.zeros(1), 1.0)]
    rng = np.random.default_rng(random_state)
    scores = np.empty((2, n_runs))
    for b, canary in enumerate((0.0, 1.0)):
        x = np.zeros((n_validation, 1))
        x[0] = canary
        data = InMemoryData(x, np.ones(n_validation))
        exact = gap_counts(x, np.ones(n_validation), scaling=identity, target=identity,
                           cands=cands)[:-1]
        for k in range(n_runs):
            noisy = noisy_gap_counts(data, scaling=identity, target=identity, cands=cands,
                                     mu=mu, rng=rng)[0]
            noisy = exact + noise_scale * (noisy - exact)
            scores[b, k] = noisy[-1] - noisy[0]
    return _release_audit("score gaps' histogram (held-out choice, regression)", scores,
                          mu, delta, confidence, {"n_validation": n_validation,
                                                  "noise_scale": noise_scale})


def audit_pooled_histogram(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA,
                           n_runs=DEFAULT_RUNS, n=50, share=0.75, random_state=0,
                           confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the target's histogram released twice and
    pooled (:func:`dpopt.pipeline.mean_of_y.private_mean_of_y` when its first histogram does
    not resolve: ``share`` of mu^2, then the rest, pooled by
    :func:`~dpopt.preprocessing._refine.pooled_counts`). Neighbouring targets of ``n``
    records, all 0 except the canary, at 0 on D0 and 1 on D1 (the worst case: one unit
    leaves the zero bin and enters another). Both releases run through the fit's adapter
    at mu = gdp_mu(epsilon, delta) in all; the statistic is the pooled count of the
    canary's bin less that of the zero bin. ``noise_scale`` < 1 is a broken variant, for
    the tests only (it multiplies the pooled noise)."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    share = check_scalar(share, "share", low=0.0, high=1.0, low_open=True, high_open=True)
    rng = np.random.default_rng(random_state)
    scores = np.empty((2, n_runs))
    for b, canary in enumerate((0.0, 1.0)):
        y = np.zeros(n)
        y[0] = canary
        data = InMemoryData(np.empty((n, 0)), y)
        counts = target_histogram(y)
        zero, one = DEFAULT_GRID.bin_index(np.array([0.0, 1.0]))
        for k in range(n_runs):
            first = data.target_bounds(mu * np.sqrt(share), rng)
            second = data.target_bounds(mu * np.sqrt(1.0 - share), rng)
            noisy = counts + noise_scale * (pooled_counts(first, second)[0][0] - counts)
            scores[b, k] = noisy[one] - noisy[zero]
    return _release_audit("target histogram released again and pooled (mean of y)", scores,
                          mu, delta, confidence, {"n": n, "share": share,
                                                  "noise_scale": noise_scale})


def audit_indicator_counts(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                           n=50, p=4, random_state=0, confidence=0.95,
                           noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the default path's indicator test
    (:func:`dpopt.preprocessing._indicators.private_indicators`: per column the count of
    values outside {0, 1}, N(0, p / mu^2) noise). Neighbouring data of ``n`` records and ``p``
    columns, all 0 except the canary row, 0 on D0 and 2 in every column on D1 (the worst
    case: every count moves by 1). The release runs at mu = gdp_mu(epsilon, delta) through
    the fit's code; the statistic is the sum of the noisy counts (the projection on the
    shift). ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)
    scores = np.empty((2, n_runs))
    columns = np.arange(p)
    for b, canary in enumerate((0.0, 2.0)):
        X = np.zeros((n, p))
        X[0] = canary
        counts = other_value_counts(X, columns)
        for k in range(n_runs):
            noisy = private_indicators(counts, n, mu, rng, columns).noisy
            scores[b, k] = float(np.sum(counts + noise_scale * (noisy - counts)))
    return _release_audit("indicator test (default path)", scores, mu, delta, confidence,
                          {"n": n, "p": p, "noise_scale": noise_scale})


def _diagonal_shift_scores(canary, n_runs, noise_scale):
    """Scores of a released symmetric matrix on neighbours whose canary row is B e_1 (D0) or
    B e_2 (D1): two diagonal entries move, the worst case of a Gram release's sensitivity.
    ``canary(b)`` gives D_b's exact matrix and a function drawing its release; the score is
    the noisy entry (1, 1) minus (0, 0), the noise multiplied by ``noise_scale`` (< 1: a
    broken variant, for the tests only)."""
    scores = np.empty((2, n_runs))
    for b in range(2):
        exact, release = canary(b)
        for k in range(n_runs):
            noisy = exact + noise_scale * (release() - exact)
            scores[b, k] = noisy[1, 1] - noisy[0, 0]
    return scores


def audit_curvature(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS, n=20,
                    p=3, random_state=0, confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of DP-GD's curvature release on the default path
    (:func:`dpopt.pipeline.curvature.noisy_gram`, sensitivity sqrt(2) B^2 without an
    intercept). Neighbouring data of ``n`` rows of ``p`` features, all 0 except the canary
    row, B e_1 on D0 and B e_2 on D1 (B = 1; the worst case: two diagonal entries move by
    B^2). The statistic is the projection of the noisy Gram on that shift (entry (1, 1)
    minus entry (0, 0)). ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)

    def canary(b):
        X = np.zeros((n, p))
        X[0, b] = 1.0
        problem = Problem(X, np.zeros(n), loss="squared", fit_intercept=False)
        return X.T @ X, lambda: noisy_gram(problem, 1.0, mu, rng)[0]

    scores = _diagonal_shift_scores(canary, n_runs, noise_scale)
    return _release_audit("curvature release (default path, DP-GD)", scores, mu, delta,
                          confidence, {"n": n, "p": p, "noise_scale": noise_scale})


def audit_intercept_step(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                         n=50, random_state=0, confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the intercept step after DP-GD on the default
    path (:func:`dpopt.pipeline.curvature.noisy_mean_residual`: the mean of the residuals
    clipped at c = 1, N(0, (2 c / (n mu))^2) noise). Neighbouring data of ``n`` rows, a model
    w = 0 and targets 0 except the canary's, -50 on D0 and +50 on D1, beyond the clip (the
    worst case: one clipped residual moves by 2 c; a release without the clip would move by
    100 and be caught). The statistic is the noisy mean. ``noise_scale`` < 1 is a broken
    variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    # the canary's residual clipped at 1
    scores = _residual_canary_scores(noisy_mean_residual, {-50.0: -1.0 / n, 50.0: 1.0 / n}, n,
                                     n_runs, mu, np.random.default_rng(random_state),
                                     noise_scale)
    return _release_audit("intercept step (default path, after DP-GD)", scores, mu, delta,
                          confidence, {"n": n, "noise_scale": noise_scale})


def _residual_canary_scores(release, exact, n, n_runs, mu, rng, noise_scale):
    """(2, n_runs) draws of ``release(problem, w, mu, rng)[0]`` on n rows with w = 0 and all
    targets 0 but the canary's, for the two canaries of ``exact`` ({canary: the release's
    exact value}), their noise scaled by ``noise_scale``."""
    scores = np.empty((2, n_runs))
    for b, (canary, value) in enumerate(exact.items()):
        y = np.zeros(n)
        y[0] = canary
        problem = Problem(np.zeros((n, 1)), y, loss="squared", fit_intercept=True)
        for k in range(n_runs):
            scores[b, k] = value + noise_scale * (release(problem, np.zeros(2), mu, rng)[0]
                                                  - value)
    return scores


def audit_residual_spread(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                          n=50, random_state=0, confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the residuals' spread read half-way through
    DP-GD on the default path (:func:`dpopt.pipeline.curvature.noisy_spread_mean`: the mean
    of q(r_i) in [0, 1/2], N(0, (1 / (2 n mu))^2) noise). Neighbouring data of ``n`` rows, a
    model w = 0 and targets 0 except the canary's, 0 on D0 (q = 0) and 50 on D1, beyond the
    statistic's threshold 2 (q = 1/2: the worst case; a second moment without the cap would
    move by 625 and be caught). The statistic is the noisy mean. ``noise_scale`` < 1 is a
    broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    scores = _residual_canary_scores(noisy_spread_mean, {0.0: 0.0, 50.0: 0.5 / n}, n, n_runs,
                                     mu, np.random.default_rng(random_state), noise_scale)
    return _release_audit("residual spread (default path, half-way through DP-GD)", scores, mu,
                          delta, confidence, {"n": n, "noise_scale": noise_scale})


def audit_far_end_count(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                        n=50, random_state=0, confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the count that confirms a far end of the
    target's range (:func:`dpopt.preprocessing.far_ends.noisy_beyond`, both ends: two
    counts, N(0, 2 / mu^2) noise each). Neighbouring targets of ``n`` records, all 0 except
    the canary, at the grid's lowest bin on D0 and its highest on D1 (the worst case: a
    record leaves one far region and enters the other, each count moves by 1), the counts'
    data read by the fit's adapter (:meth:`InMemoryData.confirmed_target_range`'s exact
    histogram). The statistic is the upper count less the lower. ``noise_scale`` < 1 is a
    broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)
    scores = np.empty((2, n_runs))
    stops = {"lower": 0, "upper": DEFAULT_GRID.n_bins - 1}
    for b, canary in enumerate((-1e12, 1e12)):
        y = np.zeros(n)
        y[0] = canary
        counts = target_histogram(y)  # as the fit's adapter reads it
        exact = noisy_beyond(counts, stops, np.inf, rng)[0]
        for k in range(n_runs):
            noisy = noisy_beyond(counts, stops, mu, rng)[0]
            noisy = exact + noise_scale * (noisy - exact)
            scores[b, k] = noisy[1] - noisy[0]
    return _release_audit("far end's count (default path, target range)", scores, mu, delta,
                          confidence, {"n": n, "noise_scale": noise_scale})


def audit_recentre(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS, n=50,
                   k=3, random_state=0, confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the re-centring release on the default path
    (:func:`dpopt.pipeline.scaling.recentre`: the means of k narrowed features in [-1, 1],
    sensitivity sqrt(k) on their sums mapped to [0, 1]). Neighbouring data of ``n`` rows,
    all 0 except the canary row, -1 in every feature on D0 and +1 on D1 (the worst case);
    the map is the identity on [-1, 1]. The statistic is the sum of the noisy means (the
    projection on the shift). ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    rng, columns = np.random.default_rng(random_state), np.arange(k)
    identity = Scaling(-np.ones(k), np.ones(k), np.zeros(k), np.ones(k))
    scores = np.empty((2, n_runs))
    for b, canary in enumerate((-1.0, 1.0)):
        X = np.zeros((n, k))
        X[0] = canary
        for r in range(n_runs):
            means = recentre(InMemoryData(X, None), identity, columns, mu, rng)[0].offset
            scores[b, r] = float(np.sum(X.mean(0) + noise_scale * (means - X.mean(0))))
    return _release_audit("re-centring release (default path)", scores, mu, delta, confidence,
                          {"n": n, "k": k, "noise_scale": noise_scale})


def audit_class_scores(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                       n_validation=50, n_classes=3, random_state=0, confidence=0.95,
                       noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the one-vs-rest held-out release
    (:func:`dpopt.pipeline.multiclass_selection.noisy_class_scores`, sensitivity sqrt(3)/m).
    Neighbouring held-out sets of ``n_validation`` records labelled 0 and scored wrong,
    except the canary: wrong and labelled 0 on D0, right and labelled 1 on D1 (the worst
    case: three means move by 1/m). The statistic is the projection of the noisy means on
    that shift (model + class 1 - class 0). ``noise_scale`` < 1 is a broken variant, for
    the tests only (it multiplies the noise)."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    d0 = np.zeros((n_validation, n_classes + 1))
    d0[:, 1] = 1.0
    d1 = d0.copy()
    d1[0] = 0.0
    d1[0, [0, 2]] = 1.0
    direction = np.zeros(n_classes + 1)
    direction[[0, 2]], direction[1] = 1.0, -1.0
    scores = _projected_runs(noisy_class_scores, d0, d1, direction, mu, n_runs, noise_scale,
                             np.random.default_rng(random_state))
    return _release_audit("one-vs-rest held-out selection (class scores)", scores, mu, delta,
                          confidence, {"n_validation": n_validation, "n_classes": n_classes,
                                       "noise_scale": noise_scale})


def audit_multinomial_step(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA,
                           n_runs=DEFAULT_RUNS, n=20, n_classes=3, random_state=0,
                           confidence=0.95, noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the multinomial model's DP-GD
    (:func:`dpopt.solvers.dp_gd.fit_multinomial_gd`, one step from W = 0, sensitivity
    2 C / n of the mean gradient, C = sqrt(2) r). Neighbouring data of ``n`` rows (one
    feature and the intercept's column, r = sqrt(2)), all 0 in the feature and of class 0,
    except the canary row, of class 0, (1000, 1) on D0 and (-1000, 1) on D1: its gradient is
    clipped to norm C on both and turns round, so the mean gradient moves by 2 C / n to
    within a part in 10^6 (the worst case). The statistic is the step's output projected on
    that move. ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)
    labels = np.zeros(n, dtype=np.int64)

    def step(canary, generator):
        X = np.column_stack([np.zeros(n), np.ones(n)])
        X[0, 0] = canary
        return fit_multinomial_gd(X, labels, n_classes, mu=mu, passes=1, step=1.0,
                                  row_bound=np.sqrt(2.0), rng=generator)[0]

    exact = [step(c, _Zero()) for c in (1000.0, -1000.0)]
    direction = exact[1] - exact[0]
    scores = np.empty((2, n_runs))
    for b, canary in enumerate((1000.0, -1000.0)):
        for k in range(n_runs):
            W = exact[b] + noise_scale * (step(canary, rng) - exact[b])
            scores[b, k] = float(np.sum(direction * W))
    return _release_audit("multinomial DP-GD step (default path, k >= 3 classes)", scores, mu,
                          delta, confidence, {"n": n, "n_classes": n_classes,
                                              "noise_scale": noise_scale})


class _Zero:
    """A generator of zeros: the step's exact (noise-free) output, for the audit's shift."""

    @staticmethod
    def standard_normal(shape):
        return np.zeros(shape)


# ---------------------------------------------------------------------------
# the table layer's target coding (dpopt.preprocessing.target_coding)


def audit_target_codes(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                       n=50, buckets=16, moved=False, random_state=0, confidence=0.95,
                       noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of one column's target coding release (the
    buckets' noisy counts and sums of the mapped target,
    :func:`dpopt.preprocessing.target_coding.noisy_bucket_sums`, at the sigma of one column,
    :func:`~dpopt.preprocessing.target_coding.coding_sigma`). Neighbouring tables of ``n``
    records in bucket 0 with mapped target 0, except the canary: in bucket 1 with value -1 on
    D0 and +1 on D1 (one sum moves by 2), or with ``moved`` in bucket 1 with -1 on D0 and in
    bucket 2 with +1 on D1 (two counts and two sums move by 1): both cases of the stated
    squared sensitivity 4. The release runs at mu = gdp_mu(epsilon, delta) through the fit's
    code; the statistic is the noisy release projected on the shift. ``noise_scale`` < 1 is a
    broken variant, for the tests only (it multiplies the noise)."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    sigma = coding_sigma(1, mu)
    rng = np.random.default_rng(random_state)
    sides = []
    for canary_bucket, value in ((1, -1.0), (2 if moved else 1, 1.0)):
        rows = np.zeros(n, dtype=np.int64)
        rows[0] = canary_bucket
        scaled = np.zeros(n)
        scaled[0] = value
        sides.append((rows, scaled))
    exact = [np.concatenate(noisy_bucket_sums(r, v, buckets, 0.0, rng)) for r, v in sides]
    direction = exact[1] - exact[0]
    scores = np.empty((2, n_runs))
    for b, (rows, scaled) in enumerate(sides):
        for k in range(n_runs):
            noisy = np.concatenate(noisy_bucket_sums(rows, scaled, buckets, sigma, rng))
            scores[b, k] = float(direction @ (exact[b] + noise_scale * (noisy - exact[b])))
    return _release_audit("target coding (buckets' counts and sums)", scores, mu, delta,
                          confidence, {"n": n, "buckets": buckets, "moved": moved,
                                       "noise_scale": noise_scale})


def audit_coding_check(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                       n=50, level=10.0, random_state=0, confidence=0.95,
                       noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the check that decides the target coding
    (:func:`dpopt.preprocessing.target_coding.resolvable`: a column's records beyond
    L = ``level`` in its values, plus N(0, 1 / mu^2) for one column, sensitivity 1).
    Neighbouring columns of ``n`` cells: value "a" in all but the canary, which is "b" on D0
    and "a" on D1 (the sum moves by 1). The release runs through the fit's code at
    mu = gdp_mu(epsilon, delta) (its buckets' mu set so that L = ``level``); the statistic is
    the noisy sum. ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)
    mu_codes = 2.0 * coding_sigma(1, 1.0) / level  # COUNT_MARGIN sigma = level
    scores = np.empty((2, n_runs))
    for b, canary in enumerate(("b", "a")):
        df = pd.DataFrame({"c": ["a"] * (n - 1) + [canary]})
        cells = [text_codes(df["c"])]
        other = [np.ones(len(cells[0][1]), dtype=bool)]  # every value outside kept levels
        exact = beyond_noise(cells, other, level)[0]
        for k in range(n_runs):
            noisy = resolvable(plan_table(df), cells, other, mu, mu_codes, rng)[1][0]
            scores[b, k] = exact + noise_scale * (noisy - exact)
    return _release_audit("target coding's check (records beyond the buckets' noise)", scores,
                          mu, delta, confidence, {"n": n, "level": level,
                                                  "noise_scale": noise_scale})


# ---------------------------------------------------------------------------
# AdaSSP's X^T X and eigenvalue releases (the solver's audit canary moves X^T y only)


def _adassp_release(xtx, n, epsilon, delta, split, rng):
    """AdaSSP's release (:func:`dpopt.solvers.adassp.adassp_from_statistics`: its own
    calibration and noise scales) of the statistics ``xtx`` and X^T y = 0, rows and targets
    bounded by 1, no intercept."""
    p = xtx.shape[0]
    _, _, _, params = adassp_from_statistics(
        xtx, np.zeros(p), n, epsilon=epsilon, delta=delta, rng=rng, row_bound=1.0,
        target_bound=1.0, fit_intercept=False, l2=np.zeros(p), budget_split=split)
    return params["release"]


def audit_adassp_gram(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                      n=20, p=3, random_state=0, confidence=0.95,
                      noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of AdaSSP's X^T X release alone, as a fit at
    (``epsilon``, ``delta``) makes it with the default path's split (:data:`SURE_SPLIT`):
    the claim is that release's own mu_2 = 1 / z_2 (sensitivity sqrt(2) B^2). The
    solver's audit moves X^T y only (its canary +-B e_1 leaves x x^T unchanged), and
    the intervals of ``inference=True`` reuse this release. Neighbouring data of ``n`` rows,
    all 0 except the canary, B e_1 on D0 and B e_2 on D1 (B = 1: two diagonal entries move
    by B^2, the worst case); statistic: the noisy entry (1, 1) minus (0, 0).
    ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, _ = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)

    def canary(b):
        exact = np.zeros((p, p))
        exact[b, b] = 1.0
        return exact, lambda: _adassp_release(exact, n, epsilon, delta, SURE_SPLIT, rng).xtx

    scores = _diagonal_shift_scores(canary, n_runs, noise_scale)
    z = calibrate_adassp(epsilon, delta, SURE_SPLIT)[1]
    return _release_audit("AdaSSP's X^T X release", scores, 1.0 / z[1], delta, confidence,
                          {"n": n, "p": p, "budget_split": SURE_SPLIT,
                           "noise_scale": noise_scale})


def audit_adassp_eigenvalue(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA,
                            n_runs=DEFAULT_RUNS, n=20, random_state=0, confidence=0.95,
                            noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of AdaSSP's release of lambda_min(X^T X) alone
    (its first step, in :data:`DEFAULT_SPLIT`, the split of ``inference=True``): the claim is
    that release's mu_1 = 1 / z_1 (sensitivity B^2). One feature, ``n`` - 1 rows at 1 (so
    that the released value stays above the clamp at 0) and the canary at 0 on D0 and
    B = 1 on D1: lambda_min moves by B^2; statistic: the released lower estimate.
    ``noise_scale`` < 1 is a broken variant, for the tests only."""
    epsilon, delta, n_runs, _ = _release_claim(epsilon, delta, n_runs)
    rng = np.random.default_rng(random_state)
    scores = np.empty((2, n_runs))
    for b in range(2):
        exact = np.array([[n - 1.0 + b]])
        for k in range(n_runs):
            released = _adassp_release(exact, n, epsilon, delta, DEFAULT_SPLIT, rng).lambda_min
            scores[b, k] = noise_scale * released + (1 - noise_scale) * exact[0, 0]
    z = calibrate_adassp(epsilon, delta, DEFAULT_SPLIT)[1]
    return _release_audit("AdaSSP's lambda_min release", scores, 1.0 / z[0], delta,
                          confidence, {"n": n, "budget_split": DEFAULT_SPLIT,
                                       "noise_scale": noise_scale})


def audit_inference_gram(*, epsilon=DEFAULT_EPSILON, delta=DEFAULT_DELTA, n_runs=DEFAULT_RUNS,
                         n=20, p=3, random_state=0, confidence=0.95,
                         noise_scale=1.0) -> AuditResult:
    """Empirical lower bound on the epsilon of the weighted Gram release of
    ``inference=True`` (:func:`dpopt.pipeline.inference.release_gram`: sum_i w_i u_i u_i^T
    plus symmetric Gaussian noise, sensitivity sqrt(2) c, c = the weight's bound times the
    rows' squared bound; least squares' meat, whose weights are squared residuals clipped
    at 2, so c = 4 B^2). Neighbouring data of ``n`` rows, all 0 except the canary, B e_1
    on D0 and B e_2 on D1 with its weight at the bound (B = 1: two diagonal entries move by
    c, the worst case); statistic: the noisy entry (1, 1) minus (0, 0). ``noise_scale`` < 1
    is a broken variant, for the tests only."""
    epsilon, delta, n_runs, mu = _release_claim(epsilon, delta, n_runs)
    bound = RESIDUAL_BOUND ** 2
    rng = np.random.default_rng(random_state)

    def canary(b):
        U = np.zeros((n, p))
        U[0, b] = 1.0
        weights = np.full(n, bound)
        return U.T @ (weights[:, None] * U), lambda: release_gram(U, weights, bound, 1.0, mu,
                                                                   rng)[0]

    scores = _diagonal_shift_scores(canary, n_runs, noise_scale)
    return _release_audit("inference's weighted Gram release", scores, mu, delta, confidence,
                          {"n": n, "p": p, "noise_scale": noise_scale})
