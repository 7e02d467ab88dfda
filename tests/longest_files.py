"""The test files `make test` starts first (read by ``tests/conftest.py``)."""

# The longest test files, longest first (seconds of a fresh clone's `make test` on the 2-core AVX2 EPYC, pytest's
# --durations, 2026-11-29: two workers on two cores, so about twice a file's time alone). `make test` runs two
# pytest-xdist workers with --dist loadfile and --no-loadscope-reorder: whole files, handed out in collection order
# as a worker runs low. (Without --no-loadscope-reorder xdist re-sorts the files by their number of tests, which
# put these one-test files last, whatever this list said.) Collected first, they start at once on alternate
# workers and the short files fill in. The suite is CPU-bound, so the order gains little (docs/testing.md).
LONGEST_FILES = (
    "test_masked_lm_repro.py",  # ~420: a whole `dvc repro`
    "test_team_server.py",  # ~300: one authenticated MLflow server on PostgreSQL, ~30 CLI subprocesses
    "test_profile_repro.py",  # ~245: a whole `dvc exp run -S profile=...`
    "test_tune_workers.py",  # ~100: two Optuna worker processes, three storages
    "test_planted_draws.py",  # ~100: a tiny draw end to end in a worker
    "test_mlflow_server_concurrency.py",  # ~80: MLflow servers, parallel logging processes
    "test_no_mirror_repro.py",  # ~75: a `dvc repro` from the pinned sources
    "test_evaluate_stage.py",  # ~70: evaluate stages, signals
    "test_finetune_resume.py",  # ~60: a killed and resumed fine-tune, accelerate launch
)
