"""Help that helps: words and examples, not type placeholders (README: Options every command shares)."""

from __future__ import annotations

import re

from tests.conftest import Run

COMMANDS = [
    ("retag",),
    ("inspect",),
    ("doctor",),
    ("publish",),
    ("reindex",),
    ("verify",),
    ("ls",),
    ("pull",),
    ("gc",),
    ("matrix",),
    ("matrix", "refresh"),
    ("plan",),
]


def test_no_type_placeholder_in_any_help_and_each_has_an_example(run: Run) -> None:
    top = run("--help")
    assert top.code == 0 and not re.search(r"<[a-z\[\]|, ]+>", top.out, re.IGNORECASE)
    for command in COMMANDS:
        result = run(*command, "--help")
        assert result.code == 0, command
        assert not re.search(r"<[a-z\[\]|, ]+>", result.out, re.IGNORECASE), (command, result.out)
        assert "Example: librarian " + command[0] in " ".join(result.out.split()), command
    pull = " ".join(run("pull", "--help").out.split())
    assert "--sm 89" in pull and "--torch 2.9" in pull and "[PACKAGE]..." in pull and "--repo DIR|URL" in pull


def complete(words: str, cwd: object, *extra_env: tuple[str, str]) -> list[str]:
    """What bash completion offers for the last word of ``words``, through click's completion protocol."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "_LIBRARIAN_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
        **dict(extra_env),
    }
    done = subprocess.run(
        [sys.executable, "-m", "librarian"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.stdout.split()


def test_completion_offers_gpus_lines_and_packages(run: Run, tmp_path: object) -> None:
    from pathlib import Path

    assert complete("librarian pull --sm 8", tmp_path) == ["80", "86", "87", "89"]
    lines = complete("librarian pull --torch 2.", tmp_path)
    assert "2.9" in lines and lines == sorted(
        lines, key=lambda v: tuple(map(int, v.split("."))), reverse=True
    )
    assert complete("librarian pull --torch 2.9 --cuda 1", tmp_path)[:1] == [
        "13.0"
    ]  # torch 2.9's newest line
    samples = Path(__file__).resolve().parent.parent / "samples" / "dist"
    assert (
        run(
            "publish",
            str(samples / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"),
            "--torch",
            "2.9",
            "--cuda",
            "13.0",
            "--repo",
            str(Path(str(tmp_path)) / "wh"),
        ).code
        == 0
    )
    assert complete("librarian pull --repo wh ti", tmp_path) == ["tinykern"]
    assert complete("librarian pull --repo nowhere ti", tmp_path) == []  # no store: nothing, and no error


def test_the_endpoint_is_said_once_when_it_is_not_huggingface_co(
    run: Run, loophub: object, tmp_path: object
) -> None:
    from pathlib import Path

    samples = Path(__file__).resolve().parent.parent / "samples" / "dist"
    made = run(
        "publish",
        str(samples / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"),
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--repo",
        "https://huggingface.co/datasets/team/wheels",
        "--create",
    )
    assert made.code == 0, made.err
    # A typed huggingface.co URL goes to HF_ENDPOINT: said, once in the command, however many calls it makes.
    assert made.notices == (f"librarian: the Hub here is {loophub.url} (HF_ENDPOINT), not huggingface.co",)  # type: ignore[attr-defined]
    again = run("ls", "--repo", "hf://datasets/team/wheels")
    assert len(again.notices) == 1
    assert run("-q", "ls", "--repo", "hf://datasets/team/wheels").notices == ()  # -q: errors only


def test_quiet_publish_and_gc_print_the_result_line_alone(run: Run, tmp_path: object) -> None:
    from pathlib import Path

    samples = sorted(
        str(p) for p in (Path(__file__).resolve().parent.parent / "samples" / "dist").glob("*.whl")
    )
    loud = run("publish", *samples, "--torch", "2.9", "--cuda", "13.0", "--dry-run")
    assert loud.out.count("would add") == 12
    quiet = run("-q", "publish", *samples, "--torch", "2.9", "--cuda", "13.0")
    assert quiet.code == 0 and quiet.out == "12 file(s) written to wheelhouse\n" and quiet.err == ""
    gone = run("-q", "gc", "--drop-torch", "2.9", "--yes", "--allow-empty")
    assert gone.code == 0 and gone.out.startswith("removed 12 wheel file(s)") and gone.out.count("\n") == 1


def test_verbose_says_what_was_done(run: Run, tmp_path: object) -> None:
    from pathlib import Path

    sample = (
        Path(__file__).resolve().parent.parent
        / "samples"
        / "dist"
        / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
    )
    published = run("-v", "publish", str(sample), "--torch", "2.9", "--cuda", "13.0")
    assert "labelled cu130torch2.9, 1 binary read, filed under sm80 sm86 sm89 sm90" in published.err
    assert "published to wheelhouse" in published.err
    pulled = run("-v", "pull", "tinykern", "--sm", "89", "--torch", "2.9", "--python", "3.11", "-o", "out")
    assert pulled.code == 1  # the one wheel is cp312: each candidate passed over says why
    assert "read index.json and 1 shard(s) (index/tinykern.json)" in pulled.err
    assert "passed over tinykern/sm89/torch2.9-cu130/" in pulled.err and "another Python: cp312" in pulled.err
    taken = run("-v", "pull", "tinykern", "--sm", "89", "--torch", "2.9", "--python", "3.12", "-o", "out")
    assert (
        "fits tinykern/sm89/torch2.9-cu130/" in taken.err and "sha256" in taken.err and "checked" in taken.err
    )
    assert (
        "fits"
        not in run("pull", "tinykern", "--sm", "89", "--torch", "2.9", "--python", "3.12", "-o", "out2").err
    )


def test_very_verbose_adds_http_requests_and_timings_never_the_token(
    run: Run, loophub: object, tmp_path: object
) -> None:
    from pathlib import Path

    from tests.loophub.fixtures import FAKE_TOKEN

    sample = (
        Path(__file__).resolve().parent.parent
        / "samples"
        / "dist"
        / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
    )
    made = run(
        "-vv",
        "publish",
        str(sample),
        "--torch",
        "2.9",
        "--cuda",
        "13.0",
        "--repo",
        "hf://datasets/team/w",
        "--create",
    )
    assert made.code == 0, made.err
    assert "HTTP GET " in made.err and " -> 200" in made.err and "done in " in made.err
    assert "reading commit" in made.err or "published to" in made.err
    assert FAKE_TOKEN not in made.err + made.out


def test_completion_reads_the_hub_stores_cached_index_through_the_store(
    run: Run, loophub: object, tmp_path: object
) -> None:
    """Package names of a Hub store come from its read cache, through the store (CachedReads): with the
    Hub gone, TAB still completes, and nothing is fetched to complete a word."""
    from pathlib import Path

    samples = Path(__file__).resolve().parent.parent / "samples" / "dist"
    repo = "hf://datasets/team/wheels"
    made = run("publish", str(samples / "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"), "--torch", "2.9",
               "--cuda", "13.0", "--repo", repo, "--create")  # fmt: skip
    assert made.code == 0, made.err
    loophub.stop()  # type: ignore[attr-defined]
    assert complete(f"librarian pull --repo {repo} ti", tmp_path) == ["tinykern"]
    assert complete("librarian pull --repo hf://datasets/team/other ti", tmp_path) == []


def test_a_repo_of_no_known_scheme_is_one_line(run: Run) -> None:
    result = run("ls", "--repo", "s3://bucket/wheels")
    assert result.code == 2
    assert (
        result.err
        == "librarian: error: s3://bucket/wheels: no store for s3:// (a folder, or hf://, https://, http://)\n"
    )
