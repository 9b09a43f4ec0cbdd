"""SLALOM for Captum."""
