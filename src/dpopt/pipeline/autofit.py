"""What the default path returns (:class:`AutoFit`), and the fit of a predictor that is a
constant (:func:`constant_fit`): no model was fitted, and the released predictor is the
constant the path's releases gave (the private mean of y, a label the selection kept, or 0).

Shared by :mod:`dpopt.pipeline.default_path` and :mod:`dpopt.pipeline.constant`, which
both build such results; no release happens here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpopt.data import Problem
from dpopt.pipeline.scaling import _column_lines
from dpopt.preprocessing.feature_maps import RowNormalization, Scaling, TargetScaling
from dpopt.solvers import Checkpoints, make_result
from dpopt.solvers._base import chunked_note

__all__ = ["AutoFit", "constant_fit", "prediction_range"]


@dataclass
class AutoFit:
    """What the default path produced: the model's FitResult (with the whole
    composition in it), the scalings to apply at prediction time, and the plan."""

    result: object
    scaling: Scaling
    target: TargetScaling | None
    plan: dict = field(default_factory=dict)
    inference: object = None  # dpopt.pipeline.inference.Inference when inference=True

    def raw_model(self) -> tuple[np.ndarray, float]:
        """``(coef, intercept)`` in the raw units of X and y (post-processing)."""
        coef, intercept = self.scaling.unscale(np.asarray(self.result.coef, float),
                                               float(self.result.intercept))
        if self.target is not None:  # y = center + half_width * (scaled model)
            coef = self.target.half_width * coef
            intercept = self.target.center + self.target.half_width * intercept
        return coef, intercept

    def report(self, name) -> str:
        """One line: the mechanism chosen, the privacy of the whole pipeline and its mu split."""
        plan, r = self.plan, self.result
        if plan.get("unlearnable"):
            return (f"{name} (solver='auto'): no model, ({r.epsilon:.4g}, {r.delta:.3g})-DP under "
                    f"{r.adjacency} adjacency. {plan['reason']}")
        shares = ", ".join(f"{k} mu={v:.3g}" for k, v in plan["mu_shares"].items())
        table = ""
        if plan.get("selection_delta"):
            table = (f"; the table's partition selection (categories / labels) holds "
                     f"{plan['selection_delta']:.3g} of delta for its threshold, the Gaussian "
                     f"mechanisms the rest")
        rows = ("; rows normalized to unit norm (n too small to locate the features' ranges)"
                if plan["scaling"] == "row-normalized" else "")
        return (f"{name} (solver='auto' -> {plan['solver']}): ({r.epsilon:.4g}, {r.delta:.3g})-DP "
                f"under {r.adjacency} adjacency, end to end (scaling included), accountant "
                f"{r.accountant}; Gaussian-DP mu={plan['mu']:.4g} split as "
                f"{shares}{rows}{table}{chunked_note(r.params)}{_selection_note(plan)}" + "".join(
                    f"\n{text}" for text in _column_lines(plan)))


def _selection_note(plan):
    """The report's sentence on the held-out choice (:mod:`dpopt.pipeline.selection`), if any."""
    sel = plan.get("selection")
    return "" if not sel else f"; {sel['reason']} (covered by the same guarantee)"


def constant_fit(n_features, fit_intercept, intercept, *, mechanisms, epsilon, delta,
                 accountant, plan, scaling=None, target=None, noise_multiplier=0.0) -> AutoFit:
    """An :class:`AutoFit` whose model is the constant ``intercept`` (scaled units; zero
    coefficients, and 0 without an intercept): its FitResult reports ``mechanisms``, the
    (``epsilon``, ``delta``) they spent under ``accountant``, and ``plan`` as its
    ``params["auto"]``. ``scaling``: the features' map (None: rows normalized, which maps a
    zero model to zero margins); ``target``: the target's map or None; ``noise_multiplier``:
    the one the result reports (that of the release the constant was read from)."""
    problem = Problem(np.zeros((1, n_features)), np.zeros(1), loss="squared",
                      fit_intercept=fit_intercept)
    w = np.zeros(n_features + int(fit_intercept))
    if fit_intercept:
        w[-1] = intercept
    result = make_result(problem, w, solver="none",
                         calibration_or_spent=(epsilon, delta, accountant, noise_multiplier),
                         mechanisms=mechanisms, n_iter=0, passes=0.0, checkpoints=Checkpoints(),
                         params={"auto": plan})
    return AutoFit(result, RowNormalization() if scaling is None else scaling, target, plan)


def prediction_range(auto):
    """(lower, upper): the private range a regressor's target was clipped to on the default
    path (the prediction's range), or None (a classifier, or a collapsed range: the
    released predictor is then a constant)."""
    target = getattr(auto, "target", None)
    if target is None or not target.half_width > 0:
        return None
    return float(target.lower), float(target.upper)
