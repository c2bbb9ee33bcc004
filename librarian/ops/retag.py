"""retag: label each wheel (its own label, the flags', or the installed torch's) and write the copy.

The copy is judged as it is written: each native member is inflated once, for RECORD and for the facts,
and every claim its new name makes that the bytes contradict is reported (publish refuses those, naming
the flag that accepts each). WHEEL ``Tag:`` lines that disagree with the filename are rewritten, as
publish does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from librarian.coords import Label, WheelName
from librarian.demands import Claim, ClaimKind, Wheel, claims, said_claims
from librarian.errors import BadInput
from librarian.ops.labels import choose_label
from librarian.safeio import input_problem
from librarian.wheel import OpenedWheel, said_of

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Retagged:
    """One wheel written: where it came from, where it went, the label it carries, what its bytes contradict."""

    source: Path
    path: Path
    label: Label
    claims: tuple[Claim, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The wheel as a JSON object."""
        return {
            "source": str(self.source),
            "path": str(self.path),
            "label": str(self.label),
            "claims": [{"kind": c.kind.value, "text": c.text, "flag": c.flag or None} for c in self.claims],
        }


def retag_each(
    paths: Sequence[Path],
    label: Label | None,
    out_dir: Path,
    *,
    relabel: bool = False,
    jobs: int | None = None,
) -> Iterator[Retagged]:
    """Each wheel relabelled into ``out_dir``, one at a time (a caller can show each before the next is read)."""
    for path in paths:
        if problem := input_problem(path):  # a FIFO would block the read: refused by what it is
            raise BadInput(f"{path}: {problem}")
        name = WheelName.parse(path.name)
        wanted = choose_label(name, label, relabel=relabel)
        opened = OpenedWheel.wheel(path, name)
        said = said_of(opened.info())
        repair = any(c.kind is ClaimKind.TAGS for c in said_claims(name, said))
        # The command stores nothing: no sha256 of the new wheel.
        out = opened.retag(wanted, out_dir, relabel=relabel, jobs=jobs, repair_tags=repair, digest=False)
        if repair:
            log.warning("%s: WHEEL's Tag lines disagree with its filename; retag wrote the filename's", path)
        found: tuple[Claim, ...] = ()
        if out.facts is not None:
            found = tuple(
                c
                for c in claims(Wheel(WheelName.parse(out.path.name), out.facts))
                if c.kind is not ClaimKind.TAGS
            )
        elif out.unread is not None:
            log.warning("%s: its binaries were not checked against the label (%s)", out.path.name, out.unread)
        for claim in found:
            accepted = f"publish refuses it without {claim.flag}" if claim.flag else "publish refuses it"
            log.warning("%s: %s (%s)", out.path.name, claim, accepted)
        yield Retagged(path, out.path, wanted, found)
