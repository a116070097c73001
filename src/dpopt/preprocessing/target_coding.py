"""Target coding: a string column becomes one number per record, the private mean of y over
the records whose value shares its bucket (for a binary classifier, of its labels as -1 / +1).

Why. One-hot coding needs the column's levels, released by the partition selection of
:mod:`dpopt.preprocessing.tables`, whose threshold (about 11 noise standard deviations, for
its delta) sends every level held by fewer records to ``<other>``: 46 cities of about 190
records each all go there at epsilon = 1 on 7,500 rows, and the column says nothing; and where
the levels are kept, each adds a feature, whose noise a private least-squares fit pays for
(AdaSSP's noise on X^T X grows like d^1.5). Target coding (Micci-Barreca, SIGKDD Explorations
2001) needs no list of levels and adds one feature: each value is hashed to one of B public
buckets, and a bucket's noisy count and noisy sum of y give its mean. A bucket's noise is the
same whatever B is (a record is in one bucket), so there is no threshold and no delta, and a
level is resolved once its count is a few noise standard deviations.

When (public facts and released counts). The default path of a regressor or a binary
classifier with an intercept and without ``inference``, on a DataFrame, for a string column
(kind "string") that one-hot coding serves badly and target coding can serve:

* most of its records are outside the kept levels: the released noisy counts of its kept
  values sum to at most n / 2 (:func:`mostly_unnamed`, post-processing of the selection);
* some of its ``<other>`` values hold more records than the buckets' noise can hide: a
  Gaussian count of the records beyond 2 sigma in its ``<other>`` values clears two of its
  standard deviations (:func:`resolvable`, ``CHECK_SHARE`` of mu^2, spent on the columns of
  the first test). An id column (one record per value), or levels all too small at this
  budget, fail it, and the coding's share stays with the model;
* or, for a regressor, it has many levels (40 or more: what skrub's ``TableVectorizer``
  calls high cardinality; counted from below from the kept values and the records outside
  them) which its model cannot resolve one by one: the kept levels whose noisy count
  reaches 9 times a lower bound of AdaSSP's ridge hold less than 90% of the records
  (:func:`unresolved_many`, post-processing of the selection; no check: such a column's
  kept levels hold more than n / 2 records, far more than the buckets' noise). Without it,
  such a column went back to one-hot coding as soon as the selection named most of its
  records, and the fit lost at that epsilon what the coding had gained below it
  (``txhousing`` R^2 0.687 at epsilon = 2, coded, then 0.619 at 4, one-hot);
* for a regressor, y's histogram can resolve its range at ``TARGET_SHARE``
  (:func:`coding_shares`).

Other string columns keep one-hot coding, so as epsilon grows, the selection keeps every
level and the model's ridge resolves them, the fit converges to the one-hot fit. Declared
categories (their levels are public: nothing is dropped), classifiers of three or more
classes and Dask frames are coded one-hot.

Mechanism and sensitivity (replace-one adjacency), on all n rows:

1. A regressor's target range: the default path's step "target bounds" (a histogram of y on
   the public grid, L2 sensitivity sqrt(2), ``TARGET_SHARE`` of mu^2), unless ``target_bounds=``
   is given. The default path then takes this range as known (it is not released twice).
2. y is clipped to [lower, upper] and mapped to [-1, 1] (post-processing); a binary
   classifier's labels are -1 and +1 (0 for a label outside its two classes). For each of the k
   string columns and each of its B buckets: the count of records and the sum of their mapped
   y, plus N(0, sigma^2) each. Replacing one record (bucket a, value v) by (bucket b, value v'),
   |v|, |v'| <= 1: if a != b two counts move by 1 and two sums by |v| and |v'|, a squared change
   <= 4; if a = b one sum moves by |v' - v| <= 2, squared 4. Over k columns Delta = 2 sqrt(k);
   sigma = Delta / mu_c makes it a Gaussian mechanism of multiplier 1 / mu_c (mu_c-GDP, Dong,
   Roth & Su 2022), recorded as ``Gaussian(1 / mu_c)``, with ``CODING_SHARE`` of mu^2 (the
   feature bounds' share: one value per level, needed within its noise, not exactly). It
   replaces the string columns' partition selection (no threshold, no delta).

The bucket means (post-processing, free). A bucket with noisy count C and noisy sum S has the
mean S / C (clipped to [-1, 1]) with variance about (sigma^2 + C) / C^2 around a true mean in
[-1, 1]. The minimax linear estimate of a mean known to lie in [-1, 1] from an observation of
variance s^2 is x / (1 + s^2) (Donoho, Liu & MacGibbon, Ann. Statist. 1990): weight
c^2 / (c^2 + C + sigma^2), with c = max(C - 2 sigma, 0) the count the noise cannot explain
(two standard deviations, the held-out choice's margin), so that a bucket no record holds
gets 0 (the centre of y's range) with probability 97.7%, and a record weighs at most
1 / (2 sigma) in its own bucket's mean. B is a power of two, 8 times the number of levels
that can hold 2 sigma records (n / (2 sigma)), within [``MIN_BUCKETS``, ``MAX_BUCKETS``]: two
such levels share a bucket with probability about 1/8 or less. The feature's values are these
means in [-1, 1] (y's centred, scaled units; the model's coefficient maps them to y); a value
never seen, or in a bucket within the noise, gets 0. Its public bounds are the smallest and
largest released value and 0. The model file keeps the non-zero buckets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpopt.preprocessing._bounds import bounds_resolvable, private_target_bounds
from dpopt.preprocessing._cells import MISSING, text_codes
from dpopt.preprocessing.far_ends import confirm_mu, confirmed_range, target_histogram
from dpopt.preprocessing.shares import SHARES
from dpopt.preprocessing.thin_tails import tail_steps
from dpopt.privacy import Gaussian
from dpopt.privacy.mechanisms import gaussian_noise

__all__ = ["TargetCode", "TARGET_SHARE", "CODING_SHARE", "CHECK_SHARE", "COUNT_MARGIN",
           "coding_shares", "mostly_unnamed", "unresolved_many", "beyond_noise", "resolvable", "bucket_count",
           "buckets_of", "coding_sigma", "noisy_bucket_sums", "bucket_means",
           "release_target_codes", "code_table"]

#: Share of mu^2 of the target's range: the default path's own step "target bounds".
TARGET_SHARE = SHARES["target_bounds"]
#: Share of mu^2 of the buckets' counts and sums: the feature bounds' (one value per level,
#: needed within its noise, not exactly).
CODING_SHARE = SHARES["feature_bounds"]
#: Share of mu^2 of the count that decides the coding (:func:`resolvable`): the indicator
#: test's, a count that decides how a column is coded.
CHECK_SHARE = SHARES["indicators"]
#: A bucket's count is trusted beyond this many noise standard deviations.
COUNT_MARGIN = 2.0
MIN_BUCKETS, MAX_BUCKETS = 16, 2 ** 16
#: A column of this many kept levels is of high cardinality (skrub's ``TableVectorizer``
#: default ``cardinality_threshold``): :func:`unresolved_many`.
MANY_LEVELS = 40
#: A level of m records is resolved by a model of ridge lambda when m >= 9 lambda (its
#: coefficient shrunk by at most 10%), and a column when its resolved levels hold 90% of
#: its records (the same 10%): :func:`unresolved_many`.
RESOLVED_FACTOR, RESOLVED_SHARE = 9.0, 0.9



@dataclass
class TargetCode:
    """A column's released bucket means: value -> bucket (public hash) -> mean in [-1, 1]."""

    buckets: int
    values: dict = field(default_factory=dict)  # bucket -> mean, non-zero buckets only

    def transform(self, s):
        """The bucket mean of each cell of ``s`` (a pandas Series)."""
        codes, keys = text_codes(s, s.name)
        table = np.array([self.values.get(int(b), 0.0) for b in buckets_of(keys, self.buckets)],
                         dtype=np.float64)
        return table[codes]

    def released(self, key):
        """Whether the bucket of the text ``key`` (e.g. ``MISSING``) has a released mean."""
        return int(buckets_of([key], self.buckets)[0]) in self.values

    def bounds(self):
        """(lower, upper): the smallest and largest released value, and 0 (public)."""
        v = [0.0, *self.values.values()]
        return float(min(v)), float(max(v))

    def to_dict(self):
        return {"buckets": self.buckets, "values": {str(b): v for b, v in self.values.items()}}

    @classmethod
    def from_dict(cls, data):
        buckets = int(data["buckets"])
        values = {int(b): float(v) for b, v in data["values"].items()}
        if not 1 <= buckets < 2 ** 63 or any(not 0 <= b < buckets for b in values):
            raise ValueError("a target code's buckets are in [0, buckets)")
        if not all(math.isfinite(v) for v in values.values()):
            raise ValueError("a target code's values are finite")
        return cls(buckets, values)


def buckets_of(keys, buckets):
    """The bucket of each text key: pandas' SipHash of the text (a fixed key: the same in
    every process) modulo ``buckets``. Public: a per-value map that reads no record."""
    h = pd.util.hash_array(np.asarray(list(keys), dtype=object))
    return (h % np.uint64(buckets)).astype(np.int64)


def coding_shares(n, mu, public_range):
    """(share of the range, share of the buckets) of mu^2, or None when the target's
    histogram cannot resolve its range at ``TARGET_SHARE`` (the default path's rule: a decade
    of y fills ``grid.bins_per_decade`` bins of about n / bins records each, which must clear
    the bins' threshold); then the table keeps one-hot coding. From public (n, mu)."""
    if public_range:
        return 0.0, CODING_SHARE
    if not bounds_resolvable(n, 1, mu * math.sqrt(TARGET_SHARE)):
        return None
    return TARGET_SHARE, CODING_SHARE


def mostly_unnamed(columns, noisy_counts, n):
    """The string ``columns`` most of whose records one-hot coding cannot name: the noisy
    counts of the values the selection kept (``noisy_counts[name]``, released with them) sum
    to at most n / 2. Post-processing of the selection."""
    return [c for c in columns if sum(noisy_counts.get(c.name, {}).values()) <= 0.5 * n]


def unresolved_many(columns, noisy_counts, n, mu, width, threshold):
    """A regressor's string ``columns`` of many levels that its model cannot resolve one by
    one. Many: at least ``MANY_LEVELS`` distinct values (skrub's ``TableVectorizer`` sends
    a column of 40 or more to its high-cardinality encoder), counted from below as the kept
    values (not ``<missing>``) plus the records outside them over the selection's
    ``threshold`` (a value it did not keep holds fewer records than that, most likely).
    Unresolved: the kept values whose noisy count reaches ``RESOLVED_FACTOR`` times the
    model's ridge hold less than ``RESOLVED_SHARE`` (90%) of the n records. The ridge:
    AdaSSP's (:mod:`dpopt.solvers.adassp`, step 2) is the spectral norm of its Gram noise, 2
    sqrt(d) sigma_2 with sigma_2 = sqrt(2) B^2 / mu_2; a lower bound from public facts is d =
    ``width`` + 1 (the encoded table and the intercept), B >= 1 (each row holds this column's
    1) and mu_2 <= mu / sqrt(2) (the default split gives the Gram matrix half the model's
    mu^2, and the model at most the fit's mu): 4 sqrt(d) / mu. A ridge lambda shrinks a
    level's coefficient by lambda / (m + lambda), at most 10% when m >= 9 lambda: the largest
    loss of R^2 that costs is then 0.01, the issue's tolerance, when the column carries all of
    y's variance; and one-hot coding serves the column when such levels hold all but 10% of
    its records (the same tolerance on the records the shrinkage can hit). A skewed column (a
    few large values, a long tail) stays coded while its tail is unresolved: with the n / 2 of
    the first rule it went back to one-hot as soon as its head was resolved, and lost 0.08 of
    R^2 there (200 Zipf levels, 6,000 rows, epsilon 16 to 32). As epsilon grows the ridge
    falls, the levels are resolved and the column goes back to one-hot coding (consistency:
    the fit converges to the one-hot fit). Post-processing of the
    selection's released counts and public (n, mu, width, threshold)."""
    ridge = 4.0 * math.sqrt(width + 1.0) / mu
    out = []
    for c in columns:
        kept = noisy_counts.get(c.name, {})
        outside = max(n - sum(kept.values()), 0.0)
        levels = len(kept) - (MISSING in kept) + (outside / threshold if threshold > 0 else 0)
        resolved = sum(k for k in kept.values() if k >= RESOLVED_FACTOR * ridge)
        if levels >= MANY_LEVELS and resolved < RESOLVED_SHARE * n:
            out.append(c)
    return out


def beyond_noise(cells, others, level):
    """For each column (``cells[i]``: its :func:`~dpopt.preprocessing._cells.text_codes`),
    sum over its ``<other>`` values (``others[i]``: per text key, outside the kept levels) of
    max(count - ``level``, 0): the records a value holds beyond the count the buckets' noise
    can hide."""
    out = []
    for (codes, keys), other in zip(cells, others):
        counts = np.bincount(codes, minlength=len(keys))[np.asarray(other, dtype=bool)]
        out.append(float(np.maximum(counts - level, 0.0).sum()))
    return np.array(out)


def resolvable(columns, cells, others, mu_check, mu_codes, rng, also_coded=0):
    """The columns worth coding and the record of the release that decides it.

    With L = 2 sigma (``COUNT_MARGIN`` standard deviations of the buckets' noise at
    ``mu_codes``, as if every column were coded, with ``also_coded`` more), each column's
    records beyond L in its ``<other>`` values (:func:`beyond_noise`) are released with N(0, k / mu_check^2):
    replacing a record lowers one value's count by 1 and raises another's by 1, which moves
    the sum by at most 1 per column (sensitivity sqrt(k) over k columns; ``Gaussian(1 /
    mu_check)``). A column is coded when its noisy sum exceeds 2 of its standard deviations:
    some of its values are large enough for their bucket means to be resolved. An id column
    (one record per value), or levels all smaller than L, have none. Returns ``(columns,
    noisy sums, record)``."""
    level = COUNT_MARGIN * coding_sigma(len(columns) + also_coded, mu_codes)
    sigma = math.sqrt(len(columns)) / mu_check
    noisy = beyond_noise(cells, others, level) + gaussian_noise(rng, sigma, len(columns))
    chosen = [c for c, e in zip(columns, noisy) if e > COUNT_MARGIN * sigma]
    return chosen, noisy, Gaussian(1.0 / mu_check, 1)


def bucket_count(n, sigma):
    """B (module docstring) from public n and sigma."""
    need = 8.0 * max(n / (COUNT_MARGIN * sigma), 1.0)
    return int(min(max(2 ** math.ceil(math.log2(need)), MIN_BUCKETS), MAX_BUCKETS))


def release_target_codes(cells, y, columns, mu_range, mu_codes, rng, public_range=None):
    """The releases of the module docstring: sets ``column.code`` (a :class:`TargetCode`)
    on each of ``columns`` (string columns; ``cells[i]``: the
    :func:`~dpopt.preprocessing._cells.text_codes` of column i) and clears their levels. Returns
    ``(records, (lower, upper), info)``: the target's released (or public) range and a
    description for the plan; the range is None, and no column is coded, when the released
    one is collapsed or unresolved (a point, or [0, 0]): then only the range was released."""
    y = np.asarray(y, dtype=np.float64)
    records = []
    if public_range is None:
        tb = private_target_bounds(y, mu_range, rng, quiet=True)
        records += list(tb.mechanisms)
        # a far end confirmed by a fresh count, its mu out of the codes' (far_ends.py)
        mu_c = confirm_mu(mu_range, mu_codes)
        lo, hi, rec, far = confirmed_range(tb.noisy_counts, tb.sigma, len(y), float(tb.lower[0]),
                                         float(tb.upper[0]), mu_c, rng,
                                         lambda: target_histogram(y))
        records += rec
        mu_codes = math.sqrt(mu_codes ** 2 - mu_c ** 2) if rec else mu_codes
    else:
        lo, hi = (float(v) for v in public_range)
    sigma = coding_sigma(len(columns), mu_codes)
    buckets = bucket_count(len(y), sigma)
    info = {"columns": [str(c.name) for c in columns], "range": [lo, hi], "buckets": buckets,
            "sigma": sigma, "mu": mu_codes, "range_released": public_range is None}
    info["grid_end"] = public_range is None and max(abs(lo), abs(hi)) >= tb.grid.edges[-1]
    if public_range is None and far:
        info["far_ends"] = far  # a far end of the range, kept or cut (far_ends.py)
    if public_range is None and hi > lo:  # a thin tail beyond it, for the constant's mean
        steps = tail_steps(tb.noisy_counts, tb.sigma, len(y), lo, hi, grid=tb.grid)
        if steps["lower"] or steps["upper"]:  # (dpopt.pipeline.constant: free)
            info["target_tail"] = {"range": [lo, hi], **steps}
    if not hi > lo:  # collapsed or unresolved: nothing is coded, the pipeline reads y itself
        return records, None, info
    scaled = np.clip((y - 0.5 * (lo + hi)) / (0.5 * (hi - lo)), -1.0, 1.0)
    for c, (codes, keys) in zip(columns, cells):  # one number per cell: no levels
        c.levels, c.has_missing = [], False
        counts, sums = noisy_bucket_sums(buckets_of(keys, buckets)[codes], scaled, buckets,
                                         sigma, rng)
        c.code = TargetCode(buckets, bucket_means(counts, sums, sigma))
    records.append(Gaussian(1.0 / mu_codes, 1))
    return records, (lo, hi), info


def code_table(df, schema, columns, values, mu, shares, rng, public_range=None,
               range_known=True, gradient_model=None):
    """The table layer's target coding, after its selection (``schema``), of the string
    ``columns`` of ``df`` for the targets ``values`` (y, or a binary classifier's -1 / +1) at
    the fit's ``mu`` with ``shares`` (:func:`coding_shares`): the candidates
    (:func:`mostly_unnamed`) and their check (:func:`resolvable`), a regressor's columns of
    many unresolved levels (:func:`unresolved_many`), then y's range and the buckets
    (:func:`release_target_codes`). Returns ``(records, share of mu^2 spent, info for the
    plan)``: ``target_coding_check`` and ``target_coding_many`` when they apply, and when
    columns were coded ``target_coding`` and, with ``range_known`` (a regressor),
    ``target_range``, the range the default path takes as known. ``gradient_model(n, d,
    mu)``: whether the one-hot table of d columns (with the intercept) is certainly fitted by a
    gradient method rather than AdaSSP, whose ridge :func:`unresolved_many` reads (then that
    rule does not apply: on 40 cities of 200 records DP-GD on the one-hot table scored 0.821
    and 0.876 at epsilon = 2 and 4, the coded column 0.799 and 0.869)."""
    candidates = mostly_unnamed(columns, schema.counts, len(df))
    width = len(schema.feature_names_out())
    gradient = gradient_model is not None and gradient_model(len(df), width + 1, mu)
    many = [] if not range_known or gradient else [  # AdaSSP's model: its ridge
        c for c in unresolved_many(columns, schema.counts, len(df), mu, width, schema.threshold)
        if c not in candidates]
    if not candidates and not many:
        return [], 0.0, {}
    cells = {c.name: text_codes(df[c.name], c.name) for c in candidates + many}  # read once
    records, spent, info, coded = [], 0.0, {}, list(many)
    if candidates:
        chosen, checked, record = resolvable(
            candidates, [cells[c.name] for c in candidates],
            [schema.key_levels(c, cells[c.name][1]) < 0 for c in candidates],
            mu * math.sqrt(CHECK_SHARE), mu * math.sqrt(shares[1]), rng, len(many))
        records, spent, coded = [record], CHECK_SHARE, chosen + coded
        info["target_coding_check"] = dict(zip([str(c.name) for c in candidates],
                                               checked.tolist()))
    if many:
        info["target_coding_many"] = [str(c.name) for c in many]
    if coded:
        rec, target_range, coding_info = release_target_codes(
            [cells[c.name] for c in coded], values, coded, mu * math.sqrt(shares[0]),
            mu * math.sqrt(shares[1]), rng, public_range)
        records += rec
        spent += shares[0]
        if target_range is not None:  # else only the range was released: nothing is coded
            spent += shares[1]
            info["target_coding"] = coding_info
            if range_known:
                info["target_range"] = list(target_range)
        else:  # the range's far-end count, if one was released, came out of the codes' share
            spent += max(0.0, shares[1] - (coding_info["mu"] / mu) ** 2)
    return records, spent, info


def coding_sigma(k, mu):
    """sigma of the buckets' counts and sums for k coded columns at ``mu``: Delta / mu with
    the replace-one sensitivity Delta = 2 sqrt(k) (module docstring)."""
    return 2.0 * math.sqrt(k) / mu


def noisy_bucket_sums(rows, scaled, buckets, sigma, rng):
    """One column's release: ``(counts, sums)`` over its ``buckets`` of the records' buckets
    ``rows`` and mapped targets ``scaled`` (in [-1, 1]), plus N(0, sigma^2) each."""
    counts = np.bincount(rows, minlength=buckets) + gaussian_noise(rng, sigma, buckets)
    sums = (np.bincount(rows, weights=scaled, minlength=buckets)
            + gaussian_noise(rng, sigma, buckets))
    return counts, sums


def bucket_means(counts, sums, sigma):
    """{bucket: shrunk mean} of the buckets whose mean is not 0 (module docstring)."""
    trusted = np.maximum(counts - COUNT_MARGIN * sigma, 0.0)
    mean = np.clip(np.divide(sums, counts, out=np.zeros_like(sums), where=trusted > 0), -1, 1)
    shrunk = mean * trusted ** 2 / (trusted ** 2 + np.maximum(counts, 0.0) + sigma ** 2)
    return {int(b): float(shrunk[b]) for b in np.flatnonzero(shrunk)}
