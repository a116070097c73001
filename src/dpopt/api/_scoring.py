"""``score`` on Dask collections: an estimator fitted on chunked data predicts lazily (a Dask
array of unknown length), which scikit-learn's metrics cannot take; the predictions and the
target are computed together, then scored as in memory (accuracy, R^2). Post-processing of
a released model on data given at scoring time: nothing is released."""

from __future__ import annotations

import numpy as np

from dpopt.data.sources import is_chunked_input


class ChunkedScoreMixin:
    """Placed before scikit-learn's ``ClassifierMixin`` / ``RegressorMixin``: their ``score``
    on in-memory data, the same metric on Dask collections."""

    def score(self, X, y, sample_weight=None):
        if not (is_chunked_input(X) or (is_chunked_input(y) and not isinstance(y, str))):
            return super().score(X, y, sample_weight=sample_weight)
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        import dask
        from sklearn.base import is_classifier
        from sklearn.metrics import accuracy_score, r2_score

        pred, y = dask.compute(self.predict(X), y)
        metric = accuracy_score if is_classifier(self) else r2_score
        return float(metric(np.asarray(y).ravel(), np.asarray(pred).ravel(),
                            sample_weight=sample_weight))
