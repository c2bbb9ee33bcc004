"""The names a build must never produce: what the build environment holds (its own distributions) and torch
with its own requirements (pip would replace them where the wheel is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from librarian.probe.target import Target, probe_target
from librarian.probe.torch import detect_torch_site

if TYPE_CHECKING:
    from librarian.ops.build.build_env import Environment


def environment_packages(env: Environment) -> frozenset[str]:
    """What the build environment holds (its own distributions) and torch with its own requirements: the
    names a build of a package must never produce (pip would replace them where it is installed)."""
    names = {"torch"}
    facts = probe_target(Target(env.python, "the build environment"))
    own = [Path(p) for p in facts.path
           if p.endswith(("site-packages", "dist-packages")) and Path(p).resolve().is_relative_to(env.folder.resolve())]  # fmt: skip
    for site in own:
        names |= {
            canonicalize_name(i.name.removesuffix(".dist-info").rsplit("-", 1)[0])
            for i in site.glob("*.dist-info")
        }
    torch_site = detect_torch_site(list(facts.path))
    for info in torch_site.glob("torch-*.dist-info") if torch_site is not None else ():  # wherever it is
        names |= _requirement_names(info / "METADATA")
    return frozenset(names)


def _requirement_names(metadata: Path) -> set[str]:
    names: set[str] = set()
    try:
        text = metadata.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return names
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            try:
                names.add(canonicalize_name(Requirement(line.partition(":")[2].strip()).name))
            except InvalidRequirement:
                continue
        elif not line.strip():
            break  # the headers end at the first empty line
    return names
