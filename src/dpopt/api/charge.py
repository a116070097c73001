"""The charge point: the one place a :class:`~dpopt.BudgetAccountant` ledger is charged.

Every release a user asks for (``dpopt.solve``, an estimator's ``fit``, a private
transformer's ``fit``, a private hyperparameter search) is charged here, once, by
:func:`charged`; the layers below (solvers, pipeline, preprocessing) compute and return
what they released (a :class:`~dpopt.FitResult` with its records, a
:class:`~dpopt.privacy.budget.Spend`) and never read or write the ledger.

The protocol of a charge (Dwork & Roth 2014, section 3.5: a budget is a bound on the
composition of every release of the session):

1. *Reserve* the target (epsilon, delta) before reading the data: refused with
   :class:`~dpopt.BudgetExceededError` when the reserved targets and the recorded spends
   could compose past the budget, and then nothing runs.
2. *Run* the release inside the reservation, in a context where no budget is active, so
   that a nested fit (the candidates of a hyperparameter search) is not charged a second
   time: the caller accounts them as a whole.
3. *Record* what was actually spent (its records, re-composed by the accountant) in place
   of the reservation. A body that raises before recording releases the reservation: no
   noisy output left, nothing spent. The exception is a :class:`~dpopt.ChargedFitError`: the
   body failed on the outcome of a noisy release it had made (no label held by enough
   records), so the failure itself is an output of that release; its releases are
   recorded (:func:`failure_spend`) before the error propagates, and a retry pays again.
   So is any failure once the body has begun to release what it reads from the data (the
   table layer's selections, the model path: :mod:`dpopt.privacy.releases`), charged whole
   (:func:`released_failures`).

The budget is the one passed (``budget=`` / ``accountant=``) or the innermost ``with
BudgetAccountant(...)`` of the current context (:mod:`dpopt.privacy.budget`, a
``contextvars`` stack: another thread's block is not seen).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from dpopt._core.exceptions import ChargedFitError
from dpopt._core.validation import check_privacy_target
from dpopt.pipeline.multiclass import OneVsRestProblems, solve_one_vs_rest
from dpopt.preprocessing.labels import LABELS_SELECTED
from dpopt.privacy import Gaussian, epsilon_of, gdp_mu
from dpopt.privacy.budget import Spend, _unbudgeted, resolve_budget
from dpopt.privacy.releases import watch
from dpopt.solvers import FitResult, prepare_solve

__all__ = ["charged", "charged_solve", "charged_after", "released_failures", "failure_spend",
           "ledger_entry", "no_intervals", "solve"]


class _Uncharged:
    """The slot of a release with no budget in force: recording is a no-op."""

    def record(self, result, *, label=None):
        return None


@contextmanager
def unchanged_on_failure(estimator):
    """``with unchanged_on_failure(self): return self._fit(...)``: a refused or failed fit
    leaves ``estimator`` as it was (its attributes restored), as a failed fit spends
    nothing (:func:`charged`)."""
    state = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(state)
        raise


@contextmanager
def charged(budget, epsilon, delta, *, adjacency="replace-one", label="fit"):
    """``with charged(budget, eps, delta, label=...) as slot: ...; slot.record(release)``:
    reserve the target of one release in ``budget`` (or the context's default; none: no
    charge), run the body with no budget active, record what ``slot.record`` is given
    (module docstring). ``epsilon`` is the target reserved (``inf`` for a non-private
    release, which any finite budget refuses). A failure after the body began to release
    (:func:`released_failures`) is charged whole, with a budget or without."""
    acc = resolve_budget(budget)
    if acc is None:
        with released_failures(epsilon, delta):
            yield _Uncharged()
        return
    with acc.spend(epsilon, delta, adjacency=adjacency, label=label) as slot, _unbudgeted():
        try:
            with released_failures(epsilon, delta):
                yield slot
        except ChargedFitError as err:  # a failure decided by a release: it is charged
            if err.whole:  # of unknown extent: the whole target reserved
                slot.record(Spend(label, float(epsilon), float(delta), adjacency, "exact", ()))
            elif err.records:
                slot.record(failure_spend(err, delta, label, adjacency))
            raise


@contextmanager
def released_failures(epsilon, delta):
    """Any error (but a :class:`ChargedFitError`, already charged) raised after the body
    began to release what it reads from the data (:mod:`dpopt.privacy.releases`: the
    table layer's selections, the model path) becomes a :class:`ChargedFitError` of the
    whole (``epsilon``, ``delta``): it may follow from those releases' outcome, and which
    of them ran is not known here. Before that point the error passes as it is."""
    with watch() as releases:
        try:
            yield
        except ChargedFitError:
            raise
        except Exception as exc:
            if not releases.started:
                raise
            raise _whole(exc, epsilon, delta, "a failure after the fit's first private "
                         "release") from exc


@contextmanager
def charged_after(prior, epsilon, delta):
    """The model path of a default-path fit, after the table layer's releases (``prior``):
    a failure once the path has begun to read the data is charged whole
    (:func:`released_failures`); before that, a ``ValueError`` refuses public facts and
    records the table layer's releases (without them it passes as it is: a refusal of the
    input; a fuzz saw a chunked fit crash only when the label selection kept three labels),
    and any other error (an internal one, a lost worker) charges the whole (``epsilon``,
    ``delta``), one Gaussian record of that curve."""
    try:
        with released_failures(epsilon, delta):
            yield
    except ChargedFitError:
        raise
    except ValueError as exc:
        if prior is None or not prior.records:
            raise
        raise ChargedFitError(f"{exc} (the fit failed after the private releases of its labels "
                              f"or columns, which are charged)", prior.records,
                              prior.delta) from exc
    except Exception as exc:
        raise _whole(exc, epsilon, delta, "an internal failure after the fit's private "
                     "releases") from exc


def _whole(exc, epsilon, delta, what):
    """The :class:`ChargedFitError` of a failure whose releases are not known here: the
    fit's whole target as one Gaussian record."""
    return ChargedFitError(f"{type(exc).__name__}: {exc} ({what}: its whole epsilon="
                           f"{epsilon:g}, delta={delta:g} is charged)",
                           [Gaussian(1.0 / gdp_mu(epsilon, delta))])


def no_intervals(k, prior):
    """The error of ``inference=True`` with k != 2 classes: a :class:`ChargedFitError` when
    k came out of the private label selection, a plain ValueError when k is declared (public)."""
    why = ("inference=True needs a model; the label selection kept one label of y, so there "
           "is none" if k == 1 else "inference=True gives intervals for a binary or linear "
           "model; a fit of k >= 3 classes has none")
    private = prior is not None and prior.info.get("labels") == LABELS_SELECTED
    return (ChargedFitError(f"{why} (the label selection is charged; declare the labels, "
                            f"classes=[...], to skip it)", prior.records, prior.delta)
            if private else ValueError(why))


def failure_spend(err, delta, label, adjacency="replace-one"):
    """What a :class:`~dpopt.ChargedFitError` charges: its Gaussian records at ``delta``
    less their thresholds' delta, with the whole ``delta`` (a black-box (epsilon, delta)
    entry, as a fit whose threshold spent a delta outside its mechanisms)."""
    epsilon = epsilon_of(list(err.records), delta - err.selection_delta)
    return Spend(label, float(epsilon), float(delta), adjacency, "exact", ())


def solve(problem, solver: str = "dp-cd", *, epsilon=1.0, delta=None, random_state=None,
          budget=None, **options) -> FitResult:
    """Fit ``problem`` with a registered solver.

    Parameters
    ----------
    problem : Problem or dpopt.data.chunked.ChunkedProblem
        A ChunkedProblem (Dask arrays / data frames, memory-mapped or on-disk data) is
        accepted by the solvers registered with ``distributed=True`` only.
    solver : str
        A name from :func:`available_solvers`.
    epsilon : float
        Target epsilon (> 0; ``inf`` runs the solver without noise).
    delta : float, optional
        Target delta in (0, 1); default 1/n^2.
    random_state : None, int, SeedSequence or Generator
        Source of all randomness; ``None`` draws fresh OS entropy.
    budget : dpopt.BudgetAccountant, optional
        Checked before the fit (refused with ``BudgetExceededError`` if the
        target would exceed it; nothing is run) and charged after. Default:
        the accountant of an enclosing ``with dpopt.BudgetAccountant(...)``, if any.
    **options
        Solver options (``get_solver(name).option_specs``); unknown names or values
        outside an option's constraint raise ``ValueError`` before anything runs.
        ``run_length`` sets the solver's run-length option whatever its name.

    Every argument is checked before the budget is consulted
    (:func:`dpopt.solvers.prepare_solve`); the solver runs inside the charge
    (:func:`charged`); a model that came out non-finite raises after the charge was
    recorded (the noisy output was released).
    """
    call = prepare_solve(problem, solver, epsilon=epsilon, delta=delta,
                         random_state=random_state, **options)
    with charged(budget, call.target, call.delta, adjacency=call.adjacency,
                 label=solver) as slot:
        result = call.run()
        slot.record(result)
    return call.finish(result)


def ledger_entry(result, label):
    """What a BudgetAccountant records: the result (its mechanisms compose exactly), or,
    when the table layer's threshold spent a delta outside the mechanisms, the black-box
    (epsilon, delta) of the whole fit (composed by the ledger's (epsilon, delta) rule)."""
    if not (result.params.get("auto") or {}).get("selection_delta"):
        return result
    return Spend(label, float(result.epsilon), float(result.delta), result.adjacency,
                 result.accountant, ())


def charged_solve(problem, spec, epsilon, delta, options, accountant, seed):
    """An explicit solver's fit, charged once (:func:`dpopt.api.charge.charged`): one
    :func:`dpopt.solve` call, or the k binary fits of a one-vs-rest problem composed as
    one release (:func:`dpopt.pipeline.multiclass.solve_one_vs_rest`)."""
    if not isinstance(problem, OneVsRestProblems):
        return solve(problem, spec.name, epsilon=epsilon, delta=delta, random_state=seed,
                     budget=accountant, **options)
    epsilon, delta = check_privacy_target(epsilon, delta, problem[0].n_samples)
    target = epsilon if spec.private else math.inf  # a non-private solver: refused by a budget
    with charged(accountant, target, delta, adjacency=spec.adjacency(spec.check_options(options)),
                 label=spec.name) as slot:
        result = solve_one_vs_rest(problem, spec.name, epsilon=epsilon, delta=delta,
                                   random_state=seed, **options)
        slot.record(result, label=spec.name)
    return result
