"""A regression target's public range (``target_bounds=``): no histogram of y is released,
its share goes to the model, y is clipped to the range, and bad values are refused before
the data is read."""

import warnings

import numpy as np
import pytest

import dpopt
from dpopt.privacy import Gaussian, epsilon_of


def table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * [1, 10, 100, 0.1]
    y = X @ [1.0, 0.1, 0.01, 10.0] + 50 + rng.standard_normal(n)
    return X, y


def fit(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        return dpopt.DPLinearRegression(**kw).fit(X, y)


def test_a_public_range_releases_no_histogram_of_y_and_gives_its_share_to_the_model():
    X, y = table()
    private = fit(X, y, epsilon=1.0, random_state=0)
    public = fit(X, y, epsilon=1.0, random_state=0, target_bounds=(40, 60))
    shares = public.auto_.plan["mu_shares"]
    assert "target_bounds" in private.auto_.plan["mu_shares"] and "target_bounds" not in shares
    assert shares["model"] > private.auto_.plan["mu_shares"]["model"]
    lo, hi = public.target_range_  # within the public range (the second look may narrow it)
    assert 40.0 <= lo < hi <= 60.0
    # one Gaussian record fewer: the target's histogram
    assert len(public.fit_result_.mechanisms) == len(private.fit_result_.mechanisms) - 1
    assert public.epsilon_spent_ == pytest.approx(
        epsilon_of(public.fit_result_.mechanisms, public.delta_spent_), rel=1e-9)
    assert public.epsilon_spent_ <= 1.0 * (1 + 1e-9)
    assert public.score(X, y) > 0.7
    assert "the target's range [40, 60] is public" in public.privacy_report()
    assert "the target's range" not in private.privacy_report()


def test_targets_beyond_the_range_are_clipped_and_predictions_stay_within_it():
    X, y = table()
    m = fit(X, y, epsilon=4.0, random_state=1, target_bounds=(49, 51))
    pred = m.predict(X)
    assert pred.min() >= 49 - 1e-9 and pred.max() <= 51 + 1e-9


def test_the_mean_only_path_spends_the_whole_budget_on_the_mean():
    """Too few rows for a model: with a public range the private mean needs no histogram,
    so its one Gaussian release gets all of mu (the range's share is not spent)."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 3))
    y = 70 + 2 * rng.standard_normal(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dpopt.DPLinearRegression(epsilon=0.25, random_state=0,
                                     target_bounds=(60, 80)).fit(X, y)
    records = m.fit_result_.mechanisms
    assert len(records) == 1 and isinstance(records[0], Gaussian)
    assert m.epsilon_spent_ == pytest.approx(0.25, rel=1e-6)
    assert 60 <= m.intercept_ <= 80 and np.all(m.coef_ == 0)
    assert "its public range" in m.auto_.plan["reason"]


def test_chunked_data_takes_the_public_range_without_a_pass_over_y():
    da = pytest.importorskip("dask.array")
    X, y = table(2000)
    m = dpopt.DPLinearRegression(epsilon=1.0, random_state=0, target_bounds=(40, 60))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(da.from_array(X, chunks=(500, 4)), da.from_array(y, chunks=500))
    assert "target_bounds" not in m.auto_.plan["mu_shares"]
    lo, hi = m.target_range_
    assert 40.0 <= lo < hi <= 60.0 and m.epsilon_spent_ <= 1.0 * (1 + 1e-9)


@pytest.mark.parametrize("given, needle", [
    ((5, 1), "need finite lower < upper"),
    ((0, np.inf), "need finite lower < upper"),
    (("a", 1), "pair \\(lower, upper\\) of numbers"),
    (3.0, "pair \\(lower, upper\\) of numbers"),
])
def test_bad_ranges_are_refused_before_anything_is_spent(given, needle):
    X, y = table(500)
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3)
    est = dpopt.DPLinearRegression(epsilon=1.0, target_bounds=given, accountant=acc)
    with pytest.raises(ValueError, match=needle):
        est.fit(X, y)
    assert acc.ledger == [] and not hasattr(est, "coef_")


def test_an_explicit_solver_refuses_the_range():
    X, y = table(500)
    with pytest.raises(ValueError, match="target_bounds= applies to solver='auto'"):
        dpopt.DPLinearRegression(solver="dp-gd", target_bounds=(0, 100)).fit(X, y)


def test_every_regressor_takes_the_range():
    X, y = table(2000)
    for est in (dpopt.DPLasso(alpha=0.01), dpopt.DPElasticNet(alpha=0.01),
                dpopt.DPHuberRegressor(threshold=5.0)):
        est.set_params(epsilon=2.0, random_state=0, target_bounds=(40, 60))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        assert "target_bounds" not in est.auto_.plan.get("mu_shares", {})
        lo, hi = est.target_range_
        assert 40.0 <= lo < hi <= 60.0


def test_an_unresolved_target_is_warned_about_as_the_target():
    """The public function names the target, not "features [0]"; the default path is quiet
    about it (its own warning and report say what it released instead)."""
    from dpopt.preprocessing import private_target_bounds

    y = 60000 + 3000 * np.random.default_rng(0).standard_normal(16)
    with pytest.warns(UserWarning, match="range of the target y") as caught:
        private_target_bounds(y, 0.1, np.random.default_rng(0))
    assert not any("features [0]" in str(w.message) for w in caught)
    private_target_bounds(y, 0.1, np.random.default_rng(0), quiet=True)  # no warning (filter)
    # 16 rows: no budget could locate it, so the fit is refused, naming the remedy
    with pytest.raises(ValueError, match=r"target's range.*target_bounds=\(lower, upper\)"):
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(np.ones((16, 2)), y)
    y = 60000 + 3000 * np.random.default_rng(0).standard_normal(90)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(np.ones((90, 2)), y)
    messages = [str(w.message) for w in caught]
    assert not any("features [0]" in m or "target y;" in m for m in messages)
    assert any("target_bounds=(lower, upper)" in m for m in messages)


def test_a_narrow_band_far_from_zero_is_warned_and_reported():
    """An independent fuzz (session 28): a target like a year (2005 +- 8) is located on the log
    grid within [1778, 3162], 170 of its standard deviations, and the released predictor's
    noise grows with that width. The fit says so and names the remedies; with the public
    range given, or a public offset subtracted, it does not."""
    from dpopt.pipeline.scaling import ColumnWarning

    rng = np.random.default_rng(0)
    X = rng.normal(size=(375, 8))
    y = 2005.0 + 8.0 * (X @ rng.normal(size=8) / np.sqrt(8) + rng.normal(size=375)) / np.sqrt(2)
    with pytest.warns(ColumnWarning, match=r"target's private range \[\d+, \d+\] is a narrow "
                                           r"band far from 0"):
        model = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert model.auto_.plan["target_narrow_band"] == list(model.target_range_)
    assert "target_bounds=(lower, upper)" in model.privacy_report()
    for fitted in (dpopt.DPLinearRegression(epsilon=1.0, random_state=0,
                                            target_bounds=(1950.0, 2060.0)).fit(X, y),
                   dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y - 2000.0)):
        assert "target_narrow_band" not in fitted.auto_.plan
    with warnings.catch_warnings():
        warnings.simplefilter("error", ColumnWarning)
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y - 2000.0)
