"""Statistical checks of noise, and the shapes of iterate noise several solvers share.

Used by tests/test_mechanisms.py and by the solvers' own test modules, which declare
their zero-gradient noise checks (``_declarations.noise_spec``).

Each check is a Kolmogorov-Smirnov test of the shape plus a second-moment z-test of the
scale (KS alone is weak against a scale error), each at ALPHA = 1e-3, so a correct
mechanism fails a check with probability about 2e-3 (false alarm).
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy import stats

import dpopt

ALPHA = 1e-3


class Dist:
    """A null distribution: its cdf and its second and fourth moments (mean zero)."""

    def __init__(self, cdf, m2, m4):
        self.cdf, self.m2, self.m4 = cdf, m2, m4


NORMAL = Dist(stats.norm.cdf, 1.0, 3.0)
LAPLACE = Dist(stats.laplace.cdf, 2.0, 24.0)


def assert_distribution(samples, dist, what):
    """KS test of the shape and z-test of E[x^2] (the scale), each at level ALPHA."""
    x = np.ravel(samples)
    res = stats.kstest(x, dist.cdf)
    assert res.pvalue > ALPHA, f"{what}: KS statistic {res.statistic:.4f}, p = {res.pvalue:.2e}"
    z = (np.mean(x * x) - dist.m2) / math.sqrt((dist.m4 - dist.m2 ** 2) / x.size)
    p = 2 * stats.norm.sf(abs(z))
    assert p > ALPHA, f"{what}: second moment {np.mean(x * x):.4f} vs {dist.m2:.4f} (KS ok), " \
                      f"z = {z:.2f}, p = {p:.2e}"


def zero_problem(n=20, p=3, sparse=False):
    """X = 0: every gradient vanishes, so a solver's iterates move only by its noise."""
    X = sp.csr_matrix((n, p)) if sparse else np.zeros((n, p))
    return dpopt.Problem(X, np.zeros(n), "squared")


M_PUBLIC = np.array([1.0, 4.0, 0.25])  # unequal, so per-coordinate scales are tested


def coordinate_noise(problem, o, res, steps=None):
    """Coordinate steps (DP-CD; DP-RBCD's uniform sampling, DP-GCD on X = 0):
    w_j = -gamma_j sigma_j (sum of k_j standard normals), k_j ~ Bin(N, 1/p) visits,
    gamma_j = step / M_j, sigma_j = z 2 C_j / n, C_j = C sqrt(M_j / sum M); N = passes p
    coordinate steps or ``steps``."""
    M = o["smoothness"]
    clips = o["clip"] * np.sqrt(M / M.sum())
    scale = o["step"] / M * res.noise_multiplier * 2 * clips / problem.n_samples
    p = problem.dim
    steps = o["passes"] * p if steps is None else steps

    k = np.arange(0, steps + 1)
    wk = stats.binom.pmf(k, steps, 1 / p)

    def cdf_j(x):  # mixture over the number k of visits of coordinate j (k = 0: atom at 0)
        x = np.asarray(x)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            parts = np.where(k > 0, stats.norm.cdf(x / np.sqrt(np.maximum(k, 1))), x >= 0)
        return np.sum(wk * parts, axis=-1)
    mixture = Dist(cdf_j, float(np.sum(wk * k)), float(np.sum(wk * 3 * k * k)))
    # the sum over coordinates is exactly N(0, N)
    return [(np.sum(res.w / scale) / math.sqrt(steps), NORMAL)] + \
        [(res.w[j] / scale[j], mixture) for j in range(p)]


def eso_noise(problem, o, res):
    """DP-GD's step_rule="eso" (and DP-RBCD's full sampling): Gamma_j = step / (min(p,
    omega) M_j), X = 0 has omega = p; one full step per pass, sigma = z 2C / n (||C_S|| = C)."""
    gamma = o["step"] / (problem.dim * o["smoothness"])
    scale = gamma * res.noise_multiplier * 2 * o["clip"] / problem.n_samples
    return [(res.w / (scale * math.sqrt(o["passes"])), NORMAL)]
