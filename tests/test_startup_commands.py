"""Start-up per command (issue 46 item 7): each command imports what it uses. ``ls`` once imported verify, reindex and gc
(and the binary readers through them), ``--help`` every command's module, ``doctor --machine`` the wheel
readers. Pinned here per command, in a fresh interpreter each: the modules it must not import. The help's
command list is drawn from a table (nothing imported for it), held to the commands' own docstrings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Run

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import json, sys
from librarian.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
READERS = (
    "librarian.wheel.binaries",
    "librarian.wheel.deep",
    "librarian.wheel.fatbin",
    "librarian.wheel.cubin",  # (wheel.elf is the machine probe's too: this machine's libstdc++)
)
NOT_IMPORTED = {
    ("ls",): ("librarian.ops.store.verify", "librarian.ops.store.reindex", "librarian.ops.store.gc", "librarian.demands", *READERS),
    ("--help",): ("librarian.stores", "librarian.ops", "librarian.demands", "librarian.cli.pull", *READERS),
    ("doctor", "--machine", "--sm", "89"): ("librarian.stores", "librarian.ops.store.verify", *READERS),
    ("pull", "tinykern", "--sm", "89", "--torch", "2.9", "-o", "out"): (
        "librarian.ops.store.verify", "librarian.ops.store.reindex", "librarian.ops.store.gc", "librarian.ops.build.build",
        "librarian.ops.build.build_and_file", "librarian.ops.machine.fix", "librarian.ops.machine.environment", "librarian.ops.machine.doctor",
        "packaging.requirements", "html",  # a bare name needs no requirement grammar; pull renders no page
        "librarian.generated", "librarian.card", "librarian.coverage",  # nor the store's card and tables
        *READERS,
    ),
}  # fmt: skip


@pytest.mark.parametrize("argv", list(NOT_IMPORTED), ids=lambda a: " ".join(a[:2]))
def test_a_command_imports_only_what_it_uses(run: Run, tmp_path: Path, argv: tuple[str, ...]) -> None:
    samples = sorted((ROOT / "samples" / "dist").glob("*.whl"))
    assert run("publish", *map(str, samples), "--torch", "2.9", "--cuda", "13.0").code == 0
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                                         "PYTHONPATH": str(ROOT)})  # fmt: skip
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    banned = NOT_IMPORTED[argv]
    wrong = [m for m in loaded if any(m == b or m.startswith(b + ".") for b in banned)]
    assert not wrong, (argv, wrong)


def test_the_help_list_says_what_each_command_says_of_itself() -> None:
    import importlib

    from typer.main import get_group

    from librarian.cli.app import Commands

    assert set(Commands.summaries) == set(Commands.modules)
    for name, module in Commands.modules.items():
        command = get_group(importlib.import_module(module).app).commands[name]
        assert (command.help or "").strip().splitlines()[0] == Commands.summaries[name], name
