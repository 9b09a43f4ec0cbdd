"""SLALOM for SHAP."""
