"""A privacy budget shared by several fits on the same private data.

:class:`BudgetAccountant` keeps a ledger of what each fit released and refuses
a fit that would take the total past the budget ``(epsilon, delta)``.

How the total is computed
-------------------------
Each ledger entry holds the fit's certified ``(epsilon_i, delta_i)`` and the
mechanism records of :mod:`dpopt.privacy` that were accounted (the
``FitResult.mechanisms``). The total epsilon at the budget's delta is the
smallest of three valid upper bounds on the adaptive composition:

1. the accountant of :func:`dpopt.privacy.epsilon_of` over *all* recorded
   mechanisms (``accountant="auto"`` gives the exact Gaussian-DP composition
   when every fit is a composition of Gaussian mechanisms, e.g. DP-CD, DP-GD);
2. a privacy-loss-distribution (PLD) composition that uses the mechanisms of
   the entries PLD supports and, for the others, the worst-case pair of an
   (epsilon_i, delta_i)-DP mechanism (Kairouz, Oh, Viswanath 2015: every
   (epsilon, delta)-DP mechanism is dominated by it, so composing it is valid
   for any fit, whatever its internals);
3. the PLD composition of the (epsilon_i, delta_i) pairs alone.

All three are never optimistic, so their minimum is not either. Each is at
least as tight as basic composition (sum of the epsilons and deltas), usually
much tighter (test ``test_budget.py::test_tighter_than_basic``).

Checking before a fit
---------------------
Before a fit only its target ``(epsilon, delta)`` is known. :meth:`check`
composes the ledger (and the fits still running, see :meth:`spend`) with the
worst-case pair of the target, which bounds whatever the fit will actually
spend because every solver certifies epsilon <= target. If that exceeds the
budget the fit is refused with :class:`dpopt.BudgetExceededError` before the
data are touched; nothing is fitted and nothing is recorded.

Adjacency
---------
A budget is about one neighbouring relation (``adjacency``, replace-one by
default). A fit certified under another one is refused, unless
``convert_adjacency=True`` and the conversion is valid: an add-remove
guarantee implies a replace-one one (replacing a record is removing it then
adding another), with the noise multiplier of a Gaussian or Laplace record
halved (sensitivity at most doubled), a pure epsilon doubled, a zCDP rho
multiplied by 4, an objective-perturbation record given its replace-one bound
(multiplier halved, chi_2 term; dpopt.solvers.objective_perturbation) and a
black-box pair mapped by group privacy to
(2 epsilon, (1 + e^epsilon) delta). Replace-one does not imply add-remove, so
the reverse is always refused. Converted entries say so in the ledger.

Default budget
--------------
``with BudgetAccountant(...) as acc:`` makes ``acc`` the default of
:func:`dpopt.solve`, of the estimators and of the private transformers in the
*current context* (a :class:`contextvars.ContextVar`): the thread, or asyncio
task, that entered the block. Another thread does not see it, so two threads
with their own ``with`` blocks each charge their own budget (before, one
process-wide stack let a block entered in thread B capture thread A's fits).

Worker threads start with an *empty* context: a fit in a
``concurrent.futures.ThreadPoolExecutor`` or in joblib's ``threading`` backend
started inside a ``with`` block is not charged to it. dpopt then warns
(:class:`dpopt.UnchargedFitWarning`: a ``with`` budget is open in another
context of the process, none in this one). To charge such fits, pass the
accountant explicitly (``accountant=acc`` to an estimator, which
``sklearn.base.clone`` keeps; ``budget=acc`` to :func:`dpopt.solve`), or run
each task in a copy of the caller's context:
``ex.submit(contextvars.copy_context().run, fit, ...)``. Processes (joblib's
``loky`` backend, Dask workers) never see it, and an accountant cannot be sent
to another process (a copy would fork the ledger): an unpickled accountant is
*detached* and refuses to record.
"""

from __future__ import annotations

import contextvars
import math
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import dp_accounting as dpa
from dp_accounting.pld import privacy_loss_distribution as pldlib

from dpopt._core.exceptions import BudgetExceededError, UnchargedFitWarning
from dpopt._core.validation import check_choice, check_delta, check_epsilon
from dpopt.privacy import (
    ACCOUNTANTS,
    ADJACENCIES,
    ZCDP,
    Gaussian,
    Laplace,
    ObjectivePerturbation,
    PureDP,
    SubsampledGaussian,
    epsilon_of,
    resolve_accountant,
)
from dpopt.privacy.accountants import PLD_DISCRETIZATION, _is_free, _pld_of

__all__ = ["BudgetAccountant", "Spend", "current_budget", "convert_to_replace_one"]


@dataclass(frozen=True)
class Spend:
    """One ledger entry: what a fit (or any DP release) spent.

    ``mechanisms`` is empty for a black-box release known only by its
    (epsilon, delta); ``converted_from`` names the adjacency the guarantee was
    certified under when it was converted (else None).
    """

    label: str
    epsilon: float
    delta: float
    adjacency: str
    accountant: str = "unknown"
    mechanisms: tuple = ()
    converted_from: str | None = None


def convert_to_replace_one(spend: Spend) -> Spend:
    """An add-remove :class:`Spend` as a valid replace-one one (module docstring)."""
    if spend.adjacency == "replace-one":
        return spend
    mechs = []
    for m in spend.mechanisms:
        if isinstance(m, (Gaussian, SubsampledGaussian, Laplace)):
            if isinstance(m, SubsampledGaussian) and m.sampling != "poisson":
                raise ValueError("only Poisson-subsampled mechanisms can be converted from "
                                 "add-remove to replace-one")
            mechs.append(replace(m, noise_multiplier=m.noise_multiplier / 2.0))
        elif isinstance(m, PureDP):
            mechs.append(replace(m, epsilon=2.0 * m.epsilon))
        elif isinstance(m, ObjectivePerturbation):
            # not a generic rule: the replace-one analysis of objective perturbation
            # (dpopt.solvers.objective_perturbation) has the same Jacobian shift, twice the
            # gradient sensitivity and a chi_2 instead of a chi_1 term
            mechs.append(replace(m, noise_multiplier=m.noise_multiplier / 2.0, dof=2))
        else:
            mechs.append(replace(m, rho=4.0 * m.rho))
    eps = 2.0 * spend.epsilon
    delta = min((1.0 + math.exp(min(spend.epsilon, 700.0))) * spend.delta, 1.0)
    return replace(spend, epsilon=eps, delta=delta, adjacency="replace-one",
                   mechanisms=tuple(mechs), converted_from=spend.adjacency)


# ---------------------------------------------------------------------------
# the default accountant: a stack per context (contextvars), not per process

_STACK: contextvars.ContextVar[tuple] = contextvars.ContextVar("dpopt_budget_stack",
                                                               default=())
_NO_BUDGET = object()
_ACTIVE_LOCK = threading.Lock()
_ACTIVE = [0]  # `with BudgetAccountant` blocks open in any context of this process


def current_budget():
    """The innermost ``with BudgetAccountant(...)`` accountant of the current
    context (thread or task), or None."""
    stack = _STACK.get()
    top = stack[-1] if stack else None
    return None if top is _NO_BUDGET else top


def _push(item):
    _STACK.set(_STACK.get() + (item,))


def _pop(item):
    """Remove the innermost ``item`` of this context's stack (a no-op when an
    exit runs in another context than its enter: nothing of this context is undone)."""
    stack = _STACK.get()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is item:
            _STACK.set(stack[:i] + stack[i + 1:])
            return True
    return False


@contextmanager
def _unbudgeted():
    """Fits inside are not recorded: for callers that account them as a whole
    (private hyperparameter selection) or that run on public data."""
    _push(_NO_BUDGET)
    try:
        yield
    finally:
        _pop(_NO_BUDGET)


def _warn_if_budget_elsewhere():
    """A fit with no budget in its context while a ``with`` budget is open in
    another context of this process: most likely a worker thread started inside
    the ``with`` (thread pools start with an empty context), whose fit the
    budget will not see. Say so rather than let the fit go uncharged silently."""
    with _ACTIVE_LOCK:
        active = _ACTIVE[0]
    if active and not _STACK.get():
        warnings.warn(
            "this fit runs in a thread (or context) where no BudgetAccountant is active, while "
            "a `with BudgetAccountant(...)` block is open in another thread: the fit is NOT "
            "charged to it. Pass accountant=/budget= explicitly, or start the worker with "
            "contextvars.copy_context().run (see dpopt.privacy.budget)", UnchargedFitWarning,
            stacklevel=3)


def resolve_budget(budget):
    """``budget`` if given (a :class:`BudgetAccountant`), else the default (or None)."""
    if budget is None:
        found = current_budget()
        if found is None:
            _warn_if_budget_elsewhere()
        return found
    if not isinstance(budget, BudgetAccountant):
        raise ValueError(f"accountant must be a dpopt.BudgetAccountant or None, got {budget!r}")
    return budget


# ---------------------------------------------------------------------------


@dataclass
class _Reservation:
    spend: Spend
    done: bool = field(default=False)


class BudgetAccountant:
    """Total privacy budget ``(epsilon, delta)`` for a sequence of fits.

    Parameters
    ----------
    epsilon : float
        Total epsilon (> 0, finite).
    delta : float
        Total delta in (0, 1); the ledger's epsilon is always reported at this delta.
    adjacency : "replace-one" or "add-remove"
        The neighbouring relation the budget is about.
    accountant : "auto", "exact", "pld" or "rdp"
        Accountant of bound 1 (module docstring); bounds 2 and 3 always use PLD.
    convert_adjacency : bool
        Accept add-remove fits into a replace-one budget by the explicit
        conversion of the module docstring (otherwise they are refused).

    Examples
    --------
    >>> acc = BudgetAccountant(epsilon=2.0, delta=1e-6)
    >>> with acc:                                             # doctest: +SKIP
    ...     DPLogisticRegression(epsilon=1.0, delta=1e-7).fit(X, y)
    ...     DPLogisticRegression(epsilon=1.0, delta=1e-7).fit(X, y)  # composed: fits
    ...     DPLogisticRegression(epsilon=1.0, delta=1e-7).fit(X, y)  # BudgetExceededError
    >>> acc.spent()                                           # doctest: +SKIP
    """

    def __init__(self, epsilon, delta, *, adjacency="replace-one", accountant="auto",
                 convert_adjacency=False):
        self.epsilon = check_epsilon(epsilon)
        if math.isinf(self.epsilon):
            raise ValueError("epsilon must be finite for a budget")
        self.delta = check_delta(delta)
        self.adjacency = check_choice(adjacency, "adjacency", ADJACENCIES)
        self.accountant = check_choice(accountant, "accountant", ACCOUNTANTS)
        if not isinstance(convert_adjacency, bool):
            raise ValueError(f"convert_adjacency must be a bool, got {convert_adjacency!r}")
        self.convert_adjacency = convert_adjacency
        self._ledger: list[Spend] = []
        self._pending: list[_Reservation] = []
        self._lock = threading.RLock()
        self._detached = False

    # -- copies: an accountant is a shared ledger, never silently duplicated ----
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self  # scikit-learn's clone keeps the same ledger

    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_pending")}
        state["_detached"] = True
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._pending = []

    # -- default via `with` -----------------------------------------------------
    def __enter__(self):
        _push(self)
        with _ACTIVE_LOCK:
            _ACTIVE[0] += 1
        return self

    def __exit__(self, *exc):
        if _pop(self):
            with _ACTIVE_LOCK:
                _ACTIVE[0] -= 1
        return False

    # -- reading ------------------------------------------------------------------
    @property
    def ledger(self) -> list[Spend]:
        """The recorded spends, oldest first (a copy)."""
        with self._lock:
            return list(self._ledger)

    def spent(self) -> float:
        """Epsilon of everything recorded, at the budget's delta (0 if nothing)."""
        with self._lock:
            return self._total(self._ledger)

    def remaining(self, delta=None, *, rtol=1e-3) -> float:
        """Largest epsilon a fit with target ``delta`` could still be granted.

        ``delta`` defaults to a tenth of the budget's delta; 0.0 when nothing fits.
        """
        delta = self.delta / 10 if delta is None else check_delta(delta)
        with self._lock:
            entries = self._ledger + [r.spend for r in self._pending]

            def fits(eps):
                entry = self._blackbox(eps, delta)
                return self._total(entries + [entry], threshold=self.epsilon) <= self.epsilon

            lo, hi = 0.0, self.epsilon
            if not fits(rtol * self.epsilon):
                return 0.0
            lo = rtol * self.epsilon
            if fits(hi):
                return hi
            while hi - lo > rtol * self.epsilon:
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            return lo

    def basic_composition(self) -> tuple[float, float]:
        """(sum of epsilons, sum of deltas) of the ledger, for comparison."""
        with self._lock:
            return (sum(s.epsilon for s in self._ledger), sum(s.delta for s in self._ledger))

    def __repr__(self):
        return (f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}, "
                f"adjacency={self.adjacency!r}, spent={self.spent():.4g}, "
                f"fits={len(self._ledger)})")

    def report(self) -> str:
        """A short text table of the ledger and the total."""
        lines = [f"budget ({self.epsilon:g}, {self.delta:.3g})-DP under {self.adjacency} adjacency"]
        for i, s in enumerate(self.ledger):
            conv = f" (converted from {s.converted_from})" if s.converted_from else ""
            lines.append(f"  {i + 1:>3}. {s.label}: ({s.epsilon:.4g}, {s.delta:.3g}) "
                         f"[{s.accountant}]{conv}")
        basic = self.basic_composition()
        lines.append(f"  total: epsilon {self.spent():.4g} at delta {self.delta:.3g} "
                     f"(basic composition: {basic[0]:.4g}, {basic[1]:.3g})")
        return "\n".join(lines)

    # -- spending -------------------------------------------------------------------
    def check(self, epsilon, delta, *, adjacency="replace-one", label="fit"):
        """Raise :class:`BudgetExceededError` if a fit with target (epsilon, delta)
        could take the total past the budget (changes nothing)."""
        with self._lock:
            self._check_spend(self._prospective(epsilon, delta, adjacency, label))

    @contextmanager
    def spend(self, epsilon, delta, *, adjacency="replace-one", label="fit"):
        """Reserve a fit's target, run the body, then record what it spent.

        ``with acc.spend(eps, delta) as slot: result = ...; slot.record(result)``.
        Refused (before the body runs) when over budget. A body that raises
        without recording releases the reservation: the noisy outputs were
        never released, so nothing was spent.
        """
        with self._lock:
            res = _Reservation(self._prospective(epsilon, delta, adjacency, label))
            self._check_spend(res.spend)
            self._pending.append(res)
        slot = _Slot(self, res)
        try:
            yield slot
        finally:
            with self._lock:
                if res in self._pending:
                    self._pending.remove(res)

    def record(self, result, *, label=None):
        """Record a finished release: a :class:`dpopt.FitResult` (or anything
        with ``epsilon``, ``delta``, ``adjacency``, ``accountant``, ``mechanisms``)
        or a :class:`Spend`. Raises :class:`BudgetExceededError` (recording it
        anyway: it was released) if the total now exceeds the budget."""
        spend = self._as_spend(result, label)
        with self._lock:
            self._check_detached()
            self._ledger.append(spend)
            total = self._total(self._ledger)
        if total > self.epsilon:
            raise BudgetExceededError(
                f"recorded {spend.label!r}, which was released without a budget check: the "
                f"total epsilon is now {total:.4g} > budget {self.epsilon:g}")
        return spend

    # -- internals -------------------------------------------------------------------
    def _check_detached(self):
        if self._detached:
            raise ValueError("this BudgetAccountant is a copy made by pickling (e.g. sent to "
                             "another process); spending through it would fork the ledger. "
                             "Fit in the process that owns the accountant (n_jobs=1 or the "
                             "threading backend)")

    def _prospective(self, epsilon, delta, adjacency, label) -> Spend:
        self._check_detached()
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        check_choice(adjacency, "adjacency", ADJACENCIES)
        if math.isinf(epsilon):
            raise BudgetExceededError(f"{label}: a non-private fit (epsilon=inf) cannot be run "
                                      f"under a privacy budget")
        return self._convert(self._blackbox(epsilon, delta, adjacency, label))

    def _check_spend(self, spend):
        entries = self._ledger + [r.spend for r in self._pending] + [spend]
        total = self._total(entries, threshold=self.epsilon)
        if total > self.epsilon:
            raise BudgetExceededError(
                f"{spend.label} with target epsilon={spend.epsilon:g}, delta={spend.delta:g} "
                f"would bring the total to epsilon={total:.4g} at delta={self.delta:g}, over the "
                f"budget epsilon={self.epsilon:g} (spent so far: {self._total(entries[:-1]):.4g}, "
                f"{len(self._ledger)} fit(s)); nothing was fitted")

    def _blackbox(self, epsilon, delta, adjacency=None, label="fit"):
        return Spend(label, float(epsilon), float(delta), adjacency or self.adjacency, "target")

    def _as_spend(self, result, label) -> Spend:
        if isinstance(result, Spend):
            spend = result if label is None else replace(result, label=label)
        else:
            try:
                eps, delta = float(result.epsilon), float(result.delta)
                adjacency, mechs = result.adjacency, tuple(result.mechanisms)
            except AttributeError:
                raise ValueError("result must be a FitResult or a Spend") from None
            name = label or getattr(result, "solver", "fit")
            spend = Spend(name, eps, delta, adjacency, getattr(result, "accountant", "unknown"),
                          mechs)
        if math.isinf(spend.epsilon):
            raise BudgetExceededError(f"{spend.label}: a non-private release (epsilon=inf) "
                                      f"cannot be recorded in a privacy budget")
        return self._convert(spend)

    def _convert(self, spend: Spend) -> Spend:
        if spend.adjacency == self.adjacency:
            return spend
        if self.adjacency == "replace-one" and self.convert_adjacency:
            return convert_to_replace_one(spend)
        hint = (" (pass convert_adjacency=True to convert add-remove guarantees explicitly)"
                if self.adjacency == "replace-one" else
                " (a replace-one guarantee does not imply an add-remove one)")
        raise BudgetExceededError(f"{spend.label} is certified under {spend.adjacency} adjacency "
                                  f"but the budget is about {self.adjacency}{hint}")

    def _total(self, entries, threshold=None) -> float:
        """Min of the three bounds (module docstring); stops early once a bound is
        <= ``threshold`` (enough to grant a fit) or when bound 1 is exact (tight)."""
        if not entries:
            return 0.0
        best = math.inf
        if all(e.mechanisms for e in entries):
            mechs = [m for e in entries for m in e.mechanisms]
            try:
                acc = resolve_accountant(mechs, self.accountant)
                best = epsilon_of(mechs, self.delta, adjacency=self.adjacency, accountant=acc)
                if acc == "exact":  # exact composition: no other bound can be smaller
                    return float(best)
            except ValueError:  # the chosen accountant does not support these records
                pass
        step = min(PLD_DISCRETIZATION, self.epsilon / 2000)
        for use_mechanisms in (True, False):
            if threshold is not None and best <= threshold:
                break
            best = min(best, _pld_total(entries, self.delta, step, use_mechanisms=use_mechanisms))
        return float(best)


class _Slot:
    def __init__(self, acc, reservation):
        self._acc, self._res = acc, reservation

    def record(self, result, *, label=None):
        """Record the fit's actual spend in place of its reservation."""
        if self._res.done:
            raise ValueError("this reservation was already recorded")
        spend = self._acc._as_spend(result, label or self._res.spend.label)
        with self._acc._lock:
            self._acc._check_detached()
            if self._res in self._acc._pending:
                self._acc._pending.remove(self._res)
            self._acc._ledger.append(spend)
            self._res.done = True
        return spend


def _pld_total(entries, delta, step, *, use_mechanisms) -> float:
    total = None
    for e in entries:
        for pld in _entry_plds(e, step, use_mechanisms):
            total = pld if total is None else total.compose(pld)
    if total is None:
        return 0.0
    return float(total.get_epsilon_for_delta(delta))


def _entry_plds(e: Spend, step, use_mechanisms):
    pld_ok = e.mechanisms and not any(
        isinstance(m, ZCDP) or (isinstance(m, SubsampledGaussian)
                                and m.sampling == "without-replacement")
        for m in e.mechanisms)
    if use_mechanisms and pld_ok:
        out = []
        for m in e.mechanisms:
            if _is_free(m):
                continue
            out.append(_pld_of(m, e.adjacency, step))
        return out
    params = dpa.pld.common.DifferentialPrivacyParameters(e.epsilon, e.delta)
    return [pldlib.from_privacy_parameters(params, value_discretization_interval=step)]
