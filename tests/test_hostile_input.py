"""Hostile and faulty input: a result or a clear ValueError, never a crash inside compiled
code, a hang, or a silent wrong answer. Parametrised over the solver registry, so solvers
merged later are covered without edits.

* ``dpopt.Problem``: hypothesis draws shapes (including empty), dtypes (float32/64,
  ints, bool, object, complex), dense or any scipy sparse format, NaN/inf, huge or
  tiny magnitudes, constant and empty columns, invalid labels. An independent oracle
  decides whether the input is valid: invalid input must raise ValueError, valid
  input must be stored exactly (no silent coercion).
* ``dpopt.solve``: every registered solver on hostile-but-valid problems and extreme
  epsilon / delta / clip / step: a finite model that respects the budget, or ValueError;
  each call runs under a time limit (a hang fails the test).
* Reproducibility: same random_state, bit-identical output; None, fresh entropy.
* Numerical safety: extreme margins in the losses, zero columns and rows, with
  overflow / division / invalid operations turned into errors.
"""

import math
import warnings
from contextlib import contextmanager

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import _declarations as D
import dpopt
from _timeouts import time_limit
from dpopt.privacy import epsilon_of

SOLVERS = dpopt.available_solvers()
PRIVATE = dpopt.available_solvers(private_only=True)
D.load()  # the options some solvers cannot run without (_declarations.required_options)


def fast_options(name, **extra):
    """Options that keep any solver quick, restricted to those it accepts."""
    accepted = dpopt.get_solver(name).options()
    opts = {"passes": 1, **D.REQUIRED_OPTIONS.get(name, {}), **extra}
    return {k: v for k, v in opts.items() if k in accepted}


def solve_or_value_error(problem, name, **kwargs):
    """Run a solver; return the FitResult or None if it raised ValueError. Anything else
    (a crash in compiled code, TypeError, ZeroDivisionError, a hang) fails the test."""
    with time_limit(60), warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        try:
            return dpopt.solve(problem, name, **kwargs)
        except ValueError as exc:
            assert str(exc), "ValueError without a message"
            return None


def check_result(res, problem, name, epsilon, delta):
    assert res.w.shape == (problem.dim,) and np.all(np.isfinite(res.w)), "non-finite model"
    coef, intercept = problem.unpack(res.w)
    np.testing.assert_array_equal(res.coef, coef)
    assert res.intercept == intercept
    if dpopt.get_solver(name).private:
        assert res.epsilon <= epsilon * (1 + 1e-12), "spent more than the budget"
        assert res.delta == delta
        # (for delta near 1 dp-accounting's RDP conversion jumps between its KL shortcut,
        # epsilon = 0, and the general bound when the same rho is grouped differently)
        if math.isfinite(res.epsilon) and delta < 0.5:
            # re-accounting on the default PLD grid (1e-4) may be coarser than the
            # solver's final grid (epsilon / 2000): both are upper bounds
            assert epsilon_of(res.mechanisms, delta, adjacency=res.adjacency) \
                <= res.epsilon * (1 + 1e-9) + 2e-3


# ---------------------------------------------------------------------------
# Problem construction

NUMERIC = [np.float64, np.float32, np.int64, np.int8, np.uint8, np.bool_]
NON_NUMERIC = [object, np.complex128]
SPARSE = [None, "csr", "csc", "coo", "lil", "dok", "bsr", "csr_array", "coo_array"]
SPECIALS = [None, None, "nan", "inf", "huge", "tiny", "constant_col", "zero_col", "zero_row"]


def to_container(A, fmt):
    if fmt is None:
        return A
    if fmt.endswith("_array"):
        return getattr(sp, fmt)(A)
    return sp.csr_matrix(A).asformat(fmt)


@st.composite
def raw_problems(draw):
    n, p = draw(st.integers(0, 6)), draw(st.integers(0, 4))
    X = draw(hnp.arrays(np.float64, (n, p),
                        elements=st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 1))))
    special = draw(st.sampled_from(SPECIALS)) if n and p else None
    if special == "nan":
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = np.nan
    elif special == "inf":
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = -np.inf
    elif special == "huge":
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = 1e200
    elif special == "tiny":
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = 1e-200
    elif special == "constant_col":
        X[:, draw(st.integers(0, p - 1))] = 3.0
    elif special == "zero_col":
        X[:, draw(st.integers(0, p - 1))] = 0.0
    elif special == "zero_row":
        X[draw(st.integers(0, n - 1))] = 0.0
    float_only = special in ("nan", "inf", "huge", "tiny")
    dtype = np.float64 if float_only else draw(st.sampled_from(NUMERIC + NON_NUMERIC))
    fmt = draw(st.sampled_from(SPARSE)) if dtype not in NON_NUMERIC else None
    loss = draw(st.sampled_from(["squared", "logistic", "huber", "absolute"]))
    labels = draw(st.sampled_from(["pm1", "single_class", "real", "zero_one", "nan"]))
    y = {"pm1": np.where(np.arange(n) % 2 == 0, 1.0, -1.0), "single_class": np.ones(n),
         "real": np.linspace(-3, 5, n), "zero_one": np.arange(n) % 2 * 1.0,
         "nan": np.full(n, np.nan)}[labels]
    return X, dtype, fmt, loss, y, special, labels


def expected_valid(X, dtype, loss, y, special, labels):
    """The oracle: is this input valid under the documented rules?"""
    n, p = X.shape
    if n == 0 or p == 0 or dtype in NON_NUMERIC:
        return False
    if special in ("nan", "inf", "huge", "tiny") or labels == "nan":
        return False
    if loss == "logistic" and labels not in ("pm1", "single_class"):
        return False
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_problems(), st.booleans())
def test_problem_rejects_invalid_and_stores_valid_input_exactly(raw, fit_intercept):
    X, dtype, fmt, loss, y, special, labels = raw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # casting NaN/inf to int, on purpose
        Xd = X.astype(dtype)
    container = to_container(Xd, fmt)
    valid = expected_valid(X, dtype, loss, y, special, labels)
    if not valid:
        with pytest.raises(ValueError):
            dpopt.Problem(container, y, loss, fit_intercept=fit_intercept)
        return
    pb = dpopt.Problem(container, y, loss, fit_intercept=fit_intercept)
    stored = pb.X.toarray() if pb.is_sparse else pb.X
    n, p = X.shape
    assert stored.dtype == np.float64 and stored.shape == (n, p + fit_intercept)
    np.testing.assert_array_equal(stored[:, :p], Xd.astype(np.float64))  # no silent coercion
    if fit_intercept:
        assert np.all(stored[:, p] == 1.0)
    np.testing.assert_array_equal(pb.y, y)
    assert pb.is_sparse == (fmt is not None)


def test_problem_specific_rejections():
    X, y = np.ones((3, 2)), np.ones(3)
    bad = [
        (np.ma.masked_array(X, mask=X > 0), y, "masked"),
        (X, np.ma.masked_array(y, mask=y > 0), "masked"),
        (X, y * 1e200, "magnitude"),
        (X.astype(str), y, "numeric dtype"),
        ([[1.0, 2.0], [3.0]], [1.0, 2.0], "could not be read"),
        (X, y[:2], "inconsistent"),
        (X, sp.csr_matrix(y), "sparse"),
        (X[None], y, "2-dimensional"),
    ]
    for Xb, yb, match in bad:
        with pytest.raises(ValueError, match=match):
            dpopt.Problem(Xb, yb)


def test_sparse_duplicates_are_summed_in_float64():
    # two int8 entries 100 at the same position: 200, not a wrapped -56
    A = sp.coo_matrix((np.array([100, 100], dtype=np.int8), ([0, 0], [0, 0])), shape=(2, 2))
    pb = dpopt.Problem(A, np.zeros(2))
    assert pb.X.toarray()[0, 0] == 200.0


# ---------------------------------------------------------------------------
# solve() on hostile-but-valid problems


@st.composite
def valid_problems(draw):
    n = draw(st.sampled_from([1, 9]))
    p = draw(st.integers(1, 4))
    X = draw(hnp.arrays(np.float64, (n, p), elements=st.sampled_from(
        [0.0, 1.0, -1.0, 0.5, 3.0, -7.0, 1e-100, 1e100, 123.456])))
    kind = draw(st.sampled_from(["as_is", "constant_col", "zero_col", "duplicate_rows", "zeros"]))
    if kind == "constant_col":
        X[:, 0] = 2.0
    elif kind == "zero_col":
        X[:, -1] = 0.0
    elif kind == "duplicate_rows":
        X[:] = X[0]
    elif kind == "zeros":
        X[:] = 0.0
    loss = draw(st.sampled_from(["squared", "logistic", "huber", "absolute"]))
    if loss == "logistic":
        y = draw(st.sampled_from([np.ones(n), -np.ones(n), np.where(np.arange(n) % 2, 1.0, -1.0)]))
    else:
        y = draw(hnp.arrays(np.float64, (n,), elements=st.sampled_from([0.0, 1.0, -2.5, 1e100])))
    fmt = draw(st.sampled_from([None, "csr", "csc"]))
    penalty = draw(st.sampled_from([{}, {"penalty": "l1", "alpha": 0.1},
                                    {"penalty": "l2", "alpha": 1e-3},
                                    {"penalty": "elastic_net", "alpha": 0.5},
                                    {"penalty": "box", "lower": -1.0, "upper": 1.0}]))
    return dpopt.Problem(to_container(X, fmt), y, loss, fit_intercept=draw(st.booleans()),
                         **penalty)


@pytest.mark.parametrize("name", SOLVERS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=valid_problems(), seed=st.integers(0, 2 ** 32 - 1))
def test_solve_gives_a_valid_result_or_value_error(name, problem, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow warnings are allowed here
        res = solve_or_value_error(problem, name, epsilon=1.0, delta=1e-5, random_state=seed,
                                   **fast_options(name))
    if res is not None:
        check_result(res, problem, name, 1.0, 1e-5)


# epsilon = 1e-6, 1e6 and delta ~ 1 make the numerical calibrations (PLD: DP-SGD, DP-SVRG) take
# seconds to ~20 s: they run with -m slow.
_SLOW_BUDGETS = [{"epsilon": 1e-6}, {"delta": 1 - 1e-12}, {"epsilon": 1e6}]
EXTREMES = [
    {"epsilon": 1e300}, {"delta": 1e-300}, {"clip": 1e-300}, {"clip": 1e300},
    {"step": 1e-300}, {"step": 1e300}, {"clip": 1e200, "step": 1e150, "passes": 3},
] + [pytest.param(e, marks=pytest.mark.slow) for e in _SLOW_BUDGETS]


def _extreme_id(e):
    return ",".join(f"{k}={v:g}" for k, v in e.items())


@pytest.mark.parametrize("extreme", EXTREMES, ids=lambda e: _extreme_id(e)
                         if isinstance(e, dict) else None)
@pytest.mark.parametrize("name", SOLVERS)
def test_extreme_privacy_and_step_parameters(name, extreme):
    rng = np.random.default_rng(0)
    problem = dpopt.Problem(rng.standard_normal((9, 3)), rng.standard_normal(9), "squared", "l1",
                            alpha=0.1)
    kwargs = {"epsilon": 1.0, "delta": 1e-5, **fast_options(name, **extreme)}
    kwargs.update({k: v for k, v in extreme.items() if k in ("epsilon", "delta")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = solve_or_value_error(problem, name, random_state=1, **kwargs)
    if res is not None:
        check_result(res, problem, name, kwargs["epsilon"], kwargs["delta"])


@pytest.mark.parametrize("name", SOLVERS)
def test_bad_options_raise_value_error(name):
    problem = dpopt.Problem(np.eye(4), np.ones(4))
    accepted = dpopt.get_solver(name).options()
    bad = [{"no_such_option": 1}]
    for opt, values in {"passes": [0, -1, 1.5, True, "2"], "step": [0.0, -1.0, np.nan, np.inf],
                        "clip": [0.0, -1.0, np.nan], "batch_size": [0, 10, 2.5],
                        "checkpoint_every": [0]}.items():
        if opt in accepted:
            bad += [{opt: v} for v in values]
    for kwargs in bad:
        with pytest.raises(ValueError), warnings.catch_warnings():
            warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
            dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=0, **kwargs)


# ---------------------------------------------------------------------------
# reproducibility


def _repro_problem(name):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((9, 4))
    spec = dpopt.get_solver(name)
    loss = "logistic" if spec.losses is None or "logistic" in spec.losses else "squared"
    if spec.penalties is not None and "l2" not in spec.penalties:  # e.g. dp-accmd
        return dpopt.Problem(X, np.sign(X[:, 0] + 0.1), loss)
    return dpopt.Problem(X, np.sign(X[:, 0] + 0.1), loss, "l2", alpha=0.01,
                         fit_intercept=True)


@pytest.mark.parametrize("name", SOLVERS)
def test_same_random_state_gives_identical_output(name):
    problem = _repro_problem(name)
    opts = fast_options(name, passes=2)
    runs = []
    for state in (123, 123, np.random.SeedSequence(9), np.random.SeedSequence(9)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
            runs.append(dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=state,
                                    **opts))
    for a, b in (runs[:2], runs[2:]):
        np.testing.assert_array_equal(a.w, b.w)
        np.testing.assert_array_equal(a.checkpoints, b.checkpoints)
        assert a.epsilon == b.epsilon and a.noise_multiplier == b.noise_multiplier


@pytest.mark.parametrize("name", PRIVATE)
def test_random_state_none_draws_fresh_entropy(name, monkeypatch):
    """random_state=None seeds each fit from fresh OS entropy and the solver draws its noise
    from that generator. Checked on the generators themselves (their seeds differ and the
    solver advances them), not on outputs, which a tiny problem can make coincide."""
    from dpopt.solvers import _base

    made, real = [], _base.check_random_state

    def spy(random_state):
        gen = real(random_state)
        made.append((gen, gen.bit_generator.state))  # the state before the solver runs
        return gen

    monkeypatch.setattr(_base, "check_random_state", spy)
    problem = _repro_problem(name)
    opts = fast_options(name, passes=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        for state in (None, None, 123):
            dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=state, **opts)
    (a, a0), (b, b0), (c, c0) = made
    assert a0 != b0 and a0 != c0 and b0 != c0  # fresh seeds (equal: probability 2^-128)
    for gen, before in made:
        assert gen.bit_generator.state != before  # the noise was drawn from it


@pytest.mark.parametrize("name", PRIVATE)
def test_a_generator_is_used_and_advanced(name):
    problem = _repro_problem(name)
    opts = fast_options(name, passes=2)
    gen = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        a = dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=gen, **opts)
        b = dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=gen, **opts)
        c = dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=5, **opts)
    assert not np.array_equal(a.w, b.w)
    np.testing.assert_array_equal(a.w, c.w)


# ---------------------------------------------------------------------------
# numerical safety

STRICT = {"over": "raise", "divide": "raise", "invalid": "raise"}


@contextmanager
def strict_floats():
    """Overflow, division by zero and invalid operations raise (underflow is harmless)."""
    with np.errstate(**STRICT), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        yield


@pytest.mark.parametrize("loss", ["squared", "logistic", "huber", "absolute"])
def test_losses_at_extreme_margins(loss):
    # (z - y)^2 / 2 cannot be represented beyond |z| ~ 1e154: the squared loss stops at 1e150
    big = 1e150 if loss == "squared" else 1e300
    z = np.array([-big, -1e15, -745.0, -710.0, -40.0, 0.0, 40.0, 710.0, 745.0, 1e15, big])
    pb = dpopt.Problem(np.ones((1, 1)), np.ones(1), loss)
    for label in (1.0, -1.0):
        y = np.full(z.size, label)
        with strict_floats():
            v, d = pb.loss.value(z, y), pb.loss.deriv(z, y)
        assert np.all(np.isfinite(v)) and np.all(v >= 0)
        assert np.all(np.isfinite(d))
    if loss == "logistic":
        y = np.ones(z.size)
        v, d = pb.loss.value(z, y), pb.loss.deriv(z, y)
        # log(1 + e^{-z}) ~ -z for z << 0, ~ e^{-z} for z >> 0; derivative in [-1, 0]
        assert v[0] == pytest.approx(big) and v[-1] == 0.0 and v[5] == pytest.approx(math.log(2))
        assert np.all((d >= -1) & (d <= 0)) and d[0] == -1.0 and d[-1] == 0.0


def test_objective_and_gradient_with_huge_margins():
    X = np.array([[1e100, -1e100], [1e100, 1e100], [0.0, 0.0]])
    pb = dpopt.Problem(X, np.array([1.0, -1.0, 1.0]), "logistic", "l2", alpha=1.0)
    w = np.array([1e100, -1e100])  # margins of 2e200
    with strict_floats():
        f, g = pb.objective(w), pb.gradient(w)
    assert math.isfinite(f) and f >= 0 and np.all(np.isfinite(g))


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("sparse", [False, True])
def test_zero_columns_and_rows_need_no_division_by_zero(name, sparse):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((12, 4))
    X[:, 1] = 0.0  # empty column
    X[3] = 0.0  # empty row
    pb = dpopt.Problem(sp.csc_matrix(X) if sparse else X, rng.standard_normal(12), "huber",
                       "elastic_net", alpha=0.1, fit_intercept=True)
    with strict_floats():
        res = solve_or_value_error(pb, name, epsilon=1.0, delta=1e-5, random_state=0,
                                   **fast_options(name, passes=2))
    if res is None:  # only for a documented restriction (penalty, intercept, loss)
        spec = dpopt.get_solver(name)
        assert spec.penalties is not None or spec.losses is not None or not spec.fit_intercept
    else:
        check_result(res, pb, name, 1.0, 1e-5)


def test_all_zero_data_gives_value_errors_not_crashes():
    pb = dpopt.Problem(np.zeros((5, 2)), np.ones(5))
    for name in SOLVERS:
        res = solve_or_value_error(pb, name, epsilon=1.0, delta=1e-5, random_state=0,
                                   **fast_options(name))
        if res is not None:
            check_result(res, pb, name, 1.0, 1e-5)


def test_overflowing_iterates_raise_instead_of_returning_a_wrong_model():
    """clip 1e200 and step 1e150 overflow the iterates; the NaN used to be mapped to w = 0
    by the prox and returned as a model."""
    rng = np.random.default_rng(0)
    pb = dpopt.Problem(rng.standard_normal((20, 3)), rng.standard_normal(20))
    for name in PRIVATE:
        accepted = set(dpopt.get_solver(name).options())
        if not {"clip", "step"} <= accepted:
            continue
        kwargs = fast_options(name, clip=1e200, step=1e150, passes=20)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if "passes" in accepted:  # these overflow for sure
                with pytest.raises(ValueError, match="finite"):
                    dpopt.solve(pb, name, epsilon=1.0, delta=1e-5, random_state=0, **kwargs)
            else:  # a finite model or the same error, never a NaN turned into a number
                res = solve_or_value_error(pb, name, epsilon=1.0, delta=1e-5, random_state=0,
                                           **kwargs)
                assert res is None or np.all(np.isfinite(res.w))


def test_reference_optimum_is_scale_invariant():
    """It used to stop at w = 0 when y was large (stopping rule tol * |F|), and the
    absolute-loss linear program failed (HiGHS) or returned w = 0 on badly scaled data."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 3)), rng.standard_normal(20)
    w_ls = np.linalg.lstsq(X, y, rcond=None)[0]
    for scale in (1.0, 1e20, 1e100):
        w, _ = dpopt.reference_optimum(dpopt.Problem(X, y * scale))
        np.testing.assert_allclose(w / scale, w_ls, rtol=1e-8, atol=1e-10)
    w1, f1 = dpopt.reference_optimum(dpopt.Problem(X, y, "absolute"))
    for sx, sy in ((1e-100, 1.0), (1e100, 1.0), (1.0, 1e100), (1e-50, 1e50)):
        w, f = dpopt.reference_optimum(dpopt.Problem(X * sx, y * sy, "absolute"))
        assert f == pytest.approx(f1 * sy, rel=1e-7)
        np.testing.assert_allclose(w * sx / sy, w1, rtol=1e-6, atol=1e-9)
