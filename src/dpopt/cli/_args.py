"""Argument types and the help formatter of the ``dpopt`` command line: each type checks
its value with the library's own checks and names the option in its error."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after every option whose default is a value; options whose
    default is None or a flag say in their help what happens when they are absent."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.required:
            return action.help
        return super()._get_help_string(action)


def _checked_number(check):
    """An argparse type: float(text) checked by ``check``; its ValueError becomes the
    argument's error message."""
    def convert(text):
        try:
            return check(float(text))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc) if "could not convert" not in str(exc)
                                             else f"not a number: {text!r}") from None
    return convert


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _option(text):
    """KEY=VALUE; VALUE parsed as JSON (numbers, true/false, lists), else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _lo_hi(pair):
    """LO:HI as two floats, or None when it is not that form (the callers word the error)."""
    lo, colon, hi = pair.partition(":")
    try:
        return (float(lo), float(hi)) if colon else None
    except ValueError:
        return None


def _target_bound(text):
    """LO:HI (``--target-bounds``): a regression target's public range, finite LO < HI."""
    got = _lo_hi(text)
    if got is None:
        raise argparse.ArgumentTypeError(f"expected LO:HI (e.g. 0:100), got {text!r}")
    a, b = got
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise argparse.ArgumentTypeError(f"need finite LO < HI, got {text!r}")
    return a, b


def _feature_bound(text):
    """NAME=LO:HI (``--feature-bounds``, repeatable): one column's public bounds. The
    column name is checked against the data when it is read (the estimator's
    ``feature_bounds=`` names the column in its error); here the form and the numbers."""
    name, sep, pair = text.rpartition("=")
    if not sep or not name.strip() or ":" not in pair:
        raise argparse.ArgumentTypeError(f"expected NAME=LO:HI (e.g. age=17:90), got {text!r}")
    got = _lo_hi(pair)
    if got is None:
        raise argparse.ArgumentTypeError(f"column {name.strip()!r}: LO and HI must be numbers, "
                                         f"got {pair!r}")
    a, b = got
    if not (math.isfinite(a) and math.isfinite(b) and a <= b):
        raise argparse.ArgumentTypeError(f"column {name.strip()!r}: need finite LO <= HI, "
                                         f"got {pair!r}")
    return name.strip(), (a, b)


def _category_levels(text):
    """NAME=A,B,... (``--categories``, repeatable): a column's public levels, as text here;
    read in the column's kind once the table is read (``dpopt.cli.fit``)."""
    name, sep, levels = text.partition("=")
    parts = [v.strip() for v in levels.split(",")]
    if not sep or not name.strip() or not all(parts):
        raise argparse.ArgumentTypeError(f"expected NAME=LEVEL,LEVEL,... (e.g. size=S,M,L), "
                                         f"got {text!r}")
    return name.strip(), parts


def _names(text):
    """NAME[,NAME...] (``--text``, ``--numbers``, repeatable), stripped and kept whole: a
    column whose name holds a comma is that column, and any other text is split at its
    commas when the table's names are known (``dpopt.cli.tables``)."""
    if not all(name.strip() for name in text.split(",")):
        raise argparse.ArgumentTypeError(f"expected column names separated by commas, "
                                         f"got {text!r}")
    return [text.strip()]


def check_output_path(path, inputs=()):
    """--out must be a writable file in an existing directory, and none of the command's
    ``inputs`` (the data, the model): writing it would destroy what it was made from.
    Checked before the fit, or before ``dpopt predict`` reads anything."""
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir() or str(path).endswith(("/", os.sep)):
        raise ValueError(f"--out: {path!r} is a directory; give a file name")
    if not parent.is_dir():
        raise ValueError(f"--out: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"--out: {path!r} is not writable")
    for name, given in inputs:
        if out.exists() and Path(given).exists() and os.path.samefile(out, given):
            raise ValueError(f"--out: {path!r} is the {name} this command reads; write the "
                             f"output to another file")
        inside = Path(given).is_dir() and Path(given).resolve() in (
            parent.resolve(), *parent.resolve().parents)
        if inside:
            raise ValueError(f"--out: {path!r} is in the directory of Parquet files that is "
                             f"the {name} this command reads (a later read would take it for "
                             f"data); write the output elsewhere")


#: The estimators' arguments a fit's message may recommend, as the command line spells them.
FLAGS = {"target_bounds=(lower, upper)": "--target-bounds LO:HI",
         "classes=[...]": "--classes A,B,..."}


def flag_words(text):
    """``text`` (a fit's error, warning or report) with the estimator arguments it recommends
    named as the command line's flags (:data:`FLAGS`)."""
    for name, flag in FLAGS.items():
        text = text.replace(name, flag)
    return text
