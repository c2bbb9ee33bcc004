"""Every install line librarian writes for people (the Hub card's pip, uv and uv-variants lines) installs the
store's bytes and nothing else, even where a public index offers a newer release of the same name.

The store is on the loopback Hub; the "public index" is a PEP 503 folder holding ``tinykern 9.9`` that pip's
configuration (``extra-index-url``, as on this machine and many CI images) and uv's (``UV_EXTRA_INDEX_URL``)
name. Each line runs as the card prints it, into a target folder (``--target``). Before ``--no-index`` was
in them, pip and uv installed 9.9 (the control below does that still, so the test can tell).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import make_wheel
from tests.conftest import Run
from tests.loophub.server import LoopHub

REPO = "hf://datasets/team/wheels"
SAMPLES = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


def public_index(folder: Path) -> str:
    """A PEP 503 index offering tinykern 9.9 (newer than the store's 0.1.0): its file:// URL."""
    wheel = make_wheel(folder / "files", name="tinykern", version="9.9", tags="py3-none-any")
    project = folder / "simple" / "tinykern"
    project.mkdir(parents=True)
    (project / "index.html").write_text(f'<a href="{wheel.resolve().as_uri()}">{wheel.name}</a>\n')
    return (folder / "simple").resolve().as_uri()


def card_lines(card: str) -> list[str]:
    """The card's install lines that name a find-links page."""
    blocks = re.findall(r"^```bash\n(.*?)^```", card, flags=re.DOTALL | re.MULTILINE)
    return [line for b in blocks for line in b.splitlines() if "--find-links" in line]


def run_line(line: str, target: Path, index: str, tmp_path: Path) -> str:
    """Run one printed line into ``target`` with a public index configured; the tinykern version installed."""
    words = shlex.split(line)
    if words[0] == "pip":
        words = [sys.executable, "-m", "pip", *words[1:]]
    elif words[0] == "uv":
        words = [UV, *words[1:], "--no-cache", "--python", sys.executable]
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nextra-index-url = {index}\ndisable-pip-version-check = true\n")
    env = {**os.environ, "PIP_CONFIG_FILE": str(config), "UV_EXTRA_INDEX_URL": index, "PIP_FIND_LINKS": "",
           "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "8.9", "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0"}  # fmt: skip
    done = subprocess.run([*words, "--target", str(target)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    (info,) = target.glob("tinykern-*.dist-info")
    return info.name.removeprefix("tinykern-").removesuffix(".dist-info")


@pytest.mark.skipif(not Path(UV).exists(), reason="uv is not installed (the test extra installs it)")
def test_every_install_line_of_the_card_installs_the_stores_release_not_the_public_newer_one(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    published = run("publish", *map(str, SAMPLES), "--torch", "2.9", "--cuda", "13.0", "--variants",
                    "--create", "--repo", REPO)  # fmt: skip
    assert published.code == 0, published.err
    card = loophub.files("team/wheels")["README.md"].decode()
    lines = card_lines(card)
    assert len(lines) == 3 and all("--no-index" in line for line in lines), lines
    index = public_index(tmp_path / "public")
    for i, line in enumerate(lines):
        version = run_line(line, tmp_path / f"t{i}", index, tmp_path)
        assert version in ("0.1.0+cu130torch2.9", "0.1.0"), (
            line,
            version,
        )  # a variant has the public version
    control = run_line(lines[0].replace(" --no-index", ""), tmp_path / "control", index, tmp_path)
    assert control == "9.9"  # without --no-index the public index wins: the test can fail


def test_the_cards_hash_pinned_example_names_a_commit_not_main(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    """Issue 46 item 4: the card's requirements example was pinned to ``resolve/main``, which moves; it names
    a commit that holds the wheel, as ``pull --requirements`` pins its lines, and a change that changes
    nothing leaves the card as it is."""
    import hashlib
    import urllib.request

    repo = ("--repo", "hf://datasets/team/pins")
    samples = sorted((Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl"))
    assert run("publish", str(samples[0]), "--torch", "2.9", "--cuda", "13.0", "--create", *repo).code == 0
    first = loophub.head("team/pins")
    assert run("publish", str(samples[1]), "--torch", "2.9", "--cuda", "13.0", *repo).code == 0
    card = loophub.files("team/pins")["README.md"].decode()
    m = re.search(r"@ (\S+/resolve/([0-9a-f]{40})/\S+) --hash=sha256:([0-9a-f]{64})", card)
    assert m is not None and "resolve/main/" not in m[0], card
    assert m[2] == first  # the commit the second change was made on, which holds the example wheel
    with urllib.request.urlopen(
        m[1], timeout=60
    ) as response:  # the loopback Hub: the pinned URL serves those bytes
        assert hashlib.sha256(response.read()).hexdigest() == m[3]
    commits = loophub.commits_made("team/pins")
    assert run("publish", str(samples[1]), "--torch", "2.9", "--cuda", "13.0", *repo).code == 0
    assert (
        loophub.commits_made("team/pins") == commits
        and loophub.files("team/pins")["README.md"].decode() == card
    )


def test_the_first_commits_hash_pinned_line_runs_as_written(
    run: Run, loophub: LoopHub, tmp_path: Path
) -> None:
    """Issue 53, item 5: the first commit's card printed ``resolve/COMMIT/`` (a 404). A commit cannot name
    itself: the first card pins ``main`` with the sha256 (pip refuses other bytes), the next ones a commit."""
    here = next(p for p in SAMPLES if f"cp{sys.version_info[0]}{sys.version_info[1]}-" in p.name)
    repo = "hf://datasets/team/first"  # a repo of its own: this is its first commit
    assert run("publish", str(here), "--torch", "2.9", "--cuda", "13.0", "--create", "--repo", repo).code == 0
    card = loophub.files("team/first")["README.md"].decode()
    m = re.search(r"^echo '(.+ --hash=sha256:[0-9a-f]{64})' > req.txt$", card, flags=re.MULTILINE)
    assert m is not None and "/resolve/main/" in m[1] and "COMMIT" not in card, card
    (tmp_path / "req.txt").write_text(m[1] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall", "-r",
                           str(tmp_path / "req.txt"), "--target", str(tmp_path / "t"), "--no-index"],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert list((tmp_path / "t").glob("tinykern-*.dist-info"))


@pytest.mark.skipif(not Path(UV).exists(), reason="uv is not installed (the test extra installs it)")
def test_the_readmes_uv_variant_lines_run_as_written(run: Run, tmp_path: Path) -> None:
    """Issue 53, item 5: the README's uv variant lines lacked --no-deps (uv stops at any dependency the
    find-links page does not hold). Each local one runs as the README prints it, on the store its publish
    line makes, into a venv (the Hub one names a repo of the README's own: its shape is checked)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    lines = [
        x
        for x in re.findall(r"^(?:\S+=\S+ )*uv pip install --preview-features.*$", readme, flags=re.MULTILINE)
    ]
    assert len(lines) == 3 and all("--no-deps" in x for x in lines), lines
    dist = tmp_path / "samples" / "dist"
    dist.mkdir(parents=True)
    for sample in SAMPLES:
        shutil.copy(sample, dist)
    assert run("publish", *map(str, sorted(dist.glob("*.whl"))), "--torch", "2.9", "--cuda", "13.0",
               "--variants", "--repo", "variant-store").code == 0  # fmt: skip
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=300)
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "NV_VARIANT_PROVIDER_FORCE_SM_ARCH": "8.9",
           "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION": "13.0"}  # fmt: skip
    for line in lines:
        if "https://" in line:
            continue
        words = shlex.split(line)
        assigns = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
        words = [UV if w == "uv" else w for w in words if w not in {f"{k}={v}" for k, v in assigns.items()}]
        done = subprocess.run([*words, "--no-cache"], env={**env, **assigns}, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    assert list(venv.glob("lib/python*/site-packages/tinykern-*.dist-info"))
