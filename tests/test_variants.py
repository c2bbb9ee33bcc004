"""Wheel variants (PEP 817 / PEP 825 drafts, as uv 0.13.9 reads them): the files a store writes with
``--variants``, their properties against the judgement, and how publish, pull, gc, verify and reindex keep
them in step. Real uv picking among them is ``tests/test_real_uv_variants.py`` (opt-in)."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile  # the test oracle for RECORD

from librarian.coords import MajorMinor, WheelName
from librarian.demands import Demand, Wheel, judge, properties
from librarian.gpus import known_gpus
from librarian.machine import Gpu, Machine, Probed
from librarian.variant_format import PROVIDERS, SCHEMA_URL, VariantLabel
from librarian.variants import VariantsDocument
from librarian.wheel.deep import read_deep
from tests.builders import make_wheel, torch_extension_so
from tests.conftest import Run
from tests.cuda_fixtures import elf_bytes
from tests.demand_builders import so
from tests.demand_builders import wheel as demand_wheel
from tests.gpu_wheels import gpu_sos, isolate_machine, so_wheel
from tests.loophub.server import LoopHub

LINE = ("--cuda", "13.0", "--torch", "2.9")
TAGS = "cp311-cp311-linux_x86_64"
LABEL = re.compile(r"^[0-9a-z_.]+$")
LINES: tuple[MajorMinor, ...] = ((2, 11), (2, 10), (2, 9), (2, 8))


@pytest.fixture(scope="session")
def sos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return gpu_sos(tmp_path_factory)


@pytest.fixture(autouse=True)
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_machine(monkeypatch, tmp_path / "bin")


def stable_so() -> bytes:
    """A ``.so`` that links libtorch and imports only torch's stable C shim: bound to no one torch line."""
    return elf_bytes(needed=("libtorch.so",), symbols={"aoti_torch_empty_strided": False})


def provider_selects(value: str, capability: MajorMinor) -> bool:
    """uv 0.13.9's NVIDIA provider, as probed from the binary: ``NN_real`` for every arch of the GPU's major
    at or below its minor, ``N0_virtual`` for its major (see tests/test_real_uv_variants.py, which checks
    this rule against uv itself)."""
    number, _, kind = value.partition("_")
    major, minor = int(number) // 10, int(number) % 10
    if kind == "real":
        return major == capability[0] and minor <= capability[1]
    return major == capability[0] and minor == 0


def facts_of(path: Path) -> Wheel:
    name = WheelName.parse(path.name)
    read = read_deep(path, name, record=False, jobs=1)
    assert read.facts is not None
    return Wheel(name, read.facts)


@pytest.mark.parametrize(
    "fixture", ["sm_80", "sm_86", "sm_90", "torch_list", "multi", "ptx", "special", "sm75"]
)
def test_every_gpu_a_variant_is_picked_for_runs_it_by_the_judgement(
    sos: dict[str, Path], tmp_path: Path, fixture: str
) -> None:
    wheel = facts_of(so_wheel(tmp_path, sos[fixture], version="1.0+cu130torch2.9", tags=TAGS))
    props = properties(wheel, LINES)
    archs = next((values for ns, feature, values in props.values if feature == "sm_arch"), ())
    for gpu in known_gpus():
        machine = Machine(gpus=Probed.found((Gpu(0, "gpu", gpu.capability),), "test"))
        gpu_verdict = judge(wheel, machine).verdict(Demand.GPU)  # the machine's other parts are unknown here
        runs = gpu_verdict.ok is True and not gpu_verdict.partly
        if any(provider_selects(v, gpu.capability) for v in archs):
            assert runs, (fixture, gpu.capability, archs)
    # and each value names code the bytes carry: SASS of that arch, or PTX of that generation or an older one
    sass = {f"{a.major * 10 + a.minor}_real" for b in wheel.facts.binaries for a in b.sass}  # type: ignore[union-attr]
    oldest_ptx = min((a.major for b in wheel.facts.binaries for a in b.ptx), default=99)  # type: ignore[union-attr]
    virtual = {v for v in archs if v.endswith("_virtual")}
    assert set(archs) - virtual <= sass and all(int(v.partition("_")[0]) // 10 >= oldest_ptx for v in virtual)


def test_properties_of_the_common_builds(sos: dict[str, Path], tmp_path: Path) -> None:
    def props(fixture: str) -> dict[tuple[str, str], tuple[str, ...]]:
        wheel = facts_of(so_wheel(tmp_path / fixture, sos[fixture], version="1.0+cu130torch2.9", tags=TAGS))
        return {(ns, f): v for ns, f, v in properties(wheel, LINES).values}

    torch_list = props("torch_list")  # TORCH_CUDA_ARCH_LIST="8.0;8.6;9.0+PTX"
    assert torch_list[("nvidia", "sm_arch")] == (
        "80_real", "86_real", "90_real", "90_virtual", "100_virtual", "120_virtual"
    )  # fmt: skip
    assert torch_list[("nvidia", "cuda_version_lower_bound")][0].startswith(("12.", "13."))
    assert ("abi_dependency", "torch") not in torch_list  # it links no torch
    assert props("sm_86")[("nvidia", "sm_arch")] == ("86_real",)
    assert props("ptx")[("nvidia", "sm_arch")] == ("80_virtual", "90_virtual", "100_virtual", "120_virtual")


def test_arch_specific_code_is_said_where_its_value_reaches_that_gpu_alone(
    sos: dict[str, Path], tmp_path: Path
) -> None:
    """sm_90a runs on sm90 alone, and 90_real reaches no other known GPU: uv picks it on an H100, as pull
    serves it there. sm_100a does not run on sm103, which 100_real reaches too: left out, said why."""
    wheel = facts_of(so_wheel(tmp_path, sos["sm_90a"], version="1.0+cu130torch2.9", tags=TAGS))
    props = properties(wheel, LINES)
    assert {(ns, f): v for ns, f, v in props.values}[("nvidia", "sm_arch")] == ("90_real",)
    only_100a = demand_wheel(
        so(sass="sm_100a", toolkit=(13, 0)), name="kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    )
    props = properties(Wheel(WheelName.parse(only_100a.filename), only_100a), LINES)
    assert not props.says_gpu and props.unsayable is not None and "no sm_arch value" in props.unsayable
    assert any("sm_100a" in r and "100_real reaches sm103, sm107 too" in r for r in props.left_out), (
        props.left_out
    )


@pytest.mark.parametrize(("cpu", "says"), [("x86_64", True), ("aarch64", False)])
def test_sm_120a_is_said_where_no_gpu_of_the_wheels_platform_shares_its_value(cpu: str, says: bool) -> None:
    """Issue 52, item 3: 120_real also reaches sm121, which ships only with an Arm CPU (DGX Spark): an
    x86_64 (or Windows) wheel with sm_120a code says 120_real, so uv offers it to an RTX 50 card as pull
    serves it there; an aarch64 one cannot (sm_120a does not run on sm121)."""
    only_120a = demand_wheel(
        so(sass="sm_120a", toolkit=(13, 0), cpu=cpu),
        name=f"kern-1.0+cu130torch2.9-cp311-cp311-linux_{cpu}.whl",
    )
    props = properties(Wheel(WheelName.parse(only_120a.filename), only_120a), LINES)
    sm_arch = {(ns, f): v for ns, f, v in props.values}.get(("nvidia", "sm_arch"))
    assert (sm_arch == ("120_real",)) is says, props
    if not says:
        assert any("120_real reaches sm121 too" in r for r in props.left_out), props.left_out


def test_a_cuda_12_build_is_never_said_to_run_natively_on_a_board_with_no_cuda_12_driver() -> None:
    """Issue 52, item 3: Xavier (sm72) never gets a driver past CUDA 11.4; an unlabelled aarch64 wheel with
    sm_70 SASS built by CUDA 12.9 is not filed there, as doctor calls that machine impossible."""
    from librarian.demands import cells

    facts = demand_wheel(
        so(sass="sm_70", toolkit=(12, 9), cpu="aarch64"), name="k-1.0-cp311-cp311-linux_aarch64.whl"
    )
    found = [f"sm{c.sm.sm}" for c in cells(Wheel(WheelName.parse(facts.filename), facts))]
    assert found == ["sm75"], found  # not sm72 (Xavier); sm70 (V100) ships with no Arm CPU
    old = demand_wheel(
        so(sass="sm_70", toolkit=(11, 4), cpu="aarch64"), name="k-1.0-cp311-cp311-linux_aarch64.whl"
    )
    assert "sm72" in [f"sm{c.sm.sm}" for c in cells(Wheel(WheelName.parse(old.filename), old))]


def test_a_wheel_mixing_sm_100a_and_sm_100_code_never_says_100_real(tmp_path: Path) -> None:
    """One member has sm_100a only, another plain sm_100: on sm103 (which 100_real reaches) the first has no
    code, so 100_real would send uv to a GPU the wheel does not wholly run on (issue 43, item 4's input)."""
    facts = demand_wheel(
        so("kern/_a.so", sass="sm_100a", toolkit=(13, 0)),
        so("kern/_b.so", sass="sm_100", toolkit=(13, 0)),
        name="kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
    )
    props = properties(Wheel(WheelName.parse(facts.filename), facts), LINES)
    archs = {(ns, f): v for ns, f, v in props.values}.get(("nvidia", "sm_arch"), ())
    assert "100_real" not in archs
    assert any(
        r.startswith("100_real: the judgement does not run it wholly on sm103") for r in props.left_out
    )


def test_no_value_is_written_that_no_gpus_provider_reports(tmp_path: Path) -> None:
    """PTX for 7.5 or 8.9 would be 75_virtual, 89_virtual: uv's provider says PTX only as N0_virtual."""
    facts = demand_wheel(
        so(sass="sm_80", ptx="compute_89", toolkit=(13, 0)),
        name="kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
    )
    props = properties(Wheel(WheelName.parse(facts.filename), facts), LINES)
    archs = {(ns, f): v for ns, f, v in props.values}[("nvidia", "sm_arch")]
    assert "89_virtual" not in archs and "80_real" in archs
    assert any(r.startswith("89_virtual: no GPU's NVIDIA provider reports it") for r in props.left_out)


def test_a_member_without_the_code_keeps_the_value_out(sos: dict[str, Path], tmp_path: Path) -> None:
    # torch_list has sm_90, sm_86 does not: the wheel as a whole runs on no 9.x GPU by SASS.
    files = {
        "kern/__init__.py": b"",
        "kern/_a.so": sos["torch_list"].read_bytes(),
        "kern/_b.so": sos["sm_86"].read_bytes(),
    }
    path = make_wheel(tmp_path, "kern", "1.0+cu130torch2.9", TAGS, files)
    props = properties(facts_of(path), LINES)
    archs = {(ns, f): v for ns, f, v in props.values}[("nvidia", "sm_arch")]
    assert "86_real" in archs and "90_real" not in archs
    assert any(r.startswith("90_real: the judgement does not run it wholly on sm90") for r in props.left_out)


def test_the_torch_binding_becomes_abi_dependency(tmp_path: Path) -> None:
    exact = make_wheel(tmp_path / "e", "k", "1.0+cu130torch2.9", TAGS, {"k/_C.so": torch_extension_so()})
    stable = make_wheel(tmp_path / "s", "k", "1.0+cu130torch2.9", TAGS, {"k/_C.so": stable_so()})
    free = make_wheel(
        tmp_path / "f", "k", "1.0+cu130torch2.9", TAGS, {"k/_C.so": elf_bytes(needed=("libc.so.6",))}
    )

    def torch_of(path: Path) -> tuple[str, ...] | None:
        values = {(ns, f): v for ns, f, v in properties(facts_of(path), LINES).values}
        return values.get(("abi_dependency", "torch"))

    assert torch_of(exact) == ("2.9",)
    assert torch_of(stable) == ("2.9", "2.10", "2.11")  # every known line from its floor, same major
    assert torch_of(free) is None


def variant_files(store: Path) -> list[Path]:
    """The variant wheels a folder store holds, one per build."""
    return sorted((store / "variant-wheels").glob("*/*.whl"))


def recorded_variant(store: Path, path_prefix: str) -> Path:
    """The variant wheel the index records for the entry whose path starts with ``path_prefix``."""
    for shard in (store / "index").glob("*.json"):
        for w in json.loads(shard.read_text())["wheels"]:
            if w["path"].startswith(path_prefix) and "variant" in w:
                package = w["path"].split("/", 1)[0]
                return store / "variant-wheels" / package / w["variant"]["filename"]
    raise AssertionError(f"no variant recorded for {path_prefix}")


def label_of(variant: Path) -> str:
    return variant.stem.rsplit("-", 1)[1]


def publish_two_builds(run: Run, sos: dict[str, Path], tmp_path: Path, *extra: str) -> Path:
    """Version 1.0 built twice: once with sm_86 code (filed sm86, sm89), once with sm_90 (filed sm90)."""
    a = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    b = so_wheel(tmp_path / "b", sos["sm_90"], version="1.0", tags=TAGS)
    for wheel in (a, b):
        result = run("publish", str(wheel), *LINE, "--variants", *extra)
        assert result.code == 0, result.err
        assert "variant wheel(s) (for uv)" in result.out
    return tmp_path / "wheelhouse"


def test_the_store_writes_one_variant_wheel_per_build_and_variants_json(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Item 1 of issue 43: the sm_86 build is filed under sm86 and sm89, and has one variant wheel, not one
    per cell; its label names the build (its GPU span and digest), never a cell."""
    store = publish_two_builds(run, sos, tmp_path)
    variants = variant_files(store)
    assert len(variants) == 2  # two builds, three cells
    sm86, sm89, sm90 = (recorded_variant(store, f"kern/sm{s}/") for s in (86, 89, 90))
    assert sm86 == sm89 != sm90 and sorted([sm86, sm90]) == variants
    labels = {label_of(sm86), label_of(sm90)}
    assert {str(VariantLabel.parse(label).gpus) for label in labels} == {"sm86", "sm90"}
    assert sm86.name == f"kern-1.0-cp311-cp311-linux_x86_64-{label_of(sm86)}.whl"
    raw = (store / "variants" / "kern-1.0-variants.json").read_bytes()
    doc = json.loads(raw)
    assert VariantsDocument.parse(raw).render() == raw  # the typed document round-trips
    assert doc["$schema"] == SCHEMA_URL
    assert doc["default-priorities"] == {"namespace": ["nvidia", "abi_dependency"]}
    assert doc["providers"] == {ns: dict(p) for ns, p in PROVIDERS.items()}
    assert sorted(doc["variants"]) == sorted(labels)
    assert all(LABEL.match(label) for label in doc["variants"])
    assert doc["variants"][label_of(sm86)]["nvidia"]["sm_arch"] == ["86_real"]
    assert doc["variants"][label_of(sm90)]["nvidia"]["sm_arch"] == ["90_real"]
    page = (store / "variants" / "kern.html").read_text()
    assert 'href="kern-1.0-variants.json"' in page
    assert f'href="../variant-wheels/kern/{sm90.name}#sha256=' in page
    assert page.count(sm86.name + "</a>") == 1  # one link, however many cells
    sources = {
        sm86: store / "kern/sm86/torch2.9-cu130/kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
        sm90: store / "kern/sm90/torch2.9-cu130/kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
    }
    for variant, source in sources.items():
        # The variant filename has one field more than the label wheel's, and the public version.
        assert len(variant.stem.split("-")) == len(source.stem.split("-")) + 1
        with WheelFile(variant) as wf:  # RECORD holds for every member: the oracle checks each hash as read
            names = wf.namelist()
            for name in names:
                wf.read(name)
            assert wf.read("kern-1.0.dist-info/METADATA").startswith(
                b"Metadata-Version: 2.1\nName: kern\nVersion: 1.0\n"
            )
            label = label_of(variant)
            own = json.loads(wf.read("kern-1.0.dist-info/variant.json"))
            assert list(own["variants"]) == [label]
            assert own["variants"][label] == doc["variants"][label]
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(variant) as var:
            ours = {
                i.filename.replace("1.0+cu130torch2.9.dist-info", "1.0.dist-info"): i for i in src.infolist()
            }
            theirs = {i.filename: i for i in var.infolist()}
            assert set(theirs) - set(ours) == {"kern-1.0.dist-info/variant.json"}
            for name, info in ours.items():
                if not name.endswith(("/METADATA", "/RECORD")):  # the same bytes, copied raw
                    assert (theirs[name].CRC, theirs[name].compress_size) == (info.CRC, info.compress_size)
    size = sum(p.stat().st_size for p in store.rglob("*.whl"))
    plain = sum(p.stat().st_size for p in store.glob("kern/*/*/*.whl"))
    assert size - plain == sum(p.stat().st_size for p in variants)  # one extra copy per build, no more


def test_pull_and_the_pip_pages_ignore_variant_wheels(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    store = publish_two_builds(run, sos, tmp_path)
    got = run("pull", "kern", "--sm", "89", "--torch", "2.9", "--python", "3.11", "-o", "out")
    assert got.code == 0, got.err
    assert [p.name for p in (tmp_path / "out").iterdir()] == [
        "kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    ]
    for page in (store / "pages").rglob("*.html"):
        assert "variant-wheels" not in page.read_text()
    listed = run("ls")
    assert "2 variant wheel(s) for 3 filed wheel(s)" in listed.out
    assert "one extra copy of each build in a folder" in listed.out


def test_a_variant_made_under_the_older_schema_stays_faithful(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 52, item 7: variant.json is written under PEP 850's v0.2.0 schema (uv 0.13.9 reads it); a store's
    variant made before, under PEP 825's v0.1.1, is still its source's: verify --deep is clean, reindex
    leaves it."""
    import hashlib

    from librarian.variant_format import READ_SCHEMAS

    store = publish_two_builds(run, sos, tmp_path)
    sm90 = recorded_variant(store, "kern/sm90/")
    with zipfile.ZipFile(sm90) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    (name,) = [n for n in members if n.endswith("/variant.json")]
    doc = json.loads(members[name])
    assert doc["$schema"] == SCHEMA_URL == "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
    members[name] = (
        json.dumps({**doc, "$schema": READ_SCHEMAS[1]}, indent=2, sort_keys=True) + "\n"
    ).encode()
    with zipfile.ZipFile(sm90, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    index = json.loads((store / "index/kern.json").read_text())
    for w in index["wheels"]:
        if w.get("variant", {}).get("filename") == sm90.name:
            w["variant"].update(
                sha256=hashlib.sha256(sm90.read_bytes()).hexdigest(), size=sm90.stat().st_size
            )
    (store / "index/kern.json").write_text(json.dumps(index))
    before = sm90.read_bytes()
    again = run("reindex")  # the index rewritten by hand above is put in order; the variant is left as it is
    assert again.code == 0 and "variant-wheels" not in again.out and sm90.read_bytes() == before, again.out
    assert run("verify", "--deep").code == 0


def test_gc_verify_and_reindex_keep_variants_in_step(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    store = publish_two_builds(run, sos, tmp_path)
    assert run("verify", "--deep").code == 0
    sm90 = recorded_variant(store, "kern/sm90/")
    good = sm90.read_bytes()
    sm90.unlink()
    missing = run("verify")
    assert (
        missing.code == 1
        and "its variant wheel is missing (reindex --variants makes it again)" in missing.out
    )
    restored = run("reindex")
    assert restored.code == 0 and f"made  variant-wheels/kern/{sm90.name}" in restored.out
    assert sm90.read_bytes() == good  # the same bytes again: made deterministically
    # Other member bytes under the recorded name and hash: only --deep can tell.
    with zipfile.ZipFile(sm90) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    members["kern/_C.so"] = members["kern/_C.so"][:-1] + b"\x01"
    with zipfile.ZipFile(sm90, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    index = json.loads((store / "index/kern.json").read_text())
    import hashlib

    for w in index["wheels"]:
        if w.get("variant", {}).get("filename") == sm90.name:
            w["variant"]["sha256"] = hashlib.sha256(sm90.read_bytes()).hexdigest()
            w["variant"]["size"] = sm90.stat().st_size
    (store / "index/kern.json").write_text(json.dumps(index))
    deep = run("verify", "--deep")
    assert deep.code == 1
    assert (
        "not the variant of kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl: kern/_C.so: other bytes"
        in deep.out
    )
    # reindex judges each variant as verify --deep does (issue 54, item 3): the tampered one is made again
    remade = run("reindex")
    assert remade.code == 0 and f"made  variant-wheels/kern/{sm90.name}" in remade.out, (
        remade.out + remade.err
    )
    assert "not the variant of" in remade.err and sm90.read_bytes() == good
    assert run("verify", "--deep").code == 0
    page = (store / "variants" / "kern.html").read_text()  # the page follows: it links the bytes made again
    assert f"{sm90.name}#sha256={hashlib.sha256(good).hexdigest()}" in page
    assert "nothing to reindex" in run("reindex").out  # judged faithful once: not read again
    stray = store / "variant-wheels/kern/kern-1.0-cp311-cp311-linux_x86_64-sm99.0badc0de.whl"
    stray.write_bytes(good)
    orphan = run("verify")
    assert "sm99.0badc0de.whl: a variant wheel no index entry records" in orphan.out
    stray.unlink()
    gone = run("gc", "--drop-torch", "2.9", "--yes", "--allow-empty")
    assert gone.code == 0, gone.err
    assert not list(store.rglob("*.whl")) and not (store / "variants").exists()


def test_reindex_variants_adds_them_to_a_store_made_without(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    wheel = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    assert run("publish", str(wheel), *LINE).code == 0
    store = tmp_path / "wheelhouse"
    assert not (store / "variants").exists()
    planned = run("reindex", "--variants", "--dry-run")
    assert (
        planned.code == 0 and "1 variant wheel(s) made" in planned.out and not (store / "variants").exists()
    )
    made = run("reindex", "--variants")
    assert made.code == 0 and "1 variant wheel(s) made" in made.out  # one build in sm86 and sm89: one copy
    assert len(variant_files(store)) == 1
    assert (store / "variants" / "kern-1.0-variants.json").is_file()
    assert run("verify", "--deep").code == 0
    again = run("reindex", "--variants")
    assert "nothing to reindex" in again.out


def test_the_project_setting_turns_variants_on(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.librarian]\nvariants = true\n")
    wheel = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    assert run("publish", str(wheel), *LINE).code == 0
    assert (tmp_path / "wheelhouse/variants/kern-1.0-variants.json").is_file()
    (tmp_path / "pyproject.toml").write_text('[tool.librarian]\nvariants = "yes"\n')
    bad = run("publish", str(wheel), *LINE)
    assert bad.code == 2 and "librarian setting 'variants' must be true or false" in bad.err


def test_an_sm_90a_only_wheel_gets_a_variant_for_sm90(run: Run, sos: dict[str, Path], tmp_path: Path) -> None:
    wheel = so_wheel(tmp_path / "a", sos["sm_90a"], version="1.0", tags=TAGS)
    result = run("publish", str(wheel), *LINE, "--variants")
    assert result.code == 0, result.err
    (variant,) = variant_files(tmp_path / "wheelhouse")
    assert label_of(variant).startswith("sm90.")
    with zipfile.ZipFile(variant) as zf:
        doc = json.loads(zf.read("kern-1.0.dist-info/variant.json"))
    (props,) = doc["variants"].values()
    assert props["nvidia"]["sm_arch"] == ["90_real"]


def test_on_the_hub_a_variant_goes_in_its_wheel_s_commit(
    run: Run, loophub: LoopHub, sos: dict[str, Path], tmp_path: Path
) -> None:
    repo = ("--repo", "hf://datasets/team/wheels")
    wheel = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    first = run("publish", str(wheel), *LINE, "--variants", "--create", *repo)
    assert first.code == 0, first.err
    commits = loophub.commits_made("team/wheels")
    files = loophub.files("team/wheels")
    assert "variants/kern-1.0-variants.json" in files
    card = files["README.md"].decode()
    assert (
        "uv pip install --preview-features wheel-variants --no-deps --reinstall --no-index kern --find-links "
        in card
    )
    assert "/datasets/team/wheels/resolve/main/variants/kern.html" in card
    (variant,) = [p for p in files if p.startswith("variant-wheels/kern/")]  # sm86 and sm89: one build
    assert variant.startswith("variant-wheels/kern/kern-1.0-cp311-cp311-linux_x86_64-sm86.")
    assert run("verify", "--deep", *repo).code == 0
    gone = run("gc", "--drop-torch", "2.9", "--yes", "--allow-empty", *repo)
    assert gone.code == 0, gone.err
    assert (
        loophub.commits_made("team/wheels") == commits + 1
    )  # the wheels, their variants and the json: one commit
    left = loophub.files("team/wheels")
    assert not [p for p in left if p.endswith(".whl") or p.startswith("variants/")]


def test_on_the_hub_reindex_deep_makes_a_tampered_variant_again(
    run: Run, loophub: LoopHub, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 54, item 3: a variant with other member bytes, the index's sha256 and size made to match: plain
    reindex on the Hub reads no wheel; --deep judges each variant against its source and makes it again."""
    import hashlib

    from huggingface_hub import CommitOperationAdd, HfApi

    repo = ("--repo", "hf://datasets/team/wheels")
    wheel = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    assert run("publish", str(wheel), *LINE, "--variants", "--create", *repo).code == 0
    files = loophub.files("team/wheels")
    (path,) = [p for p in files if p.startswith("variant-wheels/kern/")]
    good = files[path]
    tampered = tmp_path / "tampered.whl"
    tampered.write_bytes(good)
    with zipfile.ZipFile(tmp_path / "a" / wheel.name) as zf, zipfile.ZipFile(tampered, "a") as out:
        out.writestr("kern/extra.so", zf.read("kern/_C.so"))  # an extra member
    index = json.loads(files["index/kern.json"])
    for w in index["wheels"]:
        w["variant"].update(
            sha256=hashlib.sha256(tampered.read_bytes()).hexdigest(), size=tampered.stat().st_size
        )
    ops = [
        CommitOperationAdd(path, str(tampered)),
        CommitOperationAdd("index/kern.json", json.dumps(index).encode()),
    ]
    HfApi().create_commit("team/wheels", ops, commit_message="tamper", repo_type="dataset")
    assert run("verify", "--deep", *repo).code == 1

    assert "nothing to reindex" in run("reindex", *repo).out  # on the Hub, a plain reindex reads no wheel
    remade = run("reindex", "--deep", *repo)

    assert remade.code == 0 and f"made  {path}" in remade.out, remade.out + remade.err
    assert loophub.files("team/wheels")[path] == good
    assert run("verify", "--deep", *repo).code == 0
    assert "nothing to reindex" in run("reindex", "--deep", *repo).out


def test_fan_in_carries_variants_to_the_one_commit(
    run: Run, loophub: LoopHub, sos: dict[str, Path], tmp_path: Path
) -> None:
    repo = ("--repo", "hf://datasets/team/wheels")
    a = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    b = so_wheel(tmp_path / "b", sos["sm_90"], version="1.0", tags=TAGS)
    assert (
        run("publish", str(b), *LINE, "--variants", "--create", *repo).code == 0
    )  # the repo, with a first wheel
    # the sm_86 build, filed under sm86 and sm89: two staged entries, one variant wheel
    staged = run("publish", str(a), *LINE, "--variants", "--stage", "--manifest", "m.json", *repo)
    assert staged.code == 0, staged.err
    merged = run("reindex", "--manifest", "m.json", *repo)
    assert merged.code == 0, merged.err
    doc = json.loads(loophub.files("team/wheels")["variants/kern-1.0-variants.json"])
    assert sorted(VariantLabel.parse(label).gpus for label in doc["variants"]) == ["sm86", "sm90"]
    files = loophub.files("team/wheels")
    assert len([p for p in files if p.startswith("variant-wheels/kern/")]) == 2
    assert run("verify", "--deep", *repo).code == 0


def test_the_driver_floor_is_the_judgements_for_what_the_line_loads() -> None:
    """bitsandbytes-like: one member per CUDA line; the cu128 build's code is its cuda128 member's. Its SASS
    runs on any CUDA 12 driver (minor-version compatibility, as pull says): the floor is 12.0, not the
    toolkit's 12.8. Where a GPU would JIT its PTX, the driver must know that ISA: the toolkit's."""
    facts = demand_wheel(
        so("bnb/libbnb_cuda128.so", sass="sm_80", toolkit=(12, 8), needed=("libcudart.so.12",)),
        so("bnb/libbnb_cuda132.so", sass="sm_80 sm_120", toolkit=(13, 2), needed=("libcudart.so.13",)),
        name="bnb-1.0+cu128torch2.9-py3-none-linux_x86_64.whl",
    )
    props = properties(Wheel(WheelName.parse(facts.filename), facts), LINES)
    values = {(ns, f): v for ns, f, v in props.values}
    assert values[("nvidia", "cuda_version_lower_bound")] == ("12.0",)
    assert values[("nvidia", "sm_arch")] == ("80_real",)  # sm_120 is only in the cu132 build
    covered = demand_wheel(
        so(sass="sm_120", ptx="compute_120", toolkit=(13, 2)),
        name="kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
    )
    values = {
        (ns, f): v for ns, f, v in properties(Wheel(WheelName.parse(covered.filename), covered), LINES).values
    }
    assert values[("nvidia", "sm_arch")] == ("120_real", "120_virtual")
    # SASS serves every GPU 120_virtual selects, so no GPU JITs: any CUDA 13 driver runs it.
    assert values[("nvidia", "cuda_version_lower_bound")] == ("13.0",)
    cupy = demand_wheel(
        so(sass="sm_80", ptx="compute_80", toolkit=(13, 2)),
        name="kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
    )
    values = {
        (ns, f): v for ns, f, v in properties(Wheel(WheelName.parse(cupy.filename), cupy), LINES).values
    }
    # issue 52, item 7: its PTX runs by JIT on every later generation (sm90, sm100, sm120: not sm110, which
    # ships only with an Arm CPU); those GPUs JIT, so the driver must know the toolkit's ISA
    assert values[("nvidia", "sm_arch")] == (
        "80_real",
        "80_virtual",
        "90_virtual",
        "100_virtual",
        "120_virtual",
    )
    assert values[("nvidia", "cuda_version_lower_bound")] == ("13.2",)
    jit = demand_wheel(
        so(sass="sm_80", ptx="compute_90", toolkit=(13, 2)),
        name="kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl",
    )
    values = {(ns, f): v for ns, f, v in properties(Wheel(WheelName.parse(jit.filename), jit), LINES).values}
    assert values[("nvidia", "sm_arch")] == ("80_real", "90_virtual", "100_virtual", "120_virtual")
    assert values[("nvidia", "cuda_version_lower_bound")] == ("13.2",)  # sm90 would JIT: the ISA's toolkit


def test_each_build_of_a_release_gets_its_own_label_and_properties(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Two builds of kern 1.0 sharing a cell (two Pythons, other code): each gets its variant, its label
    naming its build, so no label can mean two sets of properties (it once meant the cell, and the second
    build went without)."""
    a = so_wheel(tmp_path / "a", sos["sm_86"], version="1.0", tags=TAGS)
    b = so_wheel(tmp_path / "b", sos["torch_list"], version="1.0", tags="cp312-cp312-linux_x86_64")
    assert run("publish", str(a), *LINE, "--variants").code == 0
    second = run("publish", str(b), *LINE, "--variants")
    assert second.code == 0 and "no variant wheel" not in second.err, second.err
    store = tmp_path / "wheelhouse"
    doc = json.loads((store / "variants/kern-1.0-variants.json").read_text())
    first, other = (
        label_of(recorded_variant(store, "kern/sm86/torch2.9-cu130/kern-1.0+cu130torch2.9-cp311")),
        label_of(recorded_variant(store, "kern/sm86/torch2.9-cu130/kern-1.0+cu130torch2.9-cp312")),
    )
    assert first != other and sorted(doc["variants"]) == sorted({first, other})
    assert doc["variants"][first]["nvidia"]["sm_arch"] == ["86_real"]
    assert len(doc["variants"][other]["nvidia"]["sm_arch"]) > 1
    assert len(variant_files(store)) == 2
    assert run("verify", "--deep").code == 0


def test_a_variant_recorded_with_other_bytes_than_its_name_holds_is_refused(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """A store whose index records a build's variant filename with other bytes (bent): publishing the build
    again into another cell files it without a variant rather than serve either copy."""
    store = publish_two_builds(run, sos, tmp_path)
    shard = store / "index/kern.json"
    index = json.loads(shard.read_text())
    for w in index["wheels"]:
        if "variant" in w:
            w["variant"]["sha256"] = "0" * 64
    shard.write_text(json.dumps(index))
    again = run(
        "publish", str(next((tmp_path / "a").glob("*.whl"))), *LINE, "--variants", "--sm", "80", "--trust-sm"
    )
    assert again.code == 0, again.err
    assert "is filed with other bytes" in again.err


def test_a_republish_writes_no_copy_for_cells_that_hold_the_bytes(
    run: Run, sos: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from librarian.ops.store import variant_wheels

    publish_two_builds(run, sos, tmp_path)
    made: list[str] = []
    real = variant_wheels.write_variant
    monkeypatch.setattr(variant_wheels, "write_variant", lambda *a, **k: made.append(a[2]) or real(*a, **k))
    again = run("publish", str(next((tmp_path / "a").glob("*.whl"))), *LINE, "--variants")
    assert again.code == 0 and "unchanged" in again.out
    assert made == []  # a wheel-sized copy per cell, for nothing, before


def test_a_bent_variant_in_the_index_never_makes_gc_delete_a_kept_wheel(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """An entry whose recorded variant names another, kept wheel of its folder (a hostile shard, or a
    staged manifest carrying one): plain verify reports it, and gc, removing that entry, leaves the kept
    wheel (and that wheel's own variant) in place. Fails on the code before: gc deleted the kept wheel."""
    store = publish_two_builds(run, sos, tmp_path)
    c = so_wheel(tmp_path / "c", sos["sm_86"], version="0.9", tags=TAGS)
    assert run("publish", str(c), *LINE, "--variants").code == 0
    folder = store / "kern/sm89/torch2.9-cu130"
    victim = folder / "kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    victim_variant = recorded_variant(store, "kern/sm89/torch2.9-cu130/kern-1.0+")
    assert victim.is_file() and victim_variant.is_file()
    shard = store / "index/kern.json"
    index = json.loads(shard.read_text())
    kept = next(w for w in index["wheels"] if w["path"].endswith(victim.name))
    for w in index["wheels"]:
        if w["path"].startswith("kern/sm89/") and "kern-0.9" in w["path"]:  # the one gc removes
            w["variant"] = dict(kept["variant"])  # names the kept wheel's variant
    index["schema"] = max(index.get("schema", 3), 3)
    shard.write_text(json.dumps(index))
    checked = run("verify")
    assert checked.code == 1
    assert f"the index entry is bent: its variant {victim_variant.name} is not its own" in checked.out
    gone = run("gc", "--keep-versions", "1", "--yes")
    assert gone.code == 0, gone.err
    assert victim.is_file() and victim_variant.is_file(), gone.out
    assert not (folder / "kern-0.9+cu130torch2.9-cp311-cp311-linux_x86_64.whl").exists(), gone.out + gone.err
    assert run("pull", "kern", "--sm", "89", "--torch", "2.9", "--python", "3.11", "--platform",
               "linux_x86_64", "-o", "out").code == 0  # fmt: skip


def test_reindex_drops_a_bent_variant_and_makes_its_own_and_an_orphan_variants_json_is_reported(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Item 5 of issue 43: reindex kept a variant that was not its entry's own (another wheel recorded as
    the variant); plain verify passed a ``variants/*.json`` of a package the store does not hold."""
    store = publish_two_builds(run, sos, tmp_path)
    folder = store / "kern/sm86/torch2.9-cu130"
    own = recorded_variant(store, "kern/sm86/")
    wheel = folder / "kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    good = own.read_bytes()
    shard = store / "index/kern.json"
    index = json.loads(shard.read_text())
    for w in index["wheels"]:
        if w["path"] == wheel.relative_to(store).as_posix():
            w["variant"]["filename"] = wheel.name  # the wheel itself recorded as its variant
    shard.write_text(json.dumps(index))
    orphan = store / "variants" / "ghost-9.0-variants.json"
    orphan.write_text("{}")
    checked = run("verify")
    assert checked.code == 1
    assert "the index entry is bent: its variant kern-1.0+cu130torch2.9-" in checked.out
    assert "variants/ghost-9.0-variants.json: no index entry has a variant of this release" in checked.out
    fixed = run("reindex")
    assert fixed.code == 0, fixed.err
    assert (
        "is not its own" in fixed.err and "dropped from the index, and its own made in its place" in fixed.err
    )
    assert own.read_bytes() == good and wheel.is_file(), fixed.out + fixed.err
    recorded = {
        w["path"]: w.get("variant", {}).get("filename") for w in json.loads(shard.read_text())["wheels"]
    }
    assert recorded[wheel.relative_to(store).as_posix()] == own.name, fixed.out + fixed.err
    assert not orphan.exists()
    assert run("verify", "--deep").code == 0


def _flip_a_data_byte(path: Path, member: str) -> None:
    """One byte of ``member``'s stored data changed; its local and central headers (CRC, sizes) untouched."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data = bytearray(path.read_bytes())
    name_len, extra_len = (
        int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little"),
        int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little"),
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.compress_size // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_verify_deep_reads_variant_data_and_plain_verify_catches_a_swapped_variant(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Item 4 of issue 43: a byte flipped in a member's data under unchanged headers passed verify --deep
    (it compared CRC and size only); a variant swapped for another build's, the index untouched."""
    import hashlib

    store = publish_two_builds(run, sos, tmp_path)
    sm86 = recorded_variant(store, "kern/sm86/")
    sm90 = recorded_variant(store, "kern/sm90/")
    good86 = sm86.read_bytes()
    sm86.write_bytes(sm90.read_bytes())  # another build's variant under this name; the index as it was
    swapped = run("verify")
    assert (
        swapped.code == 1
        and f"{sm86.relative_to(store).as_posix()}: does not match the variant wheel the index records"
        in swapped.out
    )
    sm86.write_bytes(good86)
    _flip_a_data_byte(sm86, "kern/_C.so")
    shard = store / "index/kern.json"
    index = json.loads(shard.read_text())
    for w in index["wheels"]:  # the index made to agree with the bent file: only its data can tell
        if w.get("variant", {}).get("filename") == sm86.name:
            w["variant"]["sha256"] = hashlib.sha256(sm86.read_bytes()).hexdigest()
    shard.write_text(json.dumps(index))
    assert sm86.name not in run("verify").out  # the recorded bytes: plain verify reads no member data
    deep = run("verify", "--deep")
    assert deep.code == 1, deep.out
    assert "kern/_C.so: other bytes than the source's kern/_C.so (its RECORD hash)" in deep.out or (
        "kern/_C.so: cannot be read" in deep.out
    ), deep.out


def test_verify_deep_judges_variant_properties_from_the_bytes_not_the_record(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """The index records other properties (and a variant.json made to match them): verify --deep says the
    judgement of the source's bytes disagrees, where it once compared the variant with the record alone."""
    store = publish_two_builds(run, sos, tmp_path)
    shard = store / "index/kern.json"
    index = json.loads(shard.read_text())
    for w in index["wheels"]:
        if w["path"].startswith(("kern/sm86/", "kern/sm89/")):  # the one build's cells, alike
            w["variant"]["properties"]["nvidia"]["sm_arch"] = ["86_real", "120_real"]  # widened
    shard.write_text(json.dumps(index))
    deep = run("verify", "--deep")
    assert deep.code == 1
    assert "the index records other properties than the judgement of kern-1.0+cu130torch2.9-" in deep.out


def test_gc_keeps_a_variant_a_kept_cell_names_and_counts_the_files_it_deletes(
    run: Run, sos: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 53, item 7: one build filed under sm86 and sm89 shares one variant; gc removing its sm89 copy
    (a newer version holds that cell) keeps the variant the sm86 copy names, and the count it reports is
    the files it deletes (it said 13 and deleted 14 where cells share a variant)."""
    store = publish_two_builds(run, sos, tmp_path)
    newer = so_wheel(tmp_path / "c", sos["sm_86"], version="2.0", tags=TAGS)
    assert run("publish", str(newer), *LINE, "--sm", "89", "--variants").code == 0
    sm86 = recorded_variant(store, "kern/sm86/")
    before = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    plan = run("gc", "--keep-versions", "1", "--json")
    assert plan.code == 0, plan.err
    told = json.loads(plan.out)
    done = run("gc", "--keep-versions", "1", "--yes")
    assert done.code == 0, done.err
    after = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    assert sm86.is_file()  # the sm86 copy of the 1.0 build is kept, and names it
    removed = [r["path"] for r in told["remove"]]
    assert removed == ["kern/sm89/torch2.9-cu130/kern-1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"], (
        removed
    )
    assert told["files_freed"] == len(before - after), (told["files_freed"], sorted(before - after))
    assert run("verify", "--deep").code == 0
    # every cell of every build: a variant two cells share is deleted, and counted, once
    before = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    told = json.loads(run("gc", "--drop-torch", "2.9", "--allow-empty", "--json").out)
    assert run("gc", "--drop-torch", "2.9", "--allow-empty", "--yes").code == 0
    after = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    assert told["files_freed"] == len(before - after), (told["files_freed"], sorted(before - after))


def test_an_sm_arch_value_is_one_typed_value_read_and_written_by_the_format() -> None:
    from librarian.variant_format import SmArchValue

    for text in ("89_real", "120_virtual", "100f_real", "90a_real", "75_virtual"):
        assert str(SmArchValue.parse(text)) == text
    assert (
        SmArchValue.parse("120_virtual").capability == (12, 0) and not SmArchValue.parse("120_virtual").real
    )
    assert SmArchValue.of(8, 9, real=True) == SmArchValue.parse("89_real")
    ordered = sorted(
        map(SmArchValue.parse, ["120_virtual", "90_real", "80_real", "90_virtual"]), key=lambda v: v.order
    )
    assert [str(v) for v in ordered] == ["80_real", "90_real", "90_virtual", "120_virtual"]
    for bad in ("89", "89_fake", "x_real", "_real"):
        with pytest.raises(ValueError):
            SmArchValue.parse(bad)
