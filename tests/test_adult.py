"""The Adult loader: parsing the UCI files, the npz layout, one-hot with schema categories."""

import numpy as np
import pytest

from dpopt.datasets import DatasetNotAvailableError, load_adult, load_dataset
from dpopt.datasets.adult import CAT_NAMES, NUM_NAMES, parse_adult_lines

LINES = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
    "Male, 2174, 0, 40, United-States, <=50K",
    "50, ?, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, "
    "0, 13, United-States, >50K.",
    "",
]


def test_parse_lines_strips_marks_missing_and_maps_labels():
    num, cat, y = parse_adult_lines(["|1x3 Cross validator", *LINES])
    assert num.shape == (2, 6) and cat.shape == (2, 8)
    np.testing.assert_array_equal(num[0], [39, 77516, 13, 2174, 0, 40])
    assert cat[1, 0] == "" and cat[0, 0] == "State-gov"  # '?' is stored as ''
    np.testing.assert_array_equal(y, [-1, 1])
    with pytest.raises(ValueError, match="15 comma-separated"):
        parse_adult_lines(["1, 2, 3"])
    with pytest.raises(ValueError, match="label"):
        parse_adult_lines([LINES[0].replace("<=50K", "maybe")])


@pytest.mark.parametrize(("line", "place"), [
    ("1, SECRET123, 3", "line 2: expected 15 comma-separated fields, got 3"),
    (LINES[0].replace("<=50K", "SECRET123"), "line 2: the label (field 15)"),
    (LINES[0].replace("77516", "SECRET123"), "line 2: field 3 is not a number"),
])
def test_parse_errors_name_the_line_not_the_record(line, place):
    with pytest.raises(ValueError, match="adult") as info:
        parse_adult_lines([LINES[0], line])
    assert place in str(info.value) and "SECRET123" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def _write(tmp_path, n=4):
    num, cat, y = parse_adult_lines(LINES[:2] * (n // 2))
    np.savez(tmp_path / "adult.npz", X_num=num, X_cat=cat, y=y, X_num_test=num[:2],
             X_cat_test=cat[:2], y_test=y[:2], num_names=np.array(NUM_NAMES),
             cat_names=np.array(CAT_NAMES))


def test_load_from_dpopt_data_and_one_hot(tmp_path, monkeypatch):
    _write(tmp_path)
    monkeypatch.setenv("DPOPT_DATA", str(tmp_path))
    a = load_adult(verify=False, download=False)
    Xtr, Xte, names = a.one_hot()
    assert Xtr.shape[0] == 4 and Xte.shape[0] == 2 and len(names) == Xtr.shape[1]
    assert names[:6] == NUM_NAMES and "workclass=?" in names  # the missing marker is a category
    onehot = Xtr[:, 6:]
    assert set(np.unique(onehot)) <= {0.0, 1.0}
    assert np.all(onehot.sum(axis=1) == 8)  # one category per categorical column
    with pytest.raises(ValueError, match="32561"):  # verify checks the official shapes
        load_adult(download=False)


def test_missing_file_without_download_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DPOPT_DATA", str(tmp_path))
    monkeypatch.setenv("DPOPT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DatasetNotAvailableError, match="adult"):
        load_adult(download=False)
    with pytest.raises(DatasetNotAvailableError, match="adult"):
        load_dataset("adult", download=False)


def test_shared_copy_when_available():
    try:
        a = load_adult(download=False)
    except DatasetNotAvailableError:
        pytest.skip("real dataset 'adult' not available: set DPOPT_DATA to a directory holding "
                    "adult.npz, or call dpopt.datasets.load_adult() with internet to download it")
    Xtr, Xte, _ = a.one_hot()
    assert Xtr.shape == (32561, 108) and Xte.shape == (16281, 108)
    assert abs(np.mean(a.y == 1) - 0.2408) < 1e-3
