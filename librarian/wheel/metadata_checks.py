"""What a wheel's METADATA, WHEEL and ``.dist-info`` name say against its filename: the checks ``verify``
runs, and publish runs the very same ones to refuse what verify would then reject."""

from __future__ import annotations

import logging
from pathlib import Path

from librarian.coords import WheelName
from librarian.demands import ClaimKind, said_claims
from librarian.errors import BadWheel
from librarian.wheel.ownership import ownership_problem
from librarian.wheel.wheelfile import WheelInfo, read_wheel_info, said_of

log = logging.getLogger(__name__)


def metadata_problems(path: Path, name: WheelName | None = None) -> list[str]:
    """Each way METADATA, WHEEL and the ``.dist-info`` name contradict the filename (``name``, default
    the file's own); a wheel that cannot be read at all (no WHEEL, say) raises BadWheel."""
    return metadata_problems_of(read_wheel_info(path, name))


def metadata_problems_of(info: WheelInfo) -> list[str]:
    """Each way METADATA and the ``.dist-info`` name contradict the filename, and a member that would write
    another distribution's files (torch's, the interpreter: :mod:`librarian.wheel.ownership`). WHEEL's ``Tag:`` lines are not
    held to it: installers read a wheel's tags from its filename (pip and uv install cupy-cuda12x, whose
    WHEEL says ``linux_x86_64`` under its ``manylinux2014`` name), so a stored wheel's are no problem;
    inspect says where they differ, and publish writes the filename's into every copy it rewrites."""
    name = info.filename
    problems = [str(c) for c in said_claims(name, said_of(info)) if c.kind is not ClaimKind.TAGS]
    if (foreign := ownership_problem(name, (m.path for m in info.members))) is not None:
        problems.append(foreign)
    expected = f"{name.distribution}-{name.version}.dist-info"
    if info.dist_info != expected:
        problems.append(f"its .dist-info is {info.dist_info}, expected {expected}")
    return problems


def refuse_unpublishable(path: Path, info: WheelInfo) -> WheelInfo:
    """Refuse (BadWheel) a wheel that ``verify`` would flag for its metadata.

    Publish runs the very checks verify runs, so that nothing is stored that verify then rejects.
    ``info`` is what was read from ``path``, returned.
    """
    problems = metadata_problems_of(info)
    if problems:
        raise BadWheel(f"{path}: {problems[0]}")
    return info


def warn_of_links(path: Path, info: WheelInfo) -> None:
    """Say once, naming the file given, that members are symbolic links (pip installs them as plain files)."""
    if links := [m.path for m in info.members if m.link]:
        log.warning(
            "%s: %d member(s) are symbolic links (%s); pip installs them as plain files",
            path,
            len(links),
            links[0],
        )
