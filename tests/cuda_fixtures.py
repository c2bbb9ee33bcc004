"""Test inputs for the ELF / fatbin / inspection tests: real ``.so`` files built by nvcc, and ELF,
fatbin, cubin and PE bytes built with ``struct`` for what nvcc 13 cannot make (CUDA 12 LZ4 cubins,
aarch64, 32-bit, big-endian, Windows).

The nvcc builds are checked in under ``tests/data/cuda/`` with ``MANIFEST.json`` (each file's command,
size and sha256, and the nvcc that built them); ``tests/data/cuda/rebuild.py`` rebuilds them from the
recipe below. Tests read the checked-in files, so the suite needs no nvcc. With
``LIBRARIAN_REBUILD_FIXTURES=1`` and nvcc on PATH, the session rebuilds them into its temp dir, two at a
time, and every test runs on the fresh builds (``test_cuda_fixtures`` then checks that they give the same
facts as the checked-in ones).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lz4.block
import pytest
import zstandard

DATA = Path(__file__).resolve().parent / "data" / "cuda"
MANIFEST = DATA / "MANIFEST.json"
REBUILD_ENV = "LIBRARIAN_REBUILD_FIXTURES"

SOURCES = ("k.cu", "k2.cu")  # checked in beside the fixtures
SHARED = ["-shared", "-Xcompiler", "-fPIC", "-cudart", "shared"]


def _gencode(arch: str, *codes: str) -> list[str]:
    return ["-gencode", f"arch={arch},code=[{','.join(codes)}]"]


# name -> (nvcc arguments besides the output, sources). One .so each; the set is kept small since
# every nvcc call costs about two seconds of CPU.
BUILDS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    # static cudart (the nvcc default): the one large fixture, ~1 MB
    "sm75": (["-shared", "-Xcompiler", "-fPIC", *_gencode("compute_75", "sm_75")], ("k.cu",)),
    "multi": (
        [
            *SHARED,
            *_gencode("compute_75", "sm_75"),
            *_gencode("compute_80", "sm_80"),
            *_gencode("compute_86", "sm_86"),
            *_gencode("compute_89", "sm_89", "compute_89"),
        ],
        ("k.cu",),
    ),
    "special": (
        [
            *SHARED,
            *_gencode("compute_90a", "sm_90a"),
            *_gencode("compute_100f", "sm_100f"),
            *_gencode("compute_120f", "sm_120f", "compute_120f"),
        ],
        ("k.cu",),
    ),
    # PyTorch's usual TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0+PTX"
    "torch_list": (
        [
            *SHARED,
            *_gencode("compute_80", "sm_80"),
            *_gencode("compute_86", "sm_86"),
            *_gencode("compute_90", "sm_90", "compute_90"),
        ],
        ("k.cu",),
    ),
    "ptx": ([*SHARED, *_gencode("compute_80", "compute_80")], ("k.cu",)),
    "rdc": ([*SHARED, "-rdc=true", *_gencode("compute_80", "sm_80", "compute_80")], ("k.cu",)),
    "debug": ([*SHARED, "-G", *_gencode("compute_75", "sm_75")], ("k.cu",)),
    "two_tu": ([*SHARED, *_gencode("compute_80", "sm_80")], ("k.cu", "k2.cu")),
}
# One SASS arch each, no PTX: what a wheel built with TORCH_CUDA_ARCH_LIST="8.6" (say) carries
# (the verdict tests of doctor, cells and pull --compatible).
SINGLE_ARCHS = ("sm_80", "sm_86", "sm_90", "sm_90a")
for _arch in SINGLE_ARCHS:
    BUILDS[_arch] = ([*SHARED, "-gencode", f"arch=compute_{_arch[3:]},code={_arch}"], ("k.cu",))
# Loose device-code files, as wheels like flashinfer-cubin ship them: file name -> nvcc arguments.
LOOSE: dict[str, list[str]] = {
    "sm90a.cubin": ["-cubin", "-arch=sm_90a"],  # ELF ABI 8: `a` only in .nv.compat
    "sm100a.cubin": ["-cubin", *_gencode("compute_100a", "sm_100a")],
    "sm120f.cubin": ["-cubin", *_gencode("compute_120f", "sm_120f")],  # nothing in a cubin says `f`
    "rdc.cubin": ["-cubin", "-rdc=true", "-arch=sm_80"],  # ET_REL
    "multi.fatbin": [
        "-fatbin",
        *_gencode("compute_80", "sm_80", "compute_80"),
        *_gencode("compute_120f", "sm_120f"),
    ],
    "sm120f.ptx": ["-ptx", "-arch=sm_120f"],
}
COMPRESS_MODES = ("default", "size", "speed", "balance", "none")
for _mode in COMPRESS_MODES:
    # -compress-all makes nvcc compress the cubins too (by default it compresses only PTX)
    BUILDS[f"compress_{_mode}"] = (
        [
            *SHARED,
            f"--compress-mode={_mode}",
            "-Xfatbin=-compress-all",
            *_gencode("compute_80", "sm_80", "compute_80"),
        ],
        ("k.cu",),
    )
STRIPPED = "stripped"  # sm75.so after `strip --strip-all`


def file_names() -> dict[str, str]:
    """Fixture name (``multi``, ``sm90a.cubin``) -> its file name in the fixture directory."""
    names = {name: f"{name}.so" for name in [*BUILDS, STRIPPED]}
    names.update({name: name for name in LOOSE})
    return names


def commands() -> dict[str, list[str]]:
    """File name -> the command that makes it, run in the fixture directory (as MANIFEST.json records)."""
    files = file_names()
    out: dict[str, list[str]] = {}
    for name, (args, sources) in BUILDS.items():
        out[files[name]] = ["nvcc", *args, "-o", files[name], *sources]
    for name, args in LOOSE.items():
        out[name] = ["nvcc", *args, "-o", name, "k.cu"]
    out[files[STRIPPED]] = ["strip", "--strip-all", "-o", files[STRIPPED], files["sm75"]]
    return out


def nvcc_version() -> tuple[int, int] | None:
    """The CUDA release of the nvcc on PATH, or ``None`` where there is none."""
    if shutil.which("nvcc") is None:
        return None
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def build_fixtures(directory: Path) -> dict[str, Path]:
    """Build every fixture into ``directory`` once (later calls reuse it); name -> path."""
    paths = {name: directory / file for name, file in file_names().items()}
    if (directory / "done").exists():
        return paths
    directory.mkdir(parents=True, exist_ok=True)
    for source in SOURCES:
        if directory.resolve() != DATA:
            shutil.copyfile(DATA / source, directory / source)
    todo = commands()
    strip = todo.pop(paths[STRIPPED].name)

    def build(file: str) -> None:
        done = subprocess.run(todo[file], cwd=directory, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{shlex.join(todo[file])} failed: {done.stderr.strip()}")

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(build, sorted(todo)))
    subprocess.run(strip, cwd=directory, check=True)
    (directory / "done").touch()
    return paths


def write_manifest(directory: Path) -> dict[str, object]:
    """Record what built the fixtures in ``directory``: ``MANIFEST.json`` (nvcc, files, commands)."""
    banner = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    release = re.search(r"release (\d+\.\d+), (V[\d.]+)", banner)
    assert release is not None, banner
    files = {}
    for file, cmd in sorted(commands().items()):
        data = (directory / file).read_bytes()
        files[file] = {
            "command": shlex.join(cmd),
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    manifest: dict[str, object] = {"nvcc": {"release": release[1], "version": release[2]}, "files": files}
    (directory / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def recorded() -> dict[str, object]:
    """The checked-in ``MANIFEST.json``."""
    data: dict[str, object] = json.loads(MANIFEST.read_text())
    return data


def recorded_toolkit() -> tuple[int, int]:
    """The CUDA release that built the checked-in fixtures (``(13, 0)``), as MANIFEST.json records it."""
    nvcc = recorded()["nvcc"]
    assert isinstance(nvcc, dict)
    major, minor = str(nvcc["release"]).split(".")
    return int(major), int(minor)


def rebuilding() -> bool:
    """Whether this session rebuilds the fixtures: asked to (``LIBRARIAN_REBUILD_FIXTURES=1``) and nvcc is here."""
    return os.environ.get(REBUILD_ENV) == "1" and nvcc_version() is not None


def fixtures_toolkit() -> tuple[int, int]:
    """The CUDA release that built the fixtures this session reads: the recorded one, or nvcc's when rebuilding."""
    version = nvcc_version() if rebuilding() else None
    return version or recorded_toolkit()


def checked_in() -> dict[str, Path]:
    """The checked-in fixtures, by name."""
    return {name: DATA / file for name, file in file_names().items()}


def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures built afresh by the nvcc on PATH, once per session (skips where nvcc is missing)."""
    if nvcc_version() is None:
        pytest.skip("nvcc is not on PATH: cannot rebuild the CUDA fixtures")
    return build_fixtures(tmp_path_factory.getbasetemp() / "cuda-fixtures")


def real_sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The nvcc-built fixtures (``.so`` by name, loose files by file name): the checked-in ones, or
    this session's rebuild when ``LIBRARIAN_REBUILD_FIXTURES=1`` and nvcc is on PATH."""
    return rebuilt(tmp_path_factory) if rebuilding() else checked_in()


# ---- ELF bytes -------------------------------------------------------------------------------------

SHT_PROGBITS, SHT_STRTAB, SHT_DYNAMIC, SHT_NOTE, SHT_DYNSYM = 1, 3, 6, 7, 11
SHT_GNU_VERNEED = 0x6FFFFFFE


class _Strings:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")

    def add(self, s: str) -> int:
        off = len(self.data)
        self.data += s.encode() + b"\0"
        return off


def elf_bytes(
    *,
    bits: int = 64,
    little: bool = True,
    machine: int = 62,
    etype: int = 3,
    osabi: int = 0,
    eflags: int = 0,
    needed: tuple[str, ...] = (),
    soname: str | None = None,
    runpath: str | None = None,
    verneed: dict[str, tuple[str, ...]] | None = None,
    symbols: dict[str, bool] | None = None,
    sections: tuple[tuple[str, int, bytes], ...] = (),
    flags: dict[str, int] | None = None,
) -> bytes:
    """A small ELF file: dynamic entries, version needs, dynamic symbols (name -> defined) and sections
    (``flags``: section name -> ``sh_flags``, else 0)."""
    e = "<" if little else ">"
    dynstr = _Strings()
    dyn = [(1, dynstr.add(n)) for n in needed]
    if soname:
        dyn.append((14, dynstr.add(soname)))
    if runpath:
        dyn.append((29, dynstr.add(runpath)))
    dyn.append((0, 0))
    dyn_fmt = e + ("iI" if bits == 32 else "qQ")
    vr = bytearray()
    libs = list((verneed or {}).items())
    for i, (lib, names) in enumerate(libs):
        vr += struct.pack(
            e + "HHIII", 1, len(names), dynstr.add(lib), 16, 0 if i == len(libs) - 1 else 16 + 16 * len(names)
        )
        for j, n in enumerate(names):
            vr += struct.pack(e + "IHHII", 0, 0, 0, dynstr.add(n), 0 if j == len(names) - 1 else 16)
    sym_fmt = e + ("IIIBBH" if bits == 32 else "IBBHQQ")
    syms = bytearray(struct.calcsize(sym_fmt))
    for name, defined in (symbols or {}).items():
        off, info, shndx = dynstr.add(name), (1 << 4) | 2, (1 if defined else 0)
        row = (off, 0, 0, info, 0, shndx) if bits == 32 else (off, info, 0, shndx, 0, 0)
        syms += struct.pack(sym_fmt, *row)
    # Section indexes: 0 null, 1 .dynstr, 2 .dynamic, 3 .gnu.version_r, 4 .dynsym, then the extras.
    table: list[tuple[str, int, bytes, int, int]] = [
        (".dynstr", SHT_STRTAB, bytes(dynstr.data), 0, 0),
        (".dynamic", SHT_DYNAMIC, b"".join(struct.pack(dyn_fmt, t, v) for t, v in dyn), 1, 0),
        (".gnu.version_r", SHT_GNU_VERNEED, bytes(vr), 1, len(libs)),
        (".dynsym", SHT_DYNSYM, bytes(syms), 1, 1),
        *((n, t, d, 0, 0) for n, t, d in sections),
    ]
    return _assemble(e, bits, machine, etype, osabi, eflags, table, flags=flags)


def _assemble(
    e: str,
    bits: int,
    machine: int,
    etype: int,
    osabi: int,
    eflags: int,
    table: list[tuple[str, int, bytes, int, int]],
    *,
    version: int = 1,
    flags: dict[str, int] | None = None,
) -> bytes:
    ehsize, shentsize = (52, 40) if bits == 32 else (64, 64)
    shstr = _Strings()
    body = bytearray(ehsize)
    rows = [(0, 0, 0, 0, 0, 0, 0)]
    for name, typ, data, link, info in [*table, (".shstrtab", SHT_STRTAB, b"", 0, 0)]:
        name_off = shstr.add(name)
        if name == ".shstrtab":
            data = bytes(shstr.data)
        body += bytes(-len(body) % 8)
        rows.append((name_off, typ, (flags or {}).get(name, 0), len(body), len(data), link, info))
        body += data
    body += bytes(-len(body) % 8)
    shoff = len(body)
    sh_fmt = e + ("IIIIIIIIII" if bits == 32 else "IIQQQQIIQQ")
    for name_off, typ, flg, off, size, link, info in rows:
        body += struct.pack(sh_fmt, name_off, typ, flg, 0, off, size, link, info, 8 if typ else 0, 0)
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 1 if e == "<" else 2, 1, osabi]) + bytes(8)
    hfmt = e + ("HHIIIIIHHHHHH" if bits == 32 else "HHIQQQIHHHHHH")
    header = ident + struct.pack(
        hfmt, etype, machine, version, 0, 0, shoff, eflags, ehsize, 0, 0, shentsize, len(rows), len(rows) - 1
    )
    body[: len(header)] = header
    return bytes(body)


def note(owner: str, ntype: int, desc: bytes) -> bytes:
    """One ELF note record."""
    name = owner.encode() + b"\0"
    return (
        struct.pack("<III", len(name), len(desc), ntype)
        + name
        + bytes(-len(name) % 4)
        + desc
        + bytes(-len(desc) % 4)
    )


def cubin_bytes(
    sm: int,
    *,
    api: tuple[int, int] | None = None,
    release: str | None = None,
    abi: int = 7,
    arch_specific: str = "",
    e_version: int = 1,
    etype: int = 2,
    kernels: bool = True,
    arch_option: str | None = None,
    layout: int = 0x06,
) -> bytes:
    """A cubin (EM_CUDA ELF) for ``sm`` whose ``.nv.info`` says ``api`` and/or tkinfo says ``release``
    (and ``arch_option``, the ``-arch`` of ptxas's command line, as ptxas 12.9 and 13.0 write it).

    ``kernels``: it holds one kernel's code (a ``.text._Z1kPi`` section, as nvcc names it); without, it is
    a stub that serves no GPU (libcufftw's 872-byte cubin).

    ``abi`` 7 or 8 picks the ``e_flags`` layout (reference section 4). ``arch_specific`` says how the
    cubin marks ``sm_NNa``: ``"flags"`` (ABI 7 0x800; ptxas 12.9's ABI 8 0x8) or ``"compat"`` (CUDA 13's
    ``.nv.compat`` attribute 9); ``"family"`` sets the later ABI-8 layout's `f` bit (0x4), which with
    ``layout`` 0x0f or 0x10 (e_flags >> 24) says `f`, and in the usual 0x06 layout means nothing.
    """
    sections = []
    if api:
        # EIATTR records: one format-3 (u16 value) record, then format 4 attr 0x37 with a u32
        info = struct.pack("<BBH", 3, 0x1B, 0x3FF) + struct.pack("<BBHI", 4, 0x37, 4, api[0] * 10 + api[1])
        sections.append((".nv.info.add", 0x70000000, info))
    if release:
        strings = b"ptxas\0" + f"Cuda compilation tools, release {release}, V{release}.1\0".encode()
        if arch_option:
            strings += f"Build cuda_{release}\0-arch {arch_option} -m 64 \0".encode()
        desc = struct.pack("<IIIIII", 2, 0, 0, 6, 0, 0) + strings
        sections.append((".note.nv.tkinfo", SHT_NOTE, note("NVIDIA Corp", 2000, desc)))
    if abi == 7:
        osabi, eflags = 0x33, sm | 0x500 | sm << 16 | (0x800 if arch_specific == "flags" else 0)
    else:
        low = (0x2 if sm >= 100 else 0x4) | (0x8 if arch_specific == "flags" else 0)
        if arch_specific == "family":
            low = 0x4
        osabi, eflags = 0x41, layout << 24 | sm << 8 | low
    if abi == 8:  # as CUDA 13 writes it: u8 format 2, u8 attribute, u16 value records
        compat = struct.pack("<BBH", 2, 9, arch_specific == "compat") + struct.pack("<BBH", 2, 2, 1)
        sections.append((".nv.compat", 0x70000086, compat))
    if kernels:
        sections.append((".text._Z1kPi", 1, bytes(64)))  # SHT_PROGBITS: the kernel's SASS
    return _assemble(
        "<", 64, 190, etype, osabi, eflags, [(n, t, d, 0, 0) for n, t, d in sections], version=e_version
    )


# ---- fatbin bytes ----------------------------------------------------------------------------------

FLAGS_BASE = 0x11  # 64bit | host_linux, on every real entry


def fatbin_entry(
    kind: int,
    arch: int,
    payload: bytes,
    *,
    compress: str = "none",
    version: tuple[int, int] = (1, 7),
    flags: int = FLAGS_BASE,
    header_size: int = 0x40,
    uncompressed_size: int | None = None,
) -> bytes:
    """One fatbin entry (kind 1 PTX, 2 cubin, 8 LTO-IR); ``compress`` is ``none``, ``lz4`` or ``zstd``."""
    stream: bytes
    if compress == "lz4":
        stream, flags = lz4.block.compress(payload, store_size=False), flags | 0x2000
    elif compress == "zstd":
        stream, flags = zstandard.ZstdCompressor().compress(payload), flags | 0x8000
    else:
        stream = payload
    csize = len(stream) if compress != "none" else 0
    usize = (len(payload) if compress != "none" else 0) if uncompressed_size is None else uncompressed_size
    padded = stream + bytes(-len(stream) % 8)
    head = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind,
        0x101,
        header_size,
        len(padded),
        csize,
        0,
        version[1],
        version[0],
        arch,
        0,
        0,
        flags,
        0,
        usize,
    )
    return head + bytes(max(header_size - len(head), 0)) + padded


def fatbin_blob(*entries: bytes, fat_size: int | None = None, header_size: int = 16) -> bytes:
    """A fatbin blob: the 16-byte header, then the entries back to back."""
    body = b"".join(entries)
    size = len(body) if fat_size is None else fat_size
    return struct.pack("<IHHQ", 0xBA55ED50, 1, header_size, size) + body


SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4


def so_with_fatbin(
    fatbin: bytes, *, name: str = ".nv_fatbin", machine: int = 62, flags: int = SHF_ALLOC
) -> bytes:
    """A host ``.so`` whose ``name`` section (``sh_flags`` ``flags``) holds ``fatbin``."""
    return elf_bytes(machine=machine, sections=((name, SHT_PROGBITS, fatbin),), flags={name: flags})


def without_section_headers(elf: bytes) -> bytes:
    """The ELF file as ``sstrip`` leaves it: no section header table (e_shoff, e_shnum, e_shstrndx 0)."""
    out = bytearray(elf)
    shoff = struct.unpack_from("<Q", out, 0x28)[0]
    struct.pack_into("<Q", out, 0x28, 0)
    struct.pack_into("<HHH", out, 0x3A, 0, 0, 0)
    return bytes(out[:shoff])


def pe_bytes(machine: int = 0x8664) -> bytes:
    """A small PE DLL (a Windows ``.pyd``) for COFF ``machine``: headers and one code section."""
    from tests.pe_builders import CODE, pe_dll

    return pe_dll(((".text", b"\xc3" * 16, CODE),), machine=machine)
