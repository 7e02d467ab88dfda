"""The image's process hygiene, the compose scale-out and the TLS proxy, checked statically (issue 37).

No Docker engine runs here (see test_compose_file.py). Checked: the image runs as an unprivileged user under
tini (signals reach the stage, orphans are reaped), the folders mounted for writing belong to that user; the
pipeline containers share one DVC cache and the shard workers divide the variants exactly (no variant in two
shards, none left out), with ``collect`` after all of them; HTTPS in front of the team server uses the
operator's certificate and forwards to the server inside compose, which itself stays on loopback.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from biaslab.config import load_params
from pipelines.stage.shard import UPSTREAM, shard_targets

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(ln for ln in DOCKERFILE.splitlines() if not ln.lstrip().startswith("#")))
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln.strip() else "")
            for ln in text.splitlines() if ln.strip()]


# ------------------------------------------------------------------------------ the image
def test_the_image_runs_as_an_unprivileged_user_under_tini():
    steps = _instructions()
    users = [(i, args.strip()) for i, (op, args) in enumerate(steps) if op == "USER"]
    assert users, "no USER: the image would run as root"
    last_index, user = users[-1]
    assert user not in ("root", "0") and not user.startswith(("root:", "0:"))
    assert any(op == "RUN" and f"useradd" in args and user in args for op, args in steps)
    (entrypoint,) = [args for op, args in steps if op == "ENTRYPOINT"]
    assert yaml.safe_load(entrypoint) == ["/usr/bin/tini", "--"]  # exec form: tini is PID 1
    assert any(op == "RUN" and re.search(r"apt-get install .*\btini\b", args) for op, args in steps)
    cmd_index = max(i for i, (op, _) in enumerate(steps) if op == "CMD")
    assert last_index < cmd_index


def test_the_folders_mounted_for_writing_belong_to_the_images_user():
    user = [args.strip() for op, args in _instructions() if op == "USER"][-1]
    created = " ".join(args for op, args in _instructions() if op == "RUN")
    for service in SERVICES.values():
        if service.get("build"):
            assert "user" not in service and "entrypoint" not in service  # neither root nor tini taken away
            for volume in service.get("volumes", []):
                source, target, *mode = volume.split(":")
                if not mode and not source.startswith("."):  # a named volume the container writes
                    assert re.search(rf"chown {user}:{user} [^&]*{re.escape(target)}\b", created), target


# ------------------------------------------------------------------------------ scale-out
def _shard(service: dict) -> tuple[int, int] | None:
    match = re.search(r"python -m pipelines\.stage\.shard (\d+)/(\d+)", " ".join(service.get("command") or []))
    return (int(match.group(1)), int(match.group(2))) if match else None


def test_every_pipeline_container_uses_the_one_shared_dvc_cache():
    assert "dvc-cache" in COMPOSE["volumes"]
    pipeline = [name for name, s in SERVICES.items() if s.get("build") and "dvc" in " ".join(s.get("command") or [])
                or _shard(s)]
    assert {"upstream", "worker", "worker-2", "collect", "worker-gpu"} <= set(pipeline)
    for name in pipeline:
        service = SERVICES[name]
        assert "dvc-cache:/dvc-cache" in service["volumes"], name
        assert "dvc config --local cache.dir /dvc-cache &&" in service["command"][-1], name


def test_the_shard_workers_divide_the_variants_exactly_and_collect_waits_for_all():
    shards = {name: _shard(s) for name, s in SERVICES.items() if _shard(s)}
    counts = {count for _, count in shards.values()}
    assert len(counts) == 1, shards
    (count,) = counts
    plain = {i for name, (i, _) in shards.items() if "profiles" not in SERVICES[name]}
    assert plain == set(range(1, count + 1))  # every shard once (the GPU twin stands in for one of them)
    variants = list(load_params(ROOT / "params.yaml").variants)
    targets = [t for i in range(1, count + 1) for t in shard_targets(variants, i, count)]
    assert sorted(targets) == sorted(f"evaluate@{v}" for v in variants)  # disjoint, none left out
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert set(UPSTREAM) <= set(stages)
    assert f"dvc repro {' '.join(UPSTREAM)}" in SERVICES["upstream"]["command"][-1]
    for name in shards:
        assert SERVICES[name]["depends_on"]["upstream"]["condition"] == "service_completed_successfully", name
        assert SERVICES["collect"]["depends_on"][name]["condition"] == "service_completed_successfully", name
    assert SERVICES["collect"]["command"][-1].endswith("&& dvc repro")


# ------------------------------------------------------------------------------ TLS
def test_a_tls_proxy_with_the_operators_certificate_fronts_the_loopback_server():
    proxy = SERVICES["tls-proxy"]
    assert proxy["profiles"] == ["tls"]
    (mount,) = proxy["volumes"]
    assert mount.endswith(":/certs:ro")
    caddyfile = COMPOSE["configs"]["caddyfile"]["content"]
    assert {c["target"] for c in proxy["configs"]} == {"/etc/caddy/Caddyfile"}
    assert "auto_https off" in caddyfile  # no certificate requested from anywhere: the operator's
    assert re.search(r"^\s*tls /certs/tls\.crt /certs/tls\.key$", caddyfile, re.M)
    assert re.search(r"^\s*reverse_proxy mlflow:5000$", caddyfile, re.M)
    sites = re.findall(r"^(\S+) \{$", caddyfile, re.M)
    assert sites and all(site.startswith("https://") for site in sites)  # no plain-HTTP site
    (port,) = proxy["ports"]
    assert port.endswith(":443")
    (server_port,) = SERVICES["mlflow"]["ports"]
    assert server_port.startswith("${MLFLOW_BIND:-127.0.0.1}:")  # the server itself stays on loopback


def test_the_docs_say_basic_auth_over_plain_http_is_loopback_only():
    text = " ".join((ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split())
    assert "Basic-auth over plain HTTP is for loopback only" in text
    assert "tls-proxy" in text and "docker compose --profile tls up" in text
