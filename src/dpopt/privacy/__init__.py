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
    MeanOracle1,
    MeanOracle2,
    ScalarSumProtocol,
    ShuffleMeanOracle1,
    ShuffleMeanOracle2,
    advanced_composition_split,
    clip_rows_l2,
    median_of_means,
    private_quantile,
)

__all__ = [
    "ACCOUNTANTS", "ADJACENCIES", "Calibration", "Gaussian", "Laplace", "ObjectivePerturbation",
    "PureDP",
    "SubsampledGaussian", "ZCDP", "calibrate", "calibrate_gaussian", "dp_to_zcdp", "epsilon_of",
    "gdp_delta", "gdp_epsilon", "gdp_mu", "objective_perturbation_delta", "rdp_gaussian_epsilon",
    "rdp_gaussian_noise",
    "resolve_accountant", "zcdp_to_dp",
    # heavy-tailed mean oracles (mechanisms.py)
    "MeanOracle1", "MeanOracle2", "ScalarSumProtocol", "ShuffleMeanOracle1",
    "ShuffleMeanOracle2", "advanced_composition_split", "clip_rows_l2", "median_of_means",
    "private_quantile",
]
