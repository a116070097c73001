"""What one record, or one odd file, can do to how `dpopt fit` / `dpopt predict` read a
table: findings of an independent fuzz of the CLI reader (session 39). Each test fails on
the reader before it."""

import json

import numpy as np
import pandas as pd
import pytest

from _cli import run
from dpopt.cli.tables import Reading, read_frame, read_table


def _table(n=400, seed=0):
    """Columns ``a`` (numbers), ``b`` (u / v text), ``y`` (0/1 following ``a``)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).round(3)
    return pd.DataFrame({"a": a, "b": rng.choice(["u", "v"], n),
                         "y": (a + 0.5 * rng.standard_normal(n) > 0).astype(int)})


FIT = ["--target", "y", "--loss", "logistic", "--epsilon", "1", "--seed", "0"]


@pytest.mark.parametrize("cell", ["x", "5", "True"])
def test_a_column_with_one_cell_is_declared_not_read_from_its_cell(tmp_path, capsys, cell):
    """An empty column reads as numbers; with one cell its kind was that cell's (text for
    ``x``): neighbours differing in that one record gave models of different structure.
    Now the column with one cell is refused unless declared (declared, it has one kind),
    and the empty column, which holds nothing, is left out and reported."""
    df = _table()
    df["c"] = ""
    path, model = tmp_path / "d.csv", tmp_path / "m.json"
    df.to_csv(path, index=False)
    code, out, err = run(["fit", path, *FIT, "--out", model], capsys)
    assert code == 0, err
    assert "left out: column(s) 'c' hold no value in any row" in out
    saved = json.loads(model.read_text())["data"]
    assert saved["columns"] == ["a", "b"] and saved["empty_columns"] == ["c"]
    code, out, err = run(["predict", model, path, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0, err
    df.loc[7, "c"] = cell  # the neighbour
    df.to_csv(path, index=False)
    code, out, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "['c'] have one cell that is not missing" in err
    assert out == "" and f"'{cell}'" not in err  # the cell is not quoted
    code, out, err = run(["fit", path, *FIT, "--numbers", "c", "--out", model], capsys)
    assert code == 0, err
    columns = json.loads(model.read_text())["data"]["table"]["columns"]
    assert [(c["name"], c["kind"]) for c in columns] == [
        ("a", "numeric"), ("b", "string"), ("c", "numeric")]


def test_a_record_with_a_field_more_than_the_header_is_refused(tmp_path, capsys):
    """pandas made the first column an index when the first record had one field more than
    the header, so every name moved one column right ("a" named b's cells, the target was
    the last record's noise): one record changed which column was the target. Now that row
    is refused, in fit and in predict; without a header the width is the first record's,
    and its extra cell is a column with one cell, refused as above."""
    df = _table()
    rows = df.to_csv(index=False).splitlines()
    rows[1] += ",9"
    path = tmp_path / "d.csv"
    path.write_text("\n".join(rows) + "\n")
    code, out, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "a row has more fields than the header" in err and out == ""
    with pytest.raises(ValueError, match="a row has more fields than the header"):
        read_frame(path, Reading.of_model({"header": True}))
    path.write_text("\n".join(rows[1:]) + "\n")
    code, _, err = run(["fit", path, "--target", "3", "--loss", "logistic", "--epsilon", "1",
                        "--no-header"], capsys)
    assert code == 2 and "['col4'] have one cell that is not missing" in err


def test_a_parquet_column_of_lists_is_refused_naming_it(tmp_path, capsys):
    """It crashed with "TypeError: unhashable type" deep in the kinds' check."""
    df = _table(60)  # rows enough to name a label at epsilon = 1 (else refused first)
    df["l"] = [[1, 2]] * 60
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    code, _, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "['l'] hold lists, maps or records" in err
    df["l"] = pd.to_timedelta(np.arange(60), unit="s")  # was "more than one kind"
    df.to_parquet(path)
    code, _, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "column 'l' has dtype timedelta64" in err


def test_dropping_rows_keeps_a_true_false_targets_labels_true_false(tmp_path, capsys):
    """With a missing label, pandas read the True/False target as Python objects; after
    --missing drop its labels were the strings 'False' and 'True'."""
    df = _table()
    df["y"] = df["y"].astype(bool).astype(object)
    df.loc[3, "y"] = None
    path, model = tmp_path / "d.csv", tmp_path / "m.json"
    df.to_csv(path, index=False)
    code, out, err = run(["fit", path, *FIT, "--missing", "drop", "--out", model], capsys)
    assert code == 0, err
    assert json.loads(model.read_text())["classes"] == [False, True]
    _, y, _, _ = read_table(path, target="y")
    assert str(y.dtype) == "boolean" and y.isna().sum() == 1


def test_parquet_names_are_read_as_a_csvs_are(tmp_path, capsys):
    """A Parquet column named ' b' could not be declared (--text b was refused: the check
    compared the declared name with the unstripped one); integer column names fitted but
    predict failed. Names are now text without surrounding spaces in every format, and two
    names that are one once stripped are refused."""
    df = _table()
    df.columns = ["a", " b", "y"]
    path, model = tmp_path / "d.parquet", tmp_path / "m.json"
    df.to_parquet(path)
    code, _, err = run(["fit", path, *FIT, "--text", "b"], capsys)
    assert code == 0, err
    df.columns = [0, 1, 2]
    df.to_parquet(path)
    code, _, err = run(["fit", path, *FIT[2:], "--target", "2", "--out", model], capsys)
    assert code == 0, err  # no column named 2 (names: 0, 1, 2 read as '0', '1', '2')...
    code, _, err = run(["fit", path, *FIT[2:], "--target", "3", "--out", model], capsys)
    assert code == 0, err
    assert json.loads(model.read_text())["data"]["columns"] == ["0", "1"]
    code, out, err = run(["predict", model, path, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0 and "accuracy on the 400 rows" in out, err
    df.columns = ["b", " b", "y"]
    df.to_parquet(path)
    code, _, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "duplicate column name(s) 'b' (2 times)" in err


def test_reading_options_are_checked_and_named(tmp_path, capsys):
    """--no-header on a Parquet file was accepted and did nothing; predict could not undo a
    model's header: false; predict's errors named a --text the user never gave; two empty
    header cells were 'nan' (2 times); an infinite target with the logistic loss gave
    scikit-learn's message."""
    df = _table()
    parquet, csv, model = tmp_path / "d.parquet", tmp_path / "d.csv", tmp_path / "m.json"
    df.to_parquet(parquet)
    code, _, err = run(["fit", parquet, *FIT, "--no-header"], capsys)
    assert code == 2 and "--no-header applies to CSV files only" in err
    df.to_csv(csv, index=False, header=False)
    code, _, err = run(["fit", csv, *FIT[2:], "--target", "3", "--no-header", "--text", "col2",
                        "--out", model], capsys)
    assert code == 0, err
    df.to_csv(csv, index=False)  # now with a header: predict is told so
    code, out, err = run(["predict", model, csv, "--out", tmp_path / "p.csv"], capsys)
    assert code == 2 and "'col1' was numeric at fit time" in err  # the header read as data
    code, out, err = run(["predict", model, csv, "--header", "--out", tmp_path / "p.csv"],
                         capsys)  # the model's col2 (--text) is not a column of this file:
    assert code == 2 and "lacks the column(s) ['col1', 'col2']" in err  # the schema says so
    rows = df.to_csv(index=False).splitlines()
    rows[0] = "a,,"
    csv.write_text("\n".join(rows) + "\n")
    code, _, err = run(["fit", csv, *FIT[2:]], capsys)
    assert code == 0, err  # pandas' names Unnamed: 1 and Unnamed: 2 are two names
    df["y"] = df["y"].astype(float)
    df.loc[4, "y"] = np.inf
    df.to_csv(csv, index=False)
    code, _, err = run(["fit", csv, *FIT], capsys)
    assert code == 2 and "the target column 'y' holds an infinite number" in err


def test_a_stray_quote_does_not_swallow_the_records_after_it(tmp_path, capsys):
    """A second fuzz: one record's cell ``"a`` opened a quoted field that pandas closed at
    the next quote anywhere in the file (here ``b"``, read literally 290 records on), so
    those records became one cell and the fit ran on n = 110 instead of 400, unrefused. A
    cell spanning lines is now refused, in fit and in predict."""
    rows = _table().astype(str).values.tolist()
    rows[300][1] = 'b"'
    path, model = tmp_path / "d.csv", tmp_path / "m.json"
    for cell, code_wanted in (("a", 0), ('"a', 2)):
        rows[10][1] = cell
        path.write_text("a,b,y\n" + "\n".join(",".join(r) for r in rows) + "\n")
        code, out, err = run(["fit", path, *FIT, "--out", model], capsys)
        assert code == code_wanted, err
    assert "['b'] hold a cell (or a name) that spans lines" in err and out == ""
    code, _, err = run(["predict", model, path, "--out", tmp_path / "p.csv"], capsys)
    assert code == 2 and "spans lines" in err


@pytest.mark.parametrize("suffix", [".csv.gz", ".csv.bz2", ".csv.xz"])
def test_a_broken_compressed_file_is_an_error_that_quotes_nothing(tmp_path, capsys, suffix):
    """A truncated file raised EOFError, a file that is not xz LZMAError (tracebacks); a file
    that is not gzip quoted its first bytes (the first record's cell without a header)."""
    import bz2
    import gzip
    import lzma

    text = _table().to_csv(index=False).encode()
    packed = {".csv.gz": gzip, ".csv.bz2": bz2, ".csv.xz": lzma}[suffix].compress(text)
    path = tmp_path / f"d{suffix}"
    path.write_bytes(packed[: len(packed) // 2])
    code, _, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "the compressed file ends early" in err
    path.write_bytes(b"zq7193" + text)  # a mark no temporary folder's name holds
    code, _, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "cannot read" in err and "zq7193" not in err.replace(str(path), "")


def test_the_separator_and_declared_names_follow_the_file_not_its_folder(tmp_path, capsys):
    """A CSV in a folder named ``runs.tsv`` was read with tabs (one column); a column named
    ``size, cm`` could not be declared (``--numbers 'size, cm'`` was split at its comma)."""
    df = _table()
    df.columns = ["size, cm", "b", "y"]
    df["size, cm"] = df["size, cm"].astype(object)
    df.loc[3, "size, cm"] = "n/k"
    folder = tmp_path / "runs.tsv"
    folder.mkdir()
    path = folder / "d.csv"
    df.to_csv(path, index=False)
    code, _, err = run(["fit", path, *FIT], capsys)
    assert code == 2 and "['size, cm'] hold cells of more than one kind" in err
    code, out, err = run(["fit", path, *FIT, "--numbers", "size, cm", "--text", "b,zz"], capsys)
    assert code == 2 and "--text: ['zz'] not a column" in err  # not a name: split at commas
    code, out, err = run(["fit", path, *FIT, "--numbers", "size, cm"], capsys)
    assert code == 0, err
    assert "(n=400, p=" in out and "declared --numbers (public): size, cm" in out
