"""Tests of dpopt.datasets: generators, file loaders, registry (no network access).

The real-data tests read california.npz and electricity.npz from the directory in
$DPOPT_DATA (a directory of the real .npz files) and are skipped without it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.utils import Bunch

import dpopt.datasets as ds
from dpopt.datasets import registry

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No test touches the network or the user's cache."""

    def no_network(spec, raw_dir):
        raise OSError("network disabled in tests")

    monkeypatch.setattr(registry, "_download", no_network)
    monkeypatch.setenv("DPOPT_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def data_dir(monkeypatch, tmp_path):
    """An empty directory installed as $DPOPT_DATA."""
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("DPOPT_DATA", str(d))
    return d


def shared_file(name):
    """Path of a real dataset in $DPOPT_DATA, or skip the test (conftest's message)."""
    from conftest import shared_data_file

    return shared_data_file(name)


def small_dataset(rng, n=30, p=4, labels="real"):
    X = rng.standard_normal((n, p))
    y = rng.standard_normal(n) if labels == "real" else rng.choice([-1.0, 1.0], n)
    return X, y


# --------------------------------------------------------------------------- synthetic

GENERATORS = {
    "sparse_lasso": lambda rs: ds.make_sparse_lasso(50, 40, 5, random_state=rs),
    "square": lambda rs: ds.make_square(40, 60, random_state=rs),
    "log1": lambda rs: ds.make_log1(60, 10, random_state=rs),
    "log2": lambda rs: ds.make_log2(60, 10, random_state=rs),
    "imbalanced_sq": lambda rs: ds.make_imbalanced(50, 6, random_state=rs),
    "imbalanced_log": lambda rs: ds.make_imbalanced(50, 6, loss="logistic", random_state=rs),
    "student": lambda rs: ds.make_heavy_tailed(50, 5, random_state=rs),
    "pareto_log": lambda rs: ds.make_heavy_tailed(50, 5, "pareto", target="logistic",
                                                  outlier_fraction=0.1, random_state=rs),
    "gaussian": lambda rs: ds.make_heavy_tailed(50, 5, "gaussian", random_state=rs),
}
SHAPES = {"sparse_lasso": (50, 40), "square": (40, 60), "log1": (60, 10), "log2": (60, 10),
          "imbalanced_sq": (50, 6), "imbalanced_log": (50, 6), "student": (50, 5),
          "pareto_log": (50, 5), "gaussian": (50, 5)}
LOGISTIC = {"log1", "log2", "imbalanced_log", "pareto_log"}


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_same_seed_same_data_other_seed_other_data(kind):
    X1, y1 = GENERATORS[kind](7)
    X2, y2 = GENERATORS[kind](7)
    X3, _ = GENERATORS[kind](8)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_shapes_dtypes_and_labels(kind):
    X, y = GENERATORS[kind](0)
    assert X.shape == SHAPES[kind] and y.shape == (X.shape[0],)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    if kind in LOGISTIC:
        assert set(np.unique(y)) == {-1.0, 1.0}
    else:
        assert len(np.unique(y)) > 2


def test_generator_argument_is_used_and_advanced():
    rng = np.random.default_rng(3)
    X1, _ = ds.make_log1(20, 5, random_state=rng)
    X2, _ = ds.make_log1(20, 5, random_state=rng)
    assert not np.array_equal(X1, X2)
    X3, _ = ds.make_log1(20, 5, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(X1, X3)


def test_sparse_lasso_support_and_noise():
    X, y, coef = ds.make_sparse_lasso(4000, 60, 7, noise=0.5, random_state=1, return_coef=True)
    assert np.count_nonzero(coef) == 7
    assert np.all((coef[coef != 0] > 0) & (coef[coef != 0] < 100))
    resid = y - X @ coef
    assert abs(resid.std() - 0.5) < 0.05


def test_square_is_the_sparse_lasso_design_at_paper_size():
    X, y, coef = ds.make_square(random_state=5, return_coef=True)
    assert X.shape == (1000, 1000) and np.count_nonzero(coef) == 10
    X2, y2 = ds.make_sparse_lasso(random_state=5)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize(("make", "sigma"), [(ds.make_log1, 1.0), (ds.make_log2, 2.0)])
def test_log_problems_have_lognormal_coefficients(make, sigma):
    X, y, coef = make(200, 3000, noise=0.0, random_state=2, return_coef=True)
    assert X.shape == (200, 3000)
    assert np.all(coef > 0)
    assert abs(np.log(coef).std() - sigma) < 0.1 * sigma
    np.testing.assert_array_equal(y, np.where(X @ coef >= 0, 1.0, -1.0))


def test_imbalanced_column_scales_and_linear_labels():
    X, y, coef = ds.make_imbalanced(20000, 5, scale_ratio=1e3, noise=0.0, random_state=4,
                                    return_coef=True)
    rms = np.sqrt((X ** 2).mean(axis=0))
    np.testing.assert_allclose(rms / rms[0], np.geomspace(1, 1e3, 5), rtol=0.05)
    np.testing.assert_allclose(y, X @ coef, rtol=1e-10, atol=1e-10)
    Xb, _ = ds.make_imbalanced(20000, 5, scale_ratio=1.0, random_state=4)
    rms_b = np.sqrt((Xb ** 2).mean(axis=0))
    assert rms_b.max() / rms_b.min() < 1.1


def test_heavy_tails_are_heavier_than_gaussian():
    kurt = {}
    for dist in ("gaussian", "student-t", "pareto"):
        X, _ = ds.make_heavy_tailed(20000, 3, dist, tail_index=3.0, random_state=0)
        z = X.ravel() - X.mean()
        kurt[dist] = np.mean(z ** 4) / np.mean(z ** 2) ** 2
    assert abs(kurt["gaussian"] - 3.0) < 0.2
    assert kurt["student-t"] > 6 and kurt["pareto"] > 6


def test_heavy_noise_only_keeps_gaussian_features():
    X, y, coef = ds.make_heavy_tailed(5000, 3, "student-t", tail_index=2.5, heavy="noise",
                                      random_state=1, return_coef=True)
    z = X.ravel()
    assert abs(np.mean(z ** 4) / np.mean(z ** 2) ** 2 - 3.0) < 0.3
    resid = y - X @ coef
    assert np.mean(resid ** 4) / np.mean(resid ** 2) ** 2 > 6
    assert np.isclose(np.linalg.norm(coef), 1.0)


@pytest.mark.parametrize("target", ["linear", "logistic"])
def test_outliers_touch_exactly_the_chosen_rows(target):
    kw = dict(n_samples=200, n_features=4, distribution="student-t", target=target,
              random_state=9)
    X0, y0 = ds.make_heavy_tailed(**kw)
    X1, y1 = ds.make_heavy_tailed(outlier_fraction=0.1, outlier_scale=50.0, **kw)
    changed = np.flatnonzero(np.any(X0 != X1, axis=1))
    assert changed.size == 20
    np.testing.assert_allclose(X1[changed], 50.0 * X0[changed])
    if target == "logistic":
        np.testing.assert_array_equal(y1[changed], -y0[changed])
    same = np.setdiff1d(np.arange(200), changed)
    np.testing.assert_array_equal(y1[same], y0[same])


@pytest.mark.parametrize(("call", "argname"), [
    (lambda: ds.make_sparse_lasso(0), "n_samples"),
    (lambda: ds.make_sparse_lasso(10, 5, 6), "n_informative"),
    (lambda: ds.make_sparse_lasso(10, 20, noise=-1.0), "noise"),
    (lambda: ds.make_log1(10, 2.5), "n_features"),
    (lambda: ds.make_quasi_sparse_logistic(sigma=0.0), "sigma"),
    (lambda: ds.make_imbalanced(scale_ratio=0.5), "scale_ratio"),
    (lambda: ds.make_imbalanced(loss="hinge"), "loss"),
    (lambda: ds.make_heavy_tailed(distribution="cauchy"), "distribution"),
    (lambda: ds.make_heavy_tailed(tail_index=0.0), "tail_index"),
    (lambda: ds.make_heavy_tailed(tail_index=float("nan")), "tail_index"),
    (lambda: ds.make_heavy_tailed(target="poisson"), "target"),
    (lambda: ds.make_heavy_tailed(outlier_fraction=1.5), "outlier_fraction"),
    (lambda: ds.make_heavy_tailed(heavy="labels"), "heavy"),
    (lambda: ds.make_heavy_tailed(distribution="pareto", tail_index=1e-3), "tail_index"),
    (lambda: ds.make_log2(random_state=-1), "random_state"),
    (lambda: ds.make_log2(return_coef=1), "return_coef"),
])
def test_bad_generator_arguments(call, argname):
    with pytest.raises(ValueError, match=argname):
        call()


# --------------------------------------------------------------------------- loaders


def test_npz_round_trip_dense(tmp_path):
    rng = np.random.default_rng(0)
    X, y = small_dataset(rng)
    path = ds.save_npz(tmp_path / "d.npz", X, y, feature_names=["a", "b", "c", "d"])
    got = ds.load_npz(path)
    np.testing.assert_array_equal(got.X, X)
    np.testing.assert_array_equal(got.y, y)
    assert got.feature_names == ("a", "b", "c", "d")


def test_npz_integer_arrays_become_float_and_names_are_optional(tmp_path):
    np.savez(tmp_path / "i.npz", X=np.arange(6).reshape(3, 2), y=np.array([1, -1, 1], np.int8))
    X, y, names = ds.load_npz(tmp_path / "i.npz")
    assert X.dtype == y.dtype == np.float64 and names is None
    np.testing.assert_array_equal(y, [1.0, -1.0, 1.0])


def test_npz_round_trip_sparse(tmp_path):
    X = sp.random(40, 300, density=0.02, format="csr", random_state=1)
    y = np.arange(40.0)
    ds.save_npz(tmp_path / "s.npz", X, y)
    got = ds.load_npz(tmp_path / "s.npz")
    assert sp.issparse(got.X) and got.X.format == "csr" and got.X.shape == (40, 300)
    assert (got.X != X).nnz == 0


@pytest.mark.parametrize("content", ["missing_y", "object", "nan", "rows", "names", "npy",
                                     "text"])
def test_npz_bad_files(tmp_path, content):
    path = tmp_path / "bad.npz"
    X, y = np.ones((3, 2)), np.ones(3)
    if content == "missing_y":
        np.savez(path, X=X)
    elif content == "object":
        np.savez(path, X=X, y=np.array([1, "a", None], dtype=object))
    elif content == "nan":
        np.savez(path, X=np.array([[1.0, np.nan]] * 3), y=y)
    elif content == "rows":
        np.savez(path, X=X, y=np.ones(4))
    elif content == "names":
        np.savez(path, X=X, y=y, feature_names=np.array(["only_one"]))
    elif content == "npy":
        with open(path, "wb") as fh:
            np.save(fh, X)
    else:
        path.write_text("not an archive")
    with pytest.raises(ValueError, match="bad.npz"):
        ds.load_npz(path)


def test_missing_file_and_bad_path_type(tmp_path):
    with pytest.raises(ValueError, match="nope.npz"):
        ds.load_npz(tmp_path / "nope.npz")
    with pytest.raises(ValueError, match="path"):
        ds.load_csv(42)
    with pytest.raises(ValueError, match="regular file"):
        ds.load_libsvm(tmp_path)


def test_libsvm_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    X = sp.random(25, 12, density=0.3, format="csr", random_state=2)
    y = rng.choice([-1.0, 1.0], 25)
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"), zero_based=False)
    got = ds.load_libsvm(tmp_path / "d.svm", n_features=12)
    assert sp.issparse(got.X) and got.X.format == "csr" and got.X.dtype == np.float64
    np.testing.assert_allclose(got.X.toarray(), X.toarray())
    np.testing.assert_array_equal(got.y, y)
    assert got.feature_names is None
    wide = ds.load_libsvm(tmp_path / "d.svm", n_features=20)
    assert wide.X.shape == (25, 20)


def test_libsvm_bad_input(tmp_path):
    (tmp_path / "bad.svm").write_text("1 3:abc\n")
    with pytest.raises(ValueError, match="bad.svm"):
        ds.load_libsvm(tmp_path / "bad.svm")
    (tmp_path / "ok.svm").write_text("1 1:1.0\n")
    with pytest.raises(ValueError, match="n_features"):
        ds.load_libsvm(tmp_path / "ok.svm", n_features=0)


def test_csv_with_header_and_named_target(tmp_path):
    rng = np.random.default_rng(3)
    X, y = small_dataset(rng, n=12, p=3)
    table = np.column_stack([X[:, 0], y, X[:, 1:]])
    np.savetxt(tmp_path / "d.csv", table, delimiter=",", header="f0,price,f1,f2", comments="")
    got = ds.load_csv(tmp_path / "d.csv", target="price")
    np.testing.assert_allclose(got.X, X)
    np.testing.assert_allclose(got.y, y)
    assert got.feature_names == ("f0", "f1", "f2")
    by_index = ds.load_csv(tmp_path / "d.csv", target=1)
    np.testing.assert_array_equal(by_index.X, got.X)


def test_csv_without_header(tmp_path):
    rng = np.random.default_rng(4)
    X, y = small_dataset(rng, n=10, p=2)
    np.savetxt(tmp_path / "n.csv", np.column_stack([y, X]), delimiter=",")
    got = ds.load_csv(tmp_path / "n.csv", target=0)
    np.testing.assert_allclose(got.X, X)
    np.testing.assert_allclose(got.y, y)
    assert got.feature_names is None
    last = ds.load_csv(tmp_path / "n.csv")  # default: last column is the target
    np.testing.assert_allclose(last.y, X[:, -1])
    forced = ds.load_csv(tmp_path / "n.csv", header=True)  # first row taken as names
    assert forced.X.shape == (9, 2)


@pytest.mark.parametrize(("text", "kwargs", "match"), [
    ("a,b\n1,2\n3,\n", {}, "numeric"),
    ("a,b\n1,2\n3,x\n", {}, "numeric"),
    ("1,2\n3,4\n", {"target": "b"}, "header"),
    ("a,b\n1,2\n", {"target": "c"}, "not a column"),
    ("a,b\n1,2\n", {"target": 2}, "out of range"),
    ("a,b\n1,2\n", {"target": 1.0}, "target"),
    ("a,b\n1,2\n", {"header": "yes"}, "header"),
    ("a,b\n", {}, "no data rows"),
    ("", {}, "empty"),
    ("a,b\n1,nan\n", {}, "NaN"),
])
def test_csv_bad_input(tmp_path, text, kwargs, match):
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(ValueError, match=match):
        ds.load_csv(tmp_path / "bad.csv", **kwargs)


# --------------------------------------------------------------------------- no values in errors

SECRET = "SECRET123"


def _assert_names_place_not_value(info, path, token, *places):
    """The error names the file (and the given places) and neither it nor a chained
    error quotes ``token`` (a record's cell or label)."""
    err = info.value
    assert path.name in str(err)
    for place in places:
        assert place in str(err)
    assert token not in str(err)
    for chained in (err.__cause__, err.__context__):  # kept even when a traceback hides it
        assert chained is None or token not in str(chained)


@pytest.mark.parametrize(("text", "place"), [
    (f"a,b\n1,2\n3,{SECRET}\n", "line 3, column 2 ('b')"),
    (f"1,2\n3,{SECRET}\n", "line 2, column 2"),
    (f'a,b\n1,"{SECRET}"\n', "line 2, column 2"),
    (f"a,b\n1,2\n3,4,{SECRET}\n", "line 3 has 3 field(s)"),
])
def test_csv_parse_errors_name_the_place_not_the_cell(tmp_path, text, place):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="not a numeric CSV table") as info:
        ds.load_csv(path)
    _assert_names_place_not_value(info, path, SECRET, place)


def test_csv_non_utf8_error_names_the_line_not_the_bytes(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"a,b\n1,2\n\xff" + SECRET.encode() + b",3\n")
    with pytest.raises(ValueError, match="UTF-8") as info:
        ds.load_csv(path)
    _assert_names_place_not_value(info, path, SECRET, "line 3")
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_a_first_row_with_a_number_is_data_not_a_header(tmp_path):
    # inferred as a header, a data row was dropped and printed by the target's error (audit)
    path = tmp_path / "headerless.csv"
    path.write_text(f"1.5,{SECRET},3\n2,4,5\n")
    with pytest.raises(ValueError, match="the file has no header") as info:
        ds.load_csv(path, target="y")
    assert SECRET not in str(info.value)
    with pytest.raises(ValueError, match="line 1, column 2") as info:
        ds.load_csv(path)
    _assert_names_place_not_value(info, path, SECRET, "line 1, column 2")
    named = tmp_path / "named.csv"
    named.write_text("a,b,y\n1,2,3\n")
    assert ds.load_csv(named, target="y").feature_names == ("a", "b")
    with pytest.raises(ValueError, match="3 columns"):  # an inferred header is not listed
        ds.load_csv(named, target="z")
    with pytest.raises(ValueError, match=r"columns: \['a', 'b', 'y'\]"):
        ds.load_csv(named, target="z", header=True)


@pytest.mark.parametrize(("text", "place"), [
    (f"1 1:1.0\n-1 3:{SECRET}\n", "line 2: entry 1 (feature index 3)"),
    ("1 1:1.0\n987654321x 2:1\n", "line 2: the label"),
    (f"1 1:1.0 {SECRET}\n", "line 1: entry 2"),
    (f"1 {SECRET}:1.0\n", "line 1: entry 1"),
])
def test_libsvm_parse_errors_name_the_place_not_the_cell(tmp_path, text, place):
    path = tmp_path / "bad.svm"
    path.write_text(text)
    token = SECRET if SECRET in text else "987654321"
    with pytest.raises(ValueError, match="not a valid LIBSVM") as info:
        ds.load_libsvm(path)
    _assert_names_place_not_value(info, path, token, place)


def test_libsvm_index_beyond_n_features_names_the_line(tmp_path):
    path = tmp_path / "wide.svm"
    path.write_text("1 1:1.0\n-1 2:1.0 7:2.0\n")
    with pytest.raises(ValueError, match="line 2: feature index 7 is beyond n_features=3"):
        ds.load_libsvm(path, n_features=3)


def test_label_errors_count_the_labels_not_quote_them(data_dir):
    with pytest.raises(ValueError, match="two classes, got 3") as info:
        ds.to_signed_labels([987654321, 1, 2], positive=1)
    assert "987654321" not in str(info.value)
    with pytest.raises(ValueError, match="positive=5 is not one of the 2 labels") as info:
        ds.to_signed_labels([987654321, 1], positive=5)
    assert "987654321" not in str(info.value)
    ds.save_npz(data_dir / "madelon.npz", np.ones((4, 2)), np.array([1, 987654321, 1, -1]))
    with pytest.raises(ValueError, match="-1/\\+1") as info:
        ds.load_dataset("madelon", verify=False)
    assert "987654321" not in str(info.value)


def test_openml_label_error_counts_the_labels(monkeypatch, tmp_path):
    _fake_openml(monkeypatch, Bunch(data=np.ones((2, 2)), target=np.array(["1", SECRET]),
                                    feature_names=["a", "b"], categories={}))
    with pytest.raises(ValueError, match="labels") as info:
        registry._fetch_madelon(tmp_path)
    assert SECRET not in str(info.value)


def test_load_file_dispatches_on_suffix(tmp_path):
    rng = np.random.default_rng(5)
    X, y = small_dataset(rng, n=8, p=3, labels="pm1")
    ds.save_npz(tmp_path / "a.npz", X, y)
    dump_svmlight_file(X, y, str(tmp_path / "a.libsvm"))
    dump_svmlight_file(X, y, str(tmp_path / "a.TXT"))
    np.savetxt(tmp_path / "a.csv", np.column_stack([X, y]), delimiter=",")
    for name in ("a.npz", "a.libsvm", "a.TXT", "a.csv"):
        got = ds.load_file(tmp_path / name)
        Xg = got.X.toarray() if sp.issparse(got.X) else got.X
        np.testing.assert_allclose(Xg, X, rtol=1e-12)
        np.testing.assert_array_equal(got.y, y)
    assert ds.load_file(str(tmp_path / "a.csv"), target=0).X.shape == (8, 3)


def test_load_file_rejects_unknown_suffix_and_keywords(tmp_path):
    with pytest.raises(ValueError, match="suffix"):
        ds.load_file(tmp_path / "a.parquet")
    np.savez(tmp_path / "a.npz", X=np.ones((2, 2)), y=np.ones(2))
    with pytest.raises(ValueError, match="target"):
        ds.load_file(tmp_path / "a.npz", target=0)


def test_to_signed_labels():
    np.testing.assert_array_equal(ds.to_signed_labels(np.array([0, 1, 1]), positive=1),
                                  [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(ds.to_signed_labels(np.array(["b", "a"]), positive="a"),
                                  [-1.0, 1.0])
    with pytest.raises(ValueError, match="two classes"):
        ds.to_signed_labels([0, 1, 2], positive=1)
    with pytest.raises(ValueError, match="positive"):
        ds.to_signed_labels([0, 1], positive=5)


# --------------------------------------------------------------------------- registry


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="california") as info:
        ds.load_dataset("mnist")
    assert "covtype" in str(info.value)


@pytest.mark.parametrize("download", [False, True])
def test_offline_and_absent_raises_not_available(data_dir, download):
    with pytest.raises(ds.DatasetNotAvailableError) as info:
        ds.load_dataset("mtp", download=download)
    msg = str(info.value)
    assert "DPOPT_DATA" in msg and "mtp.npz" in msg
    assert str(registry.get_data_home()) in msg
    assert isinstance(info.value, ValueError)
    if download:
        assert "network disabled" in msg


def test_not_available_message_when_dpopt_data_unset(monkeypatch):
    monkeypatch.delenv("DPOPT_DATA", raising=False)
    with pytest.raises(ds.DatasetNotAvailableError, match="DPOPT_DATA is not set"):
        ds.load_dataset("covtype")


def test_reads_dpopt_data_and_checks_shape(data_dir):
    rng = np.random.default_rng(6)
    X, y = small_dataset(rng, n=20, p=5)
    ds.save_npz(data_dir / "mtp.npz", X, y, feature_names=list("abcde"))
    with pytest.raises(ds.DatasetChecksumError, match="shape"):
        ds.load_dataset("mtp", download=False)
    got = ds.load_dataset("mtp", download=False, verify=False)
    np.testing.assert_array_equal(got.X, X)
    np.testing.assert_array_equal(got.y, y)
    assert got.task == "regression" and got.name == "mtp"
    assert got.feature_names == tuple("abcde")
    assert "DPOPT_DATA" in got.source and str(data_dir) in got.source


def test_classification_labels_must_be_pm1(data_dir):
    ds.save_npz(data_dir / "madelon.npz", np.ones((4, 2)), np.array([1, 2, 1, 2]))
    with pytest.raises(ValueError, match="-1/\\+1"):
        ds.load_dataset("madelon", verify=False)
    ds.save_npz(data_dir / "madelon.npz", np.ones((4, 2)), np.array([1, -1, 1, -1], np.int8))
    got = ds.load_dataset("madelon", verify=False)
    assert got.y.dtype == np.float64 and set(got.y) == {-1.0, 1.0}


def test_manifest_checksum_mismatch_is_an_error(data_dir):
    rng = np.random.default_rng(7)
    X, y = rng.standard_normal((20640, 8)), rng.standard_normal(20640)
    ds.save_npz(data_dir / "california.npz", X, y)
    with pytest.raises(ds.DatasetChecksumError, match="sha256") as info:
        ds.load_dataset("california")
    assert registry._REGISTRY["california"].npz_sha256 in str(info.value)
    assert ds.load_dataset("california", verify=False).shape == (20640, 8)


def test_download_is_converted_cached_and_verified_later(monkeypatch, data_dir, tmp_path):
    rng = np.random.default_rng(8)
    X, y = rng.standard_normal((4450, 202)), rng.standard_normal(4450)
    calls = []

    def fake_download(spec, raw_dir):
        calls.append((spec.name, raw_dir))
        return X, y, [f"f{j}" for j in range(202)]

    monkeypatch.setattr(registry, "_download", fake_download)
    cache = tmp_path / "mycache"
    first = ds.load_dataset("mtp", data_home=cache)
    assert calls == [("mtp", cache / "raw")] and first.source.startswith("download")
    assert (cache / "mtp.npz").is_file() and (cache / "mtp.sha256").is_file()
    again = ds.load_dataset("mtp", data_home=cache, download=False)
    assert len(calls) == 1 and again.source.startswith("cache")
    np.testing.assert_array_equal(again.X, X)
    assert again.feature_names == first.feature_names
    rows = {r["name"]: r for r in ds.list_datasets(data_home=cache)}
    assert rows["mtp"]["available"] and rows["mtp"]["location"] == str(cache / "mtp.npz")
    X_bad = X.copy()
    X_bad[0, 0] += 1.0
    ds.save_npz(cache / "mtp.npz", X_bad, y)  # corrupt the cached copy
    with pytest.raises(ds.DatasetChecksumError, match="mtp"):
        ds.load_dataset("mtp", data_home=cache)


def test_download_with_wrong_content_is_rejected_and_not_cached(monkeypatch, data_dir):
    rng = np.random.default_rng(9)
    fake = (rng.standard_normal((45312, 8)), rng.choice([-1.0, 1.0], 45312), None)
    monkeypatch.setattr(registry, "_download", lambda spec, raw_dir: fake)
    with pytest.raises(ds.DatasetChecksumError, match="electricity"):
        ds.load_dataset("electricity")
    assert not (registry.get_data_home() / "electricity.npz").exists()


def test_unwritable_cache_warns_and_still_returns_the_data(monkeypatch, data_dir, tmp_path):
    rng = np.random.default_rng(10)
    X, y = rng.standard_normal((4450, 202)), rng.standard_normal(4450)
    monkeypatch.setattr(registry, "_download", lambda spec, raw_dir: (X, y, None))
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.warns(UserWarning, match="could not save"):
        got = ds.load_dataset("mtp", data_home=blocker / "cache")
    np.testing.assert_array_equal(got.X, X)


def test_dpopt_data_takes_precedence_over_cache(data_dir):
    cache = registry.get_data_home()
    cache.mkdir(parents=True)
    ds.save_npz(cache / "dorothea.npz", sp.csr_matrix(np.eye(3)), np.array([1.0, -1, 1]))
    got = ds.load_dataset("dorothea", verify=False, download=False)
    assert sp.issparse(got.X) and got.source.startswith("cache")
    ds.save_npz(data_dir / "dorothea.npz", sp.csr_matrix(np.eye(2)), np.array([1.0, -1]))
    assert ds.load_dataset("dorothea", verify=False).source.startswith("DPOPT_DATA")


def test_list_datasets_marks_availability(data_dir):
    cache = registry.get_data_home()
    cache.mkdir(parents=True)
    ds.save_npz(data_dir / "mtp.npz", np.ones((2, 2)), np.ones(2))
    ds.save_npz(cache / "madelon.npz", np.ones((2, 2)), np.ones(2))
    rows = {r["name"]: r for r in ds.list_datasets()}
    assert set(rows) == {"california", "electricity", "mtp", "madelon", "dorothea", "covtype",
                         "adult"}
    assert {n for n, r in rows.items() if r["available"]} == {"mtp", "madelon"}
    assert rows["covtype"]["shape"] == (581012, 54) and rows["covtype"]["location"] is None
    assert rows["electricity"]["task"] == "classification"
    assert rows["california"]["task"] == "regression"


def test_bad_registry_arguments(data_dir):
    with pytest.raises(ValueError, match="download"):
        ds.load_dataset("mtp", download="no")
    with pytest.raises(ValueError, match="data_home"):
        ds.load_dataset("mtp", data_home=3)


def test_dataset_is_frozen():
    d = ds.load_bundled("diabetes")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.name = "other"
    assert "diabetes" in repr(d) and "(442, 10)" in repr(d)


# ------------------------------------------------ fetcher conversions (fake scikit-learn)


def _fake_openml(monkeypatch, bunch):
    import sklearn.datasets

    seen = {}

    def fetch_openml(**kwargs):
        seen.update(kwargs)
        return bunch

    monkeypatch.setattr(sklearn.datasets, "fetch_openml", fetch_openml)
    return seen


def test_electricity_conversion_reproduces_the_manifest_arrays(monkeypatch, tmp_path):
    """OpenML's encoding (day as category codes, UP/DOWN strings) -> the MANIFEST data."""
    ref = ds.load_npz(shared_file("electricity"))
    X_codes = ref.X.copy()
    X_codes[:, 1] -= 1.0  # day 1..7 -> category index 0..6
    target = np.where(ref.y > 0, "UP", "DOWN").astype(object)
    bunch = Bunch(data=X_codes, target=target, feature_names=list(ref.feature_names),
                  categories={"day": [str(d) for d in range(1, 8)]})
    seen = _fake_openml(monkeypatch, bunch)
    X, y, names = registry._fetch_electricity(tmp_path)
    assert seen["data_id"] == 151 and seen["as_frame"] is False
    assert registry.content_sha256(X, y) == registry._REGISTRY["electricity"].content_sha256
    assert tuple(names) == ref.feature_names


def test_openml_label_mappings(monkeypatch, tmp_path):
    _fake_openml(monkeypatch, Bunch(data=np.ones((3, 2)), target=np.array(["1", "2", "2"]),
                                    feature_names=["a", "b"], categories={}))
    _, y, _ = registry._fetch_madelon(tmp_path)
    np.testing.assert_array_equal(y, [-1.0, 1.0, 1.0])
    _fake_openml(monkeypatch, Bunch(data=sp.csr_matrix(np.eye(3)),
                                    target=np.array(["-1", "1", "-1"]),
                                    feature_names=["a", "b", "c"], categories={}))
    X, y, _ = registry._fetch_dorothea(tmp_path)
    assert sp.issparse(X)
    np.testing.assert_array_equal(y, [-1.0, 1.0, -1.0])
    _fake_openml(monkeypatch, Bunch(data=np.ones((2, 2)), target=np.array(["0", "1"]),
                                    feature_names=["a", "b"], categories={}))
    with pytest.raises(ValueError, match="labels"):
        registry._fetch_madelon(tmp_path)


def test_covtype_is_class_2_versus_rest(monkeypatch, tmp_path):
    import sklearn.datasets

    fake = Bunch(data=np.zeros((7, 54)), target=np.arange(1, 8), feature_names=None)
    monkeypatch.setattr(sklearn.datasets, "fetch_covtype", lambda **kw: fake)
    _, y, _ = registry._fetch_covtype(tmp_path)
    np.testing.assert_array_equal(y, [-1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0])


# --------------------------------------------------------------------------- real data


def test_real_california(monkeypatch):
    path = shared_file("california")
    monkeypatch.setenv("DPOPT_DATA", str(path.parent))
    d = ds.load_dataset("california", download=False)
    assert d.shape == (20640, 8) and d.task == "regression"
    assert d.X.dtype == d.y.dtype == np.float64
    assert d.feature_names[0] == "MedInc"
    assert d.X[:, 0].mean() == pytest.approx(3.870671, abs=1e-6)  # MANIFEST column mean
    assert d.y.mean() == pytest.approx(2.068558, abs=1e-6)


def test_real_electricity(monkeypatch):
    path = shared_file("electricity")
    monkeypatch.setenv("DPOPT_DATA", str(path.parent))
    d = ds.load_dataset("electricity", download=False)
    assert d.shape == (45312, 8) and d.task == "classification"
    assert d.y.dtype == np.float64 and set(np.unique(d.y)) == {-1.0, 1.0}
    assert d.X[:, 0].mean() == pytest.approx(0.49908, abs=1e-5)  # MANIFEST column mean
    assert int((d.y == 1).sum()) == 19237 and int((d.y == -1).sum()) == 26075


def test_resaved_real_copy_passes_the_array_checksum(monkeypatch, tmp_path):
    ref = ds.load_npz(shared_file("california"))
    d = tmp_path / "copy"
    d.mkdir()
    ds.save_npz(d / "california.npz", ref.X, ref.y, ref.feature_names, compress=False)
    monkeypatch.setenv("DPOPT_DATA", str(d))
    assert ds.load_dataset("california").shape == (20640, 8)


# --------------------------------------------------------------------------- bundled


def test_bundled_datasets():
    bc = ds.load_bundled("breast_cancer")
    assert bc.shape == (569, 30) and bc.task == "classification"
    assert set(np.unique(bc.y)) == {-1.0, 1.0} and int((bc.y == 1).sum()) == 212
    diab = ds.load_bundled("diabetes")
    assert diab.shape == (442, 10) and diab.task == "regression"
    assert "load_diabetes" in diab.source
    with pytest.raises(ValueError, match="breast_cancer"):
        ds.load_bundled("iris")


def test_public_names_are_exported():
    for name in ds.__all__:
        assert hasattr(ds, name), name
