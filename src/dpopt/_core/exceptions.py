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
