"""librarian as a library: the names ``__all__`` promises, each importable, cheaply."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import librarian

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"


def test_all_is_the_api_table() -> None:
    assert set(librarian.__all__) == {"__version__", *librarian._API}


def test_every_public_name_resolves() -> None:
    for name in librarian.__all__:
        assert getattr(librarian, name) is not None, name
    assert set(librarian.__all__) <= set(dir(librarian))


def test_importing_librarian_imports_no_hub_client() -> None:
    code = "import sys, librarian; print('huggingface_hub' in sys.modules, 'librarian.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_judge_a_sample_wheel_as_a_library() -> None:
    wheel_path = min(SAMPLES.glob("*.whl"))
    facts = librarian.inspect_wheel(wheel_path)
    machine = librarian.Machine().with_overrides(
        sm="89", torch="2.9", cuda="13.0", python="3.10", platform="linux_x86_64"
    )
    wheel = librarian.Wheel(librarian.WheelName.parse(wheel_path.name), facts)
    judgement = librarian.judge(wheel, machine)
    on_gpu = judgement.verdict(librarian.Demand.GPU)
    assert on_gpu.ok is True and "sm_89" in on_gpu.reason
    assert not judgement.failures and judgement.native and str(judgement.serving) == "its own sm_89 SASS"
    # the cells publish files it under: every real x86_64 GPU its sm_80/86/89/90 SASS serves
    assert [f"sm{c.sm.sm}" for c in librarian.cells(wheel, (13, 0))] == ["sm80", "sm86", "sm89", "sm90"]
