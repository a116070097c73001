"""Privacy: mechanisms (noise with stated sensitivity) and accounting."""

from dpopt.privacy.accounting import (
    ACCOUNTANTS,
    ADJACENCIES,
    ZCDP,
    Calibration,
    Gaussian,
    Laplace,
    ObjectivePerturbation,
    PureDP,
    SubsampledGaussian,
    calibrate,
    calibrate_gaussian,
    dp_to_zcdp,
    epsilon_of,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    objective_perturbation_delta,
    rdp_gaussian_epsilon,
    rdp_gaussian_noise,
    resolve_accountant,
    zcdp_to_dp,
)
from dpopt.privacy.mechanisms import (
    advanced_composition_split,
    private_quantile,
    private_quantile_from_counts,
    quantile_counts,
    quantile_edges,
)

__all__ = [
    "ACCOUNTANTS", "ADJACENCIES", "Calibration", "Gaussian", "Laplace", "ObjectivePerturbation",
    "PureDP",
    "SubsampledGaussian", "ZCDP", "calibrate", "calibrate_gaussian", "dp_to_zcdp", "epsilon_of",
    "gdp_delta", "gdp_epsilon", "gdp_mu", "objective_perturbation_delta", "rdp_gaussian_epsilon",
    "rdp_gaussian_noise",
    "resolve_accountant", "zcdp_to_dp",
    # general mechanisms (mechanisms.py); the heavy-tailed mean oracles live beside their
    # solvers in dpopt.solvers.heavy_tailed.oracles
    "advanced_composition_split", "private_quantile", "private_quantile_from_counts",
    "quantile_counts", "quantile_edges",
]
