"""What a wheel claims against what its bytes say, in one place: filename, METADATA, WHEEL tags and label.

Every contradiction is a :class:`Claim` naming the one publish flag that accepts it (``""`` where none
does: the wheel itself must be fixed, or, for WHEEL's ``Tag:`` lines, publish repairs them). inspect
lists them all, publish refuses on them (or records the override), verify reports them, retag warns.
Byte claims count the members an NVIDIA machine can load (:mod:`librarian.demands.members`); the CUDA
claim counts those the label's CUDA line loads. Pure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from packaging.tags import parse_tag
from packaging.utils import canonicalize_name

from librarian.coords import WheelName, version_of
from librarian.demands.base import Said, Wheel
from librarian.demands.members import seen
from librarian.demands.table import Claimed, demands, override_of


class ClaimKind(enum.Enum):
    """What a claim about the wheel's own files is about; no flag accepts one (the wheel must be fixed, or,
    for WHEEL's ``Tag:`` lines, publish repairs them). Claims of the bytes are the table's
    (:class:`~librarian.demands.table.Claimed`), each accepted by its row's override."""

    NAME = "name"  # METADATA Name against the filename
    VERSION = "version"  # METADATA Version against the filename
    TAGS = "tags"  # WHEEL Tag lines against the filename
    DIST_INFO = "dist-info"  # the .dist-info folder misnamed, or METADATA / WHEEL unreadable


@dataclass(frozen=True, slots=True)
class Claim:
    """One contradiction between what a wheel says and what its bytes (or its own files) say."""

    kind: ClaimKind | Claimed
    text: str

    @property
    def flag(self) -> str:
        """The one flag that accepts it ("" if none): the override of the table's rows that make it."""
        return override_of(self.kind) if isinstance(self.kind, Claimed) else ""

    def __str__(self) -> str:
        return self.text


def said_claims(name: WheelName, said: Said) -> list[Claim]:
    """Where METADATA's Name and Version, or WHEEL's Tag lines, disagree with the filename."""
    found = []
    if canonicalize_name(said.name) != canonicalize_name(name.distribution):
        found.append(Claim(ClaimKind.NAME, f"METADATA Name: {said.name}, filename says {name.distribution}"))
    if version_of(said.version) != name.version:
        found.append(
            Claim(ClaimKind.VERSION, f"METADATA Version: {said.version}, filename says {name.version}")
        )
    if tag_set(said.tags) != {str(t) for t in name.tags}:
        found.append(
            Claim(
                ClaimKind.TAGS,
                f"WHEEL Tag: {', '.join(sorted(tag_set(said.tags)))}, filename says {name.tag_text}",
            )
        )
    return found


def tag_set(lines: tuple[str, ...]) -> set[str]:
    """Every tag WHEEL's ``Tag:`` lines name, compressed sets expanded (unparsable lines as written)."""
    tags: set[str] = set()
    for text in lines:
        try:
            tags.update(str(t) for t in parse_tag(text))
        except ValueError:
            tags.add(text)
    return tags


def byte_claims(wheel: Wheel) -> list[Claim]:
    """Where the filename's platform tags and label contradict the members an NVIDIA machine can load: each
    row of the table of demands that makes claims, in the table's order of kinds."""
    if wheel.facts is None:
        return []
    claim = wheel.label_claim
    # The label's CUDA line picks among CUDA-line builds (a major alone: its .0, the oldest of the major).
    view = seen(wheel, (claim.cuda_major, claim.cuda_minor or 0) if claim is not None else None)
    by_kind: dict[Claimed, list[str]] = {}
    for row in demands():
        if row.claims is None or row.claimed is None or (row.claims_need_label and claim is None):
            continue
        by_kind.setdefault(row.claimed, []).extend(row.claims(row.claims_sees.of(wheel, view)))
    # Publish names refusals in Claimed's order: what the platform tag says, the glibc floor, the label.
    order = sorted(by_kind, key=list(Claimed).index)
    return [Claim(kind, t) for kind in order for t in dict.fromkeys(by_kind[kind])]


def claims(wheel: Wheel) -> tuple[Claim, ...]:
    """Every contradiction: METADATA and WHEEL against the filename (where read), then the bytes."""
    said = said_claims(wheel.name, wheel.said) if wheel.said is not None else []
    return tuple(dict.fromkeys([*said, *byte_claims(wheel)]))
