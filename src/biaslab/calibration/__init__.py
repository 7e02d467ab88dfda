"""Calibration: does each benchmark see a bias that is there? The planted model read against its counterbalanced control."""
