"""Find and load the layouts shipped with librarian (``layouts/*.toml``) or a layout file by path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from librarian.errors import LayoutError
from librarian.layout import Layout

DEFAULT_LAYOUT = "wheelhouse"


def _shipped_dir() -> Path:
    # Installed: librarian/layouts/ (hatch force-include). From a checkout: the top-level layouts/.
    packaged = Path(str(resources.files("librarian"))) / "layouts"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "layouts"


def shipped_layouts() -> dict[str, Path]:
    """The layout files shipped with librarian, by name (the file's stem)."""
    return {p.stem: p for p in sorted(_shipped_dir().glob("*.toml"))}


def load_layout(name_or_path: str = DEFAULT_LAYOUT) -> Layout:
    """A shipped layout by name (``wheelhouse``, ``by-cell``) or a layout TOML file by path."""
    shipped = shipped_layouts()
    path = shipped.get(name_or_path) or Path(name_or_path)
    if not path.is_file():
        known = ", ".join(shipped) or "none"
        raise LayoutError(f"{name_or_path}: no such layout (shipped: {known})")
    layout = Layout.from_toml(path.read_text(encoding="utf-8"), str(path))
    return layout
