"""Heavy-tailed family: option declarations shared by the four solvers."""

from __future__ import annotations

import math

from dpopt.solvers._base import (
    Option,
    one_of,
    positive,
    positive_int,
)
from dpopt.solvers._common import ZCDP_ACCOUNTANTS
from dpopt.solvers.heavy_tailed._shared import (
    MODELS,
    ORACLES,
)

# ---------------------------------------------------------------------------
# options (declared once; the one-pass solvers share them)

_BUDGET_OPTIONS = (
    Option("rho", None, None, "zCDP budget used instead of epsilon (which then caps it)"),
    Option("accountant", "zcdp", one_of(*ZCDP_ACCOUNTANTS), "epsilon <-> rho conversion"),
)
_MOMENT_OPTIONS = (
    Option("clip", None, None, 'C (float), "theory" or "quantile" (module docstring)'),
    Option("moment_bound", None, None, "r_k of E||grad f||^k <= r_k^k (public knowledge)"),
    Option("moment_order", 2, None, "k of the moment bound"),
)
_QUANTILE_OPTIONS = (
    Option("clip_quantile", None, None, "level of the private quantile clip"),
    Option("quantile_share", 0.1, None, "budget (or record) share of the private quantile"),
    Option("quantile_records", "shared", one_of("shared", "disjoint"), "records of the quantile"),
    Option("quantile_range", (1e-6, 1e6), None, "public search range of the quantile"),
)
_ONE_PASS_OPTIONS = (
    *_BUDGET_OPTIONS,
    Option("model", "central", one_of(*MODELS), "central or simulated shuffle model"),
    Option("oracle", "l2", one_of(*ORACLES), "MeanOracle1 (l2) or MeanOracle2 (coordinate)"),
    *_MOMENT_OPTIONS,
    Option("radius", math.inf, None, "the domain is the L2 ball of this radius"),
    Option("n_iter", None, None, "T, the number of batches (default: the theorem's)"),
    Option("batch_size", None, None, "s, records per batch (default floor(n / T))"),
    Option("step", 1.0, positive, "multiplier of the rule's step size"),
    Option("smoothness", "exact", None, 'beta of the average loss; "exact" reads it (warns)'),
)
_TAIL_OPTIONS = (
    *_QUANTILE_OPTIONS,
    Option("groups", None, None, "m for the coordinate oracle"),
    Option("checkpoint_every", 1, positive_int, "record the output every this many iterations"),
)
_STRONG_CONVEXITY = Option("strong_convexity", None, None, "mu (default: the L2 penalty's alpha)")
#: one batch of all 50 canary records (T = 1): the final model is the single oracle call the
#: canary enters (with T batches it is averaged with T - 1 others and the audit loses power)
_ONE_PASS_AUDIT = {"clip": 1.0, "n_iter": 1, "batch_size": 50}


