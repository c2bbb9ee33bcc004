"""Which label a wheel gets: flags, the installed torch (read, never imported), or a clear refusal."""

from __future__ import annotations

import pytest

from librarian.coords import Label, WheelName
from librarian.errors import BadInput, Refused
from librarian.machine import TorchInfo
from librarian.ops import labels


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def use(info: TorchInfo | None) -> None:
        monkeypatch.setattr("librarian.probe.detect_torch", lambda path=None: info)

    return use


def test_flags_win(installed) -> None:  # type: ignore[no-untyped-def]
    installed(None)
    assert labels.label_from_flags((12, 8), (2, 8)) == Label.parse("cu128torch2.8")


def test_installed_cuda_torch_fills_in(installed) -> None:  # type: ignore[no-untyped-def]
    installed(TorchInfo("2.9.1+cu130", (13, 0)))
    assert labels.label_from_flags(None, None) == Label.parse("cu130torch2.9")
    assert labels.label_from_flags((12, 8), None) == Label.parse("cu128torch2.9")
    assert labels.label_from_flags(None, (2, 9)) == Label.parse("cu130torch2.9")
    with pytest.raises(
        BadInput, match=r"--cuda: needed too \(the installed torch 2.9.1\+cu130 is not torch 2.8\)"
    ):
        labels.label_from_flags(None, (2, 8))


def test_cpu_torch_and_no_torch_say_what_to_pass(installed) -> None:  # type: ignore[no-untyped-def]
    installed(TorchInfo("2.13.0+cpu", None))
    with pytest.raises(
        BadInput, match=r"torch 2.13.0\+cpu installed here is a CPU build; pass --cuda and --torch"
    ):
        labels.label_from_flags(None, None)
    installed(None)
    assert labels.label_from_flags(None, None) is None
    with pytest.raises(BadInput, match="--torch: needed too"):
        labels.label_from_flags((12, 8), None)
    with pytest.raises(BadInput, match="has no label; pass --cuda and --torch"):
        labels.choose_label(WheelName.parse("x-1.0-py3-none-any.whl"), None)


def test_relabel_needs_force() -> None:
    name = WheelName.parse("flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    wanted = Label.parse("cu128torch2.8")
    with pytest.raises(Refused, match=r"carries flash-attn label \(CUDA 12 torch 2.8\).*pass --relabel"):
        labels.choose_label(name, wanted)
    assert labels.choose_label(name, wanted, relabel=True) == wanted
    ours = WheelName.parse("x-1.0+cu128torch2.8-py3-none-any.whl")
    assert labels.choose_label(ours, None) == wanted and labels.choose_label(ours, wanted) == wanted
