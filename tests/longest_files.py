"""The test files `make test` starts first (read by ``tests/conftest.py``)."""

# The longest test files, longest first (seconds in a fresh clone's `make test`, pytest's --durations).
# `make test` runs two pytest-xdist workers with --dist loadfile, which hands whole files out in collection
# order, alternately at first: in plain order the masked-LM repro, the team server and the Optuna workers all
# fell to one worker and the run waited minutes on it. Collected first, they start on alternate workers.
LONGEST_FILES = (
    "test_team_server.py",  # ~265: one authenticated MLflow server on PostgreSQL, ~30 CLI subprocesses
    "test_masked_lm_repro.py",  # ~195: a whole `dvc repro`
    "test_tune_workers.py",  # ~100: two Optuna worker processes, three storages
    "test_mlflow_server_concurrency.py",  # ~80: MLflow servers, parallel logging processes
    "test_finetune_resume.py",  # ~60: a killed and resumed fine-tune, accelerate launch
)
