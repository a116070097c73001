"""Whether a default fit has enough rows to release anything reliable, from public (n,
epsilon, delta) only.

Every default fit releases at least a constant predictor: a regressor the private mean of
y, a classifier a label read from private counts. Both start with a noisy count that must
clear a threshold: a bin of y's histogram on the public log grid, or a label's count.

* Classifier whose labels are selected (no ``classes=``, y not bool): a label held by all n
  records must clear the selection's threshold at its largest share
  (:data:`~dpopt.preprocessing.labels.MAX_LABEL_SHARE`) and the largest delta it may get
  (the labels as the only selected partition): n >= tau. Below, even such a label is kept
  with probability below one half, so the fit could release nothing. (Above, a table whose
  labels are balanced can still keep none: that failure is the selection's outcome, charged
  as before.)
* Regressor with an intercept and no public ``target_bounds``: the histogram of y with the
  whole mu of (epsilon, delta) must resolve a decade of values on the default grid,
  :func:`~dpopt.preprocessing._bounds.bounds_resolvable` (the rule by which the default path
  decides, at 30% of mu, whether a model is possible): n mu >= 4 bins * 4.5 sd * sqrt(2),
  about 25.5. Below, the coarser grids the private mean falls back on can still place a
  bin, but what followed was mostly a guess: the constant 0 when no bin cleared the noise,
  a bin the noise placed anywhere, or a located range one bin of the log grid wide whose
  mean carried noise of several standard deviations of y (R^2 from -0.06 to -55 on 30 to
  90 rows of real tables at epsilon <= 1; docs/default_path.md). It is a policy line, not
  an impossibility: 60 rows at epsilon = 1 (n mu = 20.5) released constants of R^2 -0.06
  to -0.10, now refused.

Such a fit raises :class:`~dpopt._core.exceptions.NotReleasableError` (a ValueError) before
any release (after the free checks of the input), saying what would lift it: nothing is
spent.
"""

from __future__ import annotations

import numpy as np

from dpopt._core.exceptions import NotReleasableError
from dpopt.preprocessing._bounds import bounds_resolvable, resolvable_n_mu
from dpopt.preprocessing.labels import MAX_LABEL_SHARE, declared_classes, label_selection
from dpopt.privacy import gdp_mu

__all__ = ["check_releasable", "target_range_locatable", "label_threshold"]


def target_range_locatable(n, epsilon, delta):
    """Whether the whole budget can locate a regression target's range (module docstring)."""
    return bounds_resolvable(n, 1, gdp_mu(epsilon, delta))


def label_threshold(epsilon, delta):
    """The least threshold the labels' selection can have at (epsilon, delta): its largest
    share of mu^2 and all of the threshold's delta (:func:`~dpopt.preprocessing.labels.label_selection`)."""
    return label_selection(0, epsilon, delta, share=MAX_LABEL_SHARE)[3]


def check_releasable(n, y, epsilon, delta, *, classifier, fit_intercept=True, classes=None,
                     target_bounds=None):
    """Raise :class:`NotReleasableError` when the default fit of n records (target ``y``:
    its dtype may declare the labels) at (epsilon, delta) has too few rows to release
    anything reliable (module docstring)."""
    if classifier:
        labels = y if y is None or hasattr(y, "dtype") else np.asarray(y)
        if classes is not None or declared_classes(labels, None) is not None:
            return
        tau = label_threshold(epsilon, delta)
        if n < tau:
            raise NotReleasableError(
                f"n_samples={n} is too few to release a label privately at epsilon={epsilon:g}: "
                f"a label must be held by about {int(np.ceil(tau))} records to clear the label "
                f"selection's noise, so the fit could release nothing; nothing was spent. "
                f"Declare the labels with classes=[...], or use a larger epsilon or more rows")
        return
    if not fit_intercept or target_bounds is not None or target_range_locatable(n, epsilon,
                                                                                delta):
        return
    raise NotReleasableError(
        f"n_samples={n} is too few for a private fit at epsilon={epsilon:g}: the whole budget "
        f"cannot locate the target's range reliably (its histogram needs n * mu >= "
        f"{resolvable_n_mu(1):.1f}, here {n * gdp_mu(epsilon, delta):.1f}), and a constant "
        f"released without it is mostly a guess; nothing was spent. Give y's public range "
        f"(target_bounds=(lower, upper)), or use a larger epsilon or more rows")
