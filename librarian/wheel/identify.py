"""Which native binary a member is: ELF, PE or Mach-O, and for which CPU, from its first bytes.

Each reader says whether bytes are its format, and for which CPU, from its own tables (``sniff``): a new
format is one reader module and one row in :data:`FORMATS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from librarian.facts import BinaryFormat
from librarian.wheel import elf, macho, pe
from librarian.wheel.elf import Source

Sniff = Callable[[Source, bytes], "str | None | bool"]

# In the order they are tried; the first that knows the bytes says the format and the CPU.
FORMATS: tuple[tuple[BinaryFormat, Sniff], ...] = (
    (BinaryFormat.ELF, elf.sniff),
    (BinaryFormat.PE, pe.sniff),
    (BinaryFormat.MACHO, macho.sniff),
)


def identify(data: BinaryIO | bytes) -> tuple[BinaryFormat, str | None]:
    """The container format and CPU of a native binary, from its magic and machine field."""
    src = Source(data)
    head = src.read(0, min(src.size, 64), "file header")
    for fmt, sniff in FORMATS:
        cpu = sniff(src, head)
        if cpu is not False:
            return fmt, cpu if isinstance(cpu, str) else None
    return BinaryFormat.UNKNOWN, None
