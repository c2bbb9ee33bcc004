"""Grow a real ``.so`` by a padding section: benchmarks need big, valid ELF members without big builds.

The padding goes after the original bytes as a new ``.lbench_pad`` section; the section headers (and the
section-name table, with the new name) move after it, so every reader still finds every table.
"""

from __future__ import annotations

import struct


def grow(so: bytes, pad_size: int) -> tuple[bytes, bytes]:
    """The bytes before the padding and after it: ``head + <pad_size bytes> + tail`` is a valid ELF."""
    (shoff,) = struct.unpack_from("<Q", so, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", so, 0x3A)
    headers = bytearray(so[shoff : shoff + shentsize * shnum])
    str_off, str_size = struct.unpack_from("<QQ", headers, shstrndx * shentsize + 0x18)
    shstrtab = so[str_off : str_off + str_size] + b".lbench_pad\0"
    pad_off = (shoff + 7) & ~7
    strtab_off = pad_off + pad_size
    new_shoff = (strtab_off + len(shstrtab) + 7) & ~7
    struct.pack_into("<QQ", headers, shstrndx * shentsize + 0x18, strtab_off, len(shstrtab))
    headers += struct.pack("<IIQQQQIIQQ", str_size, 1, 0, 0, pad_off, pad_size, 0, 0, 8, 0)
    head = bytearray(so[:shoff]) + bytes(pad_off - shoff)
    struct.pack_into("<Q", head, 0x28, new_shoff)
    struct.pack_into("<H", head, 0x3C, shnum + 1)
    return bytes(head), shstrtab + bytes(new_shoff - strtab_off - len(shstrtab)) + bytes(headers)


def header_overhead(so: bytes) -> int:
    """Bytes ``grow`` adds besides the padding and the file up to its section headers."""
    (shoff,) = struct.unpack_from("<Q", so, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", so, 0x3A)
    str_size = struct.unpack_from("<Q", so, shoff + shstrndx * shentsize + 0x20)[0]
    return ((shoff + 7) & ~7) + str_size + len(b".lbench_pad\0") + shentsize * (shnum + 2)
