"""The layering as a test: the rooms of ``librarian/`` and the arrows allowed between them, written once
(``ARROWS``) and checked from the AST of every module on every run, function-level imports and the lazy
``_API`` table of ``librarian/__init__.py`` included. An import the table does not allow fails with the
arrow named; a new arrow is a line here, and the table must stay without a cycle.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "librarian"

# Each room (a top-level module or package of librarian/) and the rooms it may import, lowest first.
# "api" is the package itself, librarian/__init__.py: the library's façade over the rest.
ARROWS: dict[str, frozenset[str]] = {
    room: frozenset(allowed.split())
    for room, allowed in {
        # foundations: the standard library only
        "errors": "",
        "compat": "",
        "progress": "",
        "redact": "",
        "pool": "",
        "safeio": "",
        "jsonfile": "errors",
        "variant_format": "",
        "demangle": "",  # binutils' c++filt, run for what a person reads
        # pure values and the data they are read from
        "coords": "errors",
        "facts": "coords",
        "platforms": "compat coords errors facts",
        "gpus": "compat coords errors platforms",
        "layout": "compat coords errors",
        "presets": "compat errors",
        "stable_abi": "compat coords errors safeio",
        "machine": "coords errors gpus platforms",
        "build_record": "",  # what a build was made from and with
        "build_failure": "build_record coords errors jsonfile layout",
        "index": "build_record coords errors facts jsonfile layout platforms variant_format",
        "index_files": "errors index jsonfile layout",
        # the judgement, and what the store's files say
        "cuda_libraries": "compat errors",
        "demands": "coords cuda_libraries facts gpus machine platforms stable_abi variant_format",
        "pending": "errors index index_files jsonfile",
        "manifest": "errors index index_files",
        "coverage": "index index_files platforms",
        "config": "compat errors layout safeio",
        "variants": "coords index variant_format",
        "catalogue": "coords coverage demands index index_files variant_format variants",
        "card": "build_failure catalogue coords coverage index variants",
        "generated": "build_failure card catalogue index index_files pending",
        "pytorch": "compat coords errors gpus safeio",
        # pages of links and files over HTTP: where wheels come from besides a store
        "sources": "errors redact safeio",
        # the outside worlds: wheels' bytes, this machine, stores
        "wheel": "coords demands errors facts pool progress safeio variant_format",
        "probe": "coords errors machine platforms safeio wheel",
        "stores": "build_failure card catalogue errors generated index index_files layout progress redact safeio",
        # use cases
        # use cases: the core every use case shares (what a machine takes, what a store holds, labels), then
        # one package per use case, each importing only those below it
        "ops": "build_failure build_record catalogue compat coords coverage cuda_libraries demands errors facts gpus index index_files jsonfile layout machine manifest pending "
        "platforms pool probe progress pytorch redact safeio sources stable_abi stores variant_format variants wheel demangle",
        "ops.store": "ops build_failure build_record catalogue compat coords coverage demands errors facts generated gpus index index_files jsonfile layout machine manifest pending "
        "platforms pool probe progress pytorch redact safeio sources stable_abi stores variant_format variants wheel",
        "ops.build": "ops ops.store build_failure build_record compat coords errors facts gpus index layout machine platforms pool probe progress pytorch redact safeio sources stores wheel",
        "ops.machine": "ops ops.store ops.build catalogue compat coords coverage cuda_libraries demands errors facts gpus index layout machine platforms pool probe progress pytorch redact safeio sources stable_abi stores wheel demangle",
        "ops.grid": "ops ops.store ops.build build_failure build_record coords errors gpus index layout pytorch stores",
        # people: the terminal and the command line
        "terminal": "progress",
        "cli": "api build_record config coords coverage errors gpus layout machine ops ops.store ops.build ops.machine ops.grid platforms presets probe progress "
        "pytorch redact safeio stable_abi stores terminal",  # api: librarian.__version__
        "__main__": "cli",
        "api": "coords facts machine gpus wheel probe demands stores config ops ops.store ops.build ops.machine ops.grid errors",
    }.items()
}


OPS_PACKAGES = ("store", "build", "machine", "grid")  # ops' use-case packages: rooms of their own


def room_of(module: str) -> str:
    """``librarian.ops.store.publish`` -> ``ops.store``; ``librarian.ops.labels`` -> ``ops``;
    ``librarian`` -> ``api``."""
    parts = module.split(".")
    if parts == ["librarian"]:
        return "api"
    if parts[1] == "ops" and len(parts) > 2 and parts[2] in OPS_PACKAGES:
        return f"ops.{parts[2]}"
    return parts[1]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, rooms: set[str]) -> list[str]:
    """The librarian modules an import statement names (``from librarian import progress``: the module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "librarian"]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        if node.module == "librarian":
            return [f"librarian.{a.name}" if a.name in rooms else "librarian" for a in node.names]
        if node.module.split(".")[0] == "librarian":
            return [node.module]
    return []


def _api_table(tree: ast.Module) -> list[tuple[int, str]]:
    """The modules the lazy ``_API`` table of the package's ``__init__`` names: imports made on first use."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id == "_API" and isinstance(node.value, ast.Dict):
            return [(v.lineno, v.value) for v in node.value.values if isinstance(v, ast.Constant)]
    return []


def stray_arrows(root: Path, arrows: dict[str, frozenset[str]]) -> list[str]:
    """Every import under ``root`` (a ``librarian/`` folder) from one room into another that ``arrows``
    does not allow, as ``file:line: room -> room``; a module in no room of the table is named too."""
    rooms = set(arrows)
    rooms_here = {p.stem for p in root.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    bad = [
        f"{root.name}/{r}: a room the table does not list" for r in sorted(rooms_here - rooms - {"__init__"})
    ]
    for path in sorted(root.rglob("*.py")):
        source = room_of(_module_name(path, root))
        tree = ast.parse(path.read_text(), str(path))
        found = [(n.lineno, m) for n in ast.walk(tree) for m in _imported(n, rooms)]
        if source == "api":
            found += _api_table(tree)
        for line, module in found:
            target = room_of(module)
            if target != source and target not in arrows.get(source, frozenset()):
                bad.append(
                    f"{path.relative_to(root.parent)}:{line}: {source} -> {target} is not an allowed arrow"
                )
    return bad


def test_every_import_follows_an_allowed_arrow() -> None:
    assert stray_arrows(ROOT, ARROWS) == []


def test_the_arrows_have_a_direction() -> None:
    try:
        order = list(TopologicalSorter(ARROWS).static_order())
    except CycleError as e:
        pytest.fail(f"the table has a cycle: {' -> '.join(e.args[1])}")
    assert order.index("errors") < order.index("coords") < order.index("demands") < order.index("ops")
    assert order.index("ops") < order.index("ops.store") < order.index("ops.build") < order.index("ops.grid")
    assert order.index("ops.build") < order.index("ops.machine") < order.index("cli")
    assert order.index("ops") < order.index("cli")


def test_an_upward_import_fails_with_the_arrow_named(tmp_path: Path) -> None:
    lib = tmp_path / "librarian"
    (lib / "ops").mkdir(parents=True)
    (lib / "__init__.py").write_text(
        '_API = {"pull": "librarian.ops.machine.pull", "main": "librarian.cli"}\n'
    )
    (lib / "coords.py").write_text(
        "def f():\n    from librarian.ops import pull\n"
    )  # a function-level import
    (lib / "errors.py").write_text("")
    (lib / "ops" / "__init__.py").write_text("")
    (lib / "ops" / "machine").mkdir()
    (lib / "ops" / "machine" / "__init__.py").write_text("")
    (lib / "ops" / "machine" / "pull.py").write_text(
        "from librarian import coords, errors\nimport librarian.cli.app\n"
    )
    (lib / "cli").mkdir()
    (lib / "cli" / "__init__.py").write_text("")
    (lib / "wheel").mkdir()
    (lib / "wheel" / "__init__.py").write_text("from librarian.index import IndexEntry\n")
    assert stray_arrows(lib, ARROWS) == [
        "librarian/__init__.py:1: api -> cli is not an allowed arrow",  # the lazy table counts
        "librarian/coords.py:2: coords -> ops is not an allowed arrow",
        "librarian/ops/machine/pull.py:2: ops.machine -> cli is not an allowed arrow",
        "librarian/wheel/__init__.py:1: wheel -> index is not an allowed arrow",  # pull's identity check
    ]


def test_a_room_the_table_does_not_know_is_named(tmp_path: Path) -> None:
    lib = tmp_path / "librarian"
    lib.mkdir()
    (lib / "__init__.py").write_text("")
    (lib / "helpers.py").write_text("")
    assert stray_arrows(lib, ARROWS) == ["librarian/helpers: a room the table does not list"]


def test_no_module_of_a_package_takes_a_value_from_the_package_itself() -> None:
    """A package's ``__init__`` may import its modules (the CLI's runs the funnel), so a module of it that
    took a value back from the package (``from librarian.cli import ERROR_CHARS``) would close a circle,
    kept only by an import made late: a module takes from the package its modules, never its values."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        package = _module_name(path.parent / "__init__.py", ROOT)
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == package and package != "librarian":
                values = [a.name for a in node.names if not (path.parent / f"{a.name}.py").exists()
                          and not (path.parent / a.name / "__init__.py").exists()]  # fmt: skip
                if values and path.name != "__init__.py":
                    found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {', '.join(values)}")
    assert found == []
