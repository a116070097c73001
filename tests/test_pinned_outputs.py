"""Pinned solver outputs: every registered solver on a tiny problem, fixed seed.

The digests and epsilons were computed on the code before the solver-shape refactor
(issue 13) and must not change: a refactor that moves code keeps every result bit for bit.
A legitimate change of an algorithm updates the literal here and says why in its commit.
"""

import hashlib
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt


def problem(loss="squared", penalty="l2", sparse=False, fit_intercept=False):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 5))
    X[:, 3] *= 3.0
    y = X @ np.array([1.0, -0.5, 0.0, 0.2, 0.7]) + 0.3 * rng.standard_normal(40)
    if loss in ("logistic",):
        y = np.where(y > 0, 1.0, -1.0)
    if sparse:
        X[np.abs(X) < 0.7] = 0.0
        X = sp.csc_matrix(X)
    return dpopt.Problem(X, y, loss, penalty, alpha=0.05, fit_intercept=fit_intercept)


# (solver, loss, penalty, sparse X, fit_intercept, options) -> (sha256[:16] of w, epsilon spent)
PINNED = [
    (('dp-accmd', 'squared', 'none', False, False,
      {'iterations': 10, 'constraint': 'l2', 'radius': 1000000.0}),
     '4f70db6af02b9c60', 0.99999999999999),
    (('dp-cd', 'squared', 'l2', False, False,
      {'passes': 10}),
     'c982d78b01c614c5', 0.99999999999999),
    (('dp-gcd', 'squared', 'l2', False, False,
      {'passes': 10, 'selection_share': 0.1}),
     '89c83d5d4a417e45', 0.9994943753381962),
    (('dp-gd', 'squared', 'l2', False, False,
      {'passes': 10}),
     'b8001e3f1f297658', 0.99999999999999),
    (('dp-rbcd', 'squared', 'l2', False, False,
      {'passes': 10}),
     'c982d78b01c614c5', 0.99999999999999),
    (('dp-sgd', 'squared', 'l2', False, False,
      {'passes': 2, 'batch_size': 25}),
     '6fd6c655a8b64085', 0.9998641301881657),
    (('dp-svrg', 'squared', 'l2', False, False,
      {'epochs': 1, 'epoch_length': 1, 'batch_size': 25, 'strong_convexity': 1.0}),
     '4af0ffadcbfc6583', 0.9994300130982148),
    (('dp-svrg++', 'squared', 'l2', False, False,
      {'epochs': 1, 'epoch_length': 1, 'batch_size': 25}),
     'e811904fba9b1723', 0.999921644227336),
    (('ht-acsa', 'squared', 'l2', False, False,
      {'clip': 1.0, 'n_iter': 1, 'batch_size': 40}),
     'b4a0c1309d383958', 1.0),
    (('ht-proxsgd', 'squared', 'l2', False, False,
      {'clip': 1.0, 'n_iter': 1, 'batch_size': 40, 'strong_convexity': 1.0}),
     'f7335244fee4c3e6', 1.0),
    (('ht-sgd', 'squared', 'l2', False, False,
      {'clip': 1.0, 'n_iter': 1, 'batch_size': 40, 'strong_convexity': 1.0}),
     '4236c5e1c5c888fd', 1.0),
    (('ht-subgradient', 'squared', 'l2', False, False,
      {'clip': 1.0, 'radius': 1000.0, 'moment_bound': 100.0, 'max_phase_iter': 1}),
     'e6fa1fb7088f93c4', 1.0),
    (('reference', 'squared', 'l2', False, False,
      {}),
     'af032728bb36d6c2', math.inf),
    (('dp-cd', 'logistic', 'l1', False, True,
      {'passes': 3}),
     '8ad4fec36222bd39', 0.99999999999999),
    (('dp-cd', 'squared', 'elastic_net', True, False,
      {'passes': 3}),
     '7d1d72dc1379028b', 0.99999999999999),
    (('dp-gcd', 'logistic', 'l1', False, False,
      {'passes': 5}),
     '5c9054fdaf1f52d1', 0.9996241281331988),
    (('dp-gd', 'logistic', 'l2', True, True,
      {'passes': 4, 'clipping': 'coordinate'}),
     'b7d98ac78655b071', 0.99999999999999),
    (('dp-sgd', 'logistic', 'l1', False, False,
      {'passes': 2}),
     '96cf115af65587dd', 0.9996104515528553),
    (('dp-rbcd', 'squared', 'l1', False, False,
      {'passes': 3, 'sampling': 'importance'}),
     '43fa80030b896a6e', 0.99999999999999),
    (('dp-svrg', 'logistic', 'l2', False, False,
      {'epochs': 2}),
     '2c84c0b818f64f57', 0.9997964756179415),
    (('ht-sgd', 'squared', 'l2', False, False,
      {'n_iter': 3}),
     'ea461b22337735ae', 1.0),
    (('ht-proxsgd', 'logistic', 'l1', False, False,
      {'strong_convexity': 0.05}),
     '2c34ce1df23b838c', 1.0),
    (('ht-acsa', 'logistic', 'l2', False, False,
      {'accountant': 'exact', 'clip': 0.5}),
     '817359b54a89ac19', 0.99999999999999),
    (('ht-sgd', 'squared', 'l2', False, False,
      {'model': 'shuffle-simulation', 'moment_bound': 5.0}),
     'efbed2cf9f361c54', 1.0),
    (('ht-subgradient', 'squared', 'l1', False, False,
      {'moment_bound': 10.0, 'radius': 10.0}),
     '6a40025c59d123c9', 1.0),
    (('dp-cd', 'squared', 'l2', False, False,
      {'passes': 3, 'accountant': 'rdp', 'smoothness': 'private'}),
     '96bd739746af8771', 0.9999999999999998),
    (('dp-cd', 'squared', 'l2', False, False,
      {'passes': 3, 'averaging': 'epoch'}),
     'dc731a1d7a30fdc2', 0.99999999999999),
    (('dp-gcd', 'squared', 'l1', False, False,
      {'passes': 4, 'rule': 'gs-q', 'selection': 'laplace'}),
     '3d110d7424524391', 0.997958401820256),
    (('dp-sgd', 'squared', 'l2', False, False,
      {'passes': 2, 'adjacency': 'add-remove', 'accountant': 'rdp'}),
     'a772b370924a77d2', 0.9998289056093661),
    (('dp-svrg++', 'squared', 'l1', False, False,
      {'epochs': 2}),
     'b28f3ce85d4bf438', 0.9993531743360092),
    (('dp-accmd', 'logistic', 'none', False, False,
      {'iterations': 5, 'constraint': 'l1'}),
     '8fb0500e954e4b09', 1.0),
    (('dp-rbcd', 'squared', 'l2', False, False,
      {'passes': 2, 'sampling': 'nice', 'block_size': 2}),
     '95fac99ebace4fe4', 1.0),
    (('dp-gd', 'squared', 'l1', False, False,
      {'passes': 3, 'output': 'random'}),
     '44094b774abfaba4', 0.99999999999999),
    (('ht-acsa', 'squared', 'none', False, False,
      {}),
     '29ecf405fd91bf14', 1.0),
]


def _digest(w):
    return hashlib.sha256(np.ascontiguousarray(w, dtype=np.float64).tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("case, digest, epsilon", PINNED,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{i}" for i, (c, _, _) in enumerate(PINNED)])
def test_solver_output_is_pinned(case, digest, epsilon):
    name, loss, penalty, sparse, fit_intercept, options = case
    pb = problem(loss, penalty, sparse, fit_intercept)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpopt.solve(pb, name, epsilon=1.0, delta=1e-5, random_state=3, **options)
    assert _digest(res.w) == digest
    assert res.epsilon == epsilon


def test_every_solver_present_at_pinning_is_covered():
    pinned = {c[0] for c, _, _ in PINNED}
    assert {"dp-accmd", "dp-cd", "dp-gcd", "dp-gd", "dp-rbcd", "dp-sgd", "dp-svrg", "dp-svrg++",
            "ht-acsa", "ht-proxsgd", "ht-sgd", "ht-subgradient", "reference"} <= pinned
