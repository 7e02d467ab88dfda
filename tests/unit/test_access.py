"""A tracking server's 401/403 becomes one line naming the user, the resource and the permission.

The errors are made by MLflow's own client code (``verify_rest_response`` on a response with the status
and body MLflow's basic-auth app sends; ``augmented_raise_for_status`` for an artifact upload), so the test
reads what a real refusal looks like.
"""

from __future__ import annotations

import pytest
import requests
from mlflow.utils.request_utils import augmented_raise_for_status
from mlflow.utils.rest_utils import verify_rest_response

from biaslab.tracking import access


def _refusal(status: int, endpoint: str):
    response = requests.Response()
    response.status_code = status
    response._content = b"Permission denied" if status == 403 else b"You are not authenticated."
    with pytest.raises(Exception) as err:
        verify_rest_response(response, endpoint)
    return err.value


@pytest.fixture(autouse=True)
def _user(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "worker")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "worker-password-1")
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.mlflow/credentials


@pytest.mark.parametrize(("endpoint", "expected"), [
    ("/api/2.0/mlflow/registered-models/alias",
     "user 'worker' may not set aliases of registered model 'biaslab-debiased' on http://127.0.0.1:5000: "
     "that needs EDIT on it"),
    ("/api/2.0/mlflow/model-versions/create",
     "may not create versions of registered model 'biaslab-debiased' on http://127.0.0.1:5000: that needs EDIT"),
    ("/api/2.0/mlflow/runs/create", "may not create runs in experiment 'biaslab-promotions'"),
    ("/api/2.0/mlflow/runs/log-batch", "may not log to runs of experiment 'biaslab-promotions'"),
    ("/api/2.0/mlflow/model-versions/delete", "may not delete registered model 'biaslab-debiased'"),
    ("/api/2.0/mlflow/experiments/get-by-name", "may not read experiment 'biaslab-promotions'"),
    ("/api/2.0/mlflow/users/create", "may not manage users and permissions on http://127.0.0.1:5000: only MLflow's admin may"),
])
def test_403_names_user_action_resource_and_permission(endpoint, expected):
    exc = _refusal(403, endpoint)
    with access.naming(experiment="biaslab-promotions", registered_model="biaslab-debiased"):
        denied = access.explain(exc, "http://127.0.0.1:5000")
    assert denied is not None and denied.status == 403
    assert expected in str(denied)
    assert "\n" not in str(denied) and "worker-password-1" not in str(denied)
    assert "needs a permission" not in str(denied)  # every endpoint biaslab calls is in the table


def test_401_says_which_variables_to_set_or_that_the_credentials_were_rejected(monkeypatch):
    exc = _refusal(401, "/api/2.0/mlflow/experiments/get-by-name")
    denied = access.explain(exc, "http://127.0.0.1:5000")
    assert str(denied) == ("not authenticated on http://127.0.0.1:5000: the server does not accept the "
                           "credentials of user 'worker' (wrong password, or no such user)")
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
    assert "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)" in str(
        access.explain(exc, "http://127.0.0.1:5000"))


def test_an_artifact_upload_refusal_is_explained_from_the_request():
    request = requests.Request("PUT", "http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1/abc/x.json").prepare()
    response = requests.Response()
    response.status_code, response._content, response.request, response.url = 403, b"Permission denied", request, request.url
    with pytest.raises(requests.HTTPError) as err:
        augmented_raise_for_status(response)
    with access.naming(experiment="biaslab"):
        denied = access.explain(err.value, "http://127.0.0.1:5000")
    assert "may not upload artifacts to runs of experiment 'biaslab'" in str(denied)
    assert "EDIT" in str(denied)


def test_other_errors_pass_through_unchanged():
    not_found = _refusal(404, "/api/2.0/mlflow/registered-models/get")
    assert access.explain(not_found) is None
    assert access.explain(ValueError("x")) is None
    with pytest.raises(ValueError):
        with access.refusals():
            raise ValueError("x")
    with pytest.raises(access.AccessDenied) as err, access.refusals("http://h:1"):
        raise _refusal(403, "/api/2.0/mlflow/runs/create")
    assert isinstance(err.value.__cause__, Exception) and access.is_refusal(err.value)


def test_a_password_in_the_tracking_uri_never_reaches_the_message():
    exc = _refusal(403, "/api/2.0/mlflow/runs/create")
    assert "s3cr3t" not in str(access.explain(exc, "http://u:s3cr3t@127.0.0.1:5000"))
