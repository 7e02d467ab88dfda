"""Credentials reach MLflow through its own variables and nothing biaslab writes carries them."""

from __future__ import annotations

import pytest

from biaslab.tracking import credentials
from biaslab.config import ConfigError, TrackingConfig


def test_url_passwords_are_masked_wherever_they_stand():
    text = ("storage postgresql+psycopg2://optuna:s3cretPW@db:5432/optuna and "
            "http://alice:pa55word@host:5000/x, redis://:onlypass@cache/0")
    assert credentials.redact(text) == ("storage postgresql+psycopg2://optuna:***@db:5432/optuna and "
                                        "http://alice:***@host:5000/x, redis://:***@cache/0")


def test_urls_without_a_password_are_left_alone():
    for text in ("http://mlflow:5000/api", "postgresql+psycopg2://biaslab@127.0.0.1:5432/x",
                 "sqlite:///mlruns/mlflow.db", "see http://host:5000/a@b"):
        assert credentials.redact(text) == text


def test_the_values_of_secret_variables_are_masked(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "tracking-secret-123")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-XYZ-987")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdef")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "worker")  # a name is not a secret
    text = "pw=tracking-secret-123 token tok-XYZ-987 hub hf_abcdef user worker"
    assert credentials.redact(text) == "pw=*** token *** hub *** user worker"


def test_the_password_of_mlflows_credentials_file_is_masked(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(
        "[mlflow]\nmlflow_tracking_username = bob\nmlflow_tracking_password = from-the-file-42\n")
    assert credentials.redact("x from-the-file-42 y") == "x *** y"
    assert credentials.current_username() == "bob"


def test_short_values_are_not_treated_as_secrets(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "ab")  # would mask ordinary text
    assert credentials.redact("a table about cabs") == "a table about cabs"


def test_a_tracking_uri_with_a_password_is_refused_with_the_fix_and_without_the_password():
    with pytest.raises(ConfigError) as err:
        credentials.check_tracking_uri("http://worker:hunter2hunter2@mlflow:5000")
    message = str(err.value)
    assert "hunter2" not in message
    assert "MLFLOW_TRACKING_USERNAME" in message and "MLFLOW_TRACKING_PASSWORD" in message
    for ok in ("http://mlflow:5000", "https://user@mlflow.example.org", "sqlite:///mlruns/mlflow.db", "databricks"):
        assert credentials.check_tracking_uri(ok) == ok


def test_configure_refuses_a_uri_with_a_password_before_contacting_anything(monkeypatch, tmp_path):
    from biaslab.tracking import runs as tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://w:secret-secret@127.0.0.1:9")
    with pytest.raises(ConfigError, match="carries a password"):
        tracking.configure(TrackingConfig(), root=tmp_path)
