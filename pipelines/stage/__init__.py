"""Stage helpers: the error contract every stage shares (entry), inputs from earlier stages (inputs), and the pretraining curves (training_log)."""
