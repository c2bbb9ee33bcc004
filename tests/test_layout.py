"""Layouts are data: shipped TOML files, cell -> path -> cell, and nothing escapes the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from librarian.config import load_layout, shipped_layouts
from librarian.coords import Cell, GpuArch, Label
from librarian.errors import LayoutError
from librarian.layout import Layout, check_store_path

CELL = Cell("flash_attn", GpuArch.parse("89"), Label.parse("cu128torch2.9"))
FILENAME = "flash_attn-2.8.3+cu128torch2.9-cp312-cp312-linux_x86_64.whl"


def test_shipped_layouts() -> None:
    assert {"wheelhouse", "by-cell"} <= set(shipped_layouts())


def test_default_layout_path() -> None:
    layout = load_layout()
    path = layout.path_for(CELL, FILENAME)
    assert path == f"flash_attn/sm89/torch2.9-cu128/{FILENAME}"
    assert layout.parse_path(path) == (CELL, FILENAME)


def test_by_cell_layout_is_data_too() -> None:
    layout = load_layout("by-cell")
    path = layout.path_for(CELL, FILENAME)
    assert path == f"sm89/torch2.9-cu128/flash_attn/{FILENAME}"
    assert layout.parse_path(path) == (CELL, FILENAME)
    assert load_layout().parse_path(path) is None


@pytest.mark.parametrize("sm", ["90a", "120f", "100"])
def test_suffixed_and_three_digit_archs(sm: str) -> None:
    cell = Cell("natten", GpuArch.parse(sm), Label.parse("cu130torch2.10"))
    name = "natten-0.21.0+cu130torch2.10-cp310-cp310-linux_x86_64.whl"
    layout = load_layout()
    assert layout.parse_path(layout.path_for(cell, name)) == (cell, name)


@pytest.mark.parametrize("filename", ["../x.whl", "a/b.whl", "..", "", "x\\y.whl", "evil.txt"])
def test_unsafe_filenames_refused(filename: str) -> None:
    with pytest.raises(LayoutError):
        load_layout().path_for(CELL, filename)


@pytest.mark.parametrize("package", ["..", "a/b", "", "x y"])
def test_unsafe_packages_refused(package: str) -> None:
    cell = Cell(package, CELL.sm, CELL.label)
    with pytest.raises(LayoutError):
        load_layout().path_for(cell, FILENAME)


@pytest.mark.parametrize("path", ["/abs/x.whl", "a//b.whl", "a/../b.whl", "./a.whl", ""])
def test_store_paths_checked(path: str) -> None:
    with pytest.raises(LayoutError):
        check_store_path(path)


def test_layout_file_rejects_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        '[layout]\nname = "mine"\npath = "{package}/sm{sm}/torch{torch}-cu{cuda}/{filename}"\ncolour = "red"\n'
    )
    with pytest.raises(LayoutError, match=r"mine\.toml: unknown fields in \[layout\]: colour"):
        load_layout(str(path))


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{package}/{filename}", "exactly once"),
        ("{package}/sm{sm}/{torch}{cuda}/{filename}/x", "end in"),
        ("{package}/sm{sm}/torch{torch}-cu{cuda}/{python}/{filename}", "unknown fields"),
    ],
)
def test_layout_templates_checked(template: str, problem: str) -> None:
    with pytest.raises(LayoutError, match=problem):
        Layout("t", template)


def test_layout_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("not toml [")
    with pytest.raises(LayoutError, match="bad.toml: not valid TOML"):
        load_layout(str(bad))
    with pytest.raises(LayoutError, match="no such layout"):
        load_layout("nope")
