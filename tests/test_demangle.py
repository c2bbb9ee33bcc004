"""C++ symbols as a person reads them (issue 46 item 4): demangled by binutils' c++filt where it is on
PATH, folded and cut to a width; a demangler that fails, lies about its answer's shape or is absent leaves
the mangled name, cut."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from librarian.demangle import MAX_SYMBOL, brief, demangle, readable, shorten

CHECK_FAIL = "_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"


def fake_cxxfilt(folder: Path, script: str) -> None:
    folder.mkdir(exist_ok=True)
    tool = folder / "c++filt"
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is not on PATH here")
def test_real_cxxfilt_demangles_and_folds_the_parameters() -> None:
    names = demangle([CHECK_FAIL, "PyInit__C"])
    assert names == {CHECK_FAIL: names[CHECK_FAIL]} and names[CHECK_FAIL].startswith(
        "c10::detail::torchCheckFail("
    )
    (said,) = readable([f"imports {CHECK_FAIL}; links libc10.so"])
    assert said == "imports c10::detail::torchCheckFail(…); links libc10.so"


def test_a_failing_or_lying_demangler_leaves_the_mangled_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + "/usr/bin:/bin")
    fake_cxxfilt(tmp_path / "bin", "exit 3\n")  # a crash
    assert demangle([CHECK_FAIL]) == {}
    fake_cxxfilt(tmp_path / "bin", "echo one\necho two\n")  # two answers to one question
    assert demangle([CHECK_FAIL]) == {}
    fake_cxxfilt(tmp_path / "bin", "sleep 30\n")
    monkeypatch.setattr("librarian.demangle.TIMEOUT", 0.5)
    assert demangle([CHECK_FAIL]) == {}  # a hang costs its time-out, nothing more
    (said,) = readable([f"imports {CHECK_FAIL}"])
    assert said == "imports " + shorten(CHECK_FAIL)


def test_the_demangler_is_not_given_what_no_library_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    fake_cxxfilt(tmp_path / "bin", 'while read l; do echo "seen"; done\n')
    huge = "_Z" + "x" * MAX_SYMBOL
    assert demangle([huge]) == {}  # over the bound: never sent
    assert demangle([CHECK_FAIL, CHECK_FAIL]) == {CHECK_FAIL: "seen"}  # asked once


def test_folding_keeps_the_name_past_template_arguments() -> None:
    name = "at::native::foo<std::function<void (int)>>(at::Tensor const&, c10::optional<at::Tensor> const&, long)"
    assert brief(name) == "at::native::foo<std::function<void (int)>>(…)"
    assert brief("c10::Error::what() const") == "c10::Error::what() const"  # short: as it is
    assert shorten("x" * 100, 60) == "x" * 59 + "… (41 more characters)"


def _bomb(levels: int) -> str:
    """``f(N, N<N, N>, N<N<N, N>, N<N, N> >, ...)``: each parameter twice the one before, by back-references:
    a 244-character name that demangles to 218 MB at 24 levels."""

    def sub(n: int) -> str:
        if n == 0:
            return "S_"
        n, digits, out = n - 1, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", ""
        while True:
            out, n = digits[n % 36] + out, n // 36
            if n == 0:
                return f"S{out}_"

    return "_Z1f1NS_IS_S_E" + "".join(f"S_I{sub(i - 1)}{sub(i - 1)}E" for i in range(2, levels))


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is not on PATH")
def test_a_demangler_bomb_is_stopped_at_the_cap_and_the_name_stays_mangled() -> None:
    """Issue 54 item 5: c++filt is stopped once its output passes MAX_OUTPUT, never held whole."""
    from librarian import demangle as d

    small = _bomb(8)
    assert d.demangle([small])[small].startswith("f(N, N<N, N>, ")  # a name within the cap: demangled
    bomb = _bomb(30)  # 2^30 times N: gigabytes, were it read whole
    assert len(bomb) < 400
    seen = d.readable([f"imports {bomb}", small])  # stopped: every name of the run stays mangled
    assert seen[0].startswith("imports _Z1f1NS_IS_S_E") and seen[1].startswith("_Z1f1NS_IS_S_E")
