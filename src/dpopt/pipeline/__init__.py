"""The default path: the budget plan, private scaling, the mechanism choice and the fit
(in memory: :mod:`dpopt.pipeline.default_path`; on chunks: :mod:`dpopt.pipeline.chunked`)."""
