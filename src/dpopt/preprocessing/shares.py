"""The default path's shares of mu^2 for the steps that fix the scale (Gaussian DP: step k
gets mu_k with sum_k mu_k^2 = mu^2; docs/default_path.md, "What happens"). Here, below the
pipeline, so that the table layer's releases that reuse a step's share (target coding) read
the same numbers."""

#: Shares of mu^2 (Gaussian-DP) spent on the steps that fix the scale.
SHARES = {"feature_bounds": 0.10, "feature_means": 0.04, "centred_bounds": 0.10,
          "row_norm": 0.03, "target_bounds": 0.05, "indicators": 0.02}
