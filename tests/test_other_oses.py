"""librarian itself on Windows and macOS (README: Install librarian once), tested here with fakes: the GPU probe, glibc,
and the local store's lock. Nothing here ran on Windows or macOS (see the README)."""

from __future__ import annotations

import errno
import os
import sys
import types
from pathlib import Path

import pytest

from librarian.errors import StoreError
from librarian.probe.libc import detect_glibc
from librarian.probe.nvidia import NO_CUDA_ON_MACOS, detect_gpus
from librarian.stores import local_lock
from tests.test_probe import GPUS, FakeNvml


def test_windows_loads_the_driver_by_its_windows_names() -> None:
    asked: list[str] = []

    def loader(name: str) -> object:
        asked.append(name)
        if name == "nvml.dll":
            return FakeNvml(GPUS)
        raise OSError(f"{name}: not here")

    gpus, driver = detect_gpus(loader, platform="win32")
    assert asked == ["nvml.dll"] and gpus.value is not None and gpus.source == "NVML" and driver.known


def test_macos_has_no_cuda_and_says_so() -> None:
    def loader(name: str) -> object:
        raise AssertionError("nothing is loaded on macOS")

    gpus, driver = detect_gpus(loader, platform="darwin")
    assert gpus.value is None and gpus.reason == NO_CUDA_ON_MACOS and driver.reason == NO_CUDA_ON_MACOS


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_no_glibc_where_there_is_none(platform: str) -> None:
    assert detect_glibc(platform).reason == f"no glibc on {platform}"


def test_the_windows_lock_waits_until_it_has_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[int, int, int]] = []

    def locking(fd: int, mode: int, size: int) -> None:
        calls.append((fd, mode, size))
        if len(calls) < 3:  # another process holds it: LK_LOCK gave up after its ten tries
            raise OSError(errno.EDEADLK, "Resource deadlock avoided")

    monkeypatch.setitem(sys.modules, "msvcrt", types.SimpleNamespace(locking=locking, LK_LOCK=1))
    fd = os.open(tmp_path / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        local_lock.lock_exclusively(fd, "win32")
        assert calls == [(fd, 1, 1)] * 3
        monkeypatch.setitem(
            sys.modules,
            "msvcrt",
            types.SimpleNamespace(
                locking=lambda *a: (_ for _ in ()).throw(OSError(errno.EBADF, "Bad file descriptor")),
                LK_LOCK=1,
            ),
        )
        with pytest.raises(StoreError, match="cannot lock the store"):
            local_lock.lock_exclusively(fd, "win32")
    finally:
        os.close(fd)
