"""Solver registry, dispatch and the result every solver returns."""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dpopt._validation import (
    check_delta,
    check_epsilon,
    check_random_state,
    warn_if_delta_exceeds_one_over_n,
)
from dpopt.problem import Problem


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

    def objective_trajectory(self, problem: Problem) -> np.ndarray:
        """F at every checkpoint (a diagnostic computed on the private data; not private)."""
        return np.array([problem.objective(w) for w in self.checkpoints])

    def privacy_report(self) -> str:
        if math.isinf(self.epsilon):
            return f"{self.solver}: not private (epsilon = inf)"
        return (f"{self.solver}: ({self.epsilon:.4g}, {self.delta:.3g})-DP under {self.adjacency} "
                f"adjacency, accountant {self.accountant}, noise multiplier "
                f"{self.noise_multiplier:.4g}")


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


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: ``func(problem, *, epsilon, delta, rng, **options)``."""

    name: str
    func: Callable
    description: str
    losses: tuple | None = None  # supported loss names, None = all
    penalties: tuple | None = None  # supported penalty names, None = all
    private: bool = True
    family: str = ""

    def options(self) -> list[str]:
        sig = inspect.signature(self.func)
        return [p for p in sig.parameters if p not in ("problem", "epsilon", "delta", "rng")]


_REGISTRY: dict[str, SolverSpec] = {}


def register_solver(name, *, description, losses=None, penalties=None, private=True, family=""):
    """Decorator registering ``func`` under ``name`` (see :class:`SolverSpec`)."""

    def decorator(func):
        if name in _REGISTRY:
            raise ValueError(f"solver {name!r} is already registered")
        _REGISTRY[name] = SolverSpec(name, func, description, losses and tuple(losses),
                                     penalties and tuple(penalties), private, family or name)
        return func

    return decorator


def available_solvers(private_only=False) -> list[str]:
    """Names of the registered solvers."""
    from dpopt import solvers  # noqa: F401  (imports every solver module)

    return sorted(n for n, s in _REGISTRY.items() if s.private or not private_only)


def get_solver(name) -> SolverSpec:
    names = available_solvers()
    if name not in _REGISTRY:
        raise ValueError(f"solver must be one of {names}, got {name!r}")
    return _REGISTRY[name]


def default_delta(n_samples: int) -> float:
    """1 / n^2, the papers' choice (requires n >= 2)."""
    if n_samples < 2:
        raise ValueError("delta must be given when there is a single sample (default 1/n^2 >= 1)")
    return 1.0 / n_samples ** 2


def solve(problem: Problem, solver: str = "dp-cd", *, epsilon=1.0, delta=None, random_state=None,
          budget=None, **options) -> FitResult:
    """Fit ``problem`` with a registered solver.

    Parameters
    ----------
    problem : Problem
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
        Solver options (see the solver's docstring); unknown names raise ``ValueError``.
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a dpopt.Problem, got {type(problem).__name__}")
    spec = get_solver(solver)
    epsilon = check_epsilon(epsilon)
    delta = default_delta(problem.n_samples) if delta is None else check_delta(delta)
    warn_if_delta_exceeds_one_over_n(delta, problem.n_samples)
    unknown = sorted(set(options) - set(spec.options()))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for solver {solver!r}; "
                         f"it accepts {spec.options()}")
    if spec.losses is not None and problem.loss.name not in spec.losses:
        raise ValueError(f"solver {solver!r} supports losses {list(spec.losses)}, "
                         f"got loss={problem.loss.name!r}")
    if spec.penalties is not None and problem.penalty.name not in spec.penalties:
        raise ValueError(f"solver {solver!r} supports penalties {list(spec.penalties)}, "
                         f"got penalty={problem.penalty.name!r}")
    rng = check_random_state(random_state)
    from dpopt.budget import resolve_budget, solver_adjacency

    acc = resolve_budget(budget)
    if acc is None:
        result = spec.func(problem, epsilon=epsilon, delta=delta, rng=rng, **options)
    else:
        # a non-private solver spends epsilon = inf whatever target it is given: refused
        target = epsilon if spec.private else math.inf
        with acc.spend(target, delta, adjacency=solver_adjacency(spec.func, options),
                       label=solver) as slot:
            result = spec.func(problem, epsilon=epsilon, delta=delta, rng=rng, **options)
            slot.record(result)
    # checked after recording: the error is a post-processing of a released noisy output
    if not np.all(np.isfinite(result.w)) or (result.checkpoints is not None
                                             and np.any(np.isnan(result.checkpoints))):
        raise ValueError(f"solver {solver!r} produced a non-finite model (its iterates "
                         f"overflowed): reduce step or clip, or rescale the data")
    return result
