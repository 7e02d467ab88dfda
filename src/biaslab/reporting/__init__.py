"""Reporting: what people read after a run - the side-by-side report, the one-screen summary, variant comparisons, the papers' tables, plots, headline metrics and the reproduction check."""
