"""Where a data file is malformed, found by the readers' own scan after a parse failed.

NumPy's and scikit-learn's parse errors quote the cell they could not read ("could not
convert string 'x' to float64"); the file readers of :mod:`dpopt.datasets.loaders` do not
pass those messages on, since a message goes wherever logs go and a cell is a record's
value. These functions read the file again, line by line, and return a description of
the first problem that names only its place (line, column, entry, feature index), or
None when the scan finds nothing (the reader then gives a generic message). They run
only after a parse has failed, so the valid files are read once. :func:`is_number`, their
test of a cell, is also the readers' own (a CSV header, an Adult field).
"""

from __future__ import annotations

__all__ = ["is_number", "first_non_utf8_line", "csv_problem", "libsvm_problem"]


def is_number(text):
    """Whether ``float`` reads ``text`` (a cell, a field, bytes of a token)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _lines(path):
    """``(line number from 1, bytes)`` of every line of the file."""
    with open(path, "rb") as fh:
        yield from enumerate(fh, start=1)


def first_non_utf8_line(path):
    """The number of the first line that is not UTF-8 text, or None."""
    for number, raw in _lines(path):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return None


def csv_problem(path, delimiter, skip, n_columns, names=None):
    """The first data line (after ``skip`` lines) whose field count is not ``n_columns``
    or with a cell that is not a number, as ``"line N ..."`` (with the column's header
    name when ``names`` is given); None if none. Text after ``#`` is a comment and a blank
    line is skipped (as ``numpy.loadtxt`` does)."""
    # lazy: the csv module is only needed after a failed parse
    import csv

    for number, raw in _lines(path):
        if number <= skip:
            continue
        try:
            line = raw.decode("utf-8").split("#", 1)[0]
        except UnicodeDecodeError:
            return f"line {number} is not UTF-8 text"
        if not line.strip():
            continue
        cells = next(csv.reader([line], delimiter=delimiter, quotechar='"'), [])
        if len(cells) != n_columns:
            return f"line {number} has {len(cells)} field(s), the first row has {n_columns}"
        for j, cell in enumerate(cells):
            if not is_number(cell):
                name = "" if names is None else f" ({names[j]!r})"
                return f"line {number}, column {j + 1}{name} is empty or not a number"
    return None


def _entry_problem(token, k, previous):
    """What is wrong with the ``k``-th ``index:value`` entry of a line (None if nothing),
    and its feature index."""
    index, colon, value = token.partition(b":")
    if index == b"qid":
        return (None if value.isdigit() else f"entry {k} (qid) is not an integer"), previous
    if not colon:
        return f"entry {k} is not of the form index:value", previous
    try:
        i = int(index)
    except ValueError:
        return f"entry {k}: the feature index is not an integer", previous
    if i < 0 or i <= previous:
        return (f"entry {k}: feature index {i} is negative or not larger than the one "
                f"before"), previous
    if not is_number(value):
        return f"entry {k} (feature index {i}): the value is not a number", i
    return None, i


def _line_problem(tokens):
    """``(problem or None, largest feature index)`` of the tokens of one line."""
    if not is_number(tokens[0]):
        return "the label is not a number", -1
    previous = -1
    for k, token in enumerate(tokens[1:], start=1):
        problem, previous = _entry_problem(token, k, previous)
        if problem is not None:
            return problem, previous
    return None, previous


def libsvm_problem(path, n_features=None):
    """The first malformed line of a LIBSVM/svmlight file as ``"line N: ..."`` (or the
    first feature index beyond ``n_features``); None if the scan finds nothing."""
    largest, where, zero_based = -1, None, False
    for number, raw in _lines(path):
        tokens = raw.split(b"#", 1)[0].split()
        if not tokens:
            continue
        problem, top = _line_problem(tokens)
        if problem is not None:
            return f"line {number}: {problem}"
        zero_based = zero_based or any(t.startswith(b"0:") for t in tokens[1:])
        if top > largest:
            largest, where = top, number
    columns = largest + 1 if zero_based else largest
    if n_features is not None and columns > n_features:
        return (f"line {where}: feature index {largest} is beyond n_features={n_features} "
                f"({'zero' if zero_based else 'one'}-based indices)")
    return None
