"""Recordings compressed with zstd or gzip, read as the plain files they hold.

Session logs and traces are written compressed by other tools: the reference harness writes
``session.jsonl.zstd`` by default (a header frame, then one independent zstd frame appended per
durable batch), the OpenTelemetry Collector's file exporter compresses with zstd, log shippers
gzip what they rotate. Every command that reads a recording (``audit``, ``rebuild``,
``cache-report``, ``compare``, ``calibrate``) reads those through :func:`read_recording` /
:func:`decompressed`, which go by the content's first bytes (the magic numbers), never by the
file's name:

- **zstd** (``28 B5 2F FD``): every frame, in order, until the data ends: a file of
  concatenated frames is one stream (RFC 8878 §3.1). Skippable frames are skipped. One-shot
  decoders that stop after the first frame (``zstandard``'s ``decompress()``) would read only the
  harness's header, which is why frames are walked here;
- **gzip** (``1F 8B``): every member, in order (RFC 1952 §2.2).

A **torn tail** — the last frame or member cut short, as a crash in the middle of an append
leaves it — is not an error for what came before: the complete frames are kept, whatever the
cut one had already decoded is kept too, and :attr:`Decompressed.note` says what was dropped
(the line-based readers then drop an unfinished last line as they do in a plain file). A frame
that is damaged (a bad checksum, invalid data) is a :class:`CompressedDataError` naming the
frame and its byte offset: nothing is guessed.

zstd comes from the standard library from Python 3.14 on (``compression.zstd``) and from
``backports.zstd`` before (the same API; a dependency on those versions).
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Final, Literal, TypeAlias

from .._errors import TestkitError

__all__ = [
    "GZIP_MAGIC",
    "ZSTD_MAGIC",
    "CompressedDataError",
    "Compression",
    "Decompressed",
    "DecompressingReader",
    "compression_of",
    "decompressed",
    "read_recording",
]

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The first bytes of a zstd frame (the magic number 0xFD2FB528, little-endian)."""
GZIP_MAGIC: Final = b"\x1f\x8b"
"""The first bytes of a gzip member (ID1, ID2)."""

Compression: TypeAlias = Literal["zstd", "gzip"]


class CompressedDataError(TestkitError, ValueError):
    """Compressed data that does not decompress: a damaged frame or member (not a torn tail,
    which is read up to the cut). ``path`` is the file (``None`` for bytes), ``offset`` the
    byte where the bad frame or member starts, ``compression`` which format."""

    def __init__(
        self, message: str, *, path: str | None, offset: int, compression: Compression
    ) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.offset = offset
        self.compression = compression


# A traceback names it where users import it from, not this private module.
CompressedDataError.__module__ = "dsh_testkit.traces"


@dataclass(frozen=True, slots=True, kw_only=True)
class Decompressed:
    """A recording's content, decompressed when it was compressed."""

    data: bytes
    """The plain content (the bytes as they were, when they were not compressed)."""
    compression: Compression | None = None
    """How the bytes were compressed; ``None``: they were not."""
    frames: int = 0
    """Complete zstd frames or gzip members read."""
    note: str | None = None
    """What a torn tail cost, when the last frame or member was cut short."""


def _is_skippable(data: bytes, at: int) -> bool:
    """A zstd skippable frame (magic 0x184D2A50..0x184D2A5F) starts at ``at``."""
    return data[at + 1 : at + 4] == b"\x2a\x4d\x18" and data[at] & 0xF0 == 0x50


def compression_of(head: bytes) -> Compression | None:
    """How data starting with ``head`` is compressed, from its magic number (``None``: not)."""
    if head.startswith(ZSTD_MAGIC) or (len(head) >= 4 and _is_skippable(head, 0)):
        return "zstd"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    return None


def _zstd_module() -> Any:
    """``compression.zstd`` (Python 3.14+) or ``backports.zstd``: the same API."""
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[no-redef,unused-ignore]
    return zstd


def _torn(compression: Compression, number: int, at: int, size: int, kept: int) -> str:
    unit = "frame" if compression == "zstd" else "member"
    what = f"its {kept:,} decoded bytes kept" if kept else "nothing of it could be decoded"
    return (
        f"the last {compression} {unit} ({unit} {number}, from byte {at:,} of {size:,}) is cut "
        f"short, as a crash while appending leaves it: {what}"
    )


def _zstd(data: bytes, path: str | None) -> Decompressed:
    zstd = _zstd_module()
    parts: list[bytes] = []
    at = 0
    frames = 0
    size = len(data)
    while at < size:
        if size - at >= 8 and _is_skippable(data, at):
            length = int.from_bytes(data[at + 4 : at + 8], "little")
            at += 8 + length
            continue
        if not data.startswith(ZSTD_MAGIC, at):
            if size - at < 4 and ZSTD_MAGIC.startswith(data[at:]):
                note = _torn("zstd", frames + 1, at, size, 0)
                return Decompressed(
                    data=b"".join(parts), compression="zstd", frames=frames, note=note
                )
            raise CompressedDataError(
                f"byte {at:,} is not the start of a zstd frame (after {frames} frame(s)): the "
                "data after the last frame is not zstd",
                path=path,
                offset=at,
                compression="zstd",
            )
        decoder = zstd.ZstdDecompressor()
        try:
            chunk = decoder.decompress(data[at:] if at else data)
        except zstd.ZstdError as exc:
            raise CompressedDataError(
                f"zstd frame {frames + 1} (from byte {at:,}) is damaged: {exc}",
                path=path,
                offset=at,
                compression="zstd",
            ) from None
        parts.append(chunk)
        if not decoder.eof:
            note = _torn("zstd", frames + 1, at, size, len(chunk))
            return Decompressed(data=b"".join(parts), compression="zstd", frames=frames, note=note)
        frames += 1
        at = size - len(decoder.unused_data)
    return Decompressed(data=b"".join(parts), compression="zstd", frames=frames)


def _gzip(data: bytes, path: str | None) -> Decompressed:
    parts: list[bytes] = []
    at = 0
    members = 0
    size = len(data)
    while at < size:
        if not data.startswith(GZIP_MAGIC, at):
            if not data[at:].strip(b"\0"):
                break  # zero padding after the last member (as tar and tape writers leave it)
            raise CompressedDataError(
                f"byte {at:,} is not the start of a gzip member (after {members} member(s))",
                path=path,
                offset=at,
                compression="gzip",
            )
        decoder = zlib.decompressobj(wbits=31)
        try:
            chunk = decoder.decompress(data[at:] if at else data)
        except zlib.error as exc:
            raise CompressedDataError(
                f"gzip member {members + 1} (from byte {at:,}) is damaged: {exc}",
                path=path,
                offset=at,
                compression="gzip",
            ) from None
        parts.append(chunk)
        if not decoder.eof:
            note = _torn("gzip", members + 1, at, size, len(chunk))
            return Decompressed(data=b"".join(parts), compression="gzip", frames=members, note=note)
        members += 1
        at = size - len(decoder.unused_data)
    return Decompressed(data=b"".join(parts), compression="gzip", frames=members)


def decompressed(data: bytes, *, path: str | None = None) -> Decompressed:
    """``data`` decompressed when its first bytes say it is zstd or gzip, else as it is.

    Raises :class:`CompressedDataError` for a damaged frame or member (a torn last one is read
    up to the cut, see :attr:`Decompressed.note`).
    """
    kind = compression_of(data[:8])
    if kind == "zstd":
        return _zstd(data, path)
    if kind == "gzip":
        return _gzip(data, path)
    return Decompressed(data=data)


def read_recording(path: str | os.PathLike[str]) -> Decompressed:
    """A recording file's content, decompressed when it is compressed (see the module
    docstring). Raises ``OSError`` when it cannot be read, :class:`CompressedDataError` when it
    is damaged compressed data."""
    name = os.fspath(path)
    with open(name, "rb") as file:
        data = file.read()
    return decompressed(data, path=name)


_CHUNK: Final = 1 << 20
"""Compressed bytes read at a time by :class:`DecompressingReader`."""


class DecompressingReader(io.RawIOBase):
    """The plain content of a compressed file, decompressed as it is read: what
    :func:`decompressed` gives for the whole file, byte for byte, holding one chunk at a time.

    Every frame or member in order, skippable frames skipped, zero padding after the last gzip
    member ignored; a torn last frame or member is read up to the cut and :attr:`note` (set once
    the end is reached) says so in the same words; a damaged one raises the same
    :class:`CompressedDataError` when the reading reaches it. Wrap it in ``io.BufferedReader``
    to read lines."""

    def __init__(
        self,
        file: IO[bytes],
        compression: Compression,
        *,
        path: str | None,
        chunk: int = _CHUNK,
    ) -> None:
        super().__init__()
        self._file = file
        self._chunk = chunk
        self._path = path
        self._chunks = self._zstd() if compression == "zstd" else self._gzip()
        self._pending = memoryview(b"")
        self._buffer = b""
        """Compressed bytes read and not yet decompressed; they start at :attr:`_at`."""
        self._at = 0
        self._ended = False
        self.note: str | None = None
        """What a torn tail cost (see :attr:`Decompressed.note`), once the end is read."""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        size = min(len(target), len(self._pending))
        target[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def _fill(self, size: int) -> None:
        """Read until :attr:`_buffer` holds ``size`` bytes, or the file ends."""
        while len(self._buffer) < size and not self._ended:
            more = self._file.read(self._chunk)
            if more:
                self._buffer += more
            else:
                self._ended = True

    def _error(self, message: str, at: int, compression: Compression) -> CompressedDataError:
        return CompressedDataError(message, path=self._path, offset=at, compression=compression)

    def _frame(self, decoder: Any, compression: Compression, number: int) -> Iterator[bytes]:
        """One frame or member, from :attr:`_at`: its decoded bytes, at most a chunk at a time;
        :attr:`note` when it is cut short."""
        start = self._at
        kept = 0
        fed = 0
        """Compressed bytes given to the decoder (each once)."""
        tail = b""
        """gzip: input the decoder left for the next call (its output limit was reached)."""
        unit = "frame" if compression == "zstd" else "member"
        errors = (zlib.error,) if compression == "gzip" else (_zstd_module().ZstdError,)
        while True:
            wants = decoder.needs_input if compression == "zstd" else not tail
            if wants:
                self._fill(1)
                if not self._buffer:
                    # cut short: what it had decoded is kept (zlib may hold a last piece)
                    rest = decoder.flush() if compression == "gzip" else b""
                    if rest:
                        kept += len(rest)
                        yield rest
                    self._at = start + fed
                    self.note = _torn(compression, number, start, self._at, kept)
                    return
                data, self._buffer = self._buffer, b""
                fed += len(data)
            else:
                data = b"" if compression == "zstd" else tail
            try:
                out = decoder.decompress(data, self._chunk)
            except errors as exc:
                raise self._error(
                    f"{compression} {unit} {number} (from byte {start:,}) is damaged: {exc}",
                    start,
                    compression,
                ) from None
            if compression == "gzip":
                tail = decoder.unconsumed_tail
            if out:
                kept += len(out)
                yield out
            if decoder.eof:
                self._buffer = decoder.unused_data + self._buffer
                self._at = start + fed - len(decoder.unused_data)
                return

    def _zstd(self) -> Iterator[bytes]:
        zstd = _zstd_module()
        frames = 0
        while True:
            self._fill(8)
            if not self._buffer:
                return
            if len(self._buffer) >= 8 and _is_skippable(self._buffer, 0):
                skip = 8 + int.from_bytes(self._buffer[4:8], "little")
                while skip > len(self._buffer) and not self._ended:
                    skip -= len(self._buffer)
                    self._at += len(self._buffer)
                    self._buffer = b""
                    self._fill(1)
                taken = min(skip, len(self._buffer))
                self._at += taken
                self._buffer = self._buffer[taken:]
                continue
            if not self._buffer.startswith(ZSTD_MAGIC):
                if len(self._buffer) < 4 and ZSTD_MAGIC.startswith(self._buffer):
                    size = self._at + len(self._buffer)
                    self.note = _torn("zstd", frames + 1, self._at, size, 0)
                    return
                raise self._error(
                    f"byte {self._at:,} is not the start of a zstd frame (after {frames} "
                    "frame(s)): the data after the last frame is not zstd",
                    self._at,
                    "zstd",
                )
            yield from self._frame(zstd.ZstdDecompressor(), "zstd", frames + 1)
            if self.note is not None:
                return
            frames += 1

    def _gzip(self) -> Iterator[bytes]:
        members = 0
        while True:
            self._fill(2)
            if not self._buffer:
                return
            if not self._buffer.startswith(GZIP_MAGIC):
                at = self._at
                while not self._buffer.strip(b"\0"):  # zero padding to the end: the end
                    self._at += len(self._buffer)
                    self._buffer = b""
                    self._fill(1)
                    if not self._buffer:
                        return
                raise self._error(
                    f"byte {at:,} is not the start of a gzip member (after {members} member(s))",
                    at,
                    "gzip",
                )
            decoder = zlib.decompressobj(wbits=31)
            yield from self._frame(decoder, "gzip", members + 1)
            if self.note is not None:
                return
            members += 1
