"""Multiclass logistic regression: one-vs-rest, the k binary fits composed as one release.

With k >= 3 classes, :class:`dpopt.DPLogisticRegression` fits k binary logistic models,
class c against the rest (labels +1 for class c, -1 otherwise), on the same features, and
predicts the class of the largest margin (Rifkin & Klautau, "In defense of one-vs-all
classification", JMLR 2004: with well-tuned binary learners, one-vs-rest is as accurate as
the multinomial and all-pairs schemes).

Privacy (replace-one adjacency). Replacing one record (x, y) by (x', y') changes that
record in *every* one of the k binary problems (its features, and its +-1 label for up to
two classes). So the k fits are a k-fold adaptive composition of mechanisms under the same
replace-one neighbouring relation, and the whole fit is accounted as one composition of all
their records (plus, on the default path, the private scaling that the k fits share):

* Gaussian mechanisms (explicit solvers whose records are unsampled Gaussians; the default
  path's dp-cd / dp-gd rows): each fit gets mu / sqrt(k) of the Gaussian-DP budget, so the
  k-fold composition is exactly mu-GDP (Dong, Roth & Su 2022, Cor. 3.3), i.e. the target
  (epsilon, delta), accountant ``exact``.
* Objective perturbation (the default path's logistic / L2 row): each fit's privacy loss is
  dominated by shift + m^2/2 + m R, R ~ chi_2 (Redberg, Koskela & Wang 2023;
  :class:`dpopt.privacy.ObjectivePerturbation`); these dominating pairs compose by products
  (Zhu, Dong & Wang 2022, Thm. 10), which the PLD accountant evaluates (pessimistic
  discretisation: an upper bound). The per-fit target is the largest epsilon_c whose k fits,
  calibrated by the solver at (epsilon_c, delta), compose with the scaling's Gaussian
  releases to at most the target (Brent's method on public quantities only: n, p, k, the
  released row bound R, epsilon, delta); the records actually spent are then certified
  again at the final PLD resolution.
  The explicit ``solver="objective-perturbation"`` with a public ``row_bound`` gets the
  same split (without scaling).
* Any other explicit solver (e.g. subsampled DP-SGD): basic composition, each fit at
  (epsilon / k, delta / k); the reported epsilon is the smaller of the sum of what each fit
  certified and the PLD / RDP composition of all records, at delta.

Which split applies to an explicit solver is read from the records of the first class's
fit (their types depend on the solver and its options only, never on the data); when they
are not Gaussian that fit is discarded unreleased and every class is refitted at the basic
split. One (epsilon, delta) covers the whole fit, and its api-level caller charges it once
(:mod:`dpopt.api.charge`).

The classes themselves come from the estimator: on the default path the table layer's
private label selection or the declared ``classes=`` (:mod:`dpopt.preprocessing.labels`),
for an explicit solver :func:`dpopt.api.estimators._classes_of`; the fits receive class
indices 0..k-1.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import optimize

from dpopt._core.validation import (
    MIN_EPSILON,
    check_privacy_target,
    check_random_state,
    check_scalar,
)
from dpopt.pipeline.default_path import (
    _data_of,
    _model_options,
    _public,
    choose_solver,
    plan_budget,
    private_scaling,
    public_count,
    split_mu,
)
from dpopt.pipeline.multinomial import fit_multinomial, multinomial_applies
from dpopt.privacy import Gaussian, ObjectivePerturbation, epsilon_of, gdp_epsilon, gdp_mu
from dpopt.solvers import available_solvers, get_solver, solve_uncharged
from dpopt.solvers.objective_perturbation import calibrate_objective_perturbation, loss_constants

__all__ = ["one_vs_rest", "solve_one_vs_rest", "fit_default_one_vs_rest", "MulticlassFit"]

#: PLD grid of the bisection on the per-class epsilon (pessimistic, so an upper bound);
#: the final certification uses the accountant's default resolution. Below
#: epsilon = 20 x this step the grid is epsilon / 20: each composed record can round its
#: loss up by one step, and at 2e-3 a few records alone overran a target of 0.01, so the
#: search for a feasible per-class epsilon never ended.
SEARCH_PLD_STEP = 2e-3
#: The search gives up (a clear error; the default path then splits a Gaussian mechanism's
#: mu instead) below this fraction of its guess, the Gaussian split's per-class epsilon: a
#: target a thousand times below it is no use, and at 1e-9 an infeasible search at
#: epsilon = 1e-4 took 15 s to a minute of PLD compositions on ever finer grids (session
#: 48's fuzz); and its certification on the final grid after this many 1% steps down.
SEARCH_FLOOR = 1e-3
CERTIFY_STEPS = 100


def one_vs_rest(y, cls):
    """+1 where ``y == cls``, -1 elsewhere (a per-record map of the class indices)."""
    return np.where(np.asarray(y) == cls, 1.0, -1.0)


def relabelings(n_classes):
    """One picklable map per class (they run on Dask workers for chunked data)."""
    return [functools.partial(one_vs_rest, cls=float(c)) for c in range(n_classes)]


class OneVsRestProblems:
    """The k binary problems of a one-vs-rest fit, built one at a time by ``make(relabel)``
    (each :class:`dpopt.Problem` holds its own copy of X: never k of them at once)."""

    def __init__(self, make, n_classes):
        self.make, self.maps = make, relabelings(n_classes)

    def __len__(self):
        return len(self.maps)

    def __getitem__(self, c):
        return self.make(self.maps[c])


def _all_gaussian(mechanisms):
    return all(type(m) is Gaussian for m in mechanisms)


def combine(results, *, epsilon, delta, accountant, mechanisms, split, params=None):
    """One FitResult for the k fits: ``coef`` (k, p), ``intercept`` (k,), ``w`` (k, dim),
    the whole composition's (epsilon, delta) and records."""
    first = results[0]
    summary = {"classes": len(results), "split": split,
               "per_class_epsilon": [float(r.epsilon) for r in results],
               "per_class_delta": [float(r.delta) for r in results]}
    return replace(first, solver=f"{first.solver} (one-vs-rest, {len(results)} classes)",
                   coef=np.stack([np.asarray(r.coef, float) for r in results]),
                   intercept=np.array([float(r.intercept) for r in results]),
                   w=np.stack([np.asarray(r.w, float) for r in results]),
                   epsilon=float(epsilon), delta=float(delta), accountant=accountant,
                   mechanisms=list(mechanisms), n_iter=sum(r.n_iter for r in results),
                   passes=float(sum(r.passes for r in results)), checkpoints=None,
                   checkpoint_passes=None, checkpoint_times=None,
                   time=float(sum(r.time for r in results)),
                   params={**(params or {}), "one_vs_rest": summary,
                           "per_class": [r.params for r in results]})


def _check_total(total, epsilon):
    if not total <= epsilon * (1 + 1e-9):  # never expected: the splits are exact
        raise RuntimeError(f"internal error: the one-vs-rest fit would spend {total} > "
                           f"epsilon={epsilon}; nothing is released")


# --------------------------------------------------------------------------- explicit solvers


def solve_one_vs_rest(problems, solver, *, epsilon, delta, random_state=None, **options):
    """k binary fits of ``solver``, one per problem of ``problems`` (a sequence of k
    problems sharing X, class c against the rest), as one release (module docstring).

    Same checks as :func:`dpopt.solve` (the target first); the result carries the whole
    composition, which the api-level caller charges once (nothing is charged here: a
    failed fit returns nothing to charge).
    """
    spec = get_solver(solver)
    k = len(problems)
    first = problems[0]
    epsilon, delta = check_privacy_target(epsilon, delta, first.n_samples)
    options = spec.check_options(options)
    rng = check_random_state(random_state)

    def run(problem, eps, dlt):
        return solve_uncharged(problem, solver, epsilon=eps, delta=dlt, random_state=rng,
                               **options)

    if _tight_op_split_applies(solver, options, epsilon):
        return _op_split_and_run(problems, first, run, epsilon, delta, k, options)
    # a non-private solver ignores its target: reported as epsilon = inf
    return _split_and_run(problems, first, run, epsilon if spec.private else math.inf, delta, k)


def _tight_op_split_applies(solver, options, epsilon):
    """Objective perturbation with a public row bound and nothing composed before it:
    its records follow from public quantities, so the PLD split applies."""
    return (solver == "objective-perturbation" and math.isfinite(epsilon)
            and options.get("row_bound") is not None and not options.get("prior_mu"))


def _op_split_and_run(problems, first_problem, run, epsilon, delta, k, options):
    """k objective-perturbation fits at the per-class target of :func:`op_class_epsilon`
    (the solver's own calibration, from its public options), composed by PLD."""
    bound = check_scalar(options["row_bound"], "row_bound", low=0.0, low_open=True)
    penalty = first_problem.penalty
    eps_class = op_class_epsilon(
        epsilon, delta, k, (), gdp_epsilon(gdp_mu(epsilon, delta) / math.sqrt(k), delta),
        alpha=float(penalty.alpha) if penalty.name == "l2" else 0.0, b2=bound * bound,
        n=first_problem.n_samples, intercept=first_problem.fit_intercept,
        beta=loss_constants(first_problem.loss)[1],
        regularization=options.get("regularization", "auto"))
    results = [run(p, eps_class, delta)
               for p in [first_problem, *(problems[c] for c in range(1, k))]]
    mechanisms = [m for r in results for m in r.mechanisms]
    total = epsilon_of(mechanisms, delta, adjacency=results[0].adjacency, accountant="pld")
    _check_total(total, epsilon)
    return combine(results, epsilon=total, delta=delta, accountant="pld",
                   mechanisms=mechanisms, split="objective perturbation: PLD split")


def _split_and_run(problems, first_problem, run, epsilon, delta, k):
    """The k fits (``problems[c]`` built when its turn comes; ``first_problem`` is
    ``problems[0]``, already built) and their composition (module docstring)."""
    def rest():
        return (problems[c] for c in range(1, k))

    if math.isinf(epsilon):
        results = [run(p, epsilon, delta) for p in [first_problem, *rest()]]
        return combine(results, epsilon=math.inf, delta=delta, accountant="none",
                       mechanisms=[m for r in results for m in r.mechanisms], split="none")
    # 1e-9: margin for the rounding of k calibrations (their sum of mu^2 stays below mu^2)
    eps_gauss = gdp_epsilon(gdp_mu(epsilon, delta) / math.sqrt(k) * (1 - 1e-9), delta)
    first = run(first_problem, eps_gauss, delta)
    if _all_gaussian(first.mechanisms):
        results = [first] + [run(p, eps_gauss, delta) for p in rest()]
        mechanisms = [m for r in results for m in r.mechanisms]
        total = epsilon_of(mechanisms, delta, adjacency=first.adjacency, accountant="exact")
        _check_total(total, epsilon)
        return combine(results, epsilon=total, delta=delta, accountant="exact",
                       mechanisms=mechanisms, split="gaussian: mu / sqrt(k) per class")
    # not Gaussian (a property of the solver and its options): basic composition
    results = [run(p, epsilon / k, delta / k) for p in [first_problem, *rest()]]
    mechanisms = [m for r in results for m in r.mechanisms]
    total, accountant = float(sum(r.epsilon for r in results)), "basic composition"
    with contextlib.suppress(ValueError):  # an accountant that cannot hold these records
        composed = epsilon_of(mechanisms, delta, adjacency=first.adjacency)
        if composed < total:
            total, accountant = composed, "pld"
    _check_total(total, epsilon)
    return combine(results, epsilon=total, delta=delta, accountant=accountant,
                   mechanisms=mechanisms, split="basic: (epsilon / k, delta / k) per class")


# --------------------------------------------------------------------------- the default path


@dataclass
class MulticlassFit:
    """The default path's one-vs-rest fit: the combined result (the whole composition),
    the shared scaling and the plan (the interface of :class:`dpopt.pipeline.autofit.AutoFit`)."""

    result: object
    scaling: object
    target: None = None
    plan: dict = field(default_factory=dict)

    def raw_model(self):
        """``(coef (k, p), intercept (k,))`` in the raw units of X."""
        pairs = [self.scaling.unscale(np.asarray(c, float), float(b))
                 for c, b in zip(self.result.coef, self.result.intercept)]
        return np.stack([c for c, _ in pairs]), np.array([b for _, b in pairs])

    def report(self, name) -> str:
        plan, r = self.plan, self.result
        shares = ", ".join(f"{k} mu={v:.3g}" for k, v in plan["mu_shares"].items())
        if plan.get("multinomial"):
            return (f"{name} (solver='auto' -> {plan['solver']}, one multinomial model of "
                    f"{plan['classes']} classes): ({r.epsilon:.4g}, {r.delta:.3g})-DP under "
                    f"{r.adjacency} adjacency, end to end (scaling, curvature and "
                    f"{plan['model_options']['passes']} noisy gradient steps composed), "
                    f"accountant {r.accountant}; Gaussian-DP mu={plan['mu']:.4g} split as "
                    f"{shares}")
        return (f"{name} (solver='auto' -> {plan['solver']} one-vs-rest, {plan['classes']} "
                f"classes): ({r.epsilon:.4g}, {r.delta:.3g})-DP under {r.adjacency} adjacency, "
                f"end to end (scaling and all {plan['classes']} binary fits composed), "
                f"accountant {r.accountant}; Gaussian-DP mu={plan['mu']:.4g} split as {shares}; "
                f"each class's fit at epsilon={plan['per_class_epsilon']:.4g}")


def _op_records(eps_class, delta, k, *, alpha, b2, n, intercept, beta=0.25,
                regularization="auto"):
    """The records of k objective-perturbation fits each calibrated at (eps_class, delta)
    (the calibration of :mod:`dpopt.solvers.objective_perturbation`, public inputs only;
    ``beta`` 1/4 is the logistic loss's curvature bound)."""
    _, z, shift, z_out, _ = calibrate_objective_perturbation(
        eps_class, delta, dof=2, regularization=regularization, alpha=alpha, beta=beta, b2=b2,
        n=n, intercept=intercept)
    return [ObjectivePerturbation(z, shift, 2, count=k), Gaussian(z_out, count=k)]


@functools.lru_cache(maxsize=128)
def op_class_epsilon(epsilon, delta, k, prior, guess, **public):
    """The largest per-class target (to about 1% relative) at which k
    objective-perturbation fits and the ``prior`` records (a tuple) compose to at most
    (epsilon, delta) (PLD accountant; Brent's method on a coarse pessimistic grid, the
    answer the largest feasible point it evaluated, certified at full resolution).
    ``guess``, a per-class epsilon near the answer (e.g. the Gaussian split's), starts the
    bracket. Public inputs only; cached (a calibration costs about half a second)."""
    prior = list(prior)
    feasible = []
    coarse = min(SEARCH_PLD_STEP, epsilon / 20.0)

    def total(e, step=coarse):
        return epsilon_of(prior + _op_records(e, delta, k, **public), delta, accountant="pld",
                          _pld_step=step)

    def excess(log_e):
        value = total(math.exp(log_e)) - epsilon
        if value <= 0:
            feasible.append(math.exp(log_e))
        return value

    top, step = math.log(epsilon), math.log(1.5)
    lo = hi = math.log(min(guess, epsilon))
    if excess(hi) <= 0:
        while hi < top and excess(min(hi + step, top)) <= 0:
            hi = min(hi + step, top)
        if hi >= top:
            return epsilon
        lo, hi = hi, min(hi + step, top)
    else:
        lo -= step
        while excess(lo) > 0:
            if lo < math.log(guess * SEARCH_FLOOR):
                raise ValueError(f"epsilon={epsilon:g} is too small for {k} objective-"
                                 f"perturbation fits after the earlier releases at "
                                 f"delta={delta:g}; raise epsilon, declare fewer classes or "
                                 f"keep delta << 1/n")
            lo -= step
    optimize.brentq(excess, lo, hi, xtol=1e-2)
    e = max(feasible)
    for _ in range(CERTIFY_STEPS):  # rarely: the final grid is not below the coarse one
        if epsilon_of(prior + _op_records(e, delta, k, **public), delta,
                      accountant="pld") <= epsilon:  # the final accounting's own grid
            return e
        e *= 0.99
    raise ValueError(f"epsilon={epsilon:g} is too small for {k} objective-perturbation fits "
                     f"after the earlier releases at delta={delta:g}; raise epsilon, declare "
                     f"fewer classes or keep delta << 1/n")


def _plan(entries, why, n_classes, mu_total, mus, R, public, prior):
    """The plan of a multiclass default fit: the model's ``entries`` and the facts every
    such fit reports (reason, classes, mu and its split, scaling, row bound, the table
    layer's releases)."""
    plan = {**entries, "reason": why, "classes": n_classes, "mu": mu_total, "mu_shares": mus,
            "scaling": ("row-normalized" if "feature_bounds" not in mus
                        else "private feature bounds"),
            "row_bound": R, "public_bounds": public}
    if prior is not None:
        plan["table"] = prior.info
        plan["selection_delta"] = prior.delta
    return plan


def fit_default_one_vs_rest(X, labels, n_classes, *, penalty, penalty_kwargs, fit_intercept,
                            epsilon, delta, rng, feature_bounds=None, prior=None, spent_mu=0.0):
    """The default path (:func:`dpopt.pipeline.default_path.fit_default`) for k >= 3 classes by one-vs-rest.

    ``labels`` are class indices 0..k-1 (in memory, or a Dask array with a chunked ``X``).
    The private scaling is computed once (the plan and releases of the binary default path)
    and shared by the k fits; the mechanism is the binary one of
    :func:`dpopt.pipeline.default_path.choose_solver`, each class at its share (module docstring).
    Returns a :class:`MulticlassFit` whose ``result`` is the whole composition.
    ``feature_bounds`` / ``prior``: the table layer's public bounds and its releases before
    this call (their share of mu^2 and their delta are taken out, as in ``fit_default``).
    ``spent_mu``: a later release of the same fit on the same rows (the in-sample check,
    :mod:`dpopt.pipeline.in_sample`), kept out as in ``fit_default``: the steps here share
    sqrt(mu^2 - spent_mu^2), and objective perturbation is calibrated with it counted.
    """
    # the labels are class indices: "squared" only asks them to be finite
    data = _data_of(X, labels, "squared", fit_intercept)
    n, p = data.shape
    center = fit_intercept and not data.sparse
    delta_total, delta = delta, delta - (prior.delta if prior is not None else 0.0)
    public = public_count(feature_bounds)
    whole = gdp_mu(epsilon, delta)
    mu_avail = math.sqrt(max(whole ** 2 - spent_mu ** 2, 0.0))
    shares = plan_budget(n, p, mu_avail, regression=False, center=center,
                         public=public, sparse=data.sparse)
    if shares is None:
        raise ValueError(f"n_samples={n} is too few for a private multiclass fit at "
                         f"epsilon={epsilon:g}")
    if prior is not None and prior.share:  # a share of the whole mu^2, as in fit_default
        shares["selection"] = (prior.share * whole ** 2 / mu_avail ** 2 if spent_mu
                               else prior.share)  # (bit for bit as before when nothing is kept)
    mu_total, mus = split_mu(epsilon, delta, shares, spent_mu=spent_mu)
    later = (Gaussian(1.0 / spent_mu, 1),) if spent_mu else ()  # the check, for OP's calibration
    row_mode = "feature_bounds" not in shares and public < p
    scaling, _, R, records, _ = private_scaling(
        data, mus, fit_intercept=fit_intercept, center=center, regression=False, rng=rng,
        bounds=feature_bounds, row_mode=row_mode)
    records = (list(prior.records) if prior is not None else []) + records

    def problem(relabel):
        return data.problem(scaling, None, relabel=relabel, loss="logistic", penalty=penalty,
                            fit_intercept=fit_intercept, **penalty_kwargs)

    maps = relabelings(n_classes)
    first = problem(maps[0])
    solver, why = choose_solver("logistic", first.penalty.name, n, p, available_solvers(),
                                chunked=data.chunked)
    if multinomial_applies(solver, centred=center and not row_mode):
        labelled = (data.problem(scaling, None, penalty=penalty, fit_intercept=fit_intercept,
                                 **penalty_kwargs) if data.chunked else None)
        result, plan = fit_multinomial(first, labels, n_classes, records=records, mus=mus,
                                       R=R, rng=rng, delta=delta, delta_total=delta_total,
                                       labelled=labelled)
        _check_total(result.epsilon, epsilon)
        why = (f"{n_classes} classes: one multinomial model by DP-GD with a released "
               f"curvature (dpopt.pipeline.multinomial)")
        return MulticlassFit(result, scaling, None, _plan(plan, why, n_classes, mu_total, mus,
                                                          R, public, prior))
    if solver == "objective-perturbation":
        alpha = float(first.penalty.alpha) if first.penalty.name == "l2" else 0.0
        # the Gaussian split's per-class epsilon starts the search; at a delta far above
        # 1/n it is 0 (the mu's epsilon vanishes there), and epsilon / k starts it instead
        split = gdp_epsilon(mus["model"] / math.sqrt(n_classes), delta)
        guess = split or epsilon / n_classes
        try:
            eps_class = op_class_epsilon(epsilon, delta, n_classes, tuple(records) + later,
                                         guess, alpha=alpha, b2=R * R, n=n,
                                         intercept=fit_intercept)
            options = {"row_bound": R}
        except ValueError:  # no per-class target composes (a tiny epsilon; it reads the
            # released row bound R): the Gaussian mechanism's split, exact, instead of a
            # refusal charged for the releases above, where that split is usable (at a
            # delta far above 1/n it is worth epsilon 0: the search's reason stands)
            if split < MIN_EPSILON:
                raise
            solver, why = "dp-gd", (f"{why}; objective perturbation's {n_classes} fits could "
                                    f"not be calibrated at epsilon={epsilon:g} after the "
                                    f"scaling, so dp-gd")
    if solver != "objective-perturbation":
        mu_class = mus["model"] / math.sqrt(n_classes) * (1 - 1e-9)  # margin for rounding
        eps_class = gdp_epsilon(mu_class, delta)
        options = _model_options(solver, first, mu_class, R)
    results = []
    for c, relabel in enumerate(maps):  # uncharged: the api-level caller charges the whole fit
        results.append(solve_uncharged(first if c == 0 else problem(relabel), solver,
                                       epsilon=eps_class, delta=delta, random_state=rng,
                                       **options))
    mechanisms = records + [m for r in results for m in r.mechanisms]
    accountant = "exact" if _all_gaussian(mechanisms) else "pld"
    total = epsilon_of(mechanisms, delta, adjacency=results[0].adjacency, accountant=accountant)
    _check_total(total, epsilon)
    plan = _plan({"solver": solver, "per_class_epsilon": eps_class,
                  "model_options": _public(options)},
                 f"{why}; one-vs-rest over {n_classes} classes", n_classes, mu_total, mus, R,
                 public, prior)
    result = combine(results, epsilon=total, delta=delta_total, accountant=accountant,
                     mechanisms=mechanisms, split="default path", params={"auto": plan})
    return MulticlassFit(result, scaling, None, plan)
