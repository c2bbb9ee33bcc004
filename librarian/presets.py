"""Machine presets: common machines described by the flags that would describe them (``--preset gh200``).

Data, ``librarian/data/machines.toml``, checked on load: each preset names values for ``--sm``,
``--platform``, ``--driver``, ``--python``, ``--cuda``, ``--glibc``; a flag given beside ``--preset`` wins.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from librarian.compat import tomllib
from librarian.errors import BadInput

FIELDS = ("sm", "platform", "driver", "python", "cuda", "glibc")


@dataclass(frozen=True, slots=True)
class Preset:
    """One common machine: its description and the flag values that describe it."""

    name: str
    description: str
    values: tuple[tuple[str, str], ...]  # (field, value), fields from FIELDS

    def get(self, field: str) -> str | None:
        """The preset's value for a flag's field, if it sets one."""
        return dict(self.values).get(field)


def parse_presets(text: str, source: str) -> dict[str, Preset]:
    """The presets in TOML text; every problem names ``source``."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
        found = {}
        for name, row in data.items():
            unknown = set(row) - {*FIELDS, "description"}
            if unknown:
                raise ValueError(f"preset {name!r} sets {', '.join(sorted(unknown))}, which no flag takes")
            values = tuple((k, str(row[k])) for k in FIELDS if k in row)
            found[name] = Preset(name, str(row.get("description", "")), values)
    except (tomllib.TOMLDecodeError, AttributeError, TypeError, ValueError) as e:
        raise BadInput(f"{source}: not a table of machine presets ({e})") from e
    return found


@functools.cache
def presets() -> dict[str, Preset]:
    """The packaged presets, read once."""
    text = resources.files("librarian").joinpath("data/machines.toml").read_text(encoding="utf-8")
    return parse_presets(text, "librarian/data/machines.toml")


def find_preset(name: str) -> Preset:
    """The preset ``name``; BadInput listing the known ones where there is no such preset."""
    found = presets().get(name)
    if found is None:
        raise BadInput(f"--preset {name}: no such machine (known: {', '.join(sorted(presets()))})")
    return found
