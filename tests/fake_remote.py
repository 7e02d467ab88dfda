"""A fake GitHub raw host for tests: a directory served over HTTP on loopback (no network in tests).

Files are laid out as ``<root>/<owner>/<repo>/<commit>/<path>``, the layout of
``https://raw.githubusercontent.com``, so pointing ``BIASLAB_RAW_BASE_URL`` at :attr:`FakeRemote.url` makes
:mod:`biaslab.data.sources` download from it through the same ``urllib`` code path as from GitHub.
:func:`serve_pinned_datasets` puts every pinned benchmark file there: the mirror's bytes (their pins are the
mirror's sha256) and the OccuGender authors' ``female_ratios.csv`` (``tests/fixtures``, the pinned bytes).
Shared by the unit tests of the remote sources and the ``dvc repro`` without a mirror.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

from biaslab.data import sources

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class FakeRemote:
    """A directory served over HTTP on 127.0.0.1; ``requests`` lists the paths asked for."""

    def __init__(self, root: Path):
        self.root, self.requests = root, []
        root.mkdir(parents=True, exist_ok=True)
        remote = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                remote.requests.append(self.path)
                super().do_GET()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=str(root)))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def put(self, repo: str, commit: str, path: str, payload: bytes) -> None:
        dest = self.root / repo / commit / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(payload)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_pinned_datasets(remote: FakeRemote, mirror: Path) -> None:
    """Every REMOTE file (the mirror's bytes) and the authors' female_ratios.csv, at their pinned paths."""
    for rel, pin in sources.REMOTE.items():
        if rel in sources.OPTIONAL_REMOTE and not (mirror / rel).is_file():
            continue  # optional files the mirror does not carry: not served, so prepare reports them missing
        remote.put(pin.repo, pin.commit, pin.path, (mirror / rel).read_bytes())
    for derived in sources.DERIVED.values():
        remote.put(derived.source.repo, derived.source.commit, derived.source.path,
                   (FIXTURES / "occugender_female_ratios.csv").read_bytes())
