"""What a wheel may install: its own files only. Pure: member names in, the ones that would land on another
distribution's files out.

``pip install --force-reinstall --no-deps`` writes every member where its name says: a wheel named
``tinykern`` whose members include ``torch/__init__.py``, ``tinykern-0.1.0.data/scripts/python`` or
``tinykern-0.1.0.data/data/lib/python3.11/site-packages/torch/__init__.py`` overwrites torch or the
interpreter of every environment that installs it. Publish, verify and adoption hold a wheel to the names
of torch's own environment (:data:`TORCH_ENVIRONMENT`); pull, before installing, to the names the target
environment's other distributions own too.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable

from librarian.coords import WheelName, package_key

# The import names of torch's combo environment (torch and what its wheels require, PyPI's 2.9 to 2.14):
# a stored wheel never writes there. Names of one namespace shared by a family of distributions (the
# nvidia-* wheels all write under nvidia/) are that family's: ``NAMESPACES``.
TORCH_ENVIRONMENT = frozenset(
    {
        "torch", "torchgen", "functorch", "triton", "nvidia", "cuda", "filelock", "typing_extensions",
        "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec", "setuptools", "pkg_resources",
        "_distutils_hack", "distutils-precedence", "pip", "_virtualenv",
    }
)  # fmt: skip
NAMESPACES = frozenset({"nvidia", "cuda"})
# Scripts that would take the place of the environment's interpreter or its installer.
_INTERPRETER = re.compile(r"(?:python|pythonw|pip)(?:\d+(?:\.\d+)?)?(?:\.exe)?", re.IGNORECASE)
_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd", ".pth", ".dll", ".dylib")


def _import_name(entry: str) -> str:
    """The name a top-level member stands for: ``torch`` for ``torch/``, ``torch.py``, ``torch.cpython-311.so``."""
    if "/" in entry:
        return entry.split("/", 1)[0]
    for suffix in _MODULE_SUFFIXES:
        if entry.endswith(suffix):
            return entry.removesuffix(suffix).split(".", 1)[0]
    return entry


def _owns(distribution: str, name: str) -> bool:
    """Whether ``distribution`` may write under the top-level ``name``: its own, or its namespace family's."""
    key = package_key(distribution)
    return key == package_key(name) or (name in NAMESPACES and key.startswith(f"{name}_"))


def landing_names(member: str, wheel: WheelName) -> tuple[str, str] | None:
    """Where a member lands, as (what it is, the name whose files it would write): a top-level import name,
    a script, another distribution's metadata; ``None`` for the wheel's own metadata and headers."""
    own_info = f"{wheel.distribution}-{wheel.version}.dist-info"
    own_data = f"{wheel.distribution}-{wheel.version}.data"
    top, _, rest = member.partition("/")
    if top == own_info:
        return None
    if top.endswith((".dist-info", ".data", ".egg-info")) and top != own_data:
        return "metadata", top.split("-", 1)[0].split(".", 1)[0]  # a wheel's folder names hold no other "-"
    if top != own_data:
        return "package", _import_name(member)
    kind, _, inside = rest.partition("/")
    if kind == "scripts":
        return ("interpreter", inside) if _INTERPRETER.fullmatch(posixpath.basename(inside)) else None
    if kind in ("purelib", "platlib"):
        return "package", _import_name(inside)
    if kind == "data":
        parts = inside.split("/")
        for i, part in enumerate(parts[:-1]):
            if part in ("site-packages", "dist-packages"):
                return "package", _import_name("/".join(parts[i + 1 :]))
        if len(parts) == 2 and parts[0] in ("bin", "Scripts") and _INTERPRETER.fullmatch(parts[1]):
            return "interpreter", parts[1]
    return None


def foreign_members(
    wheel: WheelName, members: Iterable[str], taken: Collection[str]
) -> list[tuple[str, str]]:
    """Pure: each member that would write another distribution's files, and whose: one under an import name
    in ``taken`` that is not the wheel's own, another distribution's metadata, a script named like the
    interpreter or pip (``.data/scripts/python``, ``.data/data/bin/python``)."""
    names = {package_key(t) for t in taken}
    found = []
    for member in members:
        landing = landing_names(member, wheel)
        if landing is None:
            continue
        kind, name = landing
        if kind == "interpreter":
            found.append((member, f"the environment's {name}"))
        elif kind == "metadata" and not _owns(wheel.distribution, name):
            found.append((member, f"{name}'s metadata"))
        elif kind == "package" and package_key(name) in names and not _owns(wheel.distribution, name):
            found.append((member, f"{name}'s files"))
    return found


def ownership_problem(
    wheel: WheelName, members: Iterable[str], taken: Collection[str] = TORCH_ENVIRONMENT
) -> str | None:
    """The one line that refuses a wheel writing another distribution's files (the first member, and how
    many more), or ``None``."""
    found = foreign_members(wheel, members, taken)
    if not found:
        return None
    member, whose = found[0]
    more = f" (and {len(found) - 1} more member(s))" if len(found) > 1 else ""
    return f"{member} would overwrite {whose}{more}: a wheel installs only its own files"
