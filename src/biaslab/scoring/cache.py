"""On-disk cache of request scores, keyed by the model's identity (opt-in: ``scoring.cache_dir``).

The same requests are scored again and again across stages and Optuna trials (every variant re-scores
OccuGender; unchanged checkpoints are re-evaluated when only a metric changes). The key of an entry is
``sha256(model fingerprint, context ids, continuation ids)`` (a prompt prefix is part of the ids), so a new checkpoint - whose
fingerprint is a content hash of its weights, tokenizer and adapter - can never read another model's
scores. Storage is one SQLite file (stdlib ``sqlite3``, WAL mode) that several processes may share.
A score computed with its per-token log-probabilities (``loglikelihood_tokens(..., per_token=True)``)
also stores them (table ``token_logprobs``, a JSON list: floats round-trip exactly); a per-token lookup
only hits entries that have them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from biaslab.scoring.requests import Score, TokenRequest


class ScoreCache:
    """Maps (model fingerprint, token request) -> :class:`Score`."""

    def __init__(self, directory: str | Path, fingerprint: str) -> None:
        if not fingerprint:
            raise ValueError("a score cache needs the model's fingerprint (its identity)")
        self.path = Path(directory) / "scores.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self._db = sqlite3.connect(self.path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, logprob REAL, n_tokens INTEGER, greedy INTEGER)"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS token_logprobs (key TEXT PRIMARY KEY, logprobs TEXT)")

    def key(self, request: TokenRequest) -> str:
        digest = hashlib.sha256()
        digest.update(self.fingerprint.encode())
        digest.update(b"\x00" + ",".join(map(str, request.context_ids)).encode())
        digest.update(b"\x00" + ",".join(map(str, request.continuation_ids)).encode())
        return digest.hexdigest()

    def get_many(self, keys: Sequence[str], per_token: bool = False) -> dict[str, Score]:
        """The stored scores among ``keys``; with ``per_token``, only those stored with token log-probs."""
        found: dict[str, Score] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            if per_token:
                rows = self._db.execute(
                    "SELECT s.key, s.logprob, s.n_tokens, s.greedy, t.logprobs FROM scores s "
                    f"JOIN token_logprobs t ON t.key = s.key WHERE s.key IN ({marks})", chunk)
                found.update({k: Score(lp, n, bool(g), tuple(json.loads(t))) for k, lp, n, g, t in rows})
            else:
                rows = self._db.execute(f"SELECT key, logprob, n_tokens, greedy FROM scores WHERE key IN ({marks})",
                                        chunk)
                found.update({k: Score(lp, n, bool(g)) for k, lp, n, g in rows})
        return found

    def put_many(self, items: dict[str, Score]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)",
                [(k, s.logprob, s.n_tokens, int(s.is_greedy)) for k, s in items.items()],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO token_logprobs VALUES (?, ?)",
                [(k, json.dumps(list(s.token_logprobs))) for k, s in items.items() if s.token_logprobs is not None],
            )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM scores").fetchone()[0])
