"""Hostile wheels: hand-made ones for each known attack, and a seeded mutator for fuzzing.

Every wheel here is made from good bytes (``zipfile``), then bent: a field of a zip record, a member's
metadata, or random bytes. The mutator is deterministic per seed, so a failing mutant is reproducible.
"""

from __future__ import annotations

import io
import random
import struct
import warnings
import zipfile
import zlib
from pathlib import Path

from tests.builders import record_hash

TAGS = "cp311-cp311-linux_x86_64"
CENTRAL, LOCAL, EOCD = b"PK\x01\x02", b"PK\x03\x04", b"PK\x05\x06"


def raw_wheel(
    directory: Path,
    filename: str,
    members: dict[str, bytes],
    *,
    modes: dict[str, int] | None = None,
    record: bool = True,
) -> Path:
    """A wheel of exactly ``members`` (plus a RECORD for them, in ``<x>.dist-info/`` when ``record``)."""
    files = dict(members)
    dist_info = next((m.split("/", 1)[0] for m in files if m.split("/", 1)[0].endswith(".dist-info")), None)
    if record and dist_info is not None:
        lines = [f"{m},{record_hash(d)},{len(d)}" for m, d in files.items()]
        files[f"{dist_info}/RECORD"] = ("\n".join([*lines, f"{dist_info}/RECORD,,"]) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (modes or {}).get(name, 0o100644) << 16
            zf.writestr(info, data)
    return path


def standard_members(
    name: str = "tinykern",
    version: str = "0.1.0",
    *,
    tags: str = TAGS,
    metadata_name: str | None = None,
    dist_info: str | None = None,
    wheel_tags: str | None = None,
    metadata: bytes | None = None,
) -> dict[str, bytes]:
    """The members of a small wheel, with any one of its self-descriptions overridden."""
    di = dist_info or f"{name}-{version}.dist-info"
    meta = (
        metadata or f"Metadata-Version: 2.1\nName: {metadata_name or name}\nVersion: {version}\n\n".encode()
    )
    wheel = f"Wheel-Version: 1.0\nGenerator: hostile\nRoot-Is-Purelib: false\nTag: {wheel_tags or tags}\n".encode()
    return {f"{name}/__init__.py": b"X = 1\n", f"{di}/METADATA": meta, f"{di}/WHEEL": wheel}


def good_wheel_bytes(
    name: str = "tinykern", version: str = "0.1.0", extra: dict[str, bytes] | None = None
) -> bytes:
    """A good wheel's bytes, for mutating."""
    buf = io.BytesIO()
    members = {**standard_members(name, version), **(extra or {})}
    di = f"{name}-{version}.dist-info"
    lines = [f"{m},{record_hash(d)},{len(d)}" for m, d in members.items()]
    members[f"{di}/RECORD"] = ("\n".join([*lines, f"{di}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for m, d in members.items():
            info = zipfile.ZipInfo(m, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16
            zf.writestr(info, d)
    return buf.getvalue()


# --- crafted wheels, one per known attack -------------------------------------------------------------------


def version_needed(data: bytes, value: int = 0x80) -> bytes:
    """The first central-directory record says it needs zip version ``value`` (0x80: 12.8)."""
    out = bytearray(data)
    i = out.find(CENTRAL)
    out[i + 6] = value
    return bytes(out)


def utf8_flag_on_latin1_name(data: bytes) -> bytes:
    """The first central-directory record sets the UTF-8 flag on a name whose first byte is 0xff."""
    out = bytearray(data)
    i = out.find(CENTRAL)
    flags = struct.unpack_from("<H", out, i + 8)[0] | 0x800
    struct.pack_into("<H", out, i + 8, flags)
    out[i + 46] = 0xFF
    return bytes(out)


def empty_member_name(data: bytes) -> bytes:
    """A last member whose name, in the central directory, is empty."""
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr(zipfile.ZipInfo("x"), b"")
    out = bytearray(buf.getvalue())
    j = out.rfind(CENTRAL)
    struct.pack_into("<H", out, j + 28, 0)
    del out[j + 46]
    k = out.rfind(EOCD)
    struct.pack_into("<I", out, k + 12, struct.unpack_from("<I", out, k + 12)[0] - 1)
    return bytes(out)


def huge_metadata(directory: Path, filename: str, size: int = 63 << 20) -> Path:
    """A small wheel (deflate squeezes zeros ~1000:1) whose METADATA inflates to ``size`` bytes."""
    name, version = filename.split("-")[:2]
    members = standard_members(name, version)
    members[f"{name}-{version}.dist-info/METADATA"] += b" " * size
    return raw_wheel(directory, filename, members)


# --- the mutator -----------------------------------------------------------------------------------------


def _offsets(data: bytes, sig: bytes) -> list[int]:
    found, i = [], data.find(sig)
    while i != -1:
        found.append(i)
        i = data.find(sig, i + 1)
    return found


KINDS = ("flip", "record_field", "truncate", "splice", "member", "zero_run", "repeat")


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutant of ``data`` and a word for how it was made (one of :data:`KINDS`, maybe with a note)."""
    out = bytearray(data)
    how = rng.choice(KINDS)
    if how == "flip":
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif how == "record_field":
        sig = rng.choice([CENTRAL, LOCAL, EOCD])
        places = _offsets(data, sig)
        if places:
            at = rng.choice(places) + rng.randrange(4, 30 if sig != EOCD else 22)
            width = rng.choice([1, 2, 4])
            value = rng.choice([0, 0xFF, 0xFFFF, 0xFFFFFFFF, 0x80, rng.randrange(1 << 32)])
            fmt = {1: "<B", 2: "<H", 4: "<I"}[width]
            if at + width <= len(out):
                struct.pack_into(fmt, out, at, value & ((1 << (8 * width)) - 1))
    elif how == "truncate":
        del out[rng.randrange(len(out)) :]
    elif how == "splice":
        at = rng.randrange(len(out))
        out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif how == "repeat":
        a = rng.randrange(len(out))
        b = min(len(out), a + rng.randint(1, 200))
        out[a:a] = out[a:b] * rng.randint(2, 20)
    elif how == "zero_run":
        a = rng.randrange(len(out))
        out[a : a + rng.randint(1, 64)] = bytes(min(len(out) - a, 64))
    else:
        try:
            return _mutate_member(data, rng), "member"
        except Exception:  # noqa: BLE001 - the input was already broken: keep it as it is
            return data, "member(skipped)"
    return bytes(out), how


def _mutate_member(data: bytes, rng: random.Random) -> bytes:
    """A valid zip whose wheel content is wrong: a metadata field, a name, a mode, a duplicate member."""
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        members = [(i, src.read(i)) for i in src.infolist()]
    k = rng.randrange(len(members))
    info, body = members[k]
    choice = rng.choice(["name", "body", "mode", "dup", "drop", "meta"])
    if choice == "name":
        info.filename = rng.choice(
            [
                "",
                "../x",
                "/abs",
                "a//b",
                "tinykern-0.1.0.dist-info/../RECORD",
                "TinyKern-0.1.0.dist-info/METADATA",
                "x\\y",
                "other-0.1.0.dist-info/WHEEL",
            ]
        )
    elif choice == "body":
        body = rng.choice([b"", b"\xff\xfe" * 50, body * 100, b"Name: evilpkg\nVersion: 9\n", bytes(5000)])
    elif choice == "mode":
        info.external_attr = rng.choice([0o120777, 0o010644, 0o020644, 0o140644, 0xFFFFFFFF >> 16]) << 16
    elif choice == "dup":
        members.append((info, body))
    elif choice == "drop":
        del members[k]
    else:
        for j, (i, b) in enumerate(members):
            if i.filename.endswith(("METADATA", "WHEEL")):
                members[j] = (i, b.replace(b"tinykern", b"evilpkg").replace(b"cp311", b"cp39"))
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as dst:
        warnings.simplefilter("ignore")  # "Duplicate name": the point of the "dup" mutant
        for i, b in members:
            new = zipfile.ZipInfo(i.filename, date_time=i.date_time)
            new.compress_type = rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
            new.external_attr = i.external_attr
            try:
                dst.writestr(new, b)
            except (ValueError, zlib.error):
                continue
    return buf.getvalue()
