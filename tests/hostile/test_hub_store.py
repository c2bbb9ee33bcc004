"""A Hub dataset owned by someone else is where pulling crosses a trust boundary: the hostile-store cases
of ``test_store.py`` and ``test_inputs.py``, against a loopback Hub store.

The index files are rewritten by a plain commit of the repo's owner (``HfApi.create_commit``), as a
hostile or careless owner would. Symbolic links have no Hub counterpart (a commit adds files), so that
case stays with the local store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from tests.conftest import Run
from tests.hostile.helpers import FLAGS, assert_one_line, build, wheel_name
from tests.loophub.server import LoopHub

REPO_ID = "owner/wheels"
REPO = f"hf://datasets/{REPO_ID}"
PULL = (
    "tinykern",
    "--sm",
    "89",
    "--torch",
    "2.8",
    "--python",
    "3.11",
    "--platform",
    "linux_x86_64",
    "--repo",
    REPO,
)


@pytest.fixture
def hub(run: Run, loophub: LoopHub, tmp_path: Path) -> LoopHub:
    for package in ("tinykern", "evilpkg"):
        assert (
            run("publish", str(build(tmp_path / "dist", package)), *FLAGS, "--repo", REPO, "--create").code
            == 0
        )
    return loophub


def rewrite(hub: LoopHub, path: str, change: Callable[[Any], Any] | str) -> None:
    """Commit a new ``path`` (JSON changed by ``change``, or the text itself), as the repo's owner can."""
    text = change if isinstance(change, str) else json.dumps(change(json.loads(hub.files(REPO_ID)[path])))
    HfApi(endpoint=hub.url).create_commit(
        REPO_ID, [CommitOperationAdd(path, text.encode())], commit_message="edit", repo_type="dataset"
    )


def first(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], Any]:
    def apply(data: Any) -> Any:
        change(data["wheels"][0])
        return data

    return apply


def test_an_entry_naming_another_packages_wheel_is_refused(run: Run, hub: LoopHub, tmp_path: Path) -> None:
    evil = json.loads(hub.files(REPO_ID)["index/evilpkg.json"])["wheels"][0]
    rewrite(
        hub,
        "index/tinykern.json",
        first(lambda e: e.update({k: evil[k] for k in ("path", "sha256", "size", "filename")})),
    )
    found = run("verify", "--deep", "--repo", REPO)
    assert found.code == 1 and "index entry of package tinykern names a wheel of evilpkg" in found.out
    pulled = run("pull", *PULL, "-o", "out")
    assert pulled.code == 2
    assert_one_line(pulled.err, "names a wheel of evilpkg", "refused")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_wrong_size_or_sha256_is_a_finding_and_pull_refuses_the_bytes(
    run: Run, hub: LoopHub, tmp_path: Path
) -> None:
    rewrite(hub, "index/tinykern.json", first(lambda e: e.update(sha256="0" * 64)))
    assert run("verify", "--deep", "--repo", REPO).code == 1
    pulled = run("pull", *PULL, "-o", "out")
    assert pulled.code == 2
    assert_one_line(pulled.err, wheel_name(), "do not match", "refused")
    assert not (tmp_path / "out" / wheel_name()).exists()
    rewrite(hub, "index/tinykern.json", first(lambda e: e.update(size=e["size"] + 1)))
    assert run("verify", "--repo", REPO).code == 1


@pytest.mark.parametrize(
    ("path", "text", "needle"),
    [
        ("index/tinykern.json", '{"schema": 1, "wheels": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("index.json", "[" * 100_000, "nested too deeply"),
        ("index.json", ('{"schema": 1, "layout": {"name": "w", "path": "{package}/sm{sm}/torch{torch}-cu{cuda}/{filename}"}, '
                        '"packages": {"../x": {"shard": "index/../x.json"}}}'), "index.json"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", [("verify",), ("ls",), ("pull", *PULL[:-2], "-o", "out")])
def test_hostile_index_files_are_one_line(
    run: Run, hub: LoopHub, path: str, text: str, needle: str, command: tuple[str, ...]
) -> None:
    rewrite(hub, path, text)
    result = run(*command, "--repo", REPO)
    assert result.code == 2, result
    assert_one_line(result.err, needle)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("path", "../../outside.whl", None),  # a path that would escape the layout
        ("path", "index.json", None),  # a reserved name: librarian's own file
        ("cell", {"package": "tinykern", "sm": "sm_90", "torch": "2.8", "cuda": "12.8"}, "its path says"),
    ],
)
def test_entries_with_wrong_or_reserved_paths_poison_only_themselves(
    run: Run, hub: LoopHub, field: str, value: Any, needle: str | None
) -> None:
    rewrite(hub, "index/tinykern.json", first(lambda e: e.update({field: value})))
    found = run("verify", "--repo", REPO)
    assert found.code == 1 and "Traceback" not in found.err, found
    if needle:
        assert needle in found.out
    pulled = run("pull", *PULL, "-o", "out")
    # A path outside the layout or reserved is never fetched; a cell that disagrees with its path still
    # names the right bytes (sha256 and identity checked), which pull may take.
    assert "Traceback" not in pulled.err and pulled.err.count("librarian: error:") == (pulled.code != 0)
    if field == "path":
        assert pulled.code in (1, 2) and not (Path("out") / "outside.whl").exists()
    assert run("pull", "evilpkg", *PULL[1:], "-o", "evil").code == 0  # the other package is untouched


COMMANDS = {
    "ls": ("ls", "--repo", REPO),
    "verify": ("verify", "--repo", REPO),
    "pull": ("pull", *PULL, "-o", "out"),
    "gc": ("gc", "--drop-torch", "2.8", "--repo", REPO),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("endpoint", ["repo_info", "tree"])
def test_a_reply_that_is_not_json_is_one_line_exit_3(
    run: Run, hub: LoopHub, command: str, endpoint: str
) -> None:
    """A Hub stand-in (a proxy's error page, a cut-off body) answering 200 with broken JSON."""
    hub.bad_json(endpoint, times=1000)
    result = run(*COMMANDS[command])
    if endpoint == "tree" and command in ("ls", "pull", "gc"):
        # they read the index, never the tree: nothing broken reached them
        assert result.code == 0, result.err
        return
    assert result.code == 3, result.err
    assert_one_line(result.err, "not JSON")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_redirect_to_itself_is_one_line_exit_3(run: Run, hub: LoopHub, command: str) -> None:
    hub.redirect_loop(None)
    result = run(*COMMANDS[command])
    assert result.code == 3, result.err
    assert_one_line(result.err, "redirect loop")
