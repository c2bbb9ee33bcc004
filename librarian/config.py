"""What the user configured: where the store is (``--repo``, else ``LIBRARIAN_REPO``, else ``[tool.librarian]``
in ./pyproject.toml or ./librarian.toml, else ``./wheelhouse``) and the layout for new stores, loaded from
the layouts shipped with librarian (``layouts/*.toml``) or a layout file by path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from librarian.compat import tomllib
from librarian.errors import BadInput, LayoutError
from librarian.layout import Layout
from librarian.safeio import read_regular

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
    try:
        text = read_regular(path, MAX_SETTINGS_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise BadInput(f"{path}: cannot read the layout ({reason})") from e
    layout = Layout.from_toml(text, str(path))
    return layout


DEFAULT_REPO = "./wheelhouse"
MAX_SETTINGS_BYTES = 1 << 20  # a pyproject.toml or a layout file: a bound, not a budget
ENV_REPO = "LIBRARIAN_REPO"


@dataclass(frozen=True, slots=True)
class Settings:
    """The store and layout librarian uses, and where each came from (for messages)."""

    repo: str
    layout: str = DEFAULT_LAYOUT
    license: str | None = None  # the Hub card's front matter ``license``
    install: str | None = None  # the card's one line that installs librarian (it is not on PyPI by that name)
    variants: bool = False  # publish and reindex file wheel-variant copies (``variants = true``)
    build_cache: str | bool | None = None  # the compile cache's folder, or ``false`` (off); None: not set


def _read_tool_table(directory: Path) -> tuple[dict[str, Any], str] | None:
    for name, table_path in (("librarian.toml", ()), ("pyproject.toml", ("tool", "librarian"))):
        path = directory / name
        if not path.is_file():
            continue
        try:
            data: Any = tomllib.loads(read_regular(path, MAX_SETTINGS_BYTES).decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise BadInput(f"{path}: not valid TOML ({e})") from e
        except RecursionError as e:
            raise BadInput(f"{path}: not valid TOML (nested too deeply)") from e
        except OSError as e:  # a FIFO, a device, past the bound: said by what it is, unread
            raise BadInput(f"{path}: cannot read it ({e.strerror or e})") from e
        for key in table_path:
            data = data.get(key, {}) if isinstance(data, dict) else {}
        if isinstance(data, dict) and data:
            unknown = set(data) - {"repo", "layout", "license", "install", "variants", "build-cache"}
            if unknown:
                raise BadInput(f"{path}: unknown librarian settings: {', '.join(sorted(unknown))[:200]}")
            for key, value in data.items():
                if key == "variants":
                    if not isinstance(value, bool):
                        raise BadInput(f"{path}: librarian setting 'variants' must be true or false")
                    continue
                if key == "build-cache" and value is False:
                    continue
                if not isinstance(value, str) or not value or len(value) > 4096:
                    raise BadInput(
                        f"{path}: librarian setting {key!r} must be a string (a path, a name, a URL)"
                    )
            return data, str(path)
    return None


def load_settings(repo: str | None = None, cwd: Path | None = None) -> Settings:
    """Resolve the store and layout from the flag, the environment and the project files."""
    table = (_read_tool_table(cwd or Path.cwd()) or ({}, ""))[0]
    layout = str(table.get("layout", DEFAULT_LAYOUT))
    license = str(table["license"]) if table.get("license") else None
    install = str(table["install"]) if table.get("install") else None
    variants = table.get("variants") is True
    cache = table.get("build-cache")
    build_cache = False if cache is False else (str(cache) if cache else None)
    where = repo or os.environ.get(ENV_REPO) or str(table.get("repo") or DEFAULT_REPO)
    return Settings(where, layout, license, install, variants, build_cache)
