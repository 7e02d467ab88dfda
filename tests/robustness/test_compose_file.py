"""docker-compose.yml stays consistent with the code it configures.

No Docker engine runs on the CI machine, so the compose file is checked statically: the services the
README promises exist, every URL names its driver, Optuna and MLflow use separate databases, workers
start only after the one-off init, and the environment variables it sets are the ones biaslab reads; and
with the Dockerfile: a GPU worker (NVIDIA reservation, opt-in profile), the Hugging Face cache volume and
token from the host, offline mode only when asked, a CUDA image by default and a CPU one by argument.
The team server: MLflow's basic-auth app with its settings, secrets only from .env (never in a tracked
file, never in the image), the port on loopback unless asked, MLflow's host/CORS/frame protections, and
Optuna's own PostgreSQL role. (The same PostgreSQL + authenticated tracking-server layout runs for real in
tests/integration/, which also runs the db-setup SQL of this file.)
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from biaslab.config import DATA_DIR_ENV
from biaslab.mitigation.lora.study import STORAGE_ENV
from biaslab.tracking.runs import TRACKING_URI_ENV

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES = COMPOSE["services"]


def _database(url: str) -> str:
    match = re.fullmatch(r"postgresql\+psycopg2://[^@/]+@db:5432/(\w+)", url)
    assert match, f"{url!r}: expected postgresql+psycopg2://user:password@db:5432/<database>"
    return match.group(1)


def _password_of(url: str) -> str:
    """The password part of a database URL: it must be a compose variable, never a value."""
    match = re.match(r"postgresql\+psycopg2://(\w+):([^@]+)@", url)
    assert match, f"{url!r}: expected postgresql+psycopg2://user:${{VARIABLE}}@..."
    return match.group(2)


def test_the_promised_services_exist():
    assert {"db", "mlflow", "init", "worker"} <= set(SERVICES)
    for name, service in SERVICES.items():
        if service.get("build"):
            assert (ROOT / service["build"] / "Dockerfile").is_file(), name


def _option(command: list[str], name: str) -> str | None:
    """The value of ``--name=value`` (or ``--name value``) in a command list."""
    for i, arg in enumerate(command):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return command[i + 1]
    return None


def _interpolate(value: str, env: dict[str, str]) -> str:
    """``value`` as compose fills it in from ``env`` (``${NAME}``, ``${NAME:-default}``, ``${NAME:?error}``)."""

    def fill(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise LookupError(f"required variable {name} is missing a value: {arg}")
        return arg if op == ":-" else ""

    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", fill, value)


SECRETS_ENV = {name: f"{name.lower().replace('_', '')}0123456789" for name in (
    "POSTGRES_PASSWORD", "OPTUNA_DB_PASSWORD", "MLFLOW_ADMIN_PASSWORD", "MLFLOW_SECRET_KEY",
    "BIASLAB_WORKER_PASSWORD", "BIASLAB_PROMOTER_PASSWORD", "BIASLAB_EVALUATOR_PASSWORD")}


def test_mlflow_server_uses_postgres_and_proxied_artifacts():
    command = SERVICES["mlflow"]["command"]
    assert _database(_interpolate(_option(command, "--backend-store-uri"), SECRETS_ENV)) == "mlflow"
    assert _option(command, "--artifacts-destination") == "/artifacts"


def test_workers_read_the_variables_biaslab_reads_and_a_separate_optuna_database():
    env = SERVICES["worker"]["environment"]
    assert env[TRACKING_URI_ENV] == "http://mlflow:5000"
    assert _database(_interpolate(env[STORAGE_ENV], SECRETS_ENV)) == "optuna"  # not MLflow's (alembic_version)
    assert DATA_DIR_ENV in env
    assert SERVICES["upstream"]["depends_on"]["init"]["condition"] == "service_completed_successfully"
    assert SERVICES["worker"]["depends_on"]["upstream"]["condition"] == "service_completed_successfully"
    assert SERVICES["init"]["environment"][TRACKING_URI_ENV] == env[TRACKING_URI_ENV]
    init_script = SERVICES["init"]["command"][-1]
    # the init creates the schema the workers then share, from the same URL
    assert SERVICES["init"]["environment"][STORAGE_ENV] == env[STORAGE_ENV]
    assert f'optuna.storages.RDBStorage(os.environ["{STORAGE_ENV}"])' in init_script


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


def test_the_default_image_gets_the_gpu_extra_and_the_cpu_image_does_not(tmp_path):
    """GPU_EXTRA=auto: [gpu] (bitsandbytes) in the default, CUDA build; not when TORCH_INDEX_URL names the CPU index.
    The RUN line's shell logic is run here with each build argument, printing the pip command it would run."""
    import subprocess

    stage = DOCKERFILE.split("FROM", 1)[1]
    assert re.search(r"^ARG GPU_EXTRA=auto$", stage, re.M)
    run = next(line for kind, line in _instructions(stage) if kind == "RUN" and "GPU_EXTRA" in line)
    script = run.replace("pip install", "echo pip install").replace("chown -R biaslab:biaslab /app", "true")

    def extras(**args: str) -> str:
        env = {"PIP_EXTRAS": "", "GPU_EXTRA": "auto", "TORCH_INDEX_URL": "", **args}
        out = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
        return " ".join(line for line in out.splitlines() if "[" in line)

    cpu = "https://download.pytorch.org/whl/cpu"
    assert extras() == "pip install -e .[gpu]"  # echo prints the command without the shell's quotes
    assert extras(TORCH_INDEX_URL=cpu) == ""
    assert extras(GPU_EXTRA="1", TORCH_INDEX_URL=cpu, PIP_EXTRAS="bench") == "pip install -e .[bench,gpu]"
    assert extras(GPU_EXTRA="0") == ""


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile stage, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(line.split(None, 1)[0], line.split(None, 1)[1]) for line in joined.splitlines()
            if line.strip() and len(line.split(None, 1)) == 2]


# ------------------------------------------------------------------------------ the team server (issue 14)
ENV_EXAMPLE = (ROOT / ".env.example").read_text(encoding="utf-8")
AUTH_INI = COMPOSE["configs"]["mlflow-auth"]["content"]
DB_SETUP_SQL = COMPOSE["configs"]["db-setup"]["content"]
SECRET_VARIABLES = ("POSTGRES_PASSWORD", "OPTUNA_DB_PASSWORD", "MLFLOW_ADMIN_PASSWORD", "MLFLOW_SECRET_KEY",
                    "BIASLAB_WORKER_PASSWORD", "BIASLAB_PROMOTER_PASSWORD", "BIASLAB_EVALUATOR_PASSWORD")


def _required(value: str) -> str:
    """``NAME`` of a value that is exactly a required compose variable ``${NAME:?message}``."""
    match = re.fullmatch(r"\$\{(\w+):\?[^}]+\}", str(value))
    assert match, f"{value!r}: a secret must be a required variable ${{NAME:?how to set it}}"
    return match.group(1)


def test_the_server_runs_mlflows_basic_auth_app_configured_by_a_mounted_ini():
    mlflow = SERVICES["mlflow"]
    command = mlflow["command"]
    assert command[:2] == ["mlflow", "server"]
    assert _option(command, "--app-name") == "basic-auth"
    env = mlflow["environment"]
    targets = {c["source"]: c["target"] for c in mlflow["configs"]}
    assert env["MLFLOW_AUTH_CONFIG_PATH"] == targets["mlflow-auth"]
    assert _required(env["MLFLOW_AUTH_ADMIN_PASSWORD"]) == "MLFLOW_ADMIN_PASSWORD"
    assert _required(env["MLFLOW_FLASK_SERVER_SECRET_KEY"]) == "MLFLOW_SECRET_KEY"  # the app refuses to start without


def test_the_auth_settings_are_the_keys_mlflow_reads_and_its_store_is_a_database_of_its_own():
    import configparser
    import importlib.util

    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(AUTH_INI)
    settings = dict(ini["mlflow"])
    # the keys of the basic_auth.ini MLflow ships (read as a file: importing mlflow.server.auth starts its store)
    shipped = configparser.ConfigParser(interpolation=None)
    (mlflow_dir,) = importlib.util.find_spec("mlflow").submodule_search_locations
    shipped_text = (Path(mlflow_dir) / "server" / "auth" / "basic_auth.ini").read_text(encoding="utf-8")
    shipped.read_string(shipped_text)
    commented = set(re.findall(r"^# (\w+) =", shipped_text, re.M))  # documented, off by default
    assert set(settings) <= set(shipped["mlflow"]) | commented  # no key MLflow would ignore
    assert settings["default_permission"] == "READ"  # everyone reads; writing needs a grant
    assert settings["authorization_function"] == "mlflow.server.auth:authenticate_request_basic_auth"
    assert settings["admin_username"] == "admin"
    assert 0 < int(settings["auth_cache_ttl_seconds"]) <= 300  # MLflow's credential cache: on, and short
    assert "admin_password" not in settings  # from MLFLOW_AUTH_ADMIN_PASSWORD, never written here
    # not the tracking store's database
    assert _database(_interpolate(settings["database_uri"], SECRETS_ENV)) == "mlflow_auth"
    assert _required(_password_of(settings["database_uri"])) == "POSTGRES_PASSWORD"
    backend = _option(SERVICES["mlflow"]["command"], "--backend-store-uri")
    assert _required(_password_of(backend)) == "POSTGRES_PASSWORD"


def test_the_server_is_published_on_loopback_unless_the_user_opts_in():
    (port,) = SERVICES["mlflow"]["ports"]
    assert _interpolate(port, {}) == "127.0.0.1:5000:5000"
    assert _interpolate(port, {"MLFLOW_BIND": "0.0.0.0", "MLFLOW_PORT": "8080"}) == "0.0.0.0:8080:5000"
    for name, service in SERVICES.items():  # nothing else is published: PostgreSQL stays inside compose
        if name not in ("mlflow", "tls-proxy"):  # the TLS proxy: tests/robustness/test_image_and_scale_out.py
            assert "ports" not in service, name


def test_mlflows_host_cors_and_frame_protections_are_set():
    env = SERVICES["mlflow"]["environment"]
    name, hosts = _interpolation(env["MLFLOW_SERVER_ALLOWED_HOSTS"])
    assert name == "MLFLOW_ALLOWED_HOSTS"
    assert hosts.split(",") == ["mlflow:5000", "localhost:*", "127.0.0.1:*"]  # workers' Host header; no "*"
    name, origins = _interpolation(env["MLFLOW_SERVER_CORS_ALLOWED_ORIGINS"])
    assert name == "MLFLOW_CORS_ALLOWED_ORIGINS" and origins == ""  # localhost origins only, MLflow's default
    assert env["MLFLOW_SERVER_X_FRAME_OPTIONS"] in ("SAMEORIGIN", "DENY")
    assert not any("disable-security-middleware" in arg for arg in SERVICES["mlflow"]["command"])
    assert "MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE" not in env
    # the variables are the ones `mlflow server` reads for --allowed-hosts/--cors-allowed-origins/--x-frame-options
    from mlflow.utils import cli_args

    envvars = {cli_args.ALLOWED_HOSTS, cli_args.CORS_ALLOWED_ORIGINS, cli_args.X_FRAME_OPTIONS}
    declared = {_click_envvar(option) for option in envvars}
    assert declared == {"MLFLOW_SERVER_ALLOWED_HOSTS", "MLFLOW_SERVER_CORS_ALLOWED_ORIGINS",
                        "MLFLOW_SERVER_X_FRAME_OPTIONS"}


def _click_envvar(option_decorator) -> str:
    import click

    @click.command()
    @option_decorator
    def command(**_kwargs):  # pragma: no cover - never invoked
        pass

    (param,) = command.params
    return param.envvar


def test_every_client_authenticates_with_mlflows_variables():
    for name, user, secret in (("init", "admin", "MLFLOW_ADMIN_PASSWORD"), ("worker", "worker", "BIASLAB_WORKER_PASSWORD"),
                               ("worker-gpu", "worker", "BIASLAB_WORKER_PASSWORD")):
        env = SERVICES[name]["environment"]
        assert env["MLFLOW_TRACKING_USERNAME"] == user, name
        assert _required(env["MLFLOW_TRACKING_PASSWORD"]) == secret, name


def test_init_creates_the_shared_resources_and_the_three_roles():
    script = SERVICES["init"]["command"][-1]
    env = SERVICES["init"]["environment"]
    for user, role, variable in (("worker", "worker", "BIASLAB_WORKER_PASSWORD"),
                                 ("promoter", "promoter", "BIASLAB_PROMOTER_PASSWORD"),
                                 ("evaluator", "evaluator", "BIASLAB_EVALUATOR_PASSWORD")):
        assert f"biaslab team setup --user {user} --role {role} --password-env {variable}" in script
        assert _required(env[variable]) == variable
    assert SERVICES["init"]["command"][:2] == ["sh", "-c"] and script.lstrip().startswith("set -e")


def test_optuna_has_a_role_of_its_own_that_cannot_open_mlflows_databases():
    env = SERVICES["worker"]["environment"]
    url = env[STORAGE_ENV]
    assert url.startswith("postgresql+psycopg2://optuna:")  # not the superuser that owns MLflow's databases
    assert _required(_password_of(url)) == "OPTUNA_DB_PASSWORD"
    setup = SERVICES["db-setup"]
    assert setup["depends_on"]["db"]["condition"] == "service_healthy"
    assert SERVICES["mlflow"]["depends_on"]["db-setup"]["condition"] == "service_completed_successfully"
    assert {c["source"] for c in setup["configs"]} == {"db-setup"}
    for statement in ("REVOKE CONNECT ON DATABASE mlflow FROM PUBLIC", "REVOKE CONNECT ON DATABASE mlflow_auth FROM PUBLIC",
                      "CREATE DATABASE optuna OWNER optuna", "\\getenv optuna_password OPTUNA_DB_PASSWORD"):
        assert statement in DB_SETUP_SQL, statement
    assert _required(setup["environment"]["OPTUNA_DB_PASSWORD"]) == "OPTUNA_DB_PASSWORD"


def test_every_secret_is_documented_in_env_example_and_none_has_a_value_there():
    documented = dict(re.findall(r"^(\w+)=(.*)$", ENV_EXAMPLE, re.M))
    for variable in SECRET_VARIABLES:
        assert documented.get(variable) == "", variable  # named, left empty
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    used = set(re.findall(r"\$\{(\w+):\?", text))
    assert used == set(SECRET_VARIABLES)  # every required variable is a documented secret, and vice versa


def test_env_is_ignored_by_git_and_by_the_image_build():
    import subprocess

    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
    assert ignored.returncode == 0, ".env must be git-ignored"
    assert ".env" in (ROOT / ".dockerignore").read_text(encoding="utf-8").split()  # COPY . . would bake it in


SECRET_PATTERNS = (  # POSIX extended regexps (git grep -E), also valid Python regexps
    r"(PASSWORD|SECRET|TOKEN)[A-Z_]*[:=][ ]*['\"]?[A-Za-z0-9+/_-]{6,}",  # NAME=value / NAME: value
    r"://[A-Za-z0-9_.-]+:[A-Za-z0-9_.%-]{3,}@",  # a URL with a literal password
    r"password[ ]*=[ ]*['\"][^'\"]{6,}['\"]",  # password = "..."
)


def _placeholder(line: str) -> bool:
    """A hit that is a reference to a variable or an obvious placeholder, not a value."""
    return bool(re.search(r"\$\{?\w+|<[a-z_-]+>|\*\*\*|os\.environ|getenv|\.\.\.|example", line))


def test_no_secret_is_committed():
    """``git grep`` over every tracked file (tests excepted: their fake secrets are the point) for password-like
    values: a NAME=value/NAME: value assignment of a password/secret/token, a URL with a literal password."""
    import subprocess

    args = [arg for pattern in SECRET_PATTERNS for arg in ("-e", pattern)]
    found = subprocess.run(["git", "grep", "-nIE", *args, "--", ".", ":(exclude)tests/**"],
                           cwd=ROOT, capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr  # 1: nothing found
    hits = [line for line in found.stdout.splitlines() if not _placeholder(line)]
    assert not hits, "password-like values in tracked files:\n" + "\n".join(hits)


def test_the_secret_scan_flags_what_the_compose_file_used_to_commit():
    committed_before = [  # lines of docker-compose.yml before the team server
        "      POSTGRES_PASSWORD: biaslab       # local demo only: use a secret store in production",
        "      --backend-store-uri postgresql+psycopg2://biaslab:biaslab@db:5432/mlflow",
        '        conn = psycopg2.connect("postgresql://biaslab:biaslab@db:5432/mlflow")',
    ]
    for line in committed_before:
        assert any(re.search(p, line) for p in SECRET_PATTERNS) and not _placeholder(line), line
    for line in ("      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}", "POSTGRES_PASSWORD=",
                 "postgresql+psycopg2://optuna:${OPTUNA_DB_PASSWORD:?x}@db:5432/optuna"):
        assert not any(re.search(p, line) for p in SECRET_PATTERNS) or _placeholder(line), line
