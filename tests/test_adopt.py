"""Moving in (issue 51): a hand-made wheelhouse adopted from its bytes as it is. Unlabelled wheels are
first-class (the path is the claim); ``reindex --adopt`` reads every unindexed wheel and indexes those whose
bytes serve their cells at their paths, names the rest with the demand that fails and the cells they serve,
``--refile`` files those there; ``ls`` and ``pull`` of a store with wheels and no index say what to run.
The wheels are the real CUDA sample wheels (``samples/``), placed by hand."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from librarian.config import load_layout
from librarian.coords import Cell, GpuArch, Label, WheelName
from librarian.demands import Wheel, claims
from librarian.index import Index, IndexEntry
from librarian.ops.store.adopt import Misfiled, duplicates, judge_reading, serving_label
from librarian.ops.store.adoption import Adopting
from librarian.ops.store.placement import path_problem
from librarian.ops.store.readings import Reading, ReadingCache
from librarian.ops.store.reindex import reindex
from librarian.ops.store.verify import NOT_INDEXED
from librarian.pytorch.matrix import load_matrix
from librarian.stores import open_store
from tests.builders import make_wheel
from tests.conftest import Run
from tests.cuda_fixtures import elf_bytes
from tests.demand_builders import so, wheel
from tests.loophub.server import LoopHub

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"
LAYOUT = load_layout()
GOOD = "tinykern/sm89/torch2.9-cu130/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
GOOD_311 = "tinykern/sm89/torch2.9-cu130/tinykern-0.1.0-cp311-cp311-linux_x86_64.whl"
NO_GPU = "tinykern/sm75/torch2.9-cu130/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"  # no sm_75 code
OTHER_CUDA = (
    "tinykern/sm90/torch2.9-cu128/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"  # links libcudart.so.13
)
LABELLED = "tinykern/sm86/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp310-cp310-linux_x86_64.whl"
CARD = "---\nlicense: mit\n---\n# My wheels\n\nHand made, for our lab. Install with `pip --no-deps`.\n"
SERVES = "its bytes serve sm80 sm86 sm89 sm90 under torch2.9-cu130"
PULL = ("--torch", "2.9", "--python", "3.12", "--platform", "linux_x86_64", "--repo", "hand")


def sample(cp: str) -> Path:
    return SAMPLES / f"tinykern-0.1.0-{cp}-{cp}-linux_x86_64.whl"


def place(root: Path, path: str, source: Path) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, root / path)


@pytest.fixture
def hand(run: Run, tmp_path: Path) -> Path:
    """A wheelhouse made by hand: two unlabelled wheels where they belong, one under a GPU it has no code for,
    one under a CUDA line it does not link, a labelled one, and a card of the owner's."""
    root = tmp_path / "hand"
    for path, cp in ((GOOD, "cp312"), (GOOD_311, "cp311"), (NO_GPU, "cp312"), (OTHER_CUDA, "cp312")):
        place(root, path, sample(cp))
    retagged = run("retag", str(sample("cp310")), "--torch", "2.9", "--cuda", "13.0", "-o", "retagged")
    assert retagged.code == 0, retagged.err
    place(root, LABELLED, tmp_path / "retagged" / LABELLED.rsplit("/", 1)[1])
    (root / "README.md").write_text(CARD)
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wheels(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.whl")}


def test_ls_and_pull_of_a_store_without_an_index_say_what_takes_it_in(run: Run, hand: Path) -> None:
    listed = run("ls", "--repo", "hand")
    assert listed.code == 0
    assert listed.out.strip() == (
        "hand: no wheels indexed, but 5 wheel file(s) there; "
        "'librarian reindex --adopt --repo hand' reads their bytes and takes them in"
    )
    assert json.loads(run("ls", "--repo", "hand", "--json").out)["unindexed"] == 5
    missing = run("ls", "tinykern", "--repo", "hand")
    assert missing.code == 1 and "hand has no index: 5 wheel file(s) there" in missing.err
    pulled = run("pull", "tinykern", "--sm", "89", *PULL, "-o", "out")  # the tree, by its paths, says so
    assert pulled.code == 0, pulled.err
    assert "'librarian reindex --adopt --repo hand' reads their bytes" in pulled.err


def test_adopt_indexes_the_wheels_that_serve_their_cells_as_they_are_and_names_the_rest(
    run: Run, hand: Path
) -> None:
    before = {p: (hand / p).read_bytes() for p in wheels(hand)}
    dry = run("reindex", "--adopt", "--dry-run", "--repo", "hand")
    assert dry.code == 1
    assert not (hand / "index.json").exists()  # a dry run writes nothing
    done = run("reindex", "--adopt", "--repo", "hand")
    assert done.code == 1, done.err  # two wheels left out: a finding
    said = dry.out.replace("would adopt", "    adopted").replace(" (dry run: nothing changed)", "")
    assert done.out == said.replace("\n    adopted 3", "\nadopted 3")
    lines = done.out.splitlines()
    assert [line.split()[-1] for line in lines if line.startswith("    adopted ")] == sorted(
        [GOOD_311, GOOD, LABELLED]
    )
    assert (
        f"{NO_GPU}: GPU arch: no code an sm75 GPU runs (it has sm_80, sm_86, sm_89, sm_90, compute_90); "
        f"{SERVES} (--refile files it there)"
    ) in lines
    assert (
        f"{OTHER_CUDA}: CUDA: path says CUDA 12.8, device code built by CUDA 13.0 (and 1 more); "
        f"{SERVES} (--refile files it there)"
    ) in lines
    assert lines[-1] == "adopted 3 wheel(s) into hand (2 left out)"
    # every wheel where it was, byte for byte: the links people use keep working
    assert {p: (hand / p).read_bytes() for p in wheels(hand)} == before
    assert (hand / "README.md").read_text() == CARD
    shard = json.loads((hand / "index/tinykern.json").read_text())
    entries = {e["path"]: e for e in shard["wheels"]}
    assert set(entries) == {GOOD, GOOD_311, LABELLED}
    assert entries[GOOD]["facts"]["archs"] == ["sm_80", "sm_86", "sm_89", "sm_90", "compute_90"]
    assert entries[GOOD]["label"] == "cu130torch2.9"  # the path's claim, as a label would make it
    assert (hand / f"{GOOD}.metadata").is_file()  # PEP 658, from the one reading
    assert (hand / "pages/sm89-torch2.9-cu130.html").read_text().count(".whl#sha256=") == 2
    # pull takes the unlabelled wheel at its old path; the misfiled ones serve nobody
    got = run("pull", "tinykern", "--sm", "89", *PULL, "-o", "out")
    assert got.code == 0 and got.err == "", got.err
    assert got.out.startswith(f"{GOOD} -> ")
    assert run("pull", "tinykern", "--sm", "75", *PULL, "-o", "out").code == 1
    verified = run("verify", "--deep", "--repo", "hand")
    assert verified.code == 1
    named = {line.split(": ", 1)[0] for line in verified.out.splitlines()[:-1]}
    assert named == {NO_GPU, OTHER_CUDA}  # the unlabelled wheels that serve their cells are clean
    assert f"{NO_GPU}: {NOT_INDEXED}" in verified.out
    assert f"{OTHER_CUDA}: path says CUDA 12.8, tinykern/_tinykern.so links libcudart.so.13" in verified.out


def test_refile_files_misfiled_wheels_where_their_bytes_serve_and_verify_is_clean(
    run: Run, hand: Path
) -> None:
    done = run("reindex", "--adopt", "--refile", "--repo", "hand")
    assert done.code == 0, done.out + done.err
    assert f"    refiled  {NO_GPU} -> sm80 sm86 sm89 sm90 under torch2.9-cu130" in done.out
    assert f"    refiled  {OTHER_CUDA} -> sm80 sm86 sm89 sm90 under torch2.9-cu130" in done.out
    assert done.out.splitlines()[-1] == "adopted 3 wheel(s) into hand (2 refiled)"
    cp312 = "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
    assert wheels(hand) == {
        GOOD, GOOD_311, LABELLED, *(f"tinykern/sm{sm}/torch2.9-cu130/{cp312}" for sm in (80, 86, 90))
    }  # fmt: skip
    assert os.path.samefile(
        hand / f"tinykern/sm80/torch2.9-cu130/{cp312}", hand / GOOD
    )  # one copy of the bytes
    assert run("verify", "--deep", "--repo", "hand").code == 0
    assert run("pull", "tinykern", "--sm", "80", *PULL, "-o", "out").code == 0
    again = run("reindex", "--adopt", "--refile", "--repo", "hand")
    assert again.code == 0 and again.out.strip() == "nothing to reindex in hand"


def test_adoption_reads_each_wheel_once_the_cache_answers_a_rerun(
    hand: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ReadingCache(tmp_path / "readings")
    first = reindex(open_store(str(hand)), LAYOUT, dry_run=True, adopting=Adopting(cache=cache))
    assert len(first.adopted) == 3 and len(first.refused) == 2

    def no_second_read(*args: object) -> Reading:
        raise AssertionError("a wheel was read twice")

    monkeypatch.setattr("librarian.ops.store.readings.reading_of", no_second_read)
    second = reindex(open_store(str(hand)), LAYOUT, adopting=Adopting(cache=cache))
    assert [e.path for e in second.adopted] == [e.path for e in first.adopted]
    assert second.refused == first.refused


def test_bad_wheels_are_named_one_line_each_and_the_rest_adopted(
    run: Run, hand: Path, tmp_path: Path
) -> None:
    cell = hand / "tinykern/sm89/torch2.9-cu130"
    (cell / "tinykern-0.2.0-cp312-cp312-linux_x86_64.whl").write_bytes(b"not a zip at all")
    liar = make_wheel(tmp_path / "liar", "tinykern", "0.3.0", "cp312-cp312-linux_x86_64",
                      record_override={"tinykern/__init__.py": "sha256=" + "A" * 43})  # fmt: skip
    shutil.copyfile(liar, cell / liar.name)
    (hand / "tinykern/sm89/loose.whl").write_bytes(b"x")  # a path that names no cell
    place(hand, "tinykern/sm89/torch2.9-cu130/evil-0.1.0-cp312-cp312-linux_x86_64.whl", sample("cp312"))
    place(hand, "tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl",
          sample("cp312"))  # fmt: skip
    (cell / "tinykern-0.4.0-cp312-cp312-linux_x86_64.whl").symlink_to(hand / GOOD)
    os.mkfifo(cell / "tinykern-0.5.0-cp312-cp312-linux_x86_64.whl")
    done = run("reindex", "--adopt", "--repo", "hand")
    assert done.code == 1 and done.err == "", done.err
    said = dict(line.split(": ", 1) for line in done.out.splitlines()[:-1] if not line.startswith(" "))
    at = "tinykern/sm89/torch2.9-cu130/"
    assert said[f"{at}tinykern-0.2.0-cp312-cp312-linux_x86_64.whl"].startswith("not a zip file")
    assert "RECORD" in said[f"{at}{liar.name}"]
    assert said["tinykern/sm89/loose.whl"].startswith("not where layout 'wheelhouse' puts wheels")
    assert (
        said[f"{at}evil-0.1.0-cp312-cp312-linux_x86_64.whl"] == "wheel of evil filed under package tinykern"
    )
    assert said[f"{at}tinykern-0.1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl"] == (
        "the same release and tags as tinykern-0.1.0-cp312-cp312-linux_x86_64.whl in this cell: remove one of them"
    )
    assert said[GOOD].startswith("the same release and tags as")  # neither of the two is taken
    assert said[f"{at}tinykern-0.4.0-cp312-cp312-linux_x86_64.whl"].startswith("a symbolic link")
    assert said[f"{at}tinykern-0.5.0-cp312-cp312-linux_x86_64.whl"].startswith("a FIFO")
    assert "adopted  " + GOOD_311 in done.out and "adopted  " + LABELLED in done.out
    assert len(said) == 10  # 7 bad inputs, the duplicate pair's other half, and the two misfiled wheels


# ---- the judgement of one wheel against its path (pure) ----------------------------------------------


def reading(*binaries: object, requires_torch: str | None = None) -> Reading:
    return Reading("a" * 64, 10, (), wheel(*binaries), None, requires_torch, b"Metadata-Version: 2.1\n")  # type: ignore[arg-type]


def test_a_stable_abi_wheel_under_a_line_below_its_floor_is_refiled_at_its_floor() -> None:
    path = "kern/sm89/torch2.9-cu128/kern-1.0-cp312-cp312-linux_x86_64.whl"
    binary = so(
        needed=("libtorch.so", "libcudart.so.12"),
        sass="sm_89",
        toolkit=(12, 8),
        shim_symbols=("torch_list_size",),
    )  # fmt: skip  (torch_list_size: since 2.10)
    judged = judge_reading(path, reading(binary), LAYOUT, load_matrix(), "")
    assert isinstance(judged, Misfiled), judged
    assert judged.problems[0].startswith("torch: path says torch 2.9, its bytes need torch >= 2.10")
    assert judged.label == Label((12, 8), (2, 10)) and judged.refilable


def test_a_labelled_wheel_whose_label_contradicts_its_path_is_named_and_not_renamed() -> None:
    path = "kern/sm89/torch2.9-cu128/kern-1.0+cu130torch2.9-cp312-cp312-linux_x86_64.whl"
    binary = so(needed=("libcudart.so.13",), sass="sm_89", toolkit=(13, 0))
    judged = judge_reading(path, reading(binary), LAYOUT, load_matrix(), "")
    assert isinstance(judged, Misfiled), judged
    assert judged.problems[0] == "label: labelled cu130torch2.9 but filed under torch2.9-cu128"
    assert judged.label == Label((13, 0), (2, 9))
    assert judged.refilable  # its own label's cell: no rename


def test_a_wheel_without_device_code_serves_the_cell_its_path_names() -> None:
    path = "kern/sm120/torch2.9-cu128/kern-1.0-cp312-cp312-linux_x86_64.whl"
    judged = judge_reading(path, reading(so(needed=("libc.so.6",))), LAYOUT, load_matrix(), "now")
    assert isinstance(judged, IndexEntry), judged
    assert judged.cell == Cell("kern", GpuArch.parse("120"), Label((12, 8), (2, 9)))
    assert judged.added == "now" and judged.facts is not None


def test_serving_label_prefers_the_claimed_torch_line_then_the_cuda_major() -> None:
    name = WheelName.parse("kern-1.0-cp312-cp312-linux_x86_64.whl")
    facts = wheel(so(needed=("libcudart.so.13",), sass="sm_89", toolkit=(13, 0)))
    found = serving_label(
        Wheel(name, facts, filed_as=Label((12, 8), (2, 9))), Label((12, 8), (2, 9)), load_matrix()
    )
    assert found == Label((13, 0), (2, 9))  # torch-free: the same torch line, CUDA 13's build of it


def test_prechecks_and_duplicates_need_no_bytes() -> None:
    assert path_problem(LAYOUT, "kern/sm89/x.whl") is not None
    assert path_problem(LAYOUT, "kern/sm89/torch2.9-cu128/evil-1.0-cp312-cp312-linux_x86_64.whl") == (
        "wheel of evil filed under package kern"
    )
    assert path_problem(LAYOUT, "kern/sm89/torch2.9-cu128/kern-1.0-cp312-cp312-linux_x86_64.whl") is None
    a = "kern/sm89/torch2.9-cu128/kern-1.0-cp312-cp312-linux_x86_64.whl"
    b = "kern/sm89/torch2.9-cu128/kern-1.0+cu128torch2.9-cp312-cp312-linux_x86_64.whl"
    c = "kern/sm89/torch2.9-cu128/kern-1.0-cp311-cp311-linux_x86_64.whl"
    assert set(duplicates([a, b, c], Index(LAYOUT), LAYOUT)) == {a, b}


def test_an_extension_built_for_another_cpython_than_its_tag_is_a_claim_no_flag_accepts() -> None:
    name = WheelName.parse("kern-1.0-cp312-cp312-linux_x86_64.whl")
    member = so("kern/_C.cpython-311-x86_64-linux-gnu.so", extension=True)
    found = [str(c) for c in claims(Wheel(name, wheel(member)))]
    assert found == ["its tags say cp312, kern/_C.cpython-311-x86_64-linux-gnu.so is built for cp311"]
    assert claims(Wheel(WheelName.parse("kern-1.0-cp311-cp311-linux_x86_64.whl"), wheel(member))) == ()
    abi3 = so("kern/_C.abi3.so", extension=True)
    assert claims(Wheel(WheelName.parse("kern-1.0-cp39-abi3-linux_x86_64.whl"), wheel(abi3))) == ()


def test_publish_refuses_a_wheel_whose_extension_is_for_another_cpython(run: Run, tmp_path: Path) -> None:
    module = elf_bytes(symbols={"PyInit__C": True})
    made = make_wheel(tmp_path / "dist", "kern", "1.0", "cp312-cp312-linux_x86_64",
                      {"kern/_C.cpython-311-x86_64-linux-gnu.so": module})  # fmt: skip
    refused = run("publish", str(made), "--torch", "2.9", "--cuda", "12.8", "--sm", "89")
    assert refused.code == 2 and "Traceback" not in refused.err
    assert "its tags say cp312, kern/_C.cpython-311-x86_64-linux-gnu.so is built for cp311" in refused.err


# ---- a hand-made Hub dataset (the loopback Hub) -----------------------------------------------------


def test_a_hand_made_hub_dataset_is_adopted_in_one_commit_its_card_kept_no_wheel_read_twice(
    run: Run, hand: Path, make_loophub: Callable[..., LoopHub], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import CommitOperationAdd, HfApi

    monkeypatch.setenv("LIBRARIAN_HUB_COMMIT_OPS", "4")  # far fewer than it writes: still one commit
    hub = make_loophub()
    api = HfApi()
    api.create_repo("team/hand", repo_type="dataset")
    ops = [
        CommitOperationAdd(p.relative_to(hand).as_posix(), str(p))
        for p in sorted(hand.rglob("*"))
        if p.is_file()
    ]
    api.create_commit("team/hand", ops, commit_message="our wheels", repo_type="dataset")
    repo = "hf://datasets/team/hand"
    hub.log.clear()
    dry = run("reindex", "--adopt", "--refile", "--dry-run", "--repo", repo)
    assert dry.code == 0, dry.out + dry.err
    read = hub.log.downloaded()  # each distinct wheel read once (three copies of one cp312 wheel: once)
    assert len(read) == len(set(read)) == 3 and set(read) < wheels(hand)
    commits = hub.commits_made("team/hand")
    hub.log.clear()
    done = run("reindex", "--adopt", "--refile", "--repo", repo)
    assert done.code == 0, done.out + done.err
    again = [p for p in hub.log.downloaded() if p.endswith(".whl")]
    assert again == []  # the listing's sha256 finds each reading: no wheel downloaded again
    assert hub.commits_made("team/hand") == commits + 1  # the whole adoption: one commit
    assert done.out.splitlines()[-2] == "adopted 3 wheel(s) into hf://datasets/team/hand (2 refiled)"
    files = hub.files("team/hand")
    card = files["README.md"].decode()
    assert "# My wheels\n\nHand made, for our lab. Install with `pip --no-deps`.\n" in card  # their text kept
    assert "license: mit" in card and "<!-- librarian:begin -->" in card
    assert NO_GPU not in files and OTHER_CUDA not in files
    assert files["tinykern/sm80/torch2.9-cu130/tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"] == files[GOOD]
    assert run("verify", "--deep", "--repo", repo).code == 0
    got = run("pull", "tinykern", "--sm", "89", *PULL[:-1], repo, "-o", "out")
    assert got.code == 0 and got.out.startswith(f"{GOOD} -> "), got.err


def test_the_card_people_wrote_keeps_every_line_of_theirs() -> None:
    from librarian.card import merge_card

    theirs = "# Our wheels\n\n\nInstall:   `pip install x`  \n\n\n| a | b |\n"
    block = "<!-- librarian:begin -->\nours\n<!-- librarian:end -->\n"
    merged = merge_card(f"---\nlicense: mit\npretty_name: Ours\n---\n{theirs}", block, "team/hand")
    front, body = merged.split("\n---\n", 1)
    assert body.startswith(theirs) and body.endswith(block)
    assert front.splitlines()[1:3] == ["license: mit", "pretty_name: Ours"]
    again = merge_card(merged, block.replace("ours", "new"), "team/hand")
    assert again == merged.replace("\nours\n", "\nnew\n")  # only the block changes


@pytest.mark.parametrize("copied", [False, True])
def test_a_refile_killed_half_way_never_loses_the_wheel(run: Run, hand: Path, copied: bool) -> None:
    """The journal a kill leaves (the refiled copies' entries, the misfiled path to delete): the next change
    finishes it, and removes the misfiled copy only where its copies were written."""
    from librarian.stores.local_journal import JOURNAL_NAME, Journal

    store = open_store(str(hand))
    plan = reindex(store, LAYOUT, dry_run=True, adopting=Adopting(refile=True))
    assert {r.path for r in plan.refiled} == {NO_GPU, OTHER_CUDA}
    refiled = next(r for r in plan.refiled if r.path == NO_GPU)
    old = reindex(store, LAYOUT, adopting=Adopting())  # the as-is adoptions land first
    assert len(old.adopted) == 3
    before = open_store(str(hand))
    from librarian.stores.base import read_index

    index = read_index(before, LAYOUT)
    reading = Reading(sha(hand / NO_GPU), (hand / NO_GPU).stat().st_size)
    new_entries = [
        replace(index.by_path()[GOOD], path=p, cell=LAYOUT.parse_path(p)[0])  # type: ignore[index]
        for p in refiled.to
        if p not in index.by_path()
    ]
    assert new_entries and all(e.sha256 == reading.sha256 for e in new_entries)
    if copied:
        for e in new_entries:
            place(hand, e.path, hand / NO_GPU)
    journal = Journal.of_change(index, index.with_entries(added=new_entries), [NO_GPU])
    (hand / JOURNAL_NAME).write_bytes(journal.to_bytes())
    finished = run("reindex", "--repo", "hand")
    assert finished.code == 1, finished.err  # OTHER_CUDA is still unindexed: a finding
    assert "finished a change that was interrupted" in finished.err
    assert (hand / NO_GPU).exists() is not copied  # removed only once its copies are in place
    assert all((hand / e.path).exists() is copied for e in new_entries)
    again = run("reindex", "--adopt", "--refile", "--repo", "hand")  # what is left is found again
    assert again.code == 0, again.out
    assert run("verify", "--deep", "--repo", "hand").code == 0


def test_relabel_renames_only_when_asked_and_verify_is_clean(run: Run, hand: Path) -> None:
    assert run("reindex", "--relabel", "--repo", "hand").code == 2  # only with --adopt
    done = run("reindex", "--adopt", "--refile", "--relabel", "--repo", "hand")
    assert done.code == 0, done.out + done.err
    assert (
        done.out.splitlines()[-1] == "adopted 1 wheel(s) into hand (4 relabelled)"
    )  # the labelled one as is
    assert f" relabelled  {GOOD} -> sm89 under torch2.9-cu130 as " in done.out
    names = {p.rsplit("/", 1)[-1] for p in wheels(hand)}
    assert all("+cu130torch2.9" in n for n in names), names  # every wheel now carries its label
    assert {n.split("-")[2] for n in names} == {"cp310", "cp311", "cp312"}
    assert not (hand / GOOD).exists() and not (hand / NO_GPU).exists()
    assert run("verify", "--deep", "--repo", "hand").code == 0
    got = run("pull", "tinykern", "--sm", "89", *PULL, "-o", "out")
    assert got.code == 0 and "+cu130torch2.9-cp312" in got.out, got.err


def test_a_wheel_whose_wheel_file_names_other_tags_than_its_filename_is_adopted(
    run: Run, tmp_path: Path
) -> None:
    """cupy-cuda12x's shape: WHEEL says linux_x86_64 under a manylinux2014 name; pip and uv read the filename."""
    renamed = "tinykern/sm89/torch2.9-cu130/tinykern-0.1.0-cp312-cp312-manylinux2014_x86_64.whl"
    place(tmp_path / "hand", renamed, sample("cp312"))
    inspected = run("inspect", str(tmp_path / "hand" / renamed))
    assert (
        "! WHEEL Tag: cp312-cp312-linux_x86_64, filename says cp312-cp312-manylinux2014_x86_64"
        in inspected.out
    )
    done = run("reindex", "--adopt", "--repo", "hand")
    assert done.code == 0 and f"adopted  {renamed}" in done.out, done.out
    assert run("verify", "--deep", "--repo", "hand").code == 0
