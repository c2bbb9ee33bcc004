"""Start-up imports only what a command uses: no Hub client, terminal UI or codecs for a local store."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import Run

# Modules a command on a local store never needs: the Hub client and its HTTP stack, the terminal UI
# (a bar is shown only on a terminal), the fatbin codecs and the binary readers (only when bytes are read).
HEAVY = (
    "huggingface_hub",
    "httpx",
    "httpx2",
    "rich",
    "lz4",
    "zstandard",
    "elftools",
    "librarian.wheel.binaries",
    "librarian.wheel.elf",
    "librarian.wheel.fatbin",
    "librarian.stores.hub",
    "librarian.stores.hub_read",
    "librarian.stores.hub_errors",
    "librarian.stores.hub_lfs",
    "librarian.stores.hub_http",
    "librarian.pytorch.releases",
)
# `librarian --version` is answered before the command group is built: no typer (nor its vendored click,
# nor the pydantic it coerces options with), no command module.
NO_GROUP = (
    "typer",
    "click",
    "pydantic",
    "librarian.cli.app",
    "librarian.cli.funnel",
    "librarian.cli.options",
)
# The other commands' modules and ops, which `librarian pull` does not load.
NOT_PULL = (
    "librarian.cli.retag",
    "librarian.cli.inspect",
    "librarian.cli.publish",
    "librarian.cli.store",
    "librarian.cli.matrix",
    "librarian.ops.store.publish",
    "librarian.ops.store.prepare",
    "librarian.ops.store.verify",
    "librarian.ops.store.gc",
    "librarian.ops.inspect",
    "librarian.ops.machine.doctor",
    "librarian.ops.store.staged",
    "librarian.wheel.relabel",
)

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"

PROBE = """
import json, sys
{setup}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {roots} or m in {names})))
"""


def _loaded(setup: str, unwanted: tuple[str, ...] = HEAVY, cwd: Path | None = None) -> list[str]:
    roots = {m.split(".")[0] for m in unwanted if not m.startswith("librarian")}
    code = PROBE.format(setup=setup, roots=roots, names=set(unwanted))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def _main(*argv: str) -> str:
    """Probe setup: ``main(argv)`` as the console script runs it, which must exit 0."""
    return f"from librarian.cli import main\ntry:\n    main({list(argv)!r})\nexcept SystemExit as e:\n    assert not e.code, e.code"


def test_version_imports_nothing_heavy() -> None:
    assert _loaded(_main("--version")) == []


def test_version_imports_no_typer_nor_click() -> None:
    assert _loaded(_main("--version"), NO_GROUP) == []
    assert _loaded(_main("-q", "--version", "-v"), NO_GROUP) == []


def test_a_local_pull_imports_no_hub_no_ui_no_binary_readers() -> None:
    # What `librarian pull --repo DIR` imports: the CLI, the pull command and op, the store factory.
    assert _loaded("import librarian.cli, librarian.cli.funnel, librarian.cli.pull, librarian.stores") == []


def test_a_local_pull_loads_the_pull_command_only(run: Run, tmp_path: Path) -> None:
    shutil.copytree(SAMPLES, tmp_path / "dist")
    assert (
        run(
            "publish",
            *map(str, sorted((tmp_path / "dist").glob("*.whl"))),
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
        ).code
        == 0
    )
    pull = _main(
        "pull",
        "tinykern",
        "--repo",
        "wheelhouse",
        "--sm",
        "89",
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--python",
        "3.12",
        "-o",
        "pulled",
    )
    # The ELF reader is the one exception: the machine probe reads libstdc++'s version definitions.
    unwanted = tuple(m for m in HEAVY if m != "librarian.wheel.elf") + NOT_PULL
    assert _loaded(pull, unwanted, cwd=tmp_path) == []
    assert list((tmp_path / "pulled").glob("tinykern-*.whl"))
