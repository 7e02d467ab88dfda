"""Bias and accuracy measures: value types with direction/ideal, bootstrap CIs, local evaluate modules."""
