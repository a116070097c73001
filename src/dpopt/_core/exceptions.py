"""Warnings and errors raised by dpopt."""


class PrivacyLeakWarning(RuntimeWarning):
    """A quantity was computed from the private data without privacy.

    Follows the diffprivlib convention: the computation is allowed (it is
    often what a paper does, e.g. exact smoothness constants), but the user is
    told that the released model's guarantee does not cover it.
    """


class BudgetExceededError(ValueError):
    """A fit would spend more privacy than the budget has left."""


class WeakPrivacyWarning(UserWarning):
    """The requested guarantee is weak: delta larger than 1/n (a random record could be
    published in full)."""


class UnchargedFitWarning(RuntimeWarning):
    """A fit ran outside every budget of its context while a ``with BudgetAccountant``
    block was open in another thread of the process: the budget does not see the fit
    (a worker thread starts with an empty context; see :mod:`dpopt.privacy.budget`)."""


class ImputedValueWarning(UserWarning):
    """A prediction met cells that the model encodes as it encodes no value: missing cells
    without a missing indicator (imputed at 0, or counted outside a categorical column's
    levels, as in training), or a categorical column none of whose values is one of the
    model's levels (written otherwise than in training: case, numbers as text)."""


class NoIntervalsError(ValueError, AttributeError):
    """A fit released nothing for confidence intervals (``inference=False``, another
    solver, or a fit that could not give them). An ``AttributeError`` as well as a
    ``ValueError``, like scikit-learn's ``NotFittedError``: ``hasattr(model, "bse_")`` is
    False and ``dir(model)`` (IPython's completion, scikit-learn's ``__dir__``) works."""


class NotReleasableError(ValueError):
    """A default fit refused before any release because, by public facts alone (n, epsilon,
    delta, the estimator's arguments), it could not release anything reliable: too few rows
    to locate a regression target's range or to name a class label privately
    (:mod:`dpopt.pipeline.releasable`). Nothing is spent; declaring what it could not find
    (``target_bounds=``, ``classes=``), a larger epsilon or more rows lifts it."""


class ChargedFitError(ValueError):
    """A fit failed on the outcome of a private release it had already made (no label held
    by enough records to be released, say). Unlike a failure on bad input, whether it
    fails depends on the data through that noisy release, so it is an output: the fit's
    budget records those releases (``records``, Gaussian mechanisms, and the
    ``selection_delta`` their thresholds spent) before the error reaches the caller, and a
    retry is charged again. ``whole``: the releases made before the failure are not known
    where it is raised (a solver inside a pipeline), so the whole (epsilon, delta) the fit
    reserved is charged instead. The estimator is left as it was."""

    def __init__(self, message, records=(), selection_delta=0.0, *, whole=False):
        super().__init__(message)
        self.records = tuple(records)
        self.selection_delta = float(selection_delta)
        self.whole = bool(whole)
