"""The Python demand: one of the wheel's tags must be one the interpreter accepts, and Requires-Python must allow it.

Tags come from the filename, exactly as pip and uv match them (``packaging.tags``); Requires-Python from
METADATA, where it was read.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag

from librarian.coords import format_dotted
from librarian.demands.base import Cause, Demand, Verdict, Wheel, unknown
from librarian.machine import Machine


@dataclass(frozen=True, slots=True)
class PythonNeed:
    """The wheel's tags (as written in its filename) and its Requires-Python."""

    tag_text: str
    tags: frozenset[Tag]
    filename: str
    requires_python: SpecifierSet | None = None


def needs(wheel: Wheel) -> PythonNeed:
    """From the filename's tags and METADATA's Requires-Python."""
    return PythonNeed(wheel.name.tag_text, wheel.name.tags, str(wheel.name), wheel.requires_python)


def check(need: PythonNeed, machine: Machine) -> Verdict:
    """Judge the tags against the interpreter's, then Requires-Python against its version."""
    tags = machine.python_tags.value
    if tags is None:
        return unknown(Demand.PYTHON, need.tag_text, machine.python_tags.reason)
    error = f"ERROR: {need.filename} is not a supported wheel on this platform."
    hit = next((t for t in tags if t in need.tags), None)
    if hit is None:
        interp = {(t.interpreter, t.abi) for t in need.tags}
        if any((t.interpreter, t.abi) in interp for t in tags):
            plats = ", ".join(sorted({t.platform for t in need.tags}))
            has = next((t.platform for t in tags if t.platform != "any"), "any")
            why = "no platform tag this machine accepts"
            return Verdict(Demand.PYTHON, False, plats, has, why, error, cause=Cause.OTHER_PLATFORM)
        best = tags[0] if tags else None
        has = f"{best.interpreter}-{best.abi}" if best else "no tags"
        wanted = ", ".join(sorted({f"{i}-{a}" for i, a in interp}))
        why = "built for another Python or ABI"
        return Verdict(Demand.PYTHON, False, wanted, has, why, error, cause=Cause.OTHER_PYTHON)
    version = machine.python.value
    if need.requires_python is not None and version is not None:
        text = format_dotted(version)
        if not need.requires_python.contains(text, prereleases=True):
            return Verdict(
                Demand.PYTHON,
                False,
                f"Requires-Python {need.requires_python}",
                f"Python {text}",
                "METADATA's Requires-Python excludes this interpreter",
                f"ERROR: Package requires a different Python: {text} not in '{need.requires_python}'",
                cause=Cause.REQUIRES_PYTHON,
            )
    return Verdict(Demand.PYTHON, True, need.tag_text, str(hit))
