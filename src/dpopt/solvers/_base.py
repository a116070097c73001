"""Solver registry, dispatch and the result every solver returns."""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import (
    check_choice,
    check_positive_int,
    check_privacy_target,
    check_random_state,
    check_scalar,
)
from dpopt.data import Problem


@dataclass
class FitResult:
    """What a solver returns.

    Attributes
    ----------
    coef, intercept : the model (intercept 0.0 without ``fit_intercept``).
    w : the solver's vector (``coef`` followed by the intercept coordinate).
    solver : registered name of the solver.
    epsilon, delta : the privacy actually spent (``inf`` for a non-private run).
    adjacency : ``"replace-one"`` or ``"add-remove"``: what the guarantee is about.
    accountant : the accountant that certified ``epsilon`` (``"none"`` if non-private).
    noise_multiplier : sigma / sensitivity of the main mechanism (0 if no noise).
    mechanisms : the composition that was accounted (records of :mod:`dpopt.privacy`),
        so that a budget can re-compose it with other fits.
    n_iter : number of updates (coordinate steps, gradient steps, ...).
    passes : data passes in the solver's own unit (see the solver's docstring).
    checkpoints : iterates at checkpoints, shape (k, dim); releasing them is
        covered by the same guarantee (post-processing of the released noisy
        quantities) unless a solver says otherwise.
    checkpoint_passes, checkpoint_times : pass count and elapsed seconds at each checkpoint.
    params : the hyperparameters actually used.
    time : total wall time in seconds.
    leaks : what the fit read from the private data without privacy (the messages of
        its :class:`dpopt.PrivacyLeakWarning`, e.g. a clipping bound taken as the data's
        maximum). Empty for a private fit. When not empty, ``epsilon``/``delta`` bound
        only the noisy steps: the released model is *not* (epsilon, delta)-DP, because
        a data-derived constant changes with one record and the guarantee does not
        cover it; :meth:`privacy_report` says so first and :attr:`is_private` is False.
    """

    coef: np.ndarray
    intercept: float
    w: np.ndarray
    solver: str
    epsilon: float
    delta: float
    adjacency: str
    accountant: str
    noise_multiplier: float
    mechanisms: list = field(default_factory=list)
    n_iter: int = 0
    passes: float = 0.0
    checkpoints: np.ndarray | None = None
    checkpoint_passes: np.ndarray | None = None
    checkpoint_times: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    time: float = 0.0
    leaks: tuple = ()

    @property
    def is_private(self) -> bool:
        """True when ``(epsilon, delta)`` is the model's end-to-end guarantee (finite
        epsilon, nothing read from the data without privacy)."""
        return not self.leaks and not math.isinf(self.epsilon)

    def objective_trajectory(self, problem: Problem) -> np.ndarray:
        """F at every checkpoint (a diagnostic computed on the private data; not private)."""
        return np.array([problem.objective(w) for w in self.checkpoints])

    def privacy_report(self) -> str:
        if math.isinf(self.epsilon):
            return f"{self.solver}: not private (epsilon = inf)"
        chunked = chunked_note(self.params)
        if self.leaks:
            return (f"NOT private: {self.solver} read from the private data without privacy: "
                    + " | ".join(self.leaks)
                    + f". Its noisy steps are calibrated to ({self.epsilon:.4g}, "
                    f"{self.delta:.3g}) under {self.adjacency} adjacency, but that guarantee "
                    f"does not cover the constants read from the data; pass them as public "
                    f"values to make the fit private{chunked}")
        return (f"{self.solver}: ({self.epsilon:.4g}, {self.delta:.3g})-DP under {self.adjacency} "
                f"adjacency, accountant {self.accountant}, noise multiplier "
                f"{self.noise_multiplier:.4g}{chunked}")


def chunked_note(params) -> str:
    """What a privacy report adds for a fit on chunked data (``params["data"]``), else ''."""
    data = params.get("data")
    return "" if not data else (f"; chunked data ({data['n_chunks']} chunks), accounting as on "
                                f"one machine (unchanged)")


class Checkpoints:
    """Collects iterates, pass counts and times while a solver runs."""

    def __init__(self):
        self._w, self._passes, self._times = [], [], []
        self._start = time.perf_counter()

    def record(self, w, passes):
        self._w.append(np.array(w, dtype=np.float64, copy=True))
        self._passes.append(float(passes))
        self._times.append(time.perf_counter() - self._start)

    def elapsed(self) -> float:
        return time.perf_counter() - self._start

    def arrays(self):
        return np.array(self._w), np.array(self._passes), np.array(self._times)


def make_result(problem, w, *, solver, calibration_or_spent, mechanisms, n_iter, passes,
                checkpoints: Checkpoints, params, adjacency="replace-one") -> FitResult:
    """Assemble a :class:`FitResult` (``calibration_or_spent`` is a
    :class:`dpopt.privacy.Calibration` or a tuple (epsilon, delta, accountant, z))."""
    c = calibration_or_spent
    if isinstance(c, tuple):
        eps, delta, acc, z = c
    else:
        eps, delta, acc, z = c.epsilon, c.delta, c.accountant, c.noise_multiplier
    coef, intercept = problem.unpack(w)
    cw, cp, ct = checkpoints.arrays()
    return FitResult(coef=coef, intercept=intercept, w=np.array(w, copy=True), solver=solver,
                     epsilon=float(eps), delta=float(delta), adjacency=adjacency, accountant=acc,
                     noise_multiplier=float(z), mechanisms=list(mechanisms), n_iter=int(n_iter),
                     passes=float(passes), checkpoints=cw, checkpoint_passes=cp,
                     checkpoint_times=ct, params=dict(params), time=checkpoints.elapsed())


# ---------------------------------------------------------------------------
# options as data (scikit-learn's _parameter_constraints, one frozen spec per solver)


def positive_int(value, name):
    """Constraint: an integer >= 1."""
    return check_positive_int(value, name)


def positive(value, name):
    """Constraint: a finite float > 0."""
    return check_scalar(value, name, low=0.0, low_open=True)


def one_of(*choices):
    """Constraint: one of the strings ``choices``."""

    def check(value, name):
        return check_choice(value, name, choices)

    check.choices = choices
    return check


@dataclass(frozen=True)
class Option:
    """One solver option: ``name``, ``default``, ``check`` (a constraint ``check(value,
    name)`` raising ``ValueError`` naming the option, or ``None`` when the solver
    validates it itself, e.g. options whose valid range depends on another) and ``doc``."""

    name: str
    default: object
    check: Callable | None = None
    doc: str = ""

    def validate(self, value):
        if self.check is not None:
            self.check(value, self.name)

    def but(self, **changes) -> Option:
        """The same option with another default, check or doc (shared options)."""
        return replace(self, **changes)


def _frozen(mapping):
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class DefaultUse:
    """When the estimators' default path (:mod:`dpopt.pipeline.default_path`) may choose a
    solver, and how it sets it up.

    ``losses`` / ``penalties``: the (loss, penalty) pairs it may be chosen for (empty: never
    chosen, its ``settings`` only serve :func:`dpopt.pipeline.default_path.rules`);
    ``rank``: among the solvers that apply, the highest rank is chosen (on chunked data, the
    highest that is ``distributed``); ``why``: the reason the fit's plan and report give;
    ``settings(*, loss, n, dim, mu, row_bound, alpha, huber_threshold, **released)``: its
    options on the default path's scaled domain (features in [0, 1] or [-1, 1], rows of norm
    <= row_bound, targets in [-1, 1]), from these public numbers only, never from the data;
    ``released`` are numbers the path released on the way (dp-gd's ``curvature``, AdaSSP's
    ``target_spread``), passed to every solver's settings, each taking what it reads;
    ``declines(n, dim, mu)``: None, or why its error bound rules it out at these public
    sizes; the solver named ``instead`` is then chosen.
    """

    settings: Callable
    why: str = ""
    losses: tuple = ()
    penalties: tuple = ()
    rank: int = 0
    declines: Callable | None = None
    instead: str | None = None

    def applies(self, loss, penalty) -> bool:
        return loss in self.losses and penalty in self.penalties


@dataclass(frozen=True, eq=False)
class SolverSpec:
    """A registered solver, declared as data.

    ``func(problem, *, epsilon, delta, rng, **options)`` fits; ``option_specs`` are its
    options (:class:`Option`); ``losses`` / ``penalties`` the names it supports (``None``
    = all); ``fit_intercept`` whether it handles an intercept coordinate; ``run_length``
    the option that sets how long it runs (``solve(..., run_length=k)`` sets it whatever
    its own name: passes, epochs, iterations or n_iter); ``audit`` / ``audit_canary`` the
    quick empirical audit's options and canary arguments (:mod:`dpopt.api.audit`);
    ``mechanism`` / ``sensitivity`` one line each on what a private solver releases and the
    sensitivity of each release under the adjacency it reports (the docstring proves them;
    ``dpopt solvers`` and the audit table print them); ``default_path`` a :class:`DefaultUse`
    when the estimators' default path may choose it.
    """

    name: str
    func: Callable
    description: str
    losses: tuple | None = None
    penalties: tuple | None = None
    private: bool = True
    family: str = ""
    option_specs: tuple = ()
    run_length: str | None = None
    fit_intercept: bool = True
    audit: Mapping = field(default_factory=dict)
    audit_canary: Mapping = field(default_factory=dict)
    distributed: bool = False  # accepts a dpopt.data.chunked.ChunkedProblem (Dask / out-of-core)
    mechanism: str = ""  # what a private solver releases (one line; the docstring proves it)
    sensitivity: str = ""  # of each release, under the adjacency it reports
    default_path: DefaultUse | None = None  # when the default path may choose it

    def options(self) -> list[str]:
        """Names of the options, in declaration order."""
        return [o.name for o in self.option_specs]

    def defaults(self) -> dict:
        return {o.name: o.default for o in self.option_specs}

    def check_options(self, options, what=None) -> dict:
        """Map the ``run_length`` alias, refuse unknown names (``ValueError`` listing the
        accepted ones) and check every given value against its constraint.

        The one check of a solver's options, for :func:`solve` and for its callers that
        check before reading any data; ``what`` names the caller's argument in the errors
        (``"solver_options"``, ``"--option"``): ``"<what>: unknown option(s) ..."`` and
        ``"<what> <option>: <the constraint's message>"``.
        """
        prefix = "" if what is None else f"{what}: "
        options = dict(options)
        if "run_length" in options and self.run_length is not None:
            if self.run_length in options:
                raise ValueError(f"{prefix}give run_length or {self.run_length}, not both")
            options[self.run_length] = options.pop("run_length")
        unknown = sorted(set(options) - set(self.options()))
        if unknown:
            raise ValueError(f"{prefix}unknown option(s) {unknown} for solver {self.name!r}; "
                             f"it accepts {self.options()}")
        for opt in self.option_specs:
            if opt.name in options:
                try:
                    opt.validate(options[opt.name])
                except ValueError as exc:
                    if what is None:
                        raise
                    raise ValueError(f"{what} {opt.name}: {exc}") from None
        return options

    def check_problem(self, problem):
        """Refuse a loss, penalty or intercept the solver does not support."""
        if self.losses is not None and problem.loss.name not in self.losses:
            raise ValueError(f"solver {self.name!r} supports losses {list(self.losses)}, "
                             f"got loss={problem.loss.name!r}")
        if self.penalties is not None and problem.penalty.name not in self.penalties:
            raise ValueError(f"solver {self.name!r} supports penalties {list(self.penalties)}, "
                             f"got penalty={problem.penalty.name!r}")
        if problem.fit_intercept and not self.fit_intercept:
            raise ValueError(f"{self.name} does not fit an intercept: use fit_intercept=False "
                             f"(append a scaled constant feature instead)")

    def adjacency(self, options) -> str:
        """The adjacency the fit will certify: its ``adjacency`` option, else replace-one."""
        return options.get("adjacency", self.defaults().get("adjacency", "replace-one"))


_REGISTRY: dict[str, SolverSpec] = {}


def register_solver(name, *, description, options, losses=None, penalties=None, private=True,
                    family="", run_length=None, fit_intercept=True, audit=None,
                    audit_canary=None, distributed=False, mechanism="", sensitivity="",
                    default_path=None):
    """Decorator registering ``func`` under ``name`` (see :class:`SolverSpec`).

    ``options`` is the tuple of :class:`Option` the function accepts as keywords after
    ``problem, *, epsilon, delta, rng``. A private solver gives ``audit`` (the options of
    its quick audit, small problem and few steps); ``tests/test_audit.py`` checks that
    every private solver has one, and its ``mechanism`` and ``sensitivity``.
    ``distributed=True`` declares that ``func`` also fits a
    :class:`dpopt.data.chunked.ChunkedProblem` (row-chunked Dask or on-disk data).
    ``default_path`` (a :class:`DefaultUse`) declares when the estimators' default path may
    choose it and with which settings: adding a default mechanism is its module and this.
    """

    def decorator(func):
        if name in _REGISTRY:
            raise ValueError(f"solver {name!r} is already registered")
        specs = tuple(options)
        if run_length is not None and run_length not in {o.name for o in specs}:
            raise ValueError(f"run_length {run_length!r} is not an option of {name!r}")
        _REGISTRY[name] = SolverSpec(name, func, description, losses and tuple(losses),
                                     penalties and tuple(penalties), private, family or name,
                                     specs, run_length, fit_intercept,
                                     _frozen(audit), _frozen(audit_canary), bool(distributed),
                                     mechanism, sensitivity, default_path)
        return func

    return decorator


def available_solvers(private_only=False) -> list[str]:
    """Names of the registered solvers."""
    # importing this module ran dpopt/solvers/__init__.py first, which imports every solver
    return sorted(n for n, s in _REGISTRY.items() if s.private or not private_only)


def get_solver(name) -> SolverSpec:
    names = available_solvers()
    if name not in _REGISTRY:
        raise ValueError(f"solver must be one of {names}, got {name!r}")
    return _REGISTRY[name]


def _run_noting_leaks(spec, problem, epsilon, delta, rng, options) -> FitResult:
    """Run the solver; the :class:`dpopt.PrivacyLeakWarning` messages it raised (constants
    read from the data) go into ``result.leaks`` and every warning is re-raised as it was."""
    caught = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = spec.func(problem, epsilon=epsilon, delta=delta, rng=rng, **options)
    finally:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                                   module=_module_of(w.filename), source=w.source)
    leaks = tuple(str(w.message) for w in caught
                  if issubclass(w.category, PrivacyLeakWarning))
    return replace(result, leaks=tuple(result.leaks) + leaks) if leaks else result


def _module_of(filename):
    """The name of the loaded module defined in ``filename`` (what ``warnings.warn`` would
    have matched filters against), else None."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename:
            return name
    return None


@dataclass(frozen=True)
class SolveCall:
    """A checked call of a registered solver (:func:`prepare_solve`): what a budget charge
    needs before anything runs (``target``: the epsilon reserved, ``inf`` for a non-private
    solver whatever it was given; ``delta``; ``adjacency``), and :meth:`run`."""

    spec: SolverSpec
    problem: object
    epsilon: float
    delta: float
    options: Mapping
    rng: np.random.Generator

    @property
    def target(self) -> float:
        return self.epsilon if self.spec.private else math.inf

    @property
    def adjacency(self) -> str:
        return self.spec.adjacency(self.options)

    def run(self) -> FitResult:
        """Run the solver (no budget charge: :func:`dpopt.solve`, in the api layer, charges)."""
        return _run_noting_leaks(self.spec, self.problem, self.epsilon, self.delta, self.rng,
                                 dict(self.options))

    def finish(self, result) -> FitResult:
        """The checks after the release: a non-finite model raises (a post-processing of the
        released noisy output, so a charged fit stays charged); chunked data is described."""
        if not np.all(np.isfinite(result.w)) or (result.checkpoints is not None
                                                 and np.any(np.isnan(result.checkpoints))):
            raise ValueError(f"solver {self.spec.name!r} produced a non-finite model (its "
                             f"iterates overflowed): reduce step or clip, or rescale the data")
        if getattr(self.problem, "is_chunked", False) is True:
            result.params["data"] = self.problem.describe()
        return result


def prepare_solve(problem, solver="dp-cd", *, epsilon=1.0, delta=None, random_state=None,
                  **options) -> SolveCall:
    """Check a solver call before anything runs: the problem, the solver, the target
    (epsilon, delta; default delta 1/n^2), the options and the loss / penalty / intercept."""
    chunked = getattr(problem, "is_chunked", False) is True
    if not isinstance(problem, Problem) and not chunked:
        raise ValueError(f"problem must be a dpopt.Problem, got {type(problem).__name__}")
    spec = get_solver(solver)
    if chunked:
        check_distributed(spec)
    epsilon, delta = check_privacy_target(epsilon, delta, problem.n_samples)
    options = spec.check_options(options)
    spec.check_problem(problem)
    return SolveCall(spec, problem, epsilon, delta, options, check_random_state(random_state))


def solve_uncharged(problem, solver="dp-cd", *, epsilon=1.0, delta=None, random_state=None,
                    **options) -> FitResult:
    """:func:`dpopt.solve` without the budget charge, for the pipeline's fits that its
    caller charges as a whole (an api-level fit). Same checks, same result."""
    call = prepare_solve(problem, solver, epsilon=epsilon, delta=delta,
                         random_state=random_state, **options)
    return call.finish(call.run())


def distributed_solvers() -> list[str]:
    """Names of the solvers declared to accept a :class:`ChunkedProblem`."""
    return [name for name in available_solvers() if get_solver(name).distributed]


def check_distributed(spec):
    """ValueError naming the distributed solvers when ``spec`` is not one of them."""
    if spec.distributed:
        return
    msg = (f"solver {spec.name!r} does not accept chunked (Dask or out-of-core) data; the solvers "
           f"that do: {distributed_solvers()}")
    if spec.family in ("dp-cd", "dp-gcd"):
        msg += (f". {spec.name} updates one coordinate per step, which on chunked data costs one "
                f"cluster-wide reduction per coordinate: use dp-gd (one reduction of the full "
                f"gradient per step), or dp-rbcd with large blocks (sampling='nice' or "
                f"'bernoulli' with a large block_size: one reduction per block)")
    raise ValueError(msg)
