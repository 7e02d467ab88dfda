"""The safetensors index of a model directory: where each tensor's bytes are, and row-level access.

A safetensors file is ``<u64 little-endian header length N><N bytes of JSON header><data>``; the header
maps each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` relative to the data
start. Reading the headers costs nothing (no tensor is loaded), which is how the stages learn the
stored dtype and the parameter count, and find the bytes of one embedding row::

    row i of a [V, d] tensor  =  bytes [data_start + begin + i·d·itemsize, ... + d·itemsize)

:meth:`SafetensorsIndex.write_rows` overwrites such rows in place: the file keeps its size, layout and
every other byte, so an edit of 200 embedding rows writes 200 rows, not a new checkpoint.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from biaslab.errors import BiaslabError

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool, "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}


class WeightsError(BiaslabError, ValueError):
    """A model directory's safetensors files are missing, malformed, or lack a tensor."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a safetensors file: its name, dtype, shape and absolute byte range in ``file``."""

    name: str
    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int  # absolute offset of the first byte in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def numel(self) -> int:
        n = 1
        for size in self.shape:
            n *= size
        return n


def read_header(path: str | os.PathLike[str]) -> tuple[dict, int]:
    """``(header dict, data start offset)`` of a safetensors file, without reading any tensor."""
    path = Path(path)
    with path.open("rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise WeightsError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (length,) = struct.unpack("<Q", raw)
        if length > 100_000_000 or length > path.stat().st_size - 8:
            raise WeightsError(f"{path}: not a safetensors file (header length {length})")
        try:
            header = json.loads(fh.read(length))
        except ValueError as exc:
            raise WeightsError(f"{path}: safetensors header is not valid JSON ({exc})") from exc
    return header, 8 + length


def file_entries(path: str | os.PathLike[str]) -> list[TensorEntry]:
    """Every tensor of one safetensors file, in byte order."""
    path = Path(path)
    header, data_start = read_header(path)
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise WeightsError(f"{path}: tensor {name!r} has dtype {info['dtype']}, which biaslab does not handle")
        begin, end = info["data_offsets"]
        entries.append(TensorEntry(name, path, _DTYPES[info["dtype"]], tuple(info["shape"]),
                                   data_start + begin, data_start + end))
    return sorted(entries, key=lambda e: e.start)


def weight_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The safetensors files of a model directory: the index's shards, else ``model.safetensors``.

    Without either, every top-level ``*.safetensors`` (a model saved under another name).
    """
    directory = Path(directory)
    index = directory / INDEX_FILE
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        missing = [s for s in shards if not (directory / s).is_file()]
        if missing:
            raise WeightsError(f"{index}: names shard(s) {missing} that are not in {directory}")
        return [directory / s for s in shards]
    if (directory / SINGLE_FILE).is_file():
        return [directory / SINGLE_FILE]
    return sorted(p for p in directory.glob("*.safetensors") if p.is_file())


class SafetensorsIndex:
    """All tensors of a model directory's safetensors files, by name."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        files = weight_files(self.directory)
        if not files:
            raise WeightsError(f"{self.directory}: no .safetensors weights")
        self.entries: dict[str, TensorEntry] = {}
        for file in files:
            for entry in file_entries(file):
                self.entries[entry.name] = entry

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[TensorEntry]:
        return iter(self.entries.values())

    def __getitem__(self, name: str) -> TensorEntry:
        try:
            return self.entries[name]
        except KeyError:
            raise WeightsError(f"{self.directory}: no tensor {name!r} in the safetensors files") from None

    @property
    def total_bytes(self) -> int:
        return sum(e.nbytes for e in self)

    @property
    def n_parameters(self) -> int:
        return sum(e.numel for e in self)

    def floating_dtype(self) -> torch.dtype | None:
        """The floating dtype holding most of the bytes: the checkpoint's storage dtype (None: no floats)."""
        by_dtype: dict[torch.dtype, int] = {}
        for e in self:
            if e.dtype.is_floating_point:
                by_dtype[e.dtype] = by_dtype.get(e.dtype, 0) + e.nbytes
        return max(by_dtype, key=by_dtype.get) if by_dtype else None

    # ------------------------------------------------------------------ rows of a 2-D tensor
    def _row_span(self, entry: TensorEntry) -> int:
        if len(entry.shape) != 2:
            raise WeightsError(f"{entry.file}: tensor {entry.name!r} has shape {entry.shape}; rows need a 2-D tensor")
        return entry.nbytes // entry.shape[0]

    def _check_ids(self, entry: TensorEntry, ids: Sequence[int]) -> None:
        bad = [i for i in ids if not 0 <= i < entry.shape[0]]
        if bad:
            raise WeightsError(f"{entry.file}: rows {bad[:5]} out of range for {entry.name!r} {entry.shape}")

    def read_rows(self, name: str, ids: Sequence[int]) -> torch.Tensor:
        """Rows ``ids`` of the 2-D tensor ``name`` as ``[len(ids), d]`` in the stored dtype."""
        entry = self[name]
        span = self._row_span(entry)
        ids = [int(i) for i in ids]
        self._check_ids(entry, ids)
        buffer = bytearray(span * len(ids))
        with entry.file.open("rb") as fh:
            for k, row in enumerate(ids):
                fh.seek(entry.start + row * span)
                buffer[k * span:(k + 1) * span] = fh.read(span)
        if not ids:
            return torch.empty((0, entry.shape[1]), dtype=entry.dtype)
        return torch.frombuffer(buffer, dtype=entry.dtype).reshape(len(ids), entry.shape[1]).clone()

    def write_rows(self, name: str, ids: Sequence[int], rows: torch.Tensor) -> None:
        """Overwrite rows ``ids`` of ``name`` in place with ``rows`` (cast to the stored dtype).

        Only for a directory this process is building (a copy): the file is modified, nothing else.
        """
        entry = self[name]
        span = self._row_span(entry)
        ids = [int(i) for i in ids]
        self._check_ids(entry, ids)
        if tuple(rows.shape) != (len(ids), entry.shape[1]):
            raise WeightsError(f"{entry.name}: {tuple(rows.shape)} rows given for {len(ids)} ids of width {entry.shape[1]}")
        data = rows.detach().to("cpu", entry.dtype).contiguous().view(torch.uint8).numpy()
        with entry.file.open("r+b") as fh:
            for k, row in enumerate(ids):
                fh.seek(entry.start + row * span)
                fh.write(data[k].tobytes())
            fh.flush()
            os.fsync(fh.fileno())
