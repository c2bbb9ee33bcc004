"""librarian.wheel.elf: headers, dynamic entries, version needs and symbols, from real and hand-built bytes."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

from librarian.errors import BadBinary
from librarian.facts import BinaryFormat
from librarian.wheel.binaries import identify
from librarian.wheel.elf import glibc_floor, read_elf, version_floor
from librarian.wheel.elf_symbols import dynamic_symbols
from tests.cuda_fixtures import cubin_bytes, elf_bytes, pe_bytes, real_sos

GLIBC_NEEDS = {
    "libc.so.6": ("GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34"),
    "ld-linux-x86-64.so.2": ("GLIBC_2.99",),  # loader internals: not a glibc floor
    "libstdc++.so.6": ("GLIBCXX_3.4.9", "GLIBCXX_3.4.30", "GLIBCXX_3.4", "CXXABI_1.3.13", "CXXABI_1.3"),
}


@pytest.fixture(scope="session")
def cuda_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc-built fixtures (checked in; rebuilt once per session when asked)."""
    return real_sos(tmp_path_factory)


def _pyelftools_view(path: Path) -> tuple[list[str], dict[str, set[str]], set[str], set[str]]:
    # pyelftools as an independent oracle for what our own reader says about the same file.
    with path.open("rb") as f:
        elf = ELFFile(f)
        needed: list[str] = []
        needs: dict[str, set[str]] = {}
        defined: set[str] = set()
        undefined: set[str] = set()
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                needed = [t.needed for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]
            if isinstance(sec, GNUVerNeedSection):
                for vn, auxes in sec.iter_versions():
                    needs[vn.name] = {a.name for a in auxes}  # type: ignore[index]
            if sec.name == ".dynsym":
                for s in list(sec.iter_symbols())[1:]:  # type: ignore[attr-defined]
                    if s.name and s["st_info"]["bind"] != "STB_LOCAL":
                        (undefined if s["st_shndx"] == "SHN_UNDEF" else defined).add(s.name)
    return needed, needs, defined, undefined


@pytest.mark.parametrize("name", ["sm75", "multi", "rdc", "stripped"])
def test_real_so_agrees_with_pyelftools(cuda_sos: dict[str, Path], name: str) -> None:
    path = cuda_sos[name]
    needed, needs, defined, undefined = _pyelftools_view(path)
    elf = read_elf(path.read_bytes())
    assert elf.cpu == "x86_64" and elf.bits == 64 and elf.little_endian
    assert list(elf.needed) == needed
    assert {lib: set(v) for lib, v in elf.version_needs} == needs
    with path.open("rb") as f:  # a file object and bytes give the same answer
        assert dynamic_symbols(f) == (frozenset(defined), frozenset(undefined))
    assert "launch" in defined


def test_real_so_floors(cuda_sos: dict[str, Path]) -> None:
    elf = read_elf(cuda_sos["sm75"].read_bytes())  # static cudart needs a newer glibc than the shared build
    assert glibc_floor(elf) == (2, 34)
    assert version_floor(elf, "CXXABI_") == (1, 3)
    assert "libcudart.so.13" in read_elf(cuda_sos["multi"].read_bytes()).needed


def test_hand_built_dynamic_and_floors() -> None:
    data = elf_bytes(
        needed=("libc10.so", "libc.so.6"),
        soname="_C.so",
        runpath="$ORIGIN:$ORIGIN/../torch/lib",
        verneed=GLIBC_NEEDS,
    )
    elf = read_elf(data)
    assert elf.needed == ("libc10.so", "libc.so.6")
    assert elf.soname == "_C.so"
    assert elf.runpath == ("$ORIGIN", "$ORIGIN/../torch/lib") and elf.rpath == ()
    assert glibc_floor(elf) == (2, 34)  # not 2.99: the ld-linux need is skipped
    assert version_floor(elf, "GLIBCXX_") == (3, 4, 30)
    assert version_floor(elf, "CXXABI_") == (1, 3, 13)


@pytest.mark.parametrize(
    ("bits", "little", "machine", "cpu"),
    [(64, True, 183, "aarch64"), (32, True, 3, "i686"), (64, False, 22, "s390x"), (64, False, 21, "ppc64"),
     (64, True, 21, "ppc64le"), (32, False, 8, None)],
)  # fmt: skip
def test_classes_byte_orders_and_machines(bits: int, little: bool, machine: int, cpu: str | None) -> None:
    data = elf_bytes(
        bits=bits,
        little=little,
        machine=machine,
        needed=("libm.so.6",),
        verneed={"libc.so.6": ("GLIBC_2.28",)},
        symbols={"PyInit__C": True, "malloc": False},
    )
    elf = read_elf(data)
    assert (elf.bits, elf.little_endian, elf.cpu) == (bits, little, cpu)
    assert elf.needed == ("libm.so.6",) and glibc_floor(elf) == (2, 28)
    assert dynamic_symbols(data) == (frozenset({"PyInit__C"}), frozenset({"malloc"}))
    assert identify(data) == (BinaryFormat.ELF, cpu)


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


GOOD = elf_bytes(needed=("libc.so.6",), verneed={"libc.so.6": ("GLIBC_2.17",)}, symbols={"f": True})
SHOFF = struct.unpack_from("<Q", GOOD, 0x28)[0]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (GOOD[: SHOFF + 100], "truncated section header table"),
        (_patch(GOOD, 0x28, "<Q", 1 << 40), "truncated section header table"),
        (_patch(GOOD, 0x3C, "<H", 60000), "truncated section header table"),
        (_patch(GOOD, 0x3A, "<H", 8), "section header table entry size 8 too small"),
        (
            _patch(GOOD, SHOFF + 64 * 2 + 0x18, "<Q", 1 << 33),
            "truncated .dynamic",
        ),  # .dynamic offset past EOF
        (_patch(GOOD, SHOFF + 64 * 2 + 0x20, "<Q", 1 << 40), ".dynamic claims"),  # absurd size
        (
            _patch(GOOD, SHOFF + 64 * 1 + 0x20, "<Q", 2),
            "offset 0x[0-9a-f]+ outside its string table",
        ),  # .dynstr cut short
        (_patch(GOOD, 4, "<B", 3), "unknown ELF class 3"),
        (GOOD[:30], "truncated ELF header"),
        (b"\x7fELF", "truncated ELF identification"),
        (b"hello, world" * 4, "not an ELF file"),
    ],
)
def test_lying_headers_give_one_line_bad_binary(data: bytes, message: str) -> None:
    with pytest.raises(BadBinary, match=message) as info:
        read_elf(io.BytesIO(data))
        dynamic_symbols(data)
    assert "\n" not in str(info.value)


def test_lying_dynsym_and_verneed() -> None:
    dynsym_size = SHOFF + 64 * 4 + 0x20
    with pytest.raises(BadBinary, match="truncated .dynsym"):
        dynamic_symbols(_patch(GOOD, dynsym_size, "<Q", len(GOOD)))
    verneed_aux = SHOFF + 64 * 3 + 0x18
    vr_off = struct.unpack_from("<Q", GOOD, verneed_aux)[0]
    with pytest.raises(BadBinary, match="aux entry runs past"):
        read_elf(_patch(GOOD, vr_off + 8, "<I", 4096))  # vn_aux points outside the section


@pytest.mark.parametrize(("machine", "cpu"), [(0x8664, "x86_64"), (0x14C, "i686"), (0xAA64, "aarch64")])
def test_pe(machine: int, cpu: str) -> None:
    assert identify(pe_bytes(machine)) == (BinaryFormat.PE, cpu)


def test_macho_and_unknown() -> None:
    thin = b"\xcf\xfa\xed\xfe" + struct.pack("<I", 0x0100000C) + bytes(64)
    assert identify(thin) == (BinaryFormat.MACHO, "aarch64")  # the tag's arm64, in the one vocabulary
    fat = b"\xca\xfe\xba\xbe" + struct.pack(">I", 2)
    fat += struct.pack(">IIIII", 0x01000007, 3, 4096, 100, 12) + struct.pack(
        ">IIIII", 0x0100000C, 0, 8192, 100, 14
    )
    assert identify(fat + bytes(64)) == (BinaryFormat.MACHO, "universal2")
    assert identify(b"INPUT(libfoo.so.1)\n") == (BinaryFormat.UNKNOWN, None)  # a linker script named .so
    with pytest.raises(BadBinary, match="without a PE header"):
        identify(b"MZ" + bytes(0x3A) + struct.pack("<I", 0x40) + b"NOPE" + bytes(32))
    with pytest.raises(BadBinary, match="truncated PE header"):
        identify(b"MZ" + bytes(0x3A) + struct.pack("<I", 1 << 20) + bytes(32))


def test_e_version() -> None:
    # ELF-ABI-7 cubins keep the CUDA release * 10 in e_version (librarian.wheel.cubin reads it); others say 1
    assert read_elf(cubin_bytes(80, e_version=118)).version == 118
    assert read_elf(elf_bytes()).version == 1


def test_version_definitions_agree_with_pyelftools() -> None:
    from elftools.elf.gnuversions import GNUVerDefSection

    from librarian.probe.libc import find_libstdcxx
    from librarian.wheel.elf_symbols import version_definitions

    lib = find_libstdcxx()
    if lib is None:
        pytest.skip("no libstdc++.so.6 on this machine to read its version definitions")
    with lib.open("rb") as f:
        theirs = [
            str(aux.name)
            for s in ELFFile(f).iter_sections()
            if isinstance(s, GNUVerDefSection)
            for _v, auxes in s.iter_versions()
            for aux in auxes
        ]
    with lib.open("rb") as f:
        ours = list(version_definitions(f))
    assert ours == theirs and any(n.startswith("GLIBCXX_3.4.") for n in ours)
    assert version_definitions(elf_bytes()) == ()  # no .gnu.version_d: defines none


def test_dynamic_symbols_decodes_only_the_names_asked_for() -> None:
    """doctor --env reads libtorch's symbol tables: of its exports only ``PyInit_`` names, of its imports
    only C++ ones, are decoded (the rest are skipped by their first bytes)."""
    from librarian.wheel.elf_symbols import dynamic_symbols
    from tests.cuda_fixtures import elf_bytes

    data = elf_bytes(
        symbols={"PyInit__C": True, "exported_fn": True, "_ZN3c104warnEv": False, "malloc": False}
    )
    assert dynamic_symbols(data) == (
        frozenset({"PyInit__C", "exported_fn"}),
        frozenset({"_ZN3c104warnEv", "malloc"}),
    )
    assert dynamic_symbols(data, exports="PyInit_", imports=("_Z",)) == (
        frozenset({"PyInit__C"}),
        frozenset({"_ZN3c104warnEv"}),
    )


def test_exports_are_asked_through_the_gnu_hash_table_as_the_loader_asks() -> None:
    """torch's exports are looked up by name in each library's ``.gnu.hash`` (never decoded whole): every
    name the symbol table exports is found, and no imported or made-up name is."""
    import glob
    import random

    from librarian.wheel.elf_symbols import Exports, dynamic_symbols

    libc = next(
        (p for p in sorted(glob.glob("/lib/x86_64-linux-gnu/libc.so.6") + glob.glob("/lib64/libc.so.6"))),
        None,
    )
    if libc is None:
        pytest.skip("no libc.so.6 at the usual paths to read a real .gnu.hash from")
    with open(libc, "rb") as f:
        table = Exports(f)
    with open(libc, "rb") as f:
        defined, undefined = dynamic_symbols(f)
    names = random.Random(1).sample(sorted(defined), min(500, len(defined)))
    assert all(n in table for n in names)
    assert not any(n + "_nope" in table for n in names)
    assert not any(n in table for n in undefined if n not in defined)
