"""Build wheels and other test inputs on the fly with ``zipfile``: real bytes, no fixtures on disk."""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import zipfile
from pathlib import Path

# The interpreter running the tests: a venv made from it, or --install into it, takes wheels of its tag
# (the suite runs on 3.10 and 3.11 alike).
HERE_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
HERE_CP = f"cp{sys.version_info[0]}{sys.version_info[1]}"
HERE_TAG = f"{HERE_CP}-{HERE_CP}-linux_x86_64"


def record_hash(data: bytes) -> str:
    """The RECORD hash field for ``data``: ``sha256=<urlsafe b64, no padding>``."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_wheel(
    directory: Path,
    name: str = "tinykern",
    version: str = "1.0.0",
    tags: str = "cp311-cp311-linux_x86_64",
    files: dict[str, bytes] | None = None,
    *,
    modes: dict[str, int] | None = None,
    data_files: dict[str, bytes] | None = None,
    record_override: dict[str, str] | None = None,
    compression: int = zipfile.ZIP_DEFLATED,
    requires_python: str | None = None,
    requires_dist: tuple[str, ...] = (),
) -> Path:
    """Write a valid wheel ``{name}-{version}-{tags}.whl`` into ``directory`` and return its path.

    ``files`` are package members (default: ``{name}/__init__.py``); ``modes`` sets unix permissions per
    member (e.g. ``0o755`` for a ``.so``); ``data_files`` go under ``{name}-{version}.data/``;
    ``record_override`` replaces RECORD hash fields to make a wheel whose RECORD lies.
    """
    dist = name.replace("-", "_")
    files = dict(files or {f"{dist}/__init__.py": b"VALUE = 1\n"})
    dist_info = f"{dist}-{version}.dist-info"
    for rel, data in (data_files or {}).items():
        files[f"{dist}-{version}.data/{rel}"] = data
    py, abi, plat = tags.split("-")
    purelib = "true" if plat == "any" else "false"
    requires = f"Requires-Python: {requires_python}\n" if requires_python else ""
    requires += "".join(f"Requires-Dist: {r}\n" for r in requires_dist)
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: test wheel\n{requires}\n".encode()
    )
    wheel_tags = "".join(
        f"Tag: {p}-{a}-{pl}\n" for p in py.split(".") for a in abi.split(".") for pl in plat.split(".")
    )
    files[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: librarian-tests\nRoot-Is-Purelib: {purelib}\n{wheel_tags}".encode()
    )
    record_path = f"{dist_info}/RECORD"
    lines = []
    for rel, data in files.items():
        digest = (record_override or {}).get(rel, record_hash(data))
        lines.append(f"{rel},{digest},{len(data)}")
    lines.append(f"{record_path},,")
    files[record_path] = ("\n".join(lines) + "\n").encode()

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{version}-{tags}.whl"
    with zipfile.ZipFile(path, "w", compression) as zf:
        for rel, data in files.items():
            info = zipfile.ZipInfo(rel, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = compression
            mode = (modes or {}).get(rel, 0o644)
            info.external_attr = (0o100000 | mode) << 16
            zf.writestr(info, data)
    return path


class UnseekableSink(io.RawIOBase):
    """A write-only stream that cannot seek: zipfile then writes data descriptors. Bytes in ``buf``."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        return self.buf.write(b)


def torch_extension_so(seed: bytes = b"") -> bytes:
    """A tiny ELF ``.so`` that links libc10 and imports one mangled c10 symbol: a torch extension bound to
    the one torch line it was built for (what gc prunes by torch line). ``seed`` makes its bytes differ."""
    from tests.cuda_fixtures import SHT_PROGBITS, elf_bytes

    return elf_bytes(
        needed=("libc10.so",),
        symbols={"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs": False},
        sections=((".comment", SHT_PROGBITS, seed),),
    )


def assert_mutants_fail_in_one_line(
    goods: tuple[bytes, ...], hot: list[int], path: str, count: int = 400
) -> None:
    """Mutate ``goods`` at ``hot`` offsets (and cut some short), seeded: each mutant reads, or fails with one
    BadBinary line naming ``path``; nothing else escapes (an IndexError, a struct.error, a hang)."""
    import random

    from librarian.errors import BadBinary
    from librarian.wheel.binaries import inspect_binary

    rng = random.Random(21)
    for _ in range(count):
        data = bytearray(rng.choice(goods))
        for _ in range(rng.randint(1, 6)):
            at = rng.choice(hot)
            data[at : at + 4] = rng.randbytes(4)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        try:
            inspect_binary(io.BytesIO(bytes(data)), path)
        except BadBinary as e:
            assert "\n" not in str(e) and str(e).startswith(f"{path}: "), str(e)


def wheel_of_installed(distribution: str, directory: Path) -> Path:
    """A ``py3-none-any`` wheel of an installed pure-Python distribution, its files taken from its RECORD:
    build tools for builds that must not reach an index (``pip install --no-index --find-links``)."""
    import importlib.metadata

    dist = importlib.metadata.distribution(distribution)
    name = dist.metadata["Name"].replace("-", "_")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{dist.version}-py3-none-any.whl"
    lines = []
    record = None
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in dist.files or ():
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
                continue  # scripts outside site-packages, and bytecode
            if rel.endswith(".dist-info/RECORD"):
                record = rel
                continue
            data = Path(str(f.locate())).read_bytes()
            zf.writestr(rel, data)
            lines.append(f"{rel},{record_hash(data)},{len(data)}")
        assert record is not None, f"{distribution}: installed without a RECORD"
        zf.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    return path


def stand_in_torch(folder: Path, version: str = "2.9.0+cu130", cuda: str = "13.0") -> Path:
    """A folder holding a wheel named torch that says what a CUDA build of torch says about itself
    (``torch/version.py``; no libraries): the combo's torch for builds of packages that link none."""
    files = {
        "torch/__init__.py": f'__version__ = "{version}"\n'.encode(),
        "torch/version.py": f'__version__ = "{version}"\ncuda = "{cuda}"\n'.encode(),
    }
    make_wheel(folder, name="torch", version=version, tags="py3-none-any", files=files)
    return folder
