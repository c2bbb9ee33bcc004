"""The CUDA demand (librarian.demands.cuda): label, libcudart, toolkit, driver; CUDA-line alternatives."""

from __future__ import annotations

import pytest

from librarian.coords import WheelName
from librarian.demands import Demand, Wheel, cuda
from librarian.demands.cuda import DRIVER_TOO_OLD
from librarian.demands.members import Member
from librarian.facts import BinaryFacts, BinaryFormat
from tests.demand_builders import NAME, machine, so, verdict_for, wheel

# --- CUDA ---------------------------------------------------------------------------------------------------

T = ("libc10.so",)  # a torch extension: built against its torch's CUDA line, the label's
CUDA_CASES = [
    # wheel label, needed, torch cuda, driver, ok, what the reason or error names
    ("cu128torch2.8", T, "12.8", "12.8", True, ""),
    ("cu126torch2.8", T, "12.8", "12.8", True, "minor-version"),
    ("cu128torch2.8", T, "12.6", "12.8", False, "newer CUDA runtime"),
    ("cu118torch2.8", T, "12.8", "12.8", False, "libcudart.so.11"),
    ("cu128torch2.8", (*T, "libcudart.so.11.0"), "12.8", "12.8", False, "links libcudart.so.11.0,"),
    ("cu128torch2.8", T, "12.8", "11.8", False, DRIVER_TOO_OLD),
    ("cu128torch2.8", T, "12.8", "12.0", True, ""),  # minor-version compatibility of the driver
    ("cu128torch2.8", T, None, "12.8", None, "--cuda"),
    # no torch: its own runtime binds it (one major, from the minor it was built for up), else only the driver
    ("cu118torch2.8", (), "12.8", "12.8", True, "only the driver runs its code"),
    ("cu130torch2.9", ("libcudart.so.13",), "12.8", "13.0", False, "links libcudart.so.13"),
    ("cu126torch2.8", ("libcudart.so.12",), "12.8", "12.8", True, "minor-version"),
]


@pytest.mark.parametrize(("label", "needed", "cuda", "driver", "ok", "names"), CUDA_CASES)
def test_cuda_rules(
    label: str, needed: tuple[str, ...], cuda: str | None, driver: str, ok: bool | None, names: str
) -> None:
    name = f"kern-1.0+{label}-cp312-cp312-linux_x86_64.whl"
    m = machine(cuda=cuda, driver=driver, torch=None if cuda is None else "2.8")
    v = verdict_for(Demand.CUDA, wheel(so(sass="sm_89", needed=needed), name=name), m, name)
    assert v.ok is ok, v
    assert names in v.reason + v.predicted_error


def test_cuda_not_needed_by_a_plain_wheel() -> None:
    name = "kern-1.0-cp312-cp312-linux_x86_64.whl"
    assert verdict_for(Demand.CUDA, wheel(so(), name=name), machine(cuda=None, torch=None), name).ok is True


def test_only_the_alternative_the_line_loads_must_match_torchs_runtime() -> None:
    # One member per CUDA line, each linking its own libcudart: only the one torch's line loads counts.
    facts = wheel(
        so("bnb/libbnb_cuda118.so", sass="sm_80", needed=("libcudart.so.11.0",)),
        so("bnb/libbnb_cuda128.so", sass="sm_80", needed=("libcudart.so.12",)),
        so("bnb/libbnb_cuda130.so", sass="sm_80", needed=("libcudart.so.13",)),
    )
    name = "bnb-1.0-py3-none-linux_x86_64.whl"
    v = verdict_for(Demand.CUDA, facts, machine(cuda="12.8", torch="2.8"), name)
    assert v.ok is True and v.wheel_needs == "libcudart.so.12"
    missing = verdict_for(Demand.CUDA, facts, machine(cuda="12.4", torch="2.5"), name)
    assert (
        missing.ok is False
        and "none of libbnb_cuda118.so, libbnb_cuda128.so, libbnb_cuda130.so" in missing.reason
    )


def test_claims_read_only_the_member_the_label_loads() -> None:
    facts = wheel(
        so("bnb/libbnb_cuda118.so", sass="sm_80", needed=("libcudart.so.11.0",)),
        so("bnb/libbnb_cuda128.so", sass="sm_80", needed=("libcudart.so.12",)),
    )
    assert cuda.claims(Wheel(WheelName.parse(NAME), facts)) == []  # NAME is labelled cu128
    lying = wheel(so("k/_C.so", needed=("libcudart.so.13",)))
    assert cuda.claims(Wheel(WheelName.parse(NAME), lying)) == [
        "label says CUDA 12.8, k/_C.so links libcudart.so.13"
    ]


@pytest.mark.parametrize(
    ("path", "token"),
    [
        ("a/libbnb_cuda118.so", (11, 8)),
        ("libx_cu130.so", (13, 0)),
        ("libx-cuda12.so", (12, 0)),
        ("libcudart.so", None),
        ("libcuda_cu118_cu128.so", None),
    ],
)
def test_cuda_tokens_in_member_names(path: str, token: tuple[int, int] | None) -> None:
    assert Member.from_binary(so(path, sass="sm_80")).cuda_token == token


@pytest.mark.parametrize(
    ("needed", "major"),
    [
        (("libcudart-3b3c5a6e.so.12.0.107",), 12),  # auditwheel's rename of a bundled runtime (spconv-cu120)
        (("libcudart.so.13",), 13),
        (("@rpath/libcudart.12.dylib",), 12),  # a Mach-O install name, directory kept
        (("libcudart-notahash.so.12",), None),
    ],
)
def test_the_cuda_runtime_a_member_links_by_any_of_its_names(
    needed: tuple[str, ...], major: int | None
) -> None:
    facts = BinaryFacts("pkg/_C.so", BinaryFormat.ELF, "x86_64", needed=needed)
    assert facts.cudart_major == major
    assert facts.cudart_library == (needed[0] if major else None)


def test_a_claim_names_each_runtime_once_its_members_folded() -> None:
    """Issue 53, item 6: a 500 MB wheel's refusal repeated ``<member> links libcudart.so.13`` per member, in
    one line of thousands of characters."""
    from librarian.coords import WheelName
    from librarian.demands import Wheel
    from librarian.demands.cuda import claims
    from tests.demand_builders import so, wheel

    members = [so(f"big/_m{k}.so", needed=("libcudart.so.13",)) for k in range(40)]
    facts = wheel(*members, name="big-1.0+cu128torch2.9-cp312-cp312-linux_x86_64.whl")
    found = claims(Wheel(WheelName.parse(facts.filename), facts))
    assert found == ["label says CUDA 12.8, big/_m0.so (and 39 more members) links libcudart.so.13"]
