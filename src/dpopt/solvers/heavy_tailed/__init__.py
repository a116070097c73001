"""Heavy-tailed private stochastic optimization: noisy clipped one-pass methods.

Lowy & Razaviyayn, "Private Stochastic Optimization with Large Worst-Case
Lipschitz Parameter" (seed 004; notes ``shared/papers/004_heavy_tailed_dp_so.md``).
The per-sample gradients only need a bounded k-th moment,
``E||grad f(w, x)||^k <= r_k^k`` (k >= 2), not a uniform Lipschitz bound.

Solvers (all start at w = 0; the domain is ``W = {||w||_2 <= radius}`` intersected
with the penalty's box, projected exactly; the penalty psi is applied by its prox):

``"ht-acsa"``  noisy clipped accelerated SGD (AC-SA of Ghadimi & Lan; paper
    Algorithm 2 = 5 with MeanOracle1, Theorem 31) for smooth convex losses:
    ``w^md_t = (1 - a_t) w^ag_{t-1} + a_t w_{t-1}``, oracle at ``w^md_t``,
    ``w_t = prox(w_{t-1} - (t / (2 eta)) g_t)`` (a_t = 2/(t+1), a_t/eta_t = t/(2 eta)),
    ``w^ag_t = a_t w_t + (1 - a_t) w^ag_{t-1}``; output ``w^ag_T``.
``"ht-sgd"``  noisy clipped SGD for smooth strongly convex losses (Algorithm 6 = 7,
    Theorem 34); step sizes and averaging weights of Stich 2019, Lemma 3
    (a = mu/2, g = beta; the paper does not print them); output the weighted
    average of the iterates w_{t+1}. T batches (the paper's loop runs T + 1).
``"ht-proxsgd"``  noisy clipped proximal SGD for Proximal-PL losses (Algorithm 8 = 9,
    Theorem 48): ``w_{t+1} = prox_{eta psi}(w_t - eta g_t)``, eta = 1/(2 beta), last iterate.
``"ht-subgradient"``  localized noisy clipped subgradient method for non-smooth
    convex losses (Algorithm 4 with the regularized subroutine Algorithm 3,
    Theorem 41): n is rounded down to 2^l; phase i = 1..l uses a fresh batch of
    n_i = n/2^i records for T_i full-batch steps on
    ``(1/n_i) sum f(w, x) + (lambda_i/2)||w - w_{i-1}||^2`` over
    ``W ∩ B(w_{i-1}, D_i)``, with eta_i = 4^-i eta, lambda_i = 1/(eta_i n_i^(1+1/k));
    only the loss subgradients are clipped, the regularizer (and the penalty's
    subgradient) is added unclipped.

Privacy (replace-one adjacency; the mechanisms are documented in
:mod:`dpopt.privacy.mechanisms`). The records are split by a uniformly random
partition drawn inside the solver: disjoint batches of a public size s, each
record in at most one batch. In the one-pass solvers a record enters exactly
one oracle call (rho_opt-zCDP); in ht-subgradient it enters the T_i calls of
its phase, each (rho_opt / T_i)-zCDP. By parallel composition the run costs
the maximum over batches, i.e. rho_opt -- not the sum over iterations. There
is no option that reuses a record: ``n_iter * batch_size <= n`` is checked,
and records left over by the rounding are never read. Everything else
(iterates, step sizes) is post-processing.

Budget. Give ``epsilon`` (and ``delta``) or ``rho``. With ``accountant="zcdp"``
(the paper's notion) ``rho = dp_to_zcdp(epsilon, delta)`` and the reported
``epsilon = zcdp_to_dp(rho, delta)`` (dp-accounting's RDP conversion). Since
every mechanism here is Gaussian, a rho-zCDP run is also exactly
sqrt(2 rho)-Gaussian-DP, so ``accountant="exact"`` converts with the Gaussian-DP
formulas instead (``rho = gdp_mu(epsilon, delta)^2 / 2``, reported epsilon =
``gdp_epsilon(sqrt(2 rho), delta)``): a valid and tighter conversion, the one
the DP-GD baseline uses. ``rho=...`` sets the budget instead of ``epsilon``,
which then only acts as a cap: the reported epsilon is the conversion of rho
at ``delta``, and a rho whose conversion exceeds ``epsilon`` raises
``ValueError`` (so the library's rule "spent epsilon <= target", on which
:class:`dpopt.BudgetAccountant`'s pre-check relies, still holds; pass
``epsilon=math.inf`` to give rho alone, outside a budget accountant). Both
are reported: ``FitResult.epsilon/delta`` and ``params["rho"]``;
``FitResult.mechanisms`` holds the zCDP records (Gaussian records with
``accountant="exact"``) of the worst-case record.

Clipping threshold (``clip``):
* a number: used as is (public);
* ``"theory"``: the theorem's threshold from ``moment_bound`` (r_k) and ``moment_order`` (k);
* ``"quantile"``: a private quantile of the per-sample gradient norms at w = 0
  (:func:`dpopt.privacy.private_quantile`: a Gaussian-noised histogram of the
  norms on a public log grid, ``quantile_range``, scanned from the tail).
  Level 1 - q with ``q = sqrt(d T) / (eps n)`` (ht-acsa, ht-sgd),
  ``sqrt(d) T / (eps n)`` (ht-proxsgd) or ``sqrt(d ln n) / (eps n_1)``
  (ht-subgradient), eps = sqrt(2 rho_opt): the fraction of clipped gradients at
  which the theorems' thresholds sit (Markov), unless ``clip_quantile`` is
  given. Cost: with ``quantile_records="shared"`` (default) the quantile reads
  all records and takes ``quantile_share * rho`` (sequential composition; the
  optimization gets the rest); with ``"disjoint"`` a random ``quantile_share``
  fraction of the records is held out for the quantile and never used by the
  optimization, and both get the full rho (parallel composition). Where a
  moment bound enters a step-size rule, ``r_k`` is replaced by ``C q^(1/k)``
  (Markov's inequality read backwards; post-processing, free).
Default: ``"theory"`` when ``moment_bound`` is given, else ``"quantile"``.

Shuffle model (``model="shuffle-simulation"``; ht-acsa, ht-sgd, ht-proxsgd):
the oracle is replaced by a SIMULATION in one process of the shuffle protocol
(local randomizers + trusted shuffler + analyzer; paper Algorithms 10/11 or 13
with CJMP21's scalar-sum protocol). Claim: with a trusted shuffler and honest
users the shuffled messages of each call are (epsilon, delta)-DP for replacing
one user's record, so by parallel composition the run is (epsilon, delta)-DP
in the shuffle model. Not a zCDP guarantee: ``rho`` is not accepted,
``params["rho"]`` is None and ``mechanisms`` is empty.
"""


from dpopt.solvers.heavy_tailed._shared import (  # noqa: F401
    HT_ACCOUNTANTS,
    MODELS,
    ORACLES,
    Batch,
    GradientOracle,
    _batch_plan,
    _check_iters,
    _clamp_iters,
    _Common,
    _common,
    _epsilon_of_rho,
    _is_isotropic_l2,
    _is_zero_penalty,
    _per_sample_gradients,
    _rho_of,
    project_two_balls,
    prox_ball,
    read_records,
    resolve_budget,
    resolve_mu,
)
from dpopt.solvers.heavy_tailed.one_pass import (  # noqa: F401
    _COMMON_DOC,
    _finish,
    _resolve_clip,
    _with_common_doc,
    fit_ht_acsa,
    fit_ht_proxsgd,
    fit_ht_sgd,
)
from dpopt.solvers.heavy_tailed.options import (  # noqa: F401
    _BUDGET_OPTIONS,
    _MOMENT_OPTIONS,
    _ONE_PASS_AUDIT,
    _ONE_PASS_OPTIONS,
    _QUANTILE_OPTIONS,
    _STRONG_CONVEXITY,
    _TAIL_OPTIONS,
)
from dpopt.solvers.heavy_tailed.rules import (  # noqa: F401
    acsa_iterations,
    clip_fraction,
    one_pass_clip,
    proxsgd_iterations,
    sgd_iterations,
    stich_schedule,
)
from dpopt.solvers.heavy_tailed.subgradient import (  # noqa: F401
    _penalty_subgradient,
    fit_ht_subgradient,
    subgradient_base_step,
)
