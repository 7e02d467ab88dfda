"""``biaslab team …``: a team server's shared resources, users and their roles (run as MLflow's admin)."""

from __future__ import annotations

from pathlib import Path

import typer

from biaslab.cli.options import PARAMS_OPT, ROOT_OPT, console, fail, load

team_app = typer.Typer(help="The team server: shared resources, users and their roles (run as MLflow's admin).",
                       no_args_is_help=True)


@team_app.command("setup")
def team_setup(
    user: str = typer.Option(None, "--user", help="also create this MLflow user (if missing) and give it --role"),
    role: str = typer.Option(None, "--role", help="worker (logs runs, registers versions), evaluator (the evaluate "
                                                  "runs the gate accepts) or promoter (runs `biaslab promote`)"),
    password_env: str = typer.Option(None, "--password-env", metavar="VAR",
                                     help="environment variable holding the new user's password "
                                          "(never on the command line)"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """As MLflow's admin: create the experiment, the promotions experiment and the registered model of
    params.yaml on the tracking server (before any worker does), and optionally a user with a role."""
    import os

    from mlflow import MlflowClient
    from rich.table import Table

    from biaslab.tracking import access
    from biaslab.tracking import team
    from biaslab.tracking import runs as tracking
    from biaslab.config import ConfigError

    params = load(root, params_file)
    if (user is None) != (role is None):
        fail("give --user and --role together")
    try:
        tracking_uri = tracking.resolve_tracking_uri(params.tracking, root)
        if not tracking_uri.startswith(("http://", "https://")):
            raise ConfigError(f"team setup needs a tracking server, not {tracking_uri!r}: set MLFLOW_TRACKING_URI "
                              "to its http(s):// address (and MLFLOW_TRACKING_USERNAME/PASSWORD to the admin's)")
        password = os.environ.get(password_env) if password_env else None
        if password_env and not password:
            raise ConfigError(f"--password-env {password_env}: that environment variable is empty or not set")
        with access.refusals(tracking_uri):
            access.name_resources(experiment=params.tracking.experiment, registered_model=params.registry.model_name)
            auth = team.auth_client(tracking_uri)
            team.require_admin(auth, tracking_uri)
            client, existing = MlflowClient(tracking_uri), set()
            resources = team.create_resources(client, params, existing)
            names = {"promotions": params.registry.promotions_experiment, "champion": params.registry.champion_model,
                     "evaluations": params.registry.evaluations_experiment}
            problems = team.adoption_problems(client, auth, resources, names, existing)
            if problems:
                raise ConfigError("refusing to adopt what `biaslab team setup` did not create: " + "; ".join(problems)
                                  + " - delete it (or name another in params.yaml registry.*) and run setup again")
            rows = []
            if user is not None:
                created = team.ensure_user(auth, user, password)
                rows = team.grant_role(auth, user, role, resources)
    except (ConfigError, access.AccessDenied) as exc:
        fail(str(exc))
    out = console()
    out.print(f"experiment {params.tracking.experiment!r} (id {resources.experiment_id}), promotions experiment "
              f"{params.registry.promotions_experiment!r} (id {resources.promotions_experiment_id}), evaluations "
              f"experiment {params.registry.evaluations_experiment!r} (id {resources.evaluations_experiment_id}), "
              f"registered model {resources.model_name!r}, champion model {resources.champion_model!r}: present")
    if user is not None:
        table = Table(title=f"user {user!r} ({'created' if created else 'existing'}), role {role}")
        for col in ("resource type", "resource", "permission"):
            table.add_column(col)
        for row in rows:
            table.add_row(*row)
        out.print(table)

