"""How `dpopt fit` / `dpopt predict` read a table's columns and labels: a target named with
digits, a True/False target's labels, a table with no data rows, a header holding a number."""

import json

import numpy as np
import pandas as pd
import pytest

from _cli import run
from dpopt.cli.tables import target_column


def _frame(first, n=3000, seed=0):
    """Columns ``first`` (a 0/1 label of ``a``), ``a`` (numbers), ``b`` (x / y / z text)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).round(3)
    label = (a + 0.5 * rng.standard_normal(n) > 0).astype(int)
    return pd.DataFrame({first: label, "a": a, "b": rng.choice(["x", "y", "z"], n)})


def _model(path):
    return json.loads(path.read_text())


def test_a_target_a_column_carries_as_its_name_is_that_column():
    names = ["3", "a", "b"]
    assert target_column("3", names) == 0  # the name, not the third column
    assert target_column("2", names) == 1  # no column named 2: a position
    assert target_column("-1", names) == 2
    assert target_column("2019", ["2019", "a", "b"]) == 0  # was: out of range
    assert target_column(3, names) == 2  # a Python int is a position
    with pytest.raises(ValueError, match="'3' names several columns"):
        target_column("3", ["3", "a", "3"])
    with pytest.raises(ValueError, match="column number 9 is out of range"):
        target_column("9", names)


@pytest.mark.parametrize("name", ["3", "2019"])
def test_fit_and_predict_take_a_digit_target_as_the_column_of_that_name(tmp_path, capsys, name):
    """A Parquet file with columns 3, a, b: --target 3 fitted on column b (3 text labels, a
    multiclass model) and --target 2019 was refused as out of range."""
    data, model, pred = tmp_path / "t.parquet", tmp_path / "m.json", tmp_path / "p.csv"
    _frame(name).to_parquet(data)
    code, out, err = run(["fit", data, "--target", name, "--loss", "logistic", "--epsilon", "1",
                          "--seed", "0", "--out", model], capsys)
    assert code == 0, err
    saved = _model(model)
    assert saved["data"]["target"] == name and saved["classes"] == [0, 1]
    assert saved["data"]["columns"] == ["a", "b"] and "0 -> -1, 1 -> +1" in out
    code, out, err = run(["predict", model, data, "--target", name, "--out", pred], capsys)
    assert code == 0, err
    assert float(out.split("rows with a target: ")[1].split()[0]) > 0.7
    code, _, err = run(["fit", data, "--target", "2", "--loss", "squared", "--epsilon", "1",
                        "--seed", "0", "--out", model], capsys)
    assert code == 0, err  # no column named 2: the second column, a
    assert _model(model)["data"]["target"] == "a"


@pytest.fixture
def bool_table(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(3000).round(3)
    frame = pd.DataFrame({"a": a, "b": rng.choice(["x", "y", "z"], 3000),
                          "t": a + 0.5 * rng.standard_normal(3000) > 0})
    frame.to_csv(tmp_path / "bool.csv", index=False)
    return tmp_path / "bool.csv"


def _fit_bool(path, tmp_path, capsys, *extra):
    model = tmp_path / "m.json"
    model.unlink(missing_ok=True)
    code, out, err = run(["fit", path, "--target", "t", "--loss", "logistic", "--epsilon", "1",
                          "--seed", "0", "--out", model, *extra], capsys)
    assert code == 0, err
    return out, _model(model)


def test_positive_label_of_a_true_false_target_is_read_as_a_bool(bool_table, tmp_path, capsys):
    """--positive-label true was refused against --classes true,false (str(True) is not
    "true"), and --positive-label false without --classes spent the budget, then was
    ignored; the report said a bool column's labels were chosen privately."""
    out, model = _fit_bool(bool_table, tmp_path, capsys, "--classes", "true,false",
                           "--positive-label", "true")
    assert "False -> -1, True -> +1" in out and model["classes"] == [False, True]
    out, model = _fit_bool(bool_table, tmp_path, capsys, "--positive-label", "FALSE")
    assert "True -> -1, False -> +1" in out and "warning" not in out
    assert model["classes"] == [True, False]
    negated = np.negative(model["coef"])
    # without --classes the labels are the column's, declared: the model of --classes false,true
    out, plain = _fit_bool(bool_table, tmp_path, capsys)
    assert "labels (declared by the True/False column, public): False -> -1, True -> +1" in out
    assert "labels (chosen privately)" not in out
    _, declared = _fit_bool(bool_table, tmp_path, capsys, "--classes", "false,true")
    assert plain["coef"] == declared["coef"] and plain["classes"] == declared["classes"]
    np.testing.assert_allclose(negated, plain["coef"])
    out, _ = _fit_bool(bool_table, tmp_path, capsys, "--positive-label", "1")
    assert "False -> -1, True -> +1" in out and "warning" not in out


@pytest.mark.parametrize("label, needle", [
    ("yes", "--positive-label: the target column holds True/False, got 'yes'"),
])
def test_a_positive_label_the_column_cannot_hold_is_refused_before_the_fit(
        bool_table, tmp_path, capsys, label, needle):
    model = tmp_path / "m.json"
    code, out, err = run(["fit", bool_table, "--target", "t", "--loss", "logistic",
                          "--epsilon", "1", "--positive-label", label, "--out", model], capsys)
    assert code == 2 and needle in err
    assert "privacy:" not in out and not model.exists()  # nothing spent, nothing written


def test_an_integer_target_refuses_a_fractional_positive_label(tmp_path, capsys):
    data = tmp_path / "i.csv"
    _frame("label")[["a", "b", "label"]].to_csv(data, index=False)
    code, out, err = run(["fit", data, "--loss", "logistic", "--epsilon", "1",
                          "--positive-label", "0.5"], capsys)
    assert code == 2 and "--positive-label: the target column holds integers" in err
    assert "privacy:" not in out
    code, out, err = run(["fit", data, "--loss", "logistic", "--epsilon", "1", "--seed", "0",
                          "--positive-label", "0.0"], capsys)
    assert code == 0 and "1 -> -1, 0 -> +1" in out, err


def test_a_table_with_no_data_rows_is_refused_as_csv_and_as_parquet(tmp_path, capsys):
    """A 0-row Parquet file was scored (exit 0, NumPy's "Mean of empty slice", accuracy nan)
    where the same table as CSV was refused."""
    train, model = tmp_path / "train.csv", tmp_path / "m.json"
    frame = _frame("t")[["a", "b", "t"]]
    frame.to_csv(train, index=False)
    code, _, err = run(["fit", train, "--loss", "logistic", "--epsilon", "1", "--seed", "0",
                        "--out", model], capsys)
    assert code == 0, err
    empty = frame.iloc[:0]
    empty.to_csv(tmp_path / "empty.csv", index=False)
    empty.to_parquet(tmp_path / "empty.parquet")
    for name in ("empty.csv", "empty.parquet"):
        pred = tmp_path / f"{name}.pred.csv"
        code, out, err = run(["predict", model, tmp_path / name, "--out", pred], capsys)
        assert code == 2 and f"{name}' has no data rows" in err, (out, err)
        assert not pred.exists() and "nan" not in out
        code, _, err = run(["fit", tmp_path / name, "--loss", "logistic", "--epsilon", "1"],
                           capsys)
        assert code == 2 and f"{name}' has no data rows" in err


@pytest.mark.parametrize("header, kinds, flagged", [
    ("3,a,b", "int,float,text", [1]),
    ("3,flag,b", "int,bool,text", [1]),
    ("id,3,score", "text,float,float", [2]),
])
def test_a_header_naming_a_column_with_a_number_is_refused(
        tmp_path, capsys, header, kinds, flagged):
    """A header 3,a,b was read as data (one cell is a number): n off by one and column a
    made text by its one cell "a", with no warning. The first row is the header unless
    --no-header says otherwise, and a name that is a number is refused, naming it."""
    rng = np.random.default_rng(0)
    make = {"int": lambda: rng.integers(0, 2, 500), "float": lambda: rng.standard_normal(500),
            "bool": lambda: rng.random(500) < 0.5, "text": lambda: rng.choice(["p", "q"], 500)}
    columns = [make[k]() for k in kinds.split(",")]
    data, model = tmp_path / "h.csv", tmp_path / "m.json"
    data.write_text("\n".join([header, *(",".join(map(str, r)) for r in zip(*columns))]) + "\n")
    code, out, err = run(["fit", data, "--loss", "logistic", "--epsilon", "1", "--out", model],
                         capsys)
    assert code == 2 and f"its column(s) {flagged} (numbered from 1) are named by numbers" in err
    assert "--no-header" in err and "'x3'" in err
    assert "privacy:" not in out and not model.exists()


def _headerless(tmp_path, first):
    """A CSV without a header whose first record is ``first`` (a, colour, label)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(800).round(3)
    colour = rng.choice(["red", "blue"], 800)
    label = ["yes" if x + (c == "red") > 0.5 else "no" for x, c in zip(a, colour)]
    rows = [f"{x},{c},{y}" for x, c, y in zip(a, colour, label)]
    rows[0] = first
    data = tmp_path / "noheader.csv"
    data.write_text("\n".join(rows) + "\n")
    return data


@pytest.mark.parametrize("first", ["0.5,alice_smith,yes", ",alice_smith,yes"])
def test_whether_the_first_row_is_data_is_declared_not_read_from_it(tmp_path, capsys, first):
    """Before, the first row was a header when none of its cells was a number: a record
    whose number was missing became the header, its values printed in the report and
    written to the model file as column names (n off by one), where its neighbour with
    the number was data. With --no-header both are data; without it, the first row is the
    header whatever it holds (a number in it is refused)."""
    data, model = _headerless(tmp_path, first), tmp_path / "m.json"
    fit = ["fit", data, "--loss", "logistic", "--epsilon", "2", "--seed", "0", "--out", model]
    code, out, err = run([*fit, "--no-header"], capsys)
    assert code == 0, err
    assert "(n=800, p=" in out and "alice_smith" not in out
    saved = _model(model)
    assert saved["data"]["columns"] == ["col1", "col2"] and saved["data"]["header"] is False
    code, out, err = run(["predict", model, data, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0, err  # read without a header, as the fit read it
    assert "(n=800)" in out
    code, out, err = run(fit, capsys)
    if first[0] == ",":  # the declared reading: this row is the header
        assert code == 0 and "(n=799, p=" in out, err
    else:
        assert code == 2 and "pass --no-header" in err


def test_labels_an_explicit_solver_reads_from_the_data_are_not_called_private(tmp_path, capsys):
    """With --solver the estimator reads np.unique(y) without privacy (a PrivacyLeakWarning);
    the report's labels line said "chosen privately"."""
    data = tmp_path / "s.csv"
    _frame("label")[["a", "label", "b"]].to_csv(data, index=False)
    code, out, err = run(["fit", data, "--loss", "logistic", "--epsilon", "1", "--seed", "0",
                          "--solver", "dp-gd", "--target", "b"], capsys)
    assert code == 0, err
    assert "labels (read from the data by the solver: NOT private): 'x', 'y', 'z'" in out


def _neighbours(tmp_path, row=5):
    """Two CSVs of one table that differ in one record: in the second, column ``a`` of
    record ``row`` holds the text ``oops`` instead of its number."""
    df = _frame("y")
    df.to_csv(tmp_path / "d.csv", index=False)
    df["a"] = df["a"].astype(object)
    df.loc[row, "a"] = "oops"
    df.to_csv(tmp_path / "d2.csv", index=False)
    return tmp_path / "d.csv", tmp_path / "d2.csv"


@pytest.mark.parametrize("row", [5, 2500])  # within and beyond the rows read first
def test_one_text_cell_does_not_turn_a_numeric_column_into_text(tmp_path, capsys, row):
    """Before, pandas read column ``a`` of the second neighbour as text: the model lost the
    column (its levels none) while the first neighbour's kept it, an unpaid change of the
    model. Now a column mixing kinds is refused before anything is fitted, and declared
    ``--numbers`` both neighbours give a model of one structure."""
    d, d2 = _neighbours(tmp_path, row)
    model = tmp_path / "m.json"
    fit = ["--target", "y", "--loss", "logistic", "--epsilon", "1", "--seed", "0", "--out", model]
    code, out, err = run(["fit", d2, *fit], capsys)
    assert code == 2 and "['a'] hold cells of more than one kind" in err
    assert "--numbers NAME" in err and "oops" not in err  # the cell is not quoted
    assert out == "" and not model.exists()  # nothing fitted, nothing written
    tables = []
    for path in (d, d2):
        code, out, err = run(["fit", path, *fit, "--numbers", "a"], capsys)
        assert code == 0, err
        assert "declared --numbers (public): a" in out
        saved = _model(model)
        tables.append([(c["name"], c["kind"]) for c in saved["data"]["table"]["columns"]])
        assert saved["data"]["kinds"] == {"text": [], "numbers": ["a"]}
    assert tables[0] == tables[1] == [("a", "numeric"), ("b", "string")]
    code, out, err = run(["predict", model, d2, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0, err  # read as the fit declared: 'oops' is a missing number
    assert float(out.split("rows with a target: ")[1].split()[0]) > 0.7


def test_declared_text_keeps_the_cells_as_written_and_predict_reads_it_so(tmp_path, capsys):
    """--text zip: '01234' stays '01234' (pandas alone reads 1234.0); the model file records
    the declaration and dpopt predict reads the column the same way."""
    rng = np.random.default_rng(1)
    n = 3000
    zips = rng.choice(["01234", "02139", "10001"], n)
    y = (zips == "02139").astype(int) ^ (rng.random(n) < 0.1)
    data, model = tmp_path / "z.csv", tmp_path / "m.json"
    pd.DataFrame({"zip": zips, "y": y}).to_csv(data, index=False)
    code, out, err = run(["fit", data, "--text", "zip", "--loss", "logistic", "--epsilon", "2",
                          "--seed", "0", "--out", model], capsys)
    assert code == 0, err
    (column,) = _model(model)["data"]["table"]["columns"]
    assert column["kind"] == "string" and sorted(column["levels"]) == ["01234", "02139", "10001"]
    code, out, err = run(["predict", model, data, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0, err
    assert float(out.split("rows with a target: ")[1].split()[0]) > 0.85


def test_kinds_mixing_true_false_and_text_are_refused_and_declarations_are_checked(
        tmp_path, capsys):
    df = _frame("y", n=200)
    df["t"] = np.where(np.arange(200) % 2 == 0, "True", "False")
    df.loc[7, "t"] = "maybe"
    data, npz = tmp_path / "t.csv", tmp_path / "d.npz"
    df.to_csv(data, index=False)
    fit = ["fit", data, "--target", "y", "--loss", "logistic", "--epsilon", "1"]
    code, _, err = run(fit, capsys)
    assert code == 2 and "['t'] hold cells of more than one kind" in err
    code, _, err = run([*fit[:2], "--target", "nope", *fit[4:]], capsys)
    assert code == 2 and "target 'nope' is not a column" in err  # the argument first
    code, _, err = run([*fit, "--text", "t,zz"], capsys)
    assert code == 2 and "--text: ['zz'] not a column of the table" in err
    code, _, err = run([*fit, "--text", "t", "--numbers", "t"], capsys)
    assert code == 2 and "['t'] declared both --text and --numbers" in err
    code, _, err = run([*fit, "--text", "a,,b"], capsys)
    assert code == 2 and "expected column names separated by commas" in err
    np.savez(npz, X=np.zeros((4, 2)), y=np.arange(4.0))
    code, _, err = run(["fit", npz, "--loss", "squared", "--epsilon", "1", "--text", "a"],
                       capsys)
    assert code == 2 and "--text, --numbers and --categories apply to tables" in err


def test_a_parquet_columns_declared_kinds(tmp_path):
    """A Parquet text column is text by its schema, even where its cells read as numbers
    (session 48: ZIP codes such as "02139" were refused as mixed, as a CSV's cells are);
    declared, a float column reads as text (a whole number as a CSV writes an integer
    code: "2", not "2.0"; an integer code column with a missing cell is float in Parquet)
    and a text column as numbers."""
    from dpopt.cli.tables import Reading, read_table

    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": [1.5, 2.0, None], "b": ["1", "x", None], "zip": ["02139", "10001", None],
                  "y": [1.0, 2.0, 3.0]}).to_parquet(path)
    X, _, _, _ = read_table(path, target="y")
    assert X["b"].tolist()[:2] == ["1", "x"] and X["zip"].tolist()[:2] == ["02139", "10001"]
    X, _, _, _ = read_table(path, Reading(text=("a",), numbers=("b",)), target="y")
    assert X["b"].tolist()[0] == 1.0 and np.isnan(X["b"].tolist()[1:]).all()
    assert [str(v) if pd.notna(v) else None for v in X["a"]] == ["1.5", "2", None]


def test_a_parquet_files_repeated_column_name_is_named(tmp_path, capsys):
    """pyarrow refused it as "not a readable table (ArrowInvalid)"; it is named as a CSV
    header's is. A pandas index stored beside the columns is not a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpopt.cli.tables import read_frame

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table([pa.array([1.0, 2.0]), pa.array([3.0, 4.0]), pa.array([0, 1])],
                            names=["a", "a", "y"]), path)
    code, _, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1"], capsys)
    assert code == 2 and "duplicate column name(s) 'a' (2 times)" in err
    for index in (None, [5, 6]):
        pd.DataFrame({"a": [1.0, 2.0], "y": [0, 1]}, index=index).to_parquet(path)
        assert list(read_frame(path).columns) == ["a", "y"]


@pytest.mark.parametrize("cell", ["99999999999999999999", "1_000", "\uff11\uff12"])
def test_a_number_the_reader_takes_for_text_is_refused(tmp_path, cell):
    """An independent audit: Python's float() takes these cells for numbers, pandas' parser
    for text, so the column of numbers became a text column (its levels selected, or
    target-coded) through one cell, past the check of mixed kinds."""
    from dpopt.cli.tables import Reading, read_table

    df = _frame("y", n=500)
    df["a"] = (df["a"] * 100).round().astype(int).astype(object)  # integers: pandas reads a
    df.loc[1, "a"] = cell  # 20-digit one among them as a Python int, the column as text
    df.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=r"\['a'\] hold cells of more than one kind"):
        read_table(tmp_path / "d.csv", target="y")
    X, _, _, _ = read_table(tmp_path / "d.csv", Reading(numbers=("a",)), target="y")
    assert X["a"].dtype == np.float64


def test_one_label_written_as_a_float_does_not_change_the_labels_type(tmp_path, capsys):
    """An independent audit: one cell 0.0 among 0/1 labels made pandas read the column as
    floats, and the model file's classes, the report and the predictions 0.0 / 1.0."""
    df = _frame("y")[["a", "y"]]
    df.to_csv(tmp_path / "c0.csv", index=False)
    df["y"] = df["y"].astype(object)
    df.loc[0, "y"] = float(df.loc[0, "y"])
    df.to_csv(tmp_path / "c1.csv", index=False)
    saved = []
    for name in ("c0", "c1"):
        model = tmp_path / f"{name}.json"
        code, out, err = run(["fit", tmp_path / f"{name}.csv", "--loss", "logistic",
                              "--epsilon", "1", "--seed", "0", "--out", model], capsys)
        assert code == 0, err
        assert "0 -> -1, 1 -> +1" in out
        saved.append(_model(model))
    assert saved[0]["classes"] == saved[1]["classes"] == [0, 1]
    assert saved[0]["coef"] == saved[1]["coef"]
