"""Reading PyTorch's wheel index pages (PEP 503 HTML, PEP 691 JSON) into served combos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from librarian.errors import BadInput
from librarian.pytorch.index_pages import (
    ServedCombo,
    parse_html_page,
    parse_index_page,
    parse_json_page,
    scan_filenames,
    scan_page,
    served_combo_of,
)
from librarian.pytorch.matrix import CPython, Platform

DATA = Path(__file__).parent / "data" / "torch-index"
LX, LA, WIN = Platform.LINUX_X86_64, Platform.LINUX_AARCH64, Platform.WINDOWS_AMD64


def html_page(names: list[str]) -> str:
    """A PEP 503 page as download.pytorch.org writes it: %2B in the href, a hash fragment."""
    links = "".join(
        f'<a href="/whl/cu128/{n.replace("+", "%2B")}#sha256={"0" * 64}">{n}</a><br/>\n' for n in names
    )
    return f"<!DOCTYPE html><html><body><h1>Links for torch</h1>\n{links}</body></html>"


def json_page(names: list[str]) -> str:
    """A PEP 691 project page."""
    files = [{"filename": n, "url": f"https://example.invalid/{n}", "hashes": {}} for n in names]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": files})


def test_checked_in_page() -> None:
    scan = scan_page((DATA / "cu128-torch.html").read_text())
    assert scan.combos == {
        ServedCombo((2, 8), (12, 8), CPython(3, 12), LX),
        ServedCombo((2, 8), (12, 8), CPython(3, 12), LA),
        ServedCombo((2, 8), (12, 8), CPython(3, 13, True), LX),
        ServedCombo((2, 8), (12, 8), CPython(3, 12), WIN),
        ServedCombo((2, 7), (12, 8), CPython(3, 9), LX),
    }
    # The release candidate and the CPU wheel are skipped, and said to be.
    assert len(scan.skipped) == 2


def test_html_uses_anchor_text_or_unquoted_href() -> None:
    page = '<a href="/whl/torch-2.8.0%2Bcu126-cp310-cp310-win_amd64.whl#sha256=ab">link</a>'
    assert parse_html_page(page) == ("torch-2.8.0+cu126-cp310-cp310-win_amd64.whl",)


def test_json_and_html_agree() -> None:
    names = [
        "torch-2.10.0+cu130-cp314-cp314t-manylinux_2_28_aarch64.whl",
        "torch-2.10.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
    ]
    from_html = scan_page(html_page(names))
    from_json = scan_page(json_page(names), "application/vnd.pypi.simple.v1+json")
    assert from_html == from_json
    assert ServedCombo((2, 10), (13, 0), CPython(3, 14, True), LA) in from_json.combos


def test_content_type_or_text_picks_json() -> None:
    names = ["torch-2.8.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert parse_index_page(json_page(names)) == tuple(names)
    assert parse_index_page(json_page(names), "application/json") == tuple(names)
    assert parse_index_page(html_page(names), "text/html") == tuple(names)


def test_bad_json_names_the_page() -> None:
    with pytest.raises(BadInput, match=r"^https://x/cu128/torch/: not a PEP 691"):
        parse_json_page('{"files": 3}', "https://x/cu128/torch/")


@pytest.mark.parametrize(
    "name",
    [
        "torch-2.8.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",  # CPU build
        "torch-2.8.0+rocm6.4-cp312-cp312-manylinux_2_28_x86_64.whl",  # ROCm build
        "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl",  # PyPI build: no CUDA in the name
        "torch-2.9.0.dev20250701+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",  # nightly
        "torchvision-0.23.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",  # another package
        "torch-2.8.0+cu128-cp312-cp312-macosx_11_0_arm64.whl",  # a platform CUDA wheels never have
        "torch-2.8.0+cu128-cp312.whl",  # not a wheel filename
    ],
)
def test_not_a_torch_cuda_wheel(name: str) -> None:
    assert served_combo_of(name) == ()


def test_platform_spellings() -> None:
    assert served_combo_of("torch-2.4.1+cu121-cp310-cp310-linux_x86_64.whl") == (
        ServedCombo((2, 4), (12, 1), CPython(3, 10), LX),
    )
    assert served_combo_of("torch-2.5.1+cu124-cp39-cp39-manylinux2014_aarch64.whl")[0].platform is LA


def test_non_wheels_are_ignored_not_skipped() -> None:
    scan = scan_filenames(["torch-2.8.0+cu128-cp312-cp312-win_amd64.whl.metadata", "README"])
    assert scan.combos == frozenset() and scan.skipped == ()
