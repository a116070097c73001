"""Argument checks shared by the whole package.

Every check raises ``ValueError`` naming the argument and changes nothing
(docs/design.md invariant 7).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING

from dpopt._core.exceptions import WeakPrivacyWarning

if TYPE_CHECKING:
    import numpy as np


def check_scalar(value, name, *, low=None, high=None, low_open=False, high_open=False,
                 allow_inf=False, integer=False):
    """Return ``value`` as float (or int) after checking type and range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = int(value) if integer else float(value)
    if integer and not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        op = ">" if low_open else ">="
        raise ValueError(f"{name} must be {op} {low}, got {value!r}")
    if high is not None and (value > high or (high_open and value == high)):
        op = "<" if high_open else "<="
        raise ValueError(f"{name} must be {op} {high}, got {value!r}")
    return value


# Range of the privacy parameters accepted as a target or an accountant input anywhere in
# dpopt (solve, the estimators, the CLI, BudgetAccountant, calibrate / epsilon_of). Outside it
# a guarantee is either meaningless or beyond what the accountants can certify in float64;
# the reasoning is in docs/privacy.md ("Range of epsilon and delta").
#
# * epsilon >= 1e-6: by group privacy, an epsilon-DP fit changes by at most a factor
#   e^(n epsilon) when all n records change, so it can learn nothing unless n epsilon >> 1,
#   i.e. n >> 1e6 at the floor; the calibrated noise multipliers already exceed ~1e5 there
#   for a single step, and below it the relative grids of the PLD search (epsilon / 2000)
#   cost minutes and round epsilon(z) to 0.
# * epsilon <= 100 (or inf): e^100 ~ 3e43 bounds no likelihood ratio of interest; e^epsilon
#   overflows float64 at ~709. ``inf`` is the explicit "no privacy" value.
# * delta >= 1e-30: delta is a probability of failure; even 1/n^2 for n = 1e12 records is
#   1e-24. Below ~1e-20 dp-accounting's PLDs (tail mass e^-50 per step) cannot certify it.
# * delta < 1: delta >= 1 is no guarantee at all; delta > 1/n allows publishing a random
#   record in full and only warns (:func:`warn_if_delta_exceeds_one_over_n`).
MIN_EPSILON, MAX_EPSILON = 1e-6, 100.0
MIN_DELTA = 1e-30
#: Share of an estimator's delta that its table layer keeps for the selections of categories
#: and labels (``dpopt.preprocessing.tables.SELECTION_DELTA_SHARE``).
SELECTION_DELTA_SHARE = 0.1
#: The least delta an estimator's fit accepts: its Gaussian releases keep 1 -
#: ``SELECTION_DELTA_SHARE`` of it, which the accountants need at ``MIN_DELTA`` or above.
MIN_FIT_DELTA = MIN_DELTA / (1.0 - SELECTION_DELTA_SHARE)


def check_epsilon(epsilon, name="epsilon", *, target=True):
    """epsilon in [MIN_EPSILON, MAX_EPSILON] or ``inf`` (no privacy, no noise).

    ``target=False`` (a per-step parameter of a mechanism record, which may be a small
    share of a target) only checks epsilon > 0.
    """
    value = check_scalar(epsilon, name, low=0.0, low_open=True, allow_inf=True)
    if not target or math.isinf(value):
        return value
    if value < MIN_EPSILON:
        raise ValueError(f"{name}={value:g} is below {MIN_EPSILON:g}, far outside any useful range "
                         f"(the model could learn nothing; see docs/privacy.md)")
    if value > MAX_EPSILON:
        raise ValueError(f"{name}={value:g} is above {MAX_EPSILON:g}, which gives no privacy; "
                         f"use {name}=inf for a non-private run")
    return value


def check_delta(delta, name="delta", *, target=True):
    """delta in [MIN_DELTA, 1) (``target=False``: the open interval (0, 1))."""
    value = check_scalar(delta, name, low=0.0, high=1.0, low_open=True, high_open=True)
    if target and value < MIN_DELTA:
        raise ValueError(f"{name}={value:g} is below {MIN_DELTA:g}, far outside any useful range "
                         f"(the accountants cannot certify it; see docs/privacy.md)")
    return value


def warn_if_delta_exceeds_one_over_n(delta, n_samples, name="delta"):
    """Warn (:class:`dpopt.WeakPrivacyWarning`) when delta > 1/n.

    A mechanism that publishes one record chosen at random is (0, 1/n)-DP: with
    delta > 1/n the guarantee allows releasing a record in full.
    """
    if n_samples >= 1 and delta > 1.0 / n_samples:
        warnings.warn(f"{name}={delta:g} is larger than 1/n = {1.0 / n_samples:.3g} (n={n_samples}): "
                      f"such a guarantee allows publishing a random record in full; use "
                      f"delta << 1/n (the default is 1/n^2)", WeakPrivacyWarning, stacklevel=3)


def default_delta(n_samples: int) -> float:
    """1 / n^2, the papers' choice (requires n >= 2)."""
    if n_samples < 2:
        raise ValueError(f"n_samples={n_samples}: the default delta 1/n^2 needs at least 2 "
                         f"samples (pass delta explicitly)")
    return 1.0 / n_samples ** 2


def check_privacy_target(epsilon, delta, n_samples=None):
    """The one check of a target (epsilon, delta): epsilon > 0 (``inf`` = no noise), delta in
    (0, 1), default 1/n^2 with a warning when delta > 1/n. Returns ``(epsilon, delta)``.

    ``n_samples=None`` (a caller that checks its arguments before reading the data: the
    estimators, the private transformers) checks the values only and returns ``delta=None``
    unchanged; the default is then :func:`default_delta` of the data's n.
    """
    epsilon = check_epsilon(epsilon)
    delta = None if delta is None else check_delta(delta)
    if n_samples is None:
        return epsilon, delta
    if delta is None:
        delta = default_delta(n_samples)
    warn_if_delta_exceeds_one_over_n(delta, n_samples)
    return epsilon, delta


def check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_bool(value, name):
    """A Python or NumPy bool (``fit_intercept``: a 0/1 or a string is refused), as ``bool``."""
    # lazy: the CLI's argument checks (this module) do not load numpy
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_random_state(random_state) -> np.random.Generator:
    """A ``numpy.random.Generator`` from ``random_state`` (invariant 6).

    ``None`` draws fresh OS entropy; an int or SeedSequence seeds a new
    generator; a Generator is used as is (and advanced).
    """
    # lazy: the CLI's argument checks (this module) do not load numpy
    import numpy as np

    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        if isinstance(random_state, bool):
            raise ValueError(f"random_state must be None, an int or a Generator, got {random_state!r}")
        if isinstance(random_state, numbers.Integral) and random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state!r}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise ValueError(
        f"random_state must be None, an int, a SeedSequence or a numpy Generator, got {random_state!r}"
    )


def sklearn_seed(random_state):
    """A seed :func:`check_random_state` accepts, from scikit-learn's ``random_state``
    conventions (a ``RandomState`` is turned into one integer drawn from it)."""
    # lazy: the CLI's argument checks (this module) do not load numpy
    import numpy as np

    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2 ** 31 - 1))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return random_state


def real_pair(value, name):
    """``value`` as two floats (lower, upper), each given as a real number (not a bool, not
    a string: ``True`` or ``"1"`` would be read as 1 silently); a ValueError naming
    ``name`` otherwise."""
    try:
        pair = tuple(value)
    except TypeError:
        pair = ()
    # numpy's bool_ is not a numbers.Real; Python's bool is
    if len(pair) != 2 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                 for v in pair):
        raise ValueError(f"{name} must be a pair (lower, upper) of numbers, got {value!r}")
    return float(pair[0]), float(pair[1])


def check_range(value, name):
    """``value`` as a pair (lower, upper) of finite floats with lower < upper; a ValueError
    naming ``name`` otherwise."""
    lo, hi = real_pair(value, name)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{name} = {value!r}: need finite lower < upper")
    return lo, hi


#: The largest magnitude of data the library accepts: beyond it sums of squares (norms,
#: smoothness constants, the squared loss) overflow (``dpopt.data.problem``).
MAX_MAGNITUDE = 1e150

#: The largest magnitude of a public target range's ends (``target_bounds``): the data's.
MAX_TARGET_END = MAX_MAGNITUDE


#: The narrowest public range accepted, in absolute terms (a feature's: ``feature_bounds``;
#: the target's: ``target_bounds``) and relative to its ends' magnitude. A feature's scaled
#: values and their squares must stay finite, so its width is at least the data's smallest
#: magnitude, 1 / MAX_MAGNITUDE (below it DP-CD's iterates overflowed); the target is scaled
#: before any square, and its equal-bin looks cut the range into 16 bins, which must be
#: normal floats (a subnormal width failed) that float64 tells apart at the range's ends.
MIN_RANGE_WIDTH = 1.0 / MAX_MAGNITUDE
MIN_TARGET_WIDTH = 1e-300
MIN_RELATIVE_WIDTH = 1e-12


def check_fit_delta(delta, name="delta"):
    """``delta`` (None: the default, 1/n^2) at least :data:`MIN_FIT_DELTA`, checked before a
    fit reads its data; a ValueError naming ``name`` otherwise."""
    if delta is not None and delta < MIN_FIT_DELTA:
        raise ValueError(f"{name}={delta:g} is below {MIN_FIT_DELTA:.3g}: a fit keeps "
                         f"{SELECTION_DELTA_SHARE:g} of delta for choosing categories and "
                         f"labels, and its other releases need the rest at {MIN_DELTA:g} or "
                         f"above")
    return delta


def check_range_width(lower, upper, name, least=MIN_RANGE_WIDTH):
    """ValueError naming ``name`` when the public range (lower < upper) is narrower than
    ``least`` or than :data:`MIN_RELATIVE_WIDTH` of its larger end (found by an independent
    fuzz: such ranges passed the checks and failed inside the fit, after its first
    release)."""
    width = upper - lower
    if not (width >= least and width >= MIN_RELATIVE_WIDTH * max(abs(lower), abs(upper))):
        raise ValueError(f"{name} = ({lower!r}, {upper!r}): too narrow to scale by (width "
                         f"{width:g}; at least {least:g}, and {MIN_RELATIVE_WIDTH:g} of its "
                         f"ends' magnitude): widen it, or shift and rescale the data")


def check_target_range(value, name="target_bounds"):
    """A regressor's public target range: :func:`check_range`, with ends at most
    :data:`MAX_TARGET_END` in magnitude (a range near 1e308 made the scaled target overflow
    after the looks at it were released, an uncharged failure decided by their noise; an
    independent audit, session 29) and a width of at least :func:`check_range_width`'s."""
    lower, upper = check_range(value, name)
    if max(abs(lower), abs(upper)) > MAX_TARGET_END:
        raise ValueError(f"{name} = {value!r}: ends beyond {MAX_TARGET_END:g} in magnitude "
                         f"overflow the scaled target's arithmetic; rescale y")
    check_range_width(lower, upper, name, MIN_TARGET_WIDTH)
    return lower, upper
