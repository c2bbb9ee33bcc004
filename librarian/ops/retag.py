"""retag: label each wheel (its own label, the flags', or the installed torch's) and write the copy."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from librarian.coords import Label, WheelName
from librarian.errors import BadInput
from librarian.ops.labels import choose_label
from librarian.wheel.retag import retag


@dataclass(frozen=True, slots=True)
class Retagged:
    """One wheel written: where it came from, where it went, the label it carries."""

    source: Path
    path: Path
    label: Label

    def to_json(self) -> dict[str, str]:
        """The wheel as a JSON object."""
        return {"source": str(self.source), "path": str(self.path), "label": str(self.label)}


def retag_each(
    paths: Sequence[Path], label: Label | None, out_dir: Path, *, relabel: bool = False, jobs: int | None = None
) -> Iterator[Retagged]:
    """Each wheel relabelled into ``out_dir``, one at a time (a caller can show each before the next is read)."""
    for path in paths:
        if not path.is_file():
            raise BadInput(f"{path}: no such file")
        wanted = choose_label(WheelName.parse(path.name), label, relabel=relabel)
        yield Retagged(path, retag(path, wanted, out_dir, relabel=relabel, jobs=jobs), wanted)
