"""Start-up imports only what a command uses: no Hub client, terminal UI or codecs for a local store."""

from __future__ import annotations

import json
import subprocess
import sys

# Modules a command on a local store never needs: the Hub client and its HTTP stack, the terminal UI
# (a bar is shown only on a terminal), the fatbin codecs and the binary readers (only when bytes are read).
HEAVY = ("huggingface_hub", "httpx", "httpx2", "rich", "lz4", "zstandard", "elftools", "librarian.wheel.binaries",
         "librarian.wheel.elf", "librarian.wheel.fatbin", "librarian.stores.hub", "librarian.stores.hub_read", "librarian.stores.hub_errors",
         "librarian.stores.hub_lfs", "librarian.stores.hub_http", "librarian.pytorch.releases")  # fmt: skip

PROBE = """
import json, sys
{setup}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {roots} or m in {names})))
"""


def _loaded(setup: str) -> list[str]:
    roots = {m.split(".")[0] for m in HEAVY if not m.startswith("librarian")}
    code = PROBE.format(setup=setup, roots=roots, names=set(HEAVY))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_version_imports_nothing_heavy() -> None:
    setup = "from librarian.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    assert _loaded(setup) == []


def test_a_local_pull_imports_no_hub_no_ui_no_binary_readers() -> None:
    # What `librarian pull --repo DIR` imports: the CLI, the pull op, the store factory.
    assert _loaded("import librarian.cli, librarian.ops.pull, librarian.stores") == []
