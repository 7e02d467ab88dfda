"""Where each raw file comes from: the local mirror first, else its pinned public source.

Every mirrored file has a public origin pinned to an exact commit, and the bytes it must have, so a
download yields byte-for-byte the mirrored file or fails:

* :data:`REMOTE` - files copied verbatim from a GitHub repository (path at a commit + sha256 of the bytes;
  see each ``<mirror>/<dataset>/SOURCE.md``);
* :data:`DERIVED` - files converted from one pinned remote file by a named function, pinned by the sha256
  of the result (OccuGender's ``jobs.csv`` from the authors' ``female_ratios.csv``);
* the pretraining corpora - rebuilt from many pinned files (:mod:`biaslab.data.corpora`);
* :data:`PACKAGED` - benchmark data written from a paper, committed in this package (OccuGender's
  ``spec.json``; the mirror's copy is a transcription of the same tables, byte for byte the same file: tests check it).

Downloads go to ``BIASLAB_DOWNLOAD_DIR`` (default: ``raw/`` next to ``data.prepared_dir``), written via a
temporary file and rename, and are reused later. Raw files are fetched from ``BIASLAB_RAW_BASE_URL``
(default ``https://raw.githubusercontent.com``) as ``<base>/<owner>/<repo>/<commit>/<path>``: any server
with that layout works (a GitHub raw proxy, or the tests' fake remote on loopback).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import import_module, resources
from pathlib import Path

from biaslab.atomic import atomic_file
from biaslab.config import DataConfig
from biaslab.data.errors import DataError

DOWNLOAD_DIR_ENV = "BIASLAB_DOWNLOAD_DIR"
RAW_BASE_ENV = "BIASLAB_RAW_BASE_URL"
DEFAULT_RAW_BASE = "https://raw.githubusercontent.com"
PARALLEL_DOWNLOADS = 8


def raw_url(repo: str, commit: str, path: str) -> str:
    """The URL of ``path`` at ``commit`` of GitHub repository ``repo`` (base: env ``BIASLAB_RAW_BASE_URL``)."""
    base = (os.environ.get(RAW_BASE_ENV) or DEFAULT_RAW_BASE).rstrip("/")
    return f"{base}/{repo}/{commit}/{urllib.parse.quote(path)}"


@dataclass(frozen=True)
class RemoteFile:
    repo: str
    commit: str
    path: str
    sha256: str

    @property
    def url(self) -> str:
        return raw_url(self.repo, self.commit, self.path)


@dataclass(frozen=True)
class DerivedFile:
    """A mirror file made from one pinned remote file by ``convert`` (``"module:function"``, bytes -> bytes)."""

    source: RemoteFile
    convert: str
    sha256: str  # of the converted bytes (= the mirror's file)

    def build(self, payload: bytes) -> bytes:
        module, _, name = self.convert.partition(":")
        return getattr(import_module(module), name)(payload)


def _pinned(source: tuple[str, str], mirror_dir: str, repo_dir: str, sha256: dict[str, str]) -> dict[str, RemoteFile]:
    """The files of one pinned repository ``source`` (repo, commit), one way for every dataset.

    ``<mirror_dir>/<name>`` in the mirror was copied from ``<repo_dir>/<name>`` (``repo_dir`` empty:
    the repository root) at that commit; ``sha256`` maps each ``name`` to the digest of its bytes.
    """
    repo, commit = source
    return {f"{mirror_dir}/{name}": RemoteFile(repo, commit, f"{repo_dir}/{name}" if repo_dir else name, sha)
            for name, sha in sha256.items()}


_GBEM = ("Stereotypes-in-LLMs/FairLMs", "6b5187a7b9c7e0e2be39fb60111cbf0c8213a169")
_RUBIA = ("vergrig/RuBia-Dataset", "eaab66eae197c2bc22152eb051f8b526dcb7cef8")
_CROWS = ("nyu-mll/crows-pairs", "8aaac11c485473159ec9328a65253a5be9a479dc")
_WINOBIAS = ("uclanlp/corefBias", "0bce984dd081bbc10b0622f326727a024c607895")
_WINOGENDER = ("rudinger/winogender-schemas", "1c7f8b481ad8a234b41e9f76a424d6e856e13f7f")
_GENDERLEX = ("ahmedssabir/GenderLex", "f103c823ae33c1f72a97f7a9993741c08e09ed89")

# Optional files: the ClozeGender authors' WinoBias / Winogender sentences with the extracted verb / occupation
# (paper Table 4). Not in the shared mirror; prepare writes genderlex_wino.parquet only when they can be had.
OPTIONAL_REMOTE: dict[str, RemoteFile] = _pinned(_GENDERLEX, "genderlex/extracted", "data", {
    "WinoBias/winobias_verb.csv": "8b982528691b3c577a04b1dc95e643290b02049e71090a5da3d6e3ef60a5b635",
    "WinoBias/winobias_occ.csv": "9c29c6ee9aee577ebd5e17741150fb5fb07eafe7012d136ae80139bf6ced5822",
    "WinoGender/winogender_verb.csv": "243a07d2771bfb13b160901c083cd5620cf88be889eb0e5450a80d7d547d6fc2",
    "WinoGender/winogender_occ.csv": "3d50536f5d6579e5851b9e4c6af2275f4914ee1cdcf7e7181ff8758f97e3eabc",
})

REMOTE: dict[str, RemoteFile] = {
    **_pinned(_GBEM, "gbem_ua", "data", {
        "acc_dataset/train_dataset_acc.csv": "946ed5ef495606ae869f9620d18bd2473ba2d67b2b1de3df6843d2bf93a8fa8f",
        "acc_dataset/test_dataset_acc.csv": "53052e97fabd6119a4e4d0c7714540ccb8571563f35eb7fa2a9daae0263e44fa",
        "prob_dataset/train_dataset.csv": "5384473ab33c33a1af040455f79ca7c3b9c37f46a4475b783f3abcb9c83a2d01",
        "prob_dataset/test_dataset.csv": "9515dcc089851630cee0fd9b29b385a02fed7d7af7d8fc5ed7b3610e61914d0e",
        "gender_words/male-words.csv": "e1a98d4c7174eaf9d779366dd292ef482eec9fbf2c7b57bf55f5886eecf88326",
        "gender_words/female-words.csv": "cf034305672925f2ba289a5b17e7b8950effea6a7062fcb7425bada56a2595da",
    }),
    **_pinned(_RUBIA, "rubia", "", {
        "rubia.tsv": "a2daa5f1c5745214ca377b8971938e6be7e6f409b443a881670f9566a456c373",
    }),
    **_pinned(_CROWS, "crows_pairs", "data", {
        "crows_pairs_anonymized.csv": "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c",
    }),
    **_pinned(_WINOBIAS, "winobias/data", "WinoBias/wino/data", {
        "anti_stereotyped_type1.txt.dev": "a4e0ebae344e78b56f657a42e8ae684b9db7747d177c5e7149c0907ebb7f3bf6",
        "anti_stereotyped_type1.txt.test": "331db5bd74bfefebf146a60b67645152a4a1991570d2a56f57154103ac361dd2",
        "anti_stereotyped_type2.txt.dev": "763ad829ad724f9a85ead689ba8ca69072020cb1238def6210f0fc6a47b97e59",
        "anti_stereotyped_type2.txt.test": "336571ac1ea8c06cd2aba8e5dd2bd98e00acc0c48da3e4ec5ec7e54eb2633a8f",
        "pro_stereotyped_type1.txt.dev": "dd55a0d220fe4c0ceb63dd4648223fb4fe1a58d5ad95c116a002ad24b0e292a5",
        "pro_stereotyped_type1.txt.test": "db7838907238a758eeb5779e48f38c013b892910d6fe864456c59f04245c6689",
        "pro_stereotyped_type2.txt.dev": "8f0250de723cea9328e3eaf7169e07936f01aa5909ce7aa580db66eb803f4e86",
        "pro_stereotyped_type2.txt.test": "ea1c1fd94fa612e3cc44d7fa3cc4cb76021bb63fdf94f9826f430051e9052438",
        "female_occupations.txt": "693bff12286c2c1d46c7d4d45a44a631574710c30b39c1a3001bb7bdebb44ed8",
        "male_occupations.txt": "6b82d88847b69d56d207a0c396e9830b031890de585e916e6b4e9bc50672657e",
    }),
    **_pinned(_WINOGENDER, "winogender", "data", {
        "all_sentences.tsv": "bd69da16bf228cb8df63fd0843aec2d8b5c36a7f21bf8c7b168bcc83932556c8",
        "templates.tsv": "496f2e2dc77296bcebcdd8865a8dc5715ce22b772de9abb5f531d5b3114c48a0",
        "occupations-stats.tsv": "3f7f37c16381a70571356982ea7fe613ac700ad04a6d3b19b9f2be18248df567",
    }),
    **_pinned(_GENDERLEX, "genderlex", "data/Genderlex", {
        "All/GenderLex_verb.csv": "8d7b5a6a8186f610dce3de50c68ae0b10bf0981a122080d3cf8391cfc9820e54",
        "All/GenderLex_noun.csv": "de0dc686229f32d79b78e43ff595a23528ddf5788a2319cdc5b479ac1ea14a57",
        "All/GenderLex_occ.csv": "ca7943202c18eaa2e903d6f2938795bdc29e7fdfb91493b9d79ed494e8ea92af",
        "Gender_neutral_SM/GenderLex_verb_someone.csv": "b5aab041e8bfb83fba8094d48d36142b45695f60cce5326a6abff9792ce09050",
        "Gender_neutral_SM/GenderLex_noun_someone.csv": "afc4a73cb551635508df22856a41ab13c1702ad055a51285ef4a83af8bd4b17c",
        "Gender_neutral_SM/GenderLex_occ_someone.csv": "73718da854b4e19ee315050ac6a5b182cf99353b5e319f8525ff64522b70c41e",
        "Gender_neutral_PN/GenderLex_verb_GN_PN.csv": "409c6ca93e65db0238fa8c01a13ce0efe5eb7f08ba4837ea2207e34b017ce905",
        "Gender_neutral_PN/GenderLex_noun_GN_PN.csv": "1d9f3f110de11fdcca5423926f18645d899a9cd724c1a43f3b0b69028f71e8f9",
        "Gender_neutral_PN/GenderLex_occ_GN_PN.csv": "7f2d6f0472aeb3c834a0a5157096562f1392444e0601dc393aa610c576526a15",
    }),
    **OPTIONAL_REMOTE,
}


_OCCUGENDER = ("chenyuen0103/gender-bias", "9ae4aad0e32561f6091d30902effd6614c3639ea")

DERIVED: dict[str, DerivedFile] = {
    "occugender/jobs.csv": DerivedFile(
        RemoteFile(*_OCCUGENDER, "data/inputs/female_ratios.csv",
                   "5960a66264be522eeff4b26215b076a3e48abb1687dcaf894554d680aed95349"),
        "biaslab.data.occugender:jobs_from_female_ratios",
        "5be4c788fbe5f894b05222ef87df276a553cb5bb7cc81c4a54fec46fda990999",
    ),
}

PACKAGED: dict[str, str] = {  # mirror path -> file under biaslab/data/specs/
    "occugender/spec.json": "occugender.json",
}


def dataset_files() -> list[str]:
    """Every benchmark file ``prepare`` needs (mirror-relative paths), each with a pinned source.

    The :data:`OPTIONAL_REMOTE` files are not among them: ``prepare`` reads them when they can be had.
    """
    return sorted({*REMOTE, *DERIVED, *PACKAGED} - set(OPTIONAL_REMOTE))


def download_dir(cfg: DataConfig) -> Path:
    """Where downloaded raw files are cached (env ``BIASLAB_DOWNLOAD_DIR`` wins)."""
    return Path(os.environ.get(DOWNLOAD_DIR_ENV) or Path(cfg.prepared_dir).parent / "raw")


def packaged_path(name: str) -> Path:
    return Path(str(resources.files("biaslab.data").joinpath("specs", name)))


def has_source(rel_path: str) -> bool:
    """Whether ``rel_path`` can be obtained without the mirror."""
    from biaslab.data import corpora

    corpus_files = {f for r in corpora.RECIPES.values() for f in (r.corpus_file, r.manifest_file)}
    return rel_path in REMOTE or rel_path in DERIVED or rel_path in PACKAGED or rel_path in corpus_files


def resolve(cfg: DataConfig, rel_path: str) -> Path:
    """The local path of raw file ``rel_path`` (relative to the mirror root), downloading if allowed."""
    local = cfg.resolved_mirror_dir() / rel_path
    if local.is_file():
        return local
    return obtain(cfg, rel_path, missing=local)


def obtain(cfg: DataConfig, rel_path: str, *, missing: Path | None = None) -> Path:
    """``rel_path`` from its pinned source, not the mirror: packaged, cached, or downloaded into the cache now."""
    if rel_path in PACKAGED:
        return packaged_path(PACKAGED[rel_path])
    missing = missing or cfg.resolved_mirror_dir() / rel_path
    cached = download_dir(cfg) / rel_path
    if cached.is_file():
        return cached
    if not has_source(rel_path):
        raise DataError(missing, "file not found in the mirror and it has no public download source")
    if not cfg.allow_download:
        raise DataError(missing, "file not found in the mirror and data.allow_download is false")
    if rel_path in REMOTE:
        fetch(REMOTE[rel_path], cached)
    elif rel_path in DERIVED:
        derived = DERIVED[rel_path]
        payload = derived.build(download(derived.source))
        _write_verified(payload, derived.sha256, cached, f"{derived.source.url} converted by {derived.convert}")
    else:
        rebuild_corpus(cfg, rel_path.split("/")[1])
    return cached


def corpus_dir(cfg: DataConfig, languages: list[str] | tuple[str, ...]) -> Path:
    """The folder holding ``<lang>/<lang>_corpus.txt`` + ``MANIFEST.tsv`` for every language.

    The mirror's ``corpora/`` when it has all of them; otherwise the download cache's, with every missing
    language rebuilt from its pinned sources (:func:`rebuild_corpus`).
    """
    from biaslab.data import corpora

    needed = [f for r in corpora.languages(languages) for f in (r.corpus_file, r.manifest_file)]
    if all((cfg.resolved_mirror_dir() / f).is_file() for f in needed):
        return cfg.resolved_mirror_dir() / "corpora"
    for rel in needed:
        obtain(cfg, rel)
    return download_dir(cfg) / "corpora"


def rebuild_corpus(cfg: DataConfig, language: str) -> None:
    """Download one language's source files at the pinned commit, rebuild its corpus + manifest, verify, write."""
    from biaslab.data import corpora

    (recipe,) = corpora.languages([language])
    sources = recipe.sources()
    urls = [raw_url(recipe.repo, recipe.commit, s.path) for s in sources]
    with ThreadPoolExecutor(PARALLEL_DOWNLOADS) as pool:  # ~1700 small files for uk: parallel requests
        payloads = dict(zip((s.path for s in sources), pool.map(download_bytes, urls)))
    try:
        outputs = corpora.assemble(recipe, payloads)
        corpora.check_outputs(recipe, outputs)
    except ValueError as exc:
        raise DataError(raw_url(recipe.repo, recipe.commit, ""), str(exc)) from None
    for rel, payload in outputs.items():  # both verified above; the manifest last, so a corpus never lacks it
        _write(payload, download_dir(cfg) / rel)


def download_bytes(url: str, timeout: float = 60.0) -> bytes:
    """The body of ``url`` (https, or http/file for a local remote); a ``DataError`` naming it on failure."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (pinned URLs)
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise DataError(url, f"download failed: {exc}") from exc


def download(remote: RemoteFile, timeout: float = 60.0) -> bytes:
    """The bytes of ``remote``, checked against its pinned sha256."""
    payload = download_bytes(remote.url, timeout)
    _check_sha256(payload, remote.sha256, remote.url)
    return payload


def resolve_optional(cfg: DataConfig, rel_path: str) -> tuple[Path | None, str]:
    """As :func:`resolve` for a file the pipeline can do without: ``(path, "")`` or ``(None, why not)``.

    A file that is not in the mirror nor in the download cache, and cannot be downloaded (downloads off,
    no network, wrong sha256), is reported, not raised; any other problem still raises.
    """
    try:
        return resolve(cfg, rel_path), ""
    except DataError as exc:
        return None, str(exc)


def fetch(remote: RemoteFile, dest: Path, timeout: float = 60.0) -> None:
    """Download ``remote`` to ``dest`` if its sha256 matches; nothing is left behind on failure."""
    _write(download(remote, timeout), dest)


def _check_sha256(payload: bytes, expected: str, where: str) -> None:
    digest = hashlib.sha256(payload).hexdigest()
    if digest != expected:
        raise DataError(where, f"sha256 mismatch: expected {expected}, got {digest}")


def _write_verified(payload: bytes, expected: str, dest: Path, where: str) -> None:
    _check_sha256(payload, expected, where)
    _write(payload, dest)


def _write(payload: bytes, dest: Path) -> None:
    with atomic_file(dest) as tmp:  # a unique temporary sibling: parallel stages never share one
        tmp.write_bytes(payload)
