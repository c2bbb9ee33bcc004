"""The torch demand (librarian.demands.torch): the minor, the C++ ABI, the symbols."""

from __future__ import annotations

from dataclasses import replace

from librarian.demands import Demand
from librarian.machine import Probed, TorchInfo
from tests.demand_builders import machine, so, verdict_for, wheel

# --- torch --------------------------------------------------------------------------------------------------


C10 = "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"  # a mangled c10 symbol: bound to one torch line


def test_torch_minor_must_match() -> None:
    facts = wheel(so(sass="sm_89", needed=("libc10.so",), torch_symbols=("_ZN3c104Half3fooEv",)))
    assert verdict_for(Demand.TORCH, facts, machine(torch="2.8")).ok is True
    v = verdict_for(Demand.TORCH, facts, machine(torch="2.9"))
    assert v.ok is False
    assert (
        str(v)
        == "torch: wheel needs torch 2.8; imports _ZN3c104Half3fooEv; links libc10.so, machine has torch 2.9"
    )
    assert v.predicted_error == "undefined symbol: _ZN3c104Half3fooEv"
    # the reason alone (doctor --env's one line per package) names both lines
    assert v.reason.startswith("built against torch 2.8, here 2.9: ")


def test_torch_symbols_checked_against_exports() -> None:
    facts = wheel(so(needed=("libc10.so",), torch_symbols=("_ZN3c103fooEv", "_ZN3c103barEv")))
    info = TorchInfo("2.8.0+cu128", (12, 8), True, None, exports=frozenset({"_ZN3c103fooEv"}))
    m = replace(machine(), torch=Probed.found(info, "test"))
    v = verdict_for(Demand.TORCH, facts, m)
    assert v.ok is False and v.predicted_error == "undefined symbol: _ZN3c103barEv"
    info_all = replace(info, exports=frozenset({"_ZN3c103fooEv", "_ZN3c103barEv"}))
    assert verdict_for(Demand.TORCH, facts, replace(m, torch=Probed.found(info_all, "test"))).ok is True


def test_torch_cxx11_abi_from_a_flash_attn_label() -> None:
    name = "flash_attn-2.8.3+cu12torch2.8cxx11abiFALSE-cp312-cp312-linux_x86_64.whl"
    info = TorchInfo("2.8.0+cu128", (12, 8), True)
    m = replace(machine(), torch=Probed.found(info, "test"))
    v = verdict_for(Demand.TORCH, wheel(so(needed=("libc10.so",), torch_symbols=(C10,)), name=name), m, name)
    assert v.ok is False and "cxx11abi" in v.reason


def test_torch_unknown_and_not_needed() -> None:
    v = verdict_for(Demand.TORCH, wheel(so(needed=("libc10.so",))), machine(torch=None, cuda=None))
    assert v.ok is None and "--torch" in v.reason
    plain = "kern-1.0-cp312-cp312-linux_x86_64.whl"
    assert verdict_for(Demand.TORCH, wheel(so(), name=plain), machine(torch=None), plain).ok is True
    exact = so(needed=("libc10.so",), torch_symbols=(C10,))
    unlabelled = verdict_for(Demand.TORCH, wheel(exact, name=plain), machine(), plain)
    assert unlabelled.ok is None and "retag" in unlabelled.reason and unlabelled.machine_has == "torch 2.8"
