"""docker-compose.yml stays consistent with the code it configures.

No Docker engine runs on the CI machine, so the compose file is checked statically: the services the
README promises exist, every URL names its driver, Optuna and MLflow use separate databases, workers
start only after the one-off init, and the environment variables it sets are the ones biaslab reads; and
with the Dockerfile: a GPU worker (NVIDIA reservation, opt-in profile), the Hugging Face cache volume and
token from the host, offline mode only when asked, a CUDA image by default and a CPU one by argument.
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


# ------------------------------------------------------------------------------ CUDA host and Hugging Face
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _interpolation(value: str) -> tuple[str, str] | None:
    """``("NAME", "default")`` for a compose ``${NAME:-default}`` value, else ``None``."""
    match = re.fullmatch(r"\$\{(\w+):-([^}]*)\}", str(value))
    return (match.group(1), match.group(2)) if match else None


def test_the_gpu_worker_reserves_an_nvidia_gpu_and_is_opt_in():
    gpu = SERVICES["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    # compose accepts a number or "all" for count, never an interpolated string (docker/compose#11097)
    assert isinstance(devices[0]["count"], int) or devices[0]["count"] == "all"
    assert gpu["profiles"] == ["gpu"]  # a CPU host's `docker compose up` never asks for a GPU
    assert "deploy" not in SERVICES["worker"]
    for key in ("command", "environment", "depends_on", "volumes", "build"):  # otherwise the same worker
        assert gpu[key] == SERVICES["worker"][key], key


def test_workers_share_the_hf_cache_volume_and_get_the_token_from_the_host():
    assert "hf-cache" in COMPOSE["volumes"]
    for name in ("worker", "worker-gpu"):
        env, volumes = SERVICES[name]["environment"], SERVICES[name]["volumes"]
        assert f"hf-cache:{env['HF_HOME']}" in volumes, name
        assert _interpolation(env["HF_TOKEN"]) == ("HF_TOKEN", ""), name  # passed through, never written here
        # offline only when asked: a variable, defaulting to online
        assert _interpolation(env["HF_HUB_OFFLINE"]) == ("HF_HUB_OFFLINE", "0"), name
        assert env[DATA_DIR_ENV] == "/data/datasets", name


def test_offline_mode_is_asked_for_not_forced_and_the_token_is_never_baked_in():
    import huggingface_hub.constants

    assert not huggingface_hub.constants._is_true("0")  # the default the compose file and the image give
    instructions = [line for line in DOCKERFILE.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "ARG HF_HUB_OFFLINE=0" in instructions
    assert any("HF_HUB_OFFLINE=${HF_HUB_OFFLINE}" in line for line in instructions)
    assert not any(re.search(r"HF_HUB_OFFLINE=1|HF_TOKEN", line) for line in instructions)  # only in the comments


def test_the_image_builds_for_cuda_by_default_and_for_cpu_by_argument():
    stage = DOCKERFILE.split("FROM", 1)[1]
    assert re.search(r'^ARG TORCH_INDEX_URL=""$', stage, re.M)
    assert '${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==' in stage  # default: PyPI (CUDA) wheel
    pinned = re.search(r"^torch==(\S+)$", (ROOT / "requirements.lock").read_text(encoding="utf-8"), re.M).group(1)
    assert f"torch=={pinned}" in stage  # the locked version, from either index
    assert re.search(r"^ENV .*HF_HOME=/hf-cache", stage, re.M | re.S)
    assert "/hf-cache" in stage.split("VOLUME", 1)[1].splitlines()[0]
    assert re.search(r'^ARG PIP_EXTRAS=""$', stage, re.M)
