"""Print tests/README.md: each library module and the test files that pin it.

A test file pins a module when it imports it; a command module (``librarian.cli.X``, ``librarian.ops.X``) is
also pinned by the test files that run its commands end to end (``librarian.cli.store``: verify, ls, gc). Run from the checkout:

    python scripts/tests_by_module.py > tests/README.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from librarian.cli.app import Commands  # the command -> module table the app itself uses

HEAD = """# The tests, by the module they pin

Each library module and the test files that import it, or, for a command's modules, run the command end to
end (`run("pull", ...)`). Every command is also pinned through the README (`tests/test_readme.py`) and the
one-judgement tests (`tests/test_one_answer.py`); every hostile input through `tests/hostile/`. Opt-in:
`-m network` (`tests/test_real_*.py`: real wheels from PyPI, the real torch build), `-m oracle`
(cuobjdump), `-m hostile_slow` (the big fuzz and SIGKILL runs). Made by `scripts/tests_by_module.py`.

| module | tests |
| --- | --- |"""


def main() -> None:
    tests = {t: t.read_text() for t in sorted((ROOT / "tests").rglob("test_*.py"))}
    rows = [HEAD]
    for path in sorted((ROOT / "librarian").rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if dotted == "librarian":
            continue
        parent, leaf = dotted.rsplit(".", 1)
        imported = re.compile(
            rf"(?:from|import)\s+{re.escape(dotted)}\b|from\s+{re.escape(parent)}\s+import\s+[^\n]*\b{leaf}\b"
        )
        # a command module is pinned by the runs of each command it defines (cli.store: verify, ls, gc)
        commands = [c for c, m in Commands.modules.items() if m == dotted] or [leaf]
        words = "|".join(re.escape(c) for c in commands)
        ran = (
            re.compile(rf"""run\(\s*\*?\(?\s*["'](?:{words})["']""")
            if parent == "librarian.cli" or parent == "librarian.ops" or parent.startswith("librarian.ops.")
            else None
        )
        hits = [t for t, text in tests.items() if imported.search(text) or (ran and ran.search(text))]
        names = (
            ", ".join(f"`{t.relative_to(ROOT).as_posix()}`" for t in hits)
            or "through the modules that use it"
        )
        rows.append(f"| `{dotted}` | {names} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
