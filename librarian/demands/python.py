"""The Python demand: one of the wheel's tags must be one the interpreter accepts, and Requires-Python must allow it.

Tags come from the filename, exactly as pip and uv match them (``packaging.tags``); Requires-Python from
METADATA, where it was read.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag

from librarian.coords import format_dotted
from librarian.demands.base import Cause, Demand, Verdict, Wheel, unknown
from librarian.demands.members import is_own
from librarian.machine import Machine

# The CPython an extension module's file name says it was built for (PEP 3149, and Windows' own form):
# ``_C.cpython-311-x86_64-linux-gnu.so``, ``_C.cpython-313t-...so`` (free-threaded), ``_C.cp311-win_amd64.pyd``.
# CPython imports such a module only from that version: another imports no ``cpython-311`` file at all.
_MODULE_ABI = re.compile(r"\.(?:cpython-|cp)(\d)(\d+)(t?)[-.]", re.IGNORECASE)


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


def module_pythons(wheel: Wheel) -> dict[str, str]:
    """Pure: each of the wheel's own extension modules whose file name names a CPython, and that CPython's
    interpreter tag (``cp311``, ``cp313t``); modules named for no version (``_C.so``, ``_C.abi3.so``) none."""
    found = {}
    for b in wheel.facts.binaries if wheel.facts is not None else ():
        m = _MODULE_ABI.search(posixpath.basename(b.path))
        if m is not None and is_own(b):
            found[b.path] = f"cp{m[1]}{m[2]}{m[3].lower()}"
    return found


def claims(wheel: Wheel) -> list[str]:
    """Where the filename's Python tags name an interpreter that none of its extension modules is built for
    (a ``cp311`` build renamed ``cp312`` by hand: Python 3.12 imports none of its ``cpython-311`` modules,
    ``ModuleNotFoundError``). No flag accepts it: the wheel must be fixed."""
    modules = module_pythons(wheel)
    if not modules:
        return []
    built = set(modules.values())
    member, python = next(iter(modules.items()))
    said = {
        t.abi if t.abi.startswith("cp") and t.abi.endswith("t") else t.interpreter for t in wheel.name.tags
    }
    return [f"its tags say {i}, {member} is built for {python}" for i in sorted(said - built)]
