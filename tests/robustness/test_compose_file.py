"""docker-compose.yml stays consistent with the code it configures.

No Docker engine runs on the CI machine, so the compose file is checked statically: the services the
README promises exist, every URL names its driver, Optuna and MLflow use separate databases, workers
start only after the one-off init, and the environment variables it sets are the ones biaslab reads.
(The same PostgreSQL + tracking-server layout runs for real in tests/integration/.)
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from biaslab.config import DATA_DIR_ENV
from biaslab.mitigation.tune import STORAGE_ENV
from biaslab.tracking import TRACKING_URI_ENV

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES = COMPOSE["services"]


def _database(url: str) -> str:
    match = re.fullmatch(r"postgresql\+psycopg2://[^@/]+@db:5432/(\w+)", url)
    assert match, f"{url!r}: expected postgresql+psycopg2://user:password@db:5432/<database>"
    return match.group(1)


def test_the_promised_services_exist():
    assert {"db", "mlflow", "init", "worker"} <= set(SERVICES)
    for name, service in SERVICES.items():
        if service.get("build"):
            assert (ROOT / service["build"] / "Dockerfile").is_file(), name


def test_mlflow_server_uses_postgres_and_proxied_artifacts():
    command = " ".join(SERVICES["mlflow"]["command"].split())
    backend = re.search(r"--backend-store-uri (\S+)", command).group(1)
    assert _database(backend) == "mlflow"
    assert "--artifacts-destination" in command


def test_workers_read_the_variables_biaslab_reads_and_a_separate_optuna_database():
    env = SERVICES["worker"]["environment"]
    assert env[TRACKING_URI_ENV] == "http://mlflow:5000"
    assert _database(env[STORAGE_ENV]) == "optuna"  # not MLflow's: both keep an alembic_version table
    assert DATA_DIR_ENV in env
    assert SERVICES["worker"]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert SERVICES["init"]["environment"][TRACKING_URI_ENV] == env[TRACKING_URI_ENV]
    init_script = SERVICES["init"]["command"][-1]
    assert env[STORAGE_ENV] in init_script  # the init creates the schema the workers then share
