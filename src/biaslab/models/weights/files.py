"""Which files make a model directory, and copying them byte for byte.

A model directory is its top-level weights (``*.safetensors``, plus the sharding index), its
configuration (``config.json``, ``generation_config.json``) and its tokenizer files. Anything else a
source directory may hold - training checkpoints, optimizer states, the hub's ``original/`` pickles,
biaslab's own provenance records - is not part of the model and is not copied.

Weights: when the directory has a sharding index (``model.safetensors.index.json``) the weights are the
index and the shards it names, nothing else - Mistral-7B-v0.3 ships its whole checkpoint a second time as
``consolidated.safetensors`` (14.5 GB, mistral-inference's layout) beside the sharded files, which
transformers never reads. Without an index every top-level ``*.safetensors`` is a weight file (a single
``model.safetensors``, or a model saved under another name), as before. :func:`hub_weight_patterns` is the
same rule for a hub download (``snapshot_download``'s ``allow_patterns``).
"""

from __future__ import annotations

import json
import os
import shutil
from fnmatch import fnmatch
from pathlib import Path

# top-level files that make up a model (hub repos: what ``snapshot_download(allow_patterns=...)`` fetches)
MODEL_FILE_PATTERNS = ("*.json", "*.safetensors", "*.model", "*.tiktoken", "*.txt", "*.jinja")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
# records biaslab writes next to a model: provenance, not model content
PROVENANCE_FILES = frozenset({
    "snapshot.json", "training_summary.json", "edit_report.json", "target_words.json", "run.json",
    "trainer_state.json", "training_args.json", "run_key.json",
})


def is_model_file(name: str, *, allow_pickle: bool = False, trust_remote_code: bool = False) -> bool:
    """Whether a top-level file named ``name`` belongs to the model."""
    if name.startswith(".") or name in PROVENANCE_FILES:
        return False
    if any(fnmatch(name, pattern) for pattern in MODEL_FILE_PATTERNS):
        return True
    if trust_remote_code and name.endswith(".py"):
        return True
    return allow_pickle and name.endswith(PICKLE_SUFFIXES) and not name.startswith(("training_args", "optimizer"))


INDEX_FILE = "model.safetensors.index.json"  # the same name as biaslab.models.weights.index.INDEX_FILE (no torch here)


def indexed_shards(directory: str | os.PathLike[str]) -> frozenset[str] | None:
    """The shard file names the sharding index of ``directory`` names; ``None`` without an index.

    An index that cannot be read is not a reason to guess: ``None`` too (every ``*.safetensors`` is then
    copied, and :class:`biaslab.models.weights.index.SafetensorsIndex` reports the broken index when read)."""
    index = Path(directory) / INDEX_FILE
    if not index.is_file():
        return None
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return frozenset(str(v) for v in weight_map.values())
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def model_files(directory: str | os.PathLike[str], *, allow_pickle: bool = False,
                trust_remote_code: bool = False) -> list[Path]:
    """The model's files in ``directory`` (top level only), sorted by name.

    With a sharding index, a ``*.safetensors`` file the index does not name (Mistral's
    ``consolidated.safetensors``) is not the model's: see the module docstring."""
    directory = Path(directory)
    shards = indexed_shards(directory)
    return sorted(
        p for p in directory.iterdir()
        if p.is_file() and is_model_file(p.name, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code)
        and (shards is None or not p.name.endswith(".safetensors") or p.name in shards)
    )


def hub_weight_patterns(index_path: str | os.PathLike[str] | None) -> list[str]:
    """``allow_patterns`` for the weights of a hub download, given its sharding index (``None``: the repo has none).

    With an index: the index and exactly the shards it names (never ``consolidated.safetensors``); without
    one: ``*.safetensors``. The caller fetches the index first (it is small), then the weights."""
    if index_path is None or not Path(index_path).is_file():
        return ["*.safetensors"]
    shards = indexed_shards(Path(index_path).parent)
    if shards is None:
        return ["*.safetensors"]
    return [INDEX_FILE, *sorted(shards)]


def is_weight_file(name: str) -> bool:
    """A safetensors weight file or the sharding index."""
    return name.endswith(".safetensors") or name.endswith(".safetensors.index.json")


def is_tensor_file(name: str) -> bool:
    """A file of tensors - safetensors weights or a pickled format (:data:`PICKLE_SUFFIXES`): the files of a
    checkpoint that are gigabytes each (a package being staged links them instead of copying)."""
    return name.endswith(".safetensors") or name.endswith(PICKLE_SUFFIXES)


def copy_model_files(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, weights: bool = True,
                     allow_pickle: bool = False, trust_remote_code: bool = False) -> list[Path]:
    """Copy the model's files from ``src`` into ``dst`` (created if missing); returns the copies.

    ``weights=False`` copies everything but the safetensors files and their index (a caller writing
    the weights itself, e.g. in another dtype).

    ``shutil.copyfile`` streams in the kernel (``sendfile``): the bytes never pass through Python, and
    every copy is a new file, so patching a copy in place never touches the source (or DVC's cache).
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise ValueError(f"{src}: source and destination of a model copy are the same directory")
    dst.mkdir(parents=True, exist_ok=True)
    copies = []
    for file in model_files(src, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code):
        if not weights and is_weight_file(file.name):
            continue
        target = dst / file.name
        shutil.copyfile(file, target)
        copies.append(target)
    return copies


def save_tensors(tensors: dict, path: str | os.PathLike[str], metadata: dict[str, str] | None = None) -> Path:
    """``safetensors.torch.save_file(tensors, path, metadata)``, then the mode a file written by Python gets
    (``0o666`` less the umask): ``save_file`` creates its file 0600, so a shard, hook or converted checkpoint was
    the one file of a model directory that other users (a serving account, a teammate reading the DVC cache)
    could not read. Streams to disk as ``save_file`` does (no in-memory copy of a multi-GB shard)."""
    from safetensors.torch import save_file

    path = Path(path)
    save_file(tensors, str(path), metadata=metadata)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)
    return path
