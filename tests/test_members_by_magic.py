"""Members are identified by their first bytes, not their names (issue 45 item 3): vllm's ``vllm/vllm-rs`` is
a 64 MB ELF executable with no extension, needing GLIBC_2.28, where the wheel's ``.so`` files need 2.26; it
counted for nothing. An extensionless ELF now counts for CPU, glibc and imports; a text file without an
extension, and data by its name, are not read past their first bytes (or at all)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from librarian.wheel import inspect_wheel
from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import elf_bytes

LIB = elf_bytes(verneed={"libc.so.6": ("GLIBC_2.17",)})
TOOL = elf_bytes(etype=2, verneed={"libc.so.6": ("GLIBC_2.17", "GLIBC_2.28")})  # ET_EXEC


def wheel_with_a_tool(tmp_path: Path, plat: str = "manylinux_2_17_x86_64") -> Path:
    files = {
        "vk/__init__.py": b"",
        "vk/_core.so": LIB,
        "vk/vk-rs": TOOL,
        "vk/NOTICE": b"plain text, no extension, long enough to be sniffed: " + b"x" * 100,
        "vk/weights.json": b"\x7fELF pretending, but named as data" + b"x" * 100,
    }
    return make_wheel(tmp_path / "d", "vk", "1.0", f"cp312-cp312-{plat}", files)


def test_an_extensionless_executable_counts_for_glibc_and_cpu(tmp_path: Path) -> None:
    facts = inspect_wheel(wheel_with_a_tool(tmp_path))
    paths = [b.path for b in facts.binaries]
    assert paths == ["vk/_core.so", "vk/vk-rs"]  # member order; NOTICE and weights.json are not binaries
    assert facts.glibc == (2, 28)
    tool = facts.binaries[1]
    assert tool.cpu == "x86_64" and tool.glibc == (2, 28)


def test_publish_refuses_a_tag_the_executable_contradicts_and_doctor_names_it(
    run: Run, tmp_path: Path
) -> None:
    wheel = wheel_with_a_tool(tmp_path)
    refused = run("publish", str(wheel), "--torch", "2.9", "--cuda", "12.8", "--sm", "89", "--trust-sm")
    assert refused.code == 2 and "vk/vk-rs" in refused.err and "--allow-glibc-mismatch" in refused.err, (
        refused.err
    )
    doctor = run("doctor", str(wheel), "--glibc", "2.27", "--sm", "89", "--python", "3.12",
                 "--platform", "linux_x86_64")  # fmt: skip
    assert doctor.code == 1 and "GLIBC_2.28" in doctor.out, doctor.out


def test_only_the_first_bytes_of_a_big_unknown_member_are_read(tmp_path: Path) -> None:
    """A 20 MB member without an extension that is not a binary: inspection reads its head, not its body
    (a corrupt body past the head would fail an inflate of the whole)."""
    path = tmp_path / "big-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big/blob", b"NOTABINARY" + bytes(20 << 20))
        zf.writestr("big-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: big\nVersion: 1.0\n")
        zf.writestr(
            "big-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        zf.writestr("big-1.0.dist-info/RECORD", "")
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("big/blob")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF  # the body's deflate stream broken half way
    path.write_bytes(bytes(data))
    assert inspect_wheel(path).binaries == ()
