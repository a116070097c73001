"""The problem model: losses on the margin, separable penalties, the ERM problem."""

from dpopt.data.losses import LOSSES, Loss, absolute, get_loss, huber, logistic, squared
from dpopt.data.penalties import (
    PENALTIES,
    Penalty,
    box,
    elastic_net,
    get_penalty,
    l1,
    l2,
    non_negative,
    none,
    prox_scalar,
)
from dpopt.data.problem import Problem

__all__ = [
    "Problem", "Loss", "Penalty", "LOSSES", "PENALTIES", "get_loss", "get_penalty",
    "squared", "logistic", "huber", "absolute",
    "none", "l1", "l2", "elastic_net", "box", "non_negative", "prox_scalar",
]
