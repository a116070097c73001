"""Audit of the table layer's private selection: a label or a category held by one record.

The distinguishing game of :mod:`dpopt.api.audit`, played on the releases of
:func:`dpopt.preprocessing.table_encoder.prepare_default` (the labels' and the columns'
partition selection of the default path). Two replace-one neighbours of n records differ in one record:

* ``kind="label"``: labels "a" (half of the rows) and "b", except one record labelled
  "rare0" in D0 and "rare1" in D1 (the issue's example: 49 zeros and a 1 against 49 zeros
  and a 2, with a well-populated second class so that a fit exists);
* ``kind="category"``: a string column with "x" and "y", except one record holding "rare0"
  in D0 and "rare1" in D1 (a regression target, so only the column is selected);
* ``kind="counts"``: two declared labels "a" and "b", one record labelled "a" in D0 and "b"
  in D1; the release is the declared labels' noisy counts
  (:func:`dpopt.preprocessing.table_encoder.noisy_class_counts`), and the score of a run is
  its noisy count of "a" minus that of "b" (a threshold test on it is the likelihood-ratio
  test of the Gaussian release);
* ``kind="reference"``: a declared categorical column with levels "x" and "y", one record
  holding "x" in D0 and "y" in D1, under the reference coding of ``inference=True``; the
  release is the column's noisy counts (every key public), and the score of a run is its
  noisy count of "x" minus that of "y", as for ``"counts"``.

The score of a run is +1 when its output contains "rare0", -1 when it contains "rare1", 0
otherwise; the audit reports the empirical lower bound on epsilon of the best threshold
test on these scores (:func:`dpopt.api.audit.empirical_epsilon`) and how often the value held by
one record was released, with its Clopper-Pearson upper bound: the threshold makes that at
most ``delta_sel`` (a tenth of the fit's delta, :data:`dpopt.preprocessing.tables.SELECTION_DELTA_SHARE`),
so over a few thousand runs at a large delta it should essentially never be seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpopt.api.audit import clopper_pearson_upper, empirical_epsilon
from dpopt.preprocessing.table_encoder import prepare_default

__all__ = ["SelectionAudit", "selection_audit", "neighbours"]

#: The kinds whose release is a Gaussian over public keys, scored by a count difference.
COUNTS = ("counts", "reference")


@dataclass(frozen=True)
class SelectionAudit:
    kind: str
    epsilon: float
    delta: float
    epsilon_lb: float
    released: int  # runs on D0 whose output held the value of one record
    released_upper: float  # its Clopper-Pearson upper bound (rate, at ``confidence``)
    delta_sel: float
    n_runs: int

    @property
    def consistent(self) -> bool:
        return self.epsilon_lb <= self.epsilon

    def summary(self) -> str:
        head = (f"selection audit ({self.kind}): epsilon lower bound {self.epsilon_lb:.3f} vs "
                f"claimed {self.epsilon:g} ({'consistent' if self.consistent else 'VIOLATED'})")
        if self.kind in COUNTS:  # a Gaussian over public keys: nothing is thresholded
            return f"{head}; {self.n_runs} runs per neighbour"
        return (f"{head}; the value of one record released in {self.released}/{self.n_runs} "
                f"runs (rate <= {self.released_upper:.2g} at 95%; threshold delta_sel "
                f"{self.delta_sel:.2g})")


def neighbours(kind, n):
    """``((X0, y0), (X1, y1))``: replace-one neighbours differing in one label / category."""
    base = np.array(["a"] * (n // 2) + ["b"] * (n - n // 2), dtype=object)
    if kind == "label":
        X = np.zeros((n, 1))
        y0, y1 = base.copy(), base.copy()
        y0[-1], y1[-1] = "rare0", "rare1"
        return (X, y0), (X, y1)
    if kind == "category":
        col = np.where(base == "a", "x", "y").astype(object)
        c0, c1 = col.copy(), col.copy()
        c0[-1], c1[-1] = "rare0", "rare1"
        y = np.linspace(0.0, 1.0, n)
        return (pd.DataFrame({"city": c0}), y), (pd.DataFrame({"city": c1}), y)
    if kind == "counts":
        X = np.zeros((n, 1))
        y0, y1 = base.copy(), base.copy()
        y0[-1], y1[-1] = "a", "b"
        return (X, y0), (X, y1)
    if kind == "reference":
        col = np.where(base == "a", "x", "y").astype(object)
        c0, c1 = col.copy(), col.copy()
        c0[-1], c1[-1] = "x", "y"
        y = np.linspace(0.0, 1.0, n)
        return (pd.DataFrame({"kind": c0}), y), (pd.DataFrame({"kind": c1}), y)
    raise ValueError(f"kind must be 'label', 'category', 'counts' or 'reference', got {kind!r}")


def _released(kind, X, y, epsilon, delta, rng):
    """The set of released values of one run of the default path's table releases (for
    ``kind="counts"``, the difference of the two noisy counts)."""
    counts = kind == "counts"
    _, _, classes, encoder, _, prior = prepare_default(
        X, y, epsilon=epsilon, delta=delta, feature_bounds=None,
        categories={"kind": ["x", "y"]} if kind == "reference" else None,
        classes=["a", "b"] if counts else None, classifier=kind in ("label", "counts"),
        rng=rng, count_declared=counts,
        coding="reference" if kind == "reference" else "one-hot")
    if counts:
        a, b = prior.info["label_counts"]
        return a - b, prior.delta
    if kind == "reference":
        released = encoder.schema.counts["kind"]
        return released["x"] - released["y"], prior.delta
    if kind == "label":
        return {str(c) for c in classes}, prior.delta
    return set(encoder.schema.columns[0].levels), prior.delta


def selection_audit(kind="label", *, epsilon=1.0, delta=1e-3, n=200, n_runs=2000,
                    random_state=0, confidence=0.95) -> SelectionAudit:
    """Run the game (module docstring) ``n_runs`` times on each neighbour."""
    (X0, y0), (X1, y1) = neighbours(kind, n)
    seeds = np.random.SeedSequence(random_state).spawn(2 * n_runs)
    scores = np.zeros((2, n_runs))
    delta_sel = 0.0
    for b, (X, y) in enumerate(((X0, y0), (X1, y1))):
        for k in range(n_runs):
            try:
                out, delta_sel = _released(kind, X, y, epsilon, delta,
                                           np.random.default_rng(seeds[b * n_runs + k]))
            except ValueError:  # the labels' selection left one class: nothing released
                out = set()
            scores[b, k] = out if kind in COUNTS else ("rare0" in out) - ("rare1" in out)
    lb = empirical_epsilon(scores[1], scores[0], delta, confidence=confidence)[0]
    released = 0 if kind in COUNTS else int(np.sum(scores[0] > 0))
    level = 1.0 - (1.0 - confidence)
    return SelectionAudit(kind, epsilon, delta, lb, released,
                          float(clopper_pearson_upper(released, n_runs, level)), delta_sel,
                          n_runs)
