"""Evaluation: every enabled benchmark on one variant, with its metrics file, predictions and tables (suite)."""
