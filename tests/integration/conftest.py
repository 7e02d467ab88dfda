"""A throwaway PostgreSQL cluster for the scale-out tests (MLflow backend store, shared Optuna study).

``postgres_cluster`` (session): finds the server binaries (``initdb`` on PATH, else the newest
``/usr/lib/postgresql/*/bin``), runs ``initdb`` in a fresh temp dir and ``pg_ctl start`` on a free
loopback port with its unix socket in that dir, and stops and deletes it at the end, also when a test
fails. ``postgres_db`` (function): a factory
``postgres_db(name) -> "postgresql+psycopg2://biaslab@127.0.0.1:PORT/<name>_<random>"`` creating a fresh
database (dropped afterwards).

The URLs name the driver, ``postgresql+psycopg2://``, as params/env must in production: SQLAlchemy 2.1 maps a
bare ``postgresql://`` to psycopg 3, which is not installed (the locked driver is ``psycopg2-binary``).
Without the server binaries the tests skip and say how to install them; ``make test`` installs Debian's
``postgresql`` when it can.

PostgreSQL refuses to run as root: as root, the cluster runs as the ``postgres`` system user (``runuser``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_USER = "biaslab"  # the cluster's superuser (trust auth: a loopback-only throwaway cluster)
INSTALL_HINT = ("install the PostgreSQL server (Debian/Ubuntu: `apt-get install postgresql`; "
                "`make test` does this when run as root)")


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb``/``pg_ctl``: PATH first, then the newest /usr/lib/postgresql/*/bin."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []

    def major(path: str) -> int:
        match = re.search(r"/postgresql/(\d+)", path)
        return int(match.group(1)) if match else 0

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=major, reverse=True)]
    for directory in candidates:
        if all(os.access(directory / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresCluster:
    host: str
    port: int
    socket_dir: Path
    user: str = PG_USER

    def dsn(self, database: str = "postgres") -> str:
        """libpq form, for psycopg2.connect / psql."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def url(self, database: str) -> str:
        """SQLAlchemy form, for MLflow's --backend-store-uri and Optuna's RDBStorage."""
        return f"postgresql+psycopg2://{self.user}@{self.host}:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        """Run one statement outside a transaction (CREATE/DROP DATABASE need that)."""
        import psycopg2

        conn = psycopg2.connect(self.dsn("postgres"))
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    bindir = find_pg_bin()
    if bindir is None:
        pytest.skip(f"PostgreSQL server binaries (initdb, pg_ctl) not on PATH nor in /usr/lib/postgresql/*/bin: "
                    f"{INSTALL_HINT}")
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:  # initdb/postgres refuse root: run them as the postgres system user
        import pwd

        runuser = shutil.which("runuser")
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            owner = None
        if runuser is None or owner is None:
            pytest.skip("running as root, and no `postgres` user or `runuser` to start PostgreSQL as: "
                        f"{INSTALL_HINT} (it creates the user), or run the tests as a normal user")
        as_user = [runuser, "-u", "postgres", "--"]

    # not pytest's tmp_path: its root (pytest-of-<user>) is mode 0700, the postgres user could not enter it
    base = Path(tempfile.mkdtemp(prefix="biaslab-pg-"))
    data, log = base / "data", base / "server.log"
    started = False

    def run(*args: str | Path) -> subprocess.CompletedProcess:
        return subprocess.run([*as_user, *map(str, args)], cwd=base, capture_output=True, text=True, timeout=120)

    try:
        if owner is not None:
            os.chown(base, owner.pw_uid, owner.pw_gid)
        done = run(bindir / "initdb", "-D", data, "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--locale=C",
                   "--no-sync", "--no-instructions")
        if done.returncode != 0:
            pytest.fail(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        for _attempt in range(3):  # a free port can be taken between probing and binding: retry
            port = free_port()
            # fsync off etc.: a throwaway cluster, speed over durability
            options = (f"-p {port} -c listen_addresses=127.0.0.1 -k {base} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
            done = run(bindir / "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start")
            started = done.returncode == 0
            if started:
                break
            run(bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop")
        if not started:
            server_log = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            pytest.fail(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{server_log}")
        yield PostgresCluster("127.0.0.1", port, base)
    finally:
        if started or (data / "postmaster.pid").exists():
            run(bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_db(postgres_cluster) -> Iterator[Callable[[str], str]]:
    """``postgres_db(name)``: a fresh, uniquely named database; returns its SQLAlchemy URL. Dropped afterwards."""
    created: list[str] = []

    def make(name: str = "db") -> str:
        database = f"{re.sub(r'[^a-z0-9_]', '_', name.lower())}_{uuid.uuid4().hex[:8]}"
        postgres_cluster.execute(f'CREATE DATABASE "{database}"')
        created.append(database)
        return postgres_cluster.url(database)

    yield make
    for database in created:  # WITH (FORCE): ends connections a killed server/worker may have left
        with contextlib.suppress(Exception):
            postgres_cluster.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
