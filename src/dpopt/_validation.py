"""Argument checks shared by the whole package.

Every check raises ``ValueError`` naming the argument and changes nothing
(DESIGN.md, invariant 7).
"""

from __future__ import annotations

import math
import numbers

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


def check_epsilon(epsilon, name="epsilon"):
    """epsilon > 0; ``inf`` means no privacy (no noise)."""
    return check_scalar(epsilon, name, low=0.0, low_open=True, allow_inf=True)


def check_delta(delta, name="delta"):
    """delta in the open interval (0, 1)."""
    return check_scalar(delta, name, low=0.0, high=1.0, low_open=True, high_open=True)


def check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_random_state(random_state) -> np.random.Generator:
    """A ``numpy.random.Generator`` from ``random_state`` (invariant 6).

    ``None`` draws fresh OS entropy; an int or SeedSequence seeds a new
    generator; a Generator is used as is (and advanced).
    """
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
