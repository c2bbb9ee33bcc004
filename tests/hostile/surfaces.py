"""Field-aware fuzzing of the surfaces a whole-wheel mutant rarely reaches: PE import and delay-load import
tables, Mach-O load commands and symbol tables, RECORD fields, and a Hub's replies.

A member mutant changes one or a few fields of a good member, chosen inside the region under test, to a
value that breaks a reader more often than random bytes do (zero, all ones, the top bit, an offset into
the file, a count near a cap). Each goes straight to ``inspect_binary``: it must give facts or raise
BadBinary (one line), within a CPU-time bound. Run the big runs alone, as the wheel fuzzer is::

    python -m tests.hostile.surfaces --seed 1 --count 10000
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from librarian.errors import LibrarianError
from librarian.wheel.binaries import inspect_binary
from tests.macho_builders import CPU_ARM64, CPU_X86_64, thin, universal
from tests.pe_builders import CODE, DATA, pe_dll

MSVC_C10 = (
    "?torchCheckFail@detail@c10@@YAXPEBD0IAEBV?$basic_string@DU?$char_traits@D@std@@V?$allocator@D@2@@std@@@Z"
)
C10 = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"


@dataclass(frozen=True)
class Surface:
    """A good member and the byte range of it that the mutants change."""

    name: str
    member: str  # its path in a wheel (the reader is chosen by the bytes; the name says the OS)
    data: bytes
    start: int
    end: int


def _pe_surfaces() -> list[Surface]:
    data = pe_dll(
        ((".text", b"\xc3" * 64, CODE), (".nv_fatb", b"\0" * 16, DATA)),
        {
            "cudart64_12.dll": ["cudaLaunchKernel"],
            "torch_cpu.dll": [MSVC_C10],
            "KERNEL32.dll": ["GetProcAddress"],
        },
        delay_imports={"nvcuda.dll": ["cuInit", "cuModuleLoad"], "c10.dll": [MSVC_C10]},
    )
    found = []
    for section, name in ((b".idata", "pe imports"), (b".didat", "pe delay imports")):
        row = data.index(section)  # the section header: size and file offset
        size, offset = struct.unpack_from("<I4xI", data, row + 16)
        found.append(Surface(name, "pkg/_C.pyd", data, offset, offset + size))
    headers = data.index(b"PE\0\0")
    found.append(Surface("pe headers", "pkg/_C.pyd", data, headers, headers + 24 + 240 + 40 * 4))
    return found


def _macho_surfaces() -> list[Surface]:
    exact = thin(
        CPU_ARM64,
        ("@rpath/libtorch_cpu.dylib", "@rpath/libc10.dylib"),
        (C10, "PyObject_GetAttr"),
        ("PyInit__C",),
    )
    sizeofcmds = struct.unpack_from("<iIIII", exact, 4)[4]
    symtab = exact.rindex(struct.pack("<II", 0x2, 24))
    _, _, symoff, _, stroff, strsize = struct.unpack_from("<6I", exact, symtab)
    fat = universal((CPU_X86_64, exact), (CPU_ARM64, exact))
    return [
        Surface("macho load commands", "pkg/_C.so", exact, 32, 32 + sizeofcmds),
        Surface("macho symbol table", "pkg/_C.so", exact, symoff, stroff + strsize),
        Surface("macho universal header", "pkg/_C.so", fat, 0, 8 + 20 * 2),
    ]


def surfaces() -> list[Surface]:
    """Every member surface, each a good member and its range."""
    return [*_pe_surfaces(), *_macho_surfaces()]


def _hostile_value(rng: random.Random, width: int, size: int) -> int:
    top = (1 << (8 * width)) - 1
    return rng.choice(
        [0, 1, top, top >> 1, 1 << (8 * width - 1), rng.randrange(size + 1), size - 1, size + 1,
         (1 << 18) - 1, 1 << 20, 4096, rng.randrange(top + 1), (1 << (8 * width - 1)) | rng.randrange(1 << 16)]
    ) & top  # fmt: skip


def mutate_surface(surface: Surface, rng: random.Random) -> tuple[bytes, str]:
    """One to four fields of ``surface``'s range set to hostile values (aligned 1, 2, 4 or 8 bytes wide)."""
    out = bytearray(surface.data)
    how = []
    for _ in range(rng.choice([1, 1, 1, 2, 4])):
        width = rng.choice([1, 2, 4, 4, 4, 8])
        span = surface.end - surface.start - width
        if span <= 0:
            continue
        at = surface.start + rng.randrange(span) // width * width
        value = _hostile_value(rng, width, len(out))
        out[at : at + width] = value.to_bytes(width, "little")
        how.append(f"{at:#x}:{width}={value:#x}")
    return bytes(out), ",".join(how)


@dataclass
class SurfaceStats:
    """What a surface fuzz run saw."""

    mutants: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # "read" / "refused", per surface
    escapes: list[str] = field(default_factory=list)  # an exception that is not LibrarianError
    slow: list[str] = field(default_factory=list)  # a mutant past the CPU-time bound
    slowest_s: float = 0.0
    peak_rss_mb: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "mutants": self.mutants,
            "outcomes": dict(self.outcomes),
            "escapes": len(self.escapes),
            "slow": len(self.slow),
            "slowest_s": round(self.slowest_s, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "examples": (self.escapes + self.slow)[:5],
        }


def fuzz_surfaces(seed: int, count: int, bound_s: float = 5.0) -> SurfaceStats:
    """``count`` member mutants over every surface, round robin, seeded."""
    rng = random.Random(seed)
    stats = SurfaceStats()
    all_surfaces = surfaces()
    for i in range(count):
        surface = all_surfaces[i % len(all_surfaces)]
        data, how = mutate_surface(surface, rng)
        stats.mutants += 1
        start = time.process_time()
        try:
            inspect_binary(io.BytesIO(data), surface.member)
            stats.outcomes[f"{surface.name}: read"] += 1
        except LibrarianError as e:
            assert "\n" not in str(e), str(e)
            stats.outcomes[f"{surface.name}: refused"] += 1
        except Exception as e:  # noqa: BLE001 - an escape is what the fuzzer looks for
            stats.escapes.append(f"seed {seed} mutant {i} ({surface.name} {how}): {type(e).__name__}: {e}")
        spent = time.process_time() - start
        stats.slowest_s = max(stats.slowest_s, spent)
        if spent > bound_s:
            stats.slow.append(f"seed {seed} mutant {i} ({surface.name} {how}): {spent:.1f} s of CPU")
    stats.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return stats


# --- RECORD fields ---------------------------------------------------------------------------------------

_BAD_PATHS = ("../x", "/abs", "", "a" * 140000, "x\\y")
RECORD_FIELDS: tuple[Callable[[random.Random, str, str, str], str], ...] = (
    lambda rng, path, digest, size: f"{path},{digest},{rng.choice(['-1', '', 'x', '1e9', str(1 << 70), '0'])}",
    lambda rng, path, digest, size: f"{path},{rng.choice(['', 'sha256=', 'md5=abc', 'sha256=!!!', 'sha512=' + 'A' * 86, 'sha256=' + 'A' * 200000])},{size}",
    lambda rng, path, digest, size: f"{rng.choice(_BAD_PATHS + (path + '/',))},{digest},{size}",
    lambda rng, path, digest, size: f'"{path},{digest},{size}',  # an unclosed quote
    lambda rng, path, digest, size: f"{path},{digest},{size},extra,fields",
    lambda rng, path, digest, size: f"{path}",
    lambda rng, path, digest, size: f"{path},{digest},{size}\n{path},{digest},{size}",  # a duplicate line
    lambda rng, path, digest, size: "\x00" * rng.randint(1, 10),
)  # fmt: skip


def mutate_record(record: str, rng: random.Random) -> tuple[str, str]:
    """RECORD with one line's fields replaced by a hostile form; and which form."""
    lines = record.splitlines()
    k = rng.randrange(len(lines))
    path, digest, size = (lines[k].split(",") + ["", ""])[:3]
    which = rng.randrange(len(RECORD_FIELDS))
    lines[k] = RECORD_FIELDS[which](rng, path, digest, size)
    return "\n".join(lines) + "\n", f"record form {which}"


# --- Hub replies -----------------------------------------------------------------------------------------

REPO_INFO: dict[str, object] = {
    "_id": "0" * 24, "id": "team/wheels", "author": "team", "sha": "a" * 40, "private": False,
    "lastModified": "2026-12-01T10:00:00.000Z", "gated": False, "disabled": False, "downloads": 0, "likes": 0,
    "tags": [], "siblings": [{"rfilename": "index.json"}], "createdAt": "2026-12-01T10:00:00.000Z",
}  # fmt: skip


def reply_mutants(rng: random.Random) -> tuple[bytes, str]:
    """A hostile body for a JSON endpoint: broken text, or the repo info with one value bent."""
    from tests.hostile.fuzz import mutate_json

    pick = rng.random()
    if pick < 0.3:
        text = json.dumps(REPO_INFO)
        return text[: rng.randrange(len(text))].encode(), "truncated"
    if pick < 0.4:
        return rng.choice(
            [b"", b"null", b"[]", b'"x"', b"<html>502 Bad Gateway</html>", b"[" * 100000]
        ), "junk"
    data, how = mutate_json(REPO_INFO, rng)
    return json.dumps(data).encode(), how


def _main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=10000)
    args = parser.parse_args()
    sys.stdout.write(json.dumps(fuzz_surfaces(args.seed, args.count).to_json()) + "\n")


if __name__ == "__main__":
    _main()


# --- flags and settings files ------------------------------------------------------------------------------

FLAG_VALUES: dict[str, tuple[str, ...]] = {
    "--sm": ("89", "0", "-1", "999", "sm_89", "89a", "8.9", "x", "9" * 40, ""),
    "--torch": ("2.9", "2", "2.99", "99.0", "2.9.1.2", "x", "-1", "9" * 40, ""),
    "--cuda": ("12.8", "128", "13", "99.9", "x", "12.x", "9" * 40, ""),
    "--python": ("3.11", "3", "3.99", "2.7", "x", "/no/such/python", "9" * 40, ""),
    "--platform": ("manylinux_2_28_x86_64", "manylinux_2_999999_x86_64", "manylinux_99999999999999999_1_x86_64",
                   "win_amd64", "macosx_99_99_arm64", "macosx_100_0_arm64", "xxxx", "linux_", "a" * 5000, ""),
    "--glibc": ("2.31", "2", "2.999999", "99999999999.1", "x", ""),
    "--driver": ("12.8", "0.0", "999.9", "x", ""),
    "--gpu": ("0", "1", "-1", "99999999999999999999", "x"),
}  # fmt: skip
COMMANDS: tuple[tuple[str, ...], ...] = (("doctor", "{wheel}"), ("pull", "tinykern", "-o", "{out}"))


def flag_argv(rng: random.Random, wheel: str, out: str) -> list[str]:
    """A doctor or pull command line with one to four flags, each a hostile value or a sane one."""
    base = [part.format(wheel=wheel, out=out) for part in rng.choice(COMMANDS)]
    flags = rng.sample(sorted(FLAG_VALUES), rng.randint(1, 4))
    for flag in flags:
        base += [flag, rng.choice(FLAG_VALUES[flag])]
    return base


SETTINGS_VALUES: tuple[str, ...] = (
    '""', "5", "true", "[]", "{}", '"../../etc"', '"wheelhouse"', '"' + "a" * 5000 + '"',
    "[" * 2000 + "]" * 2000, '"no-such-layout"', '"\\u0000"',
)  # fmt: skip


def settings_text(rng: random.Random) -> str:
    """A pyproject.toml whose [tool.librarian] table is bent: a key given a hostile value, or a stray key."""
    key = rng.choice(["repo", "layout", "license", "install", "stray"])
    return f"[tool.librarian]\n{key} = {rng.choice(SETTINGS_VALUES)}\n"


def matrix_text(rng: random.Random, base: dict[str, object]) -> str:
    """A matrix override: the packaged matrix's first torch row with one value bent (TOML), or junk text."""
    import tomli_w

    from tests.hostile.fuzz import mutate_json

    if rng.random() < 0.15:
        return rng.choice(["[" * 3000, "x = ", "\x00", "[[torch]]\nversion = 1\n" * 50])
    bent, _ = mutate_json(base, rng)
    try:
        return tomli_w.dumps(bent if isinstance(bent, dict) else {"x": bent})
    except (TypeError, ValueError):  # a value TOML cannot hold (None): the override is left out
        return ""
