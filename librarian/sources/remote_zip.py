"""A zip on a server read by its parts: the members asked for, fetched by HTTP range requests, never the
whole archive (torch's wheel is 900 MB; its headers a few hundred KB). Python's :mod:`zipfile` reads it
through :class:`RangeFile`, a seekable file whose reads become range requests of whole blocks, each
fetched once; every request bounded as :mod:`librarian.sources.http` bounds a download.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

from librarian.errors import BadInput, StoreError
from librarian.sources.http import Limits, read_range
from librarian.sources.links import shown

BLOCK = 256 << 10  # bytes per range request: a zip's tail and a few small members in one
MAX_MEMBER = 16 << 20  # bytes of one member taken (headers are KBs)
MAX_FETCHED = 256 << 20  # bytes fetched from one archive in all


class RangeFile(io.RawIOBase):
    """The file at ``url`` as a read-only seekable stream; blocks are fetched as they are first read."""

    def __init__(self, url: str, limits: Limits) -> None:
        super().__init__()
        self.url = url
        self._limits = limits
        self._blocks: dict[int, bytes] = {}
        self._pos = 0
        self.fetched = 0
        tail, self.size = read_range(url, -BLOCK, BLOCK, limits)
        self._tail = (self.size - len(tail), tail)  # the end of the file: the zip's directory

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _block(self, k: int) -> bytes:
        if k not in self._blocks:
            start = k * BLOCK
            if self.fetched > MAX_FETCHED:
                raise BadInput(
                    f"{shown(self.url)}: over {MAX_FETCHED:,} bytes read by parts; not a wheel to read so"
                )
            data, _ = read_range(self.url, start, min(BLOCK, self.size - start), self._limits)
            self.fetched += len(data)
            self._blocks[k] = data
        return self._blocks[k]

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), self.size - self._pos)
        if want <= 0:
            return 0
        out = bytearray()
        tail_start, tail = self._tail
        while len(out) < want:
            at = self._pos + len(out)
            if at >= tail_start:  # within the tail fetched first
                piece = tail[at - tail_start : at - tail_start + want - len(out)]
            else:
                block = self._block(at // BLOCK)
                piece = block[at % BLOCK : at % BLOCK + want - len(out)]
            if not piece:
                break
            out += piece
        buffer[: len(out)] = out
        self._pos += len(out)
        return len(out)


def remote_members(url: str, wanted: Callable[[str], bool], limits: Limits) -> dict[str, bytes]:
    """The members of the zip at ``url`` whose names ``wanted`` accepts, each at most ``MAX_MEMBER`` bytes,
    read by range requests; one line (BadInput, StoreError) where it is no zip or the server cannot."""
    stream = io.BufferedReader(RangeFile(url, limits), buffer_size=64 << 10)
    try:
        archive = zipfile.ZipFile(stream)
    except zipfile.BadZipFile as e:
        raise BadInput(f"{shown(url)}: not a zip ({e})") from e
    found = {}
    with archive:
        for info in archive.infolist():
            if not wanted(info.filename):
                continue
            if info.file_size > MAX_MEMBER:
                raise BadInput(
                    f"{shown(url)}: {info.filename} is {info.file_size:,} bytes, over {MAX_MEMBER:,}"
                )
            try:
                found[info.filename] = archive.read(info)
            except (zipfile.BadZipFile, OSError) as e:  # a torn member, a server gone mid-read
                raise StoreError(f"{shown(url)}: {info.filename}: cannot be read ({e})") from e
    return found
