"""Whether a default fit can release anything at all, from public (n, epsilon, delta) only.

Every default fit releases at least a constant predictor: a regressor the private mean of
y, a classifier a label read from private counts. Both start with a noisy count that must
clear a threshold: a bin of y's histogram on the public log grid, or a label's count. When
even the whole budget cannot make that count clear its threshold, no release can follow
but a guess, and a guess is harm: a regressor then released 0, or a bin its noise placed
anywhere (R^2 -4 to -55 on 30 to 90 rows of scikit-learn's diabetes at epsilon <= 1), and a
classifier's label selection failed after it had spent the budget. Such a fit is refused
before any data is read, with a ValueError that says what would make it possible: nothing
is spent. The rules are the ones the fit itself runs, taken at their most lenient.

* Regressor with an intercept and no public ``target_bounds``: the target's histogram with
  the whole mu of (epsilon, delta) must be able to see its bulk,
  :func:`~dpopt.preprocessing._bounds.bounds_resolvable` (a decade of values spread over the
  grid's 4 bins of n / 4 records each, each above 4.5 noise standard deviations sqrt(2)/mu):
  n mu >= 4 * 4.5 * sqrt(2), about 25.5. The default path asks the same of 30% of mu before
  it fits a model (:func:`dpopt.pipeline.default_path.model_possible`).
* Classifier whose labels are selected (no ``classes=``, y not bool): a label held by all n
  records must clear the selection's threshold at its largest share
  (:data:`~dpopt.preprocessing.labels.MAX_LABEL_SHARE`) and the largest delta it may get
  (the labels as the only selected partition): n >= tau, else even such a label is kept
  with probability below one half.
"""

from __future__ import annotations

import math

from dpopt.preprocessing._bounds import DEFAULT_BIN_CONFIDENCE, DEFAULT_GRID, bounds_resolvable
from dpopt.preprocessing.labels import MAX_LABEL_SHARE, declared_classes
from dpopt.preprocessing.tables import delta_split, selection_threshold
from dpopt.privacy import gdp_mu

__all__ = ["check_releasable", "mean_locatable", "label_threshold"]


def mean_locatable(n, epsilon, delta):
    """Whether the whole budget can locate a regression target's range (module docstring)."""
    return bounds_resolvable(n, 1, gdp_mu(epsilon, delta))


def label_threshold(epsilon, delta):
    """The least threshold the labels' selection can have at (epsilon, delta): its largest
    share of mu^2 and all of the threshold's delta (:func:`dpopt.preprocessing.labels.label_prior`)."""
    delta_g, delta_sel = delta_split(delta, True)
    sigma = math.sqrt(2.0) / (gdp_mu(epsilon, delta_g) * math.sqrt(MAX_LABEL_SHARE))
    return selection_threshold(sigma, 1, delta_sel)


def check_releasable(n, y, epsilon, delta, classifier, fit_intercept=True, classes=None,
                     target_bounds=None):
    """Raise a ValueError, before anything is read or spent, when the default fit of n
    records (target ``y``: its dtype may declare the labels) at (epsilon, delta) could
    release nothing (module docstring)."""
    if classifier:
        if classes is not None or declared_classes(y, None) is not None:
            return
        tau = label_threshold(epsilon, delta)
        if n < tau:
            raise ValueError(
                f"n_samples={n} is too few to release a label privately at epsilon={epsilon:g}: "
                f"a label must be held by about {math.ceil(tau)} records to clear the label "
                f"selection's noise, so the fit could release nothing; nothing was spent. "
                f"Declare the labels with classes=[...], or use a larger epsilon or more rows")
        return
    if not fit_intercept or target_bounds is not None or mean_locatable(n, epsilon, delta):
        return
    mu = gdp_mu(epsilon, delta)
    need = DEFAULT_GRID.bins_per_decade * DEFAULT_BIN_CONFIDENCE * math.sqrt(2.0)
    raise ValueError(
        f"n_samples={n} is too few for a private fit at epsilon={epsilon:g}: even the whole "
        f"budget cannot locate the target's range (its histogram needs n * mu >= {need:.1f}, "
        f"here {n * mu:.1f}), so the fit could release only a guess; nothing was spent. Give "
        f"y's public range (target_bounds=(lower, upper)), or use a larger epsilon or more rows")
