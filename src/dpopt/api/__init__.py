"""What users call: the scikit-learn estimators, the private hyperparameter search, the
privacy audit and model files."""
