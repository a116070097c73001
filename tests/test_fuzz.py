"""Hypothesis fuzz of the user-facing entry points (issue 21, Target).

Over the default path of the estimators, the private transformers, ``dpopt fit`` on CSV
tables and chunked (Dask) input, with hostile values (NaN, inf, huge, text, empty shapes,
duplicate names, bad epsilon / delta), every call must either succeed or raise a
``ValueError`` / ``TypeError`` that

* is not raised from inside NumPy, SciPy, Numba or pandas (their messages name no argument),
* names the argument or column at fault (``X``, ``y``, ``epsilon``, a column, an option),

and a failed fit must charge nothing to its ``BudgetAccountant``, while a successful one is
charged once, at most its target. Budgets entered in several threads stay exact: each
ledger holds its own thread's fits and nothing else.

The default run draws a quick slice (93 cases, derandomized so that it is reproducible);
``-m slow`` runs 2,100 cases (900 default path, 500 transformers, 400 CLI tables, 200
chunked, 100 thread budgets) with fresh randomness.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import tempfile
import threading
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import dpopt

QUICK = {"derandomize": True, "database": None, "deadline": None,
         "suppress_health_check": list(HealthCheck)}
SLOW = {"database": None, "deadline": None, "suppress_health_check": list(HealthCheck)}

#: the words an error may name: an argument, a column, a command-line option
NAMED = re.compile(r"(\bX\b|\by\b|epsilon|delta|\balpha\b|l1_ratio|bounds|quantiles|confidence"
                   r"|DATA|column|--[a-z][a-z-]*|label|n_samples|target|threshold|accountant)")
FOREIGN = ("numpy", "scipy", "numba", "pandas", "llvmlite")


def check_error(exc: BaseException):
    """A clean error: ValueError / TypeError (or a dpopt subclass), raised outside the
    numeric libraries, naming what is wrong."""
    kind = type(exc)
    clean_type = kind in (ValueError, TypeError) or (
        isinstance(exc, (ValueError, TypeError)) and kind.__module__.startswith("dpopt"))
    assert clean_type, f"{kind.__module__}.{kind.__name__}: {exc}"
    last = traceback.extract_tb(exc.__traceback__)[-1].filename if exc.__traceback__ else ""
    parts = Path(last).parts
    assert not any(lib in parts for lib in FOREIGN), f"raised inside {last}: {exc}"
    assert NAMED.search(str(exc)), f"names no argument: {exc}"


# ---------------------------------------------------------------------------- strategies

def mostly(valid, hostile):
    """Mostly one of ``valid``, sometimes one of ``hostile`` (so that most cases get past the
    argument checks and reach the data and the mechanisms). Hypothesis favours the ends of
    an integer range, so the hostile branch sits in its middle."""
    return st.integers(0, 9).flatmap(
        lambda k: st.sampled_from(hostile if k == 5 else valid))


CELLS = st.sampled_from([0.0, 1.0, -2.5, 3.7, 1e-300, 1e300, np.nan, np.inf, -np.inf])
EPSILONS = mostly([1e-6, 1e-3, 0.1, 1.0, 1.0, 5.0, 100.0],
                  [1e-7, 1e3, math.inf, 0.0, -1.0, math.nan])
DELTAS = mostly([None, None, 1e-12, 1e-6, 0.1, 0.5, 0.99], [1.0, 0.0, -0.1, math.nan])


@st.composite
def matrices(draw, min_rows=0, max_rows=60, max_cols=5):
    """(X as the user passes it, a float version or None when X is not numeric)."""
    n = draw(mostly(list(range(max(min_rows, 20), max_rows + 1)),
                    list(range(min_rows, min(3, max_rows) + 1))))
    p = draw(mostly(list(range(1, max_cols + 1)), [0]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    X = rng.standard_normal((n, p)) * draw(st.sampled_from([1.0, 1e-3, 1e3]))
    if n and p and draw(st.integers(0, 3)) == 2:  # a few hostile cells
        for _ in range(draw(st.integers(1, 3))):
            X[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = draw(CELLS)
    if p and draw(st.integers(0, 4)) == 2:
        X[:, draw(st.integers(0, p - 1))] = draw(CELLS)  # a constant column
    form = draw(mostly(["float", "float", "float32", "int", "sparse", "frame", "list"],
                       ["object-text", "text"]))
    if form == "float32":
        return X.astype(np.float32)
    if form == "int":
        return np.nan_to_num(X, posinf=0, neginf=0).astype(np.int64)
    if form == "sparse":
        return sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    if form == "frame":
        pd = pytest.importorskip("pandas")
        frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(p)])
        if p and draw(st.booleans()):
            frame[f"c{draw(st.integers(0, p - 1))}"] = draw(
                st.sampled_from([["u", "v"], [True, False], ["1", "2"]])) * (n // 2) + ["u"] * (n % 2)
        return frame
    if form == "object-text":
        out = X.astype(object)
        if n and p:
            out[draw(st.integers(0, n - 1)), draw(st.integers(0, p - 1))] = draw(
                st.sampled_from(["x", "<=50K", "", "1.5", None]))
        return out
    if form == "text":
        return X.astype(str)
    return X.tolist()


@st.composite
def targets(draw, n, classifier):
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    kind = draw(mostly(["good"], ["text", "nan", "short", "2d", "one"]))
    if classifier:
        y = np.where(rng.random(n) < 0.5, 0, 1)
        if kind == "text":
            return np.where(y == 1, ">50K", "<=50K")
        if kind == "one":
            return np.zeros(n)
    else:
        y = rng.standard_normal(n) * draw(st.sampled_from([1.0, 1e3]))
        if kind == "text":
            return np.where(y > 0, "a", "b")
        if kind == "one":
            return np.full(n, 3.0)
    if kind == "nan" and n:
        y = y.astype(float)
        y[0] = np.nan
    if kind == "short":
        return y[: max(n - 1, 0)]
    if kind == "2d":
        return np.c_[y, y]
    return y


ESTIMATORS = ["DPLinearRegression", "DPLogisticRegression", "DPLasso", "DPElasticNet",
              "DPHuberRegressor"]


@contextlib.contextmanager
def quiet():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _charged_once_or_never(acc, outcome, target):
    if isinstance(outcome, dpopt.ChargedFitError):  # failed on a release's outcome: charged
        assert len(acc.ledger) == 1 and acc.ledger[0].epsilon <= target * (1 + 1e-9)
    elif isinstance(outcome, BaseException):
        assert acc.ledger == [], f"a failed fit was charged: {acc.ledger}"
    else:
        assert len(acc.ledger) == 1, acc.ledger
        assert acc.ledger[0].epsilon <= target * (1 + 1e-9)


def _run(fit):
    try:
        with quiet():
            out = fit()
    except (ValueError, TypeError) as exc:  # anything else fails the test as it is
        check_error(exc)
        event(f"refused: {type(exc).__name__}")
        return exc
    event("succeeded")
    return out


# ------------------------------------------------------------------ the default path


def default_path_case(data):
    name = data.draw(st.sampled_from(ESTIMATORS))
    cls = getattr(dpopt, name)
    X = data.draw(matrices())
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    y = data.draw(targets(n, classifier=name == "DPLogisticRegression"))
    epsilon, delta = data.draw(EPSILONS), data.draw(DELTAS)
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=0.995)
    est = cls(epsilon=epsilon, delta=delta, accountant=acc, random_state=0)
    outcome = _run(lambda: est.fit(X, y))
    if isinstance(outcome, BaseException):
        assert not hasattr(est, "coef_")  # nothing half-written
    else:
        assert np.all(np.isfinite(est.coef_)) and est.epsilon_spent_ <= epsilon * (1 + 1e-9)
    _charged_once_or_never(acc, outcome, epsilon)


@settings(max_examples=25, **QUICK)
@given(st.data())
def test_default_path_quick(data):
    default_path_case(data)


@pytest.mark.slow
@settings(max_examples=900, **SLOW)
@given(st.data())
def test_default_path(data):
    default_path_case(data)


# ------------------------------------------------------------------ the transformers

TRANSFORMERS = ["PrivateClipper", "PrivateMinMaxScaler", "PrivateStandardScaler",
                "PrivateRobustScaler"]
BOUNDS = mostly([None, None, (-1.0, 1.0), (np.nan, 1.0), (-5.0, 5.0)],
               [(2.0, 1.0), (0.0, math.inf), "wide"])


def transformer_case(data):
    import dpopt.preprocessing as pre

    cls = getattr(pre, data.draw(st.sampled_from(TRANSFORMERS)))
    X = data.draw(matrices(max_rows=80))
    epsilon, delta = data.draw(EPSILONS), data.draw(DELTAS)
    params = {"epsilon": epsilon, "delta": delta, "random_state": 0,
              "bounds": data.draw(BOUNDS),
              "quantiles": data.draw(mostly([(0.01, 0.99), (0.25, 0.75)], [(0.9, 0.1), 0.5])),
              "confidence": data.draw(mostly([4.0, 2.0, 0.0], [-1.0, math.nan]))}
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=0.995)
    t = cls(accountant=acc, **params)
    outcome = _run(lambda: t.fit(X))
    if isinstance(outcome, BaseException):
        assert acc.ledger == [] and not hasattr(t, "lower_")
        return
    assert t.epsilon_spent_ <= epsilon
    assert len(acc.ledger) == (1 if t.mechanisms_ else 0)  # nothing released: nothing charged
    assert all(s.epsilon <= epsilon for s in acc.ledger)
    out = _run(lambda: t.transform(X))
    if not isinstance(out, BaseException):
        assert out.shape == (X.shape[0] if hasattr(X, "shape") else len(X), t.n_features_in_)


@settings(max_examples=50, **QUICK)
@given(st.data())
def test_transformers_quick(data):
    transformer_case(data)


@pytest.mark.slow
@settings(max_examples=500, **SLOW)
@given(st.data())
def test_transformers(data):
    transformer_case(data)


# ------------------------------------------------------------------ dpopt fit on CSV tables

CSV_CELLS = st.sampled_from(["1", "-2.5", "0", "3e2", "", "NA", "?", "x", "1e309", "nan", "inf",
                             "<=50K", ">50K", "true", " 4 ", "\"a,b\""])
HEADER = st.sampled_from(["a", "b", "c", "income", "a", "x y", ""])


@st.composite
def csv_tables(draw, labels):
    """A CSV text: a numeric target, or a label column when ``labels``; a few hostile
    cells, ragged rows, odd or duplicate names."""
    width = draw(mostly([2, 3, 4], [1]))
    header = draw(mostly([["a", "b", "c", "income"][:width]],
                         [draw(st.lists(HEADER, min_size=width, max_size=width))]))
    rows = draw(mostly([20, 30, 50], [0, 1, 2]))
    numeric = not labels
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    lines = [",".join(header)] if draw(st.booleans()) or not numeric else []
    table = [[f"{v:.3g}" for v in rng.standard_normal(width)] for _ in range(rows)]
    for cells in table:
        cells[-1] = str(rng.choice(["<=50K", ">50K"])) if not numeric else cells[-1]
    if rows and draw(mostly([False], [True])):  # one hostile cell
        table[draw(st.integers(0, rows - 1))][draw(st.integers(0, width - 1))] = draw(CSV_CELLS)
    if rows and draw(mostly([False], [True])):  # one ragged row
        table[draw(st.integers(0, rows - 1))].pop()
    lines += [",".join(cells) for cells in table]
    return "\n".join(lines) + ("\n" if draw(st.booleans()) else "")


def cli_case(data):
    from dpopt.cli import main

    loss = data.draw(st.sampled_from(["logistic", "squared", "huber", "absolute"]))
    labels = data.draw(mostly([loss == "logistic"], [loss != "logistic"]))
    text = data.draw(csv_tables(labels))
    argv = ["--loss", loss, "--epsilon", data.draw(mostly(["1", "0.1", "5"], ["inf", "0", "1e-7"])),
            "--seed", "0"]
    argv += data.draw(mostly([[], [], ["--missing", "zero"], ["--missing", "drop"],
                              ["--penalty", "l1", "--alpha", "0.1"]],
                             [["--target", "a"], ["--target", "0"],
                              ["--positive-label", ">50K"], ["--delta", "0.9"]]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_text(text)
        out, err = io.StringIO(), io.StringIO()
        with quiet(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["fit", str(path), *argv, "--out", str(Path(tmp) / "m.json")])
            except SystemExit as exc:  # argparse's own usage errors
                code = exc.code
        left = sorted(p.name for p in Path(tmp).iterdir())
    assert code in (0, 2), (code, err.getvalue())
    event(f"exit code {code}")
    if code == 2:
        message = err.getvalue()
        assert "Traceback" not in message and message.strip(), message
        assert "np.str_" not in message and "np.float64" not in message, message
        assert NAMED.search(message), message
        assert left == ["t.csv"], left  # nothing written by a failed fit
    else:
        assert left == ["m.json", "t.csv"], left  # no temporary left behind


@settings(max_examples=10, **QUICK)
@given(st.data())
def test_cli_tables_quick(data):
    cli_case(data)


@pytest.mark.slow
@settings(max_examples=400, **SLOW)
@given(st.data())
def test_cli_tables(data):
    cli_case(data)


# ------------------------------------------------------------------ chunked input


def chunked_case(data):
    da = pytest.importorskip("dask.array")
    name = data.draw(st.sampled_from(["DPLinearRegression", "DPLogisticRegression"]))
    n = data.draw(st.integers(1, 400))
    p = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    X = rng.standard_normal((n, p))
    if data.draw(st.booleans()):
        X[data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, p - 1))] = data.draw(CELLS)
    y = (X[:, 0] > 0).astype(float) if name == "DPLogisticRegression" else X @ np.ones(p)
    chunk = data.draw(st.integers(1, n))
    Xd, yd = da.from_array(X, chunks=(chunk, p)), da.from_array(y, chunks=chunk)
    epsilon = data.draw(st.sampled_from([0.5, 2.0, 1e-7, math.inf]))
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=0.995)
    est = getattr(dpopt, name)(epsilon=epsilon, accountant=acc, random_state=0)
    outcome = _run(lambda: est.fit(Xd, yd))
    _charged_once_or_never(acc, outcome, epsilon)


@settings(max_examples=3, **QUICK)
@given(st.data())
def test_chunked_quick(data):
    chunked_case(data)


@pytest.mark.slow
@settings(max_examples=200, **SLOW)
@given(st.data())
def test_chunked(data):
    chunked_case(data)


# ------------------------------------------------------------------ budgets across threads

_X_THREADS = np.random.default_rng(7).uniform(-1, 1, (400, 2))


def threads_case(plans, budgets):
    """Each thread enters its own ``with BudgetAccountant`` and fits its plan; each ledger
    must hold exactly that thread's granted fits, composed exactly, within its budget."""
    from dpopt.preprocessing import PrivateStandardScaler

    results, errors = {}, []
    barrier = threading.Barrier(len(plans))

    def work(k):
        try:
            with dpopt.BudgetAccountant(epsilon=budgets[k], delta=1e-5) as acc:
                barrier.wait(30)
                spent = []
                for eps in plans[k]:
                    try:
                        t = PrivateStandardScaler(epsilon=eps, delta=1e-7, bounds=(-1.0, 1.0),
                                                  random_state=0).fit(_X_THREADS)
                        spent.append((t.epsilon_spent_, t.mechanisms_))
                    except dpopt.BudgetExceededError:
                        pass
            results[k] = (acc, spent)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(plans))]
    with quiet():
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not errors, errors
    for k, (acc, spent) in results.items():
        assert len(acc.ledger) == len(spent)
        assert [s.epsilon for s in acc.ledger] == [eps for eps, _ in spent]
        assert acc.spent() <= acc.epsilon
        again = dpopt.BudgetAccountant(epsilon=budgets[k], delta=1e-5)
        for s in acc.ledger:
            again.record(s)
        assert acc.spent() == again.spent()


PLANS = st.lists(st.lists(st.sampled_from([0.05, 0.2, 0.5, 1.0, 2.0]), min_size=1, max_size=4),
                 min_size=2, max_size=3)


@settings(max_examples=5, **QUICK)
@given(PLANS, st.lists(st.sampled_from([0.3, 1.0, 3.0]), min_size=3, max_size=3))
def test_budgets_across_threads_quick(plans, budgets):
    threads_case(plans, budgets)


@pytest.mark.slow
@settings(max_examples=100, **SLOW)
@given(PLANS, st.lists(st.sampled_from([0.3, 1.0, 3.0]), min_size=3, max_size=3))
def test_budgets_across_threads(plans, budgets):
    threads_case(plans, budgets)
