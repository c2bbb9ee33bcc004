"""Wheel names, labels (ours and foreign), GPU archs, CUDA/torch versions: parse and write back."""

from __future__ import annotations

import pytest

from librarian.coords import (
    ArchKind,
    Cell,
    GpuArch,
    Label,
    WheelName,
    package_key,
    parse_cuda,
    parse_label_claim,
    parse_torch,
)
from librarian.errors import BadInput


@pytest.mark.parametrize("text", ["cu128torch2.8", "cu126torch2.10", "cu130torch2.9", "cu118torch2.4"])
def test_label_round_trips(text: str) -> None:
    assert str(Label.parse(text)) == text


def test_label_parts() -> None:
    label = Label.parse("cu128torch2.10")
    assert label.cuda == (12, 8) and label.torch == (2, 10)
    assert label.combo == "torch2.10-cu128"
    assert Label(parse_cuda("12.8"), parse_torch("2.10.1+cu128")) == label


@pytest.mark.parametrize("bad", ["cu128", "torch2.8", "cu12.8torch2.8", "", "cu128torch2"])
def test_label_rejects(bad: str) -> None:
    with pytest.raises(BadInput, match="not a librarian label"):
        Label.parse(bad)


@pytest.mark.parametrize(
    ("text", "cuda"),
    [("12.8", (12, 8)), ("128", (12, 8)), ("cu130", (13, 0)), ("11.8.0", (11, 8)), ("cu92", (9, 2))],
)
def test_parse_cuda(text: str, cuda: tuple[int, int]) -> None:
    assert parse_cuda(text) == cuda


@pytest.mark.parametrize(
    ("text", "torch"),
    [("2.8", (2, 8)), ("2.8.0+cu128", (2, 8)), ("torch2.10", (2, 10)), ("2.9.0rc1", (2, 9))],
)
def test_parse_torch(text: str, torch: tuple[int, int]) -> None:
    assert parse_torch(text) == torch


@pytest.mark.parametrize("bad", ["12", "x", "2", "2.8.x"])
def test_parse_versions_reject(bad: str) -> None:
    with pytest.raises(BadInput):
        parse_torch(bad)


def test_foreign_labels() -> None:
    fa = parse_label_claim("cu12torch2.8cxx11abiTRUE")
    assert fa is not None and fa.form == "flash-attn" and fa.cuda_major == 12 and fa.cuda_minor is None
    assert fa.torch == (2, 8) and fa.cxx11abi is True
    assert str(fa.to_label(cuda=(12, 8))) == "cu128torch2.8"
    with pytest.raises(BadInput, match="pass --cuda 12.X"):
        fa.to_label()
    with pytest.raises(BadInput, match="says CUDA 12"):
        fa.to_label(cuda=(13, 0))
    pyg = parse_label_claim("pt28cu128")
    assert pyg is not None and pyg.form == "pyg" and str(pyg.to_label()) == "cu128torch2.8"
    pt = parse_label_claim("cu126")
    assert pt is not None and pt.form == "pytorch" and pt.torch is None
    assert str(pt.to_label(torch=(2, 6))) == "cu126torch2.6"
    assert parse_label_claim("local.build") is None


@pytest.mark.parametrize(
    ("text", "canonical", "sm"),
    [
        ("sm_89", "sm_89", "89"),
        ("89", "sm_89", "89"),
        ("sm_90a", "sm_90a", "90a"),
        ("120f", "sm_120f", "120f"),
        ("compute_80", "compute_80", "80"),
        ("8.9", "sm_89", "89"),
        ("lto_90", "lto_90", "90"),
    ],
)
def test_gpu_arch(text: str, canonical: str, sm: str) -> None:
    arch = GpuArch.parse(text)
    assert str(arch) == canonical and arch.sm == sm
    assert GpuArch.parse(str(arch)) == arch


def test_gpu_arch_capability() -> None:
    assert GpuArch.parse("sm_120").capability == (12, 0)
    assert GpuArch.parse("compute_75").kind is ArchKind.PTX
    with pytest.raises(BadInput, match="not a GPU arch"):
        GpuArch.parse("sm_8")


def test_wheel_name_round_trip_and_label() -> None:
    text = "flash_attn-2.8.3+cu128torch2.9-cp312-cp312-linux_x86_64.whl"
    name = WheelName.parse(text)
    assert str(name) == text
    assert name.package == "flash_attn" and name.label == Label.parse("cu128torch2.9")
    assert name.python_tag == "cp312" and name.platform_tag == "linux_x86_64"


def test_wheel_name_with_label_and_build_tag() -> None:
    name = WheelName.parse("natten-0.21.0-1-cp310-cp310-linux_x86_64.whl")
    assert name.label is None and name.build == "1"
    labelled = name.with_label(Label.parse("cu128torch2.7"))
    assert str(labelled) == "natten-0.21.0+cu128torch2.7-1-cp310-cp310-linux_x86_64.whl"


def test_wheel_name_foreign_label_is_not_ours() -> None:
    name = WheelName.parse("flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    assert name.label is None and name.label_claim is not None


@pytest.mark.parametrize(
    "bad", ["x.whl", "a-1.0.whl", "a-notaversion-py3-none-any.whl", "a-1.0-py3-none-any.zip"]
)
def test_wheel_name_rejects(bad: str) -> None:
    with pytest.raises(BadInput, match="not a wheel filename"):
        WheelName.parse(bad)


def test_package_key_matches_like_pip() -> None:
    assert package_key("Flash-Attn") == package_key("flash_attn") == package_key("flash.attn") == "flash_attn"


def test_cell_needs_sass() -> None:
    with pytest.raises(BadInput, match="real GPU"):
        Cell("x", GpuArch.parse("compute_80"), Label.parse("cu128torch2.8"))
