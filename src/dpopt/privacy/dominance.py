"""Whether the mechanisms a fit actually ran are at least as private as the ones accounted
for it in advance: the private hyperparameter search (:mod:`dpopt.api.tuning`) accounts
each candidate's records from a probe on public data, makes them slightly less private
(:func:`pessimistic`), and checks every real run against them (:func:`dominated`)."""

from __future__ import annotations

import math
from dataclasses import fields, replace

from dpopt.privacy.events import Gaussian

#: Relative margin by which the accounted records are made less private than the probe's
#: (noise multipliers shrunk, shifts and epsilons grown): a real fit whose calibration
#: depends on a released value (the default path's objective perturbation is calibrated at
#: the released row bound, and its (shift, multiplier) pair is the same up to root finding)
#: must be dominated by them.
RECORD_SLACK = 1e-8
_MORE_PRIVATE_WHEN_LARGER = ("noise_multiplier",)
_MORE_PRIVATE_WHEN_SMALLER = ("shift", "epsilon", "rho", "sampling_rate")


def pessimistic(records):
    """The records the search accounts: each probe record made slightly less private."""
    out = []
    for m in records:
        changes = {f: getattr(m, f) * (1 - RECORD_SLACK) for f in _MORE_PRIVATE_WHEN_LARGER
                   if hasattr(m, f)}
        changes.update({f: getattr(m, f) * (1 + RECORD_SLACK) + 1e-12
                        for f in _MORE_PRIVATE_WHEN_SMALLER
                        if hasattr(m, f) and f != "sampling_rate"})
        out.append(replace(m, **changes))
    return out


def dominated(real, accounted):
    """The real records are at least as private as the accounted ones: they match, in
    order, a subsequence of them (a step may release less on some data, e.g. a private
    scaler that skips its moments when the bounds collapse; composing fewer mechanisms
    loses less privacy), each with the same type and structure and a privacy loss
    monotone in each compared field. Or both are Gaussian mechanisms only, and the real
    ones' mu^2 add up to at most the accounted ones': the default path moves mu^2 between
    its steps by what earlier releases said (a second look at the target's range, a
    re-centring, a curvature for DP-GD), and a fully adaptive composition of Gaussian
    mechanisms whose mu^2 add up to at most mu^2 is mu-GDP (Smith & Thakurta 2022), so its
    Renyi curve and privacy profile are those of one Gaussian of that mu: the accounted
    records' own, whatever their number and order."""
    if real and accounted and all(type(m) is Gaussian for m in (*real, *accounted)):
        return gdp_mu2(real) <= gdp_mu2(accounted)
    it = iter(accounted)
    return all(any(record_dominated(x, y) for y in it) for x in real)


def gdp_mu2(records):
    """mu^2 of a composition of Gaussian records: count / multiplier^2 each (Dong, Roth &
    Su 2022)."""
    return math.fsum(m.count / m.noise_multiplier ** 2 for m in records)


def record_dominated(x, y):
    if type(x) is not type(y):
        return False
    for f in fields(x):
        u, v = getattr(x, f.name), getattr(y, f.name)
        if f.name in _MORE_PRIVATE_WHEN_LARGER:
            ok = u >= v
        elif f.name in _MORE_PRIVATE_WHEN_SMALLER:
            ok = u <= v
        else:
            ok = u == v
        if not ok:
            return False
    return True
