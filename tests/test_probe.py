"""librarian.probe at its boundaries (fake NVML / driver libs, a fake nvidia-smi, a fake torch install) and
Machine overrides. No GPU is needed; g++ builds the tiny libraries of the torch-ABI test where present."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from librarian.coords import GpuArch, WheelName
from librarian.demands import Demand, Wheel, judge
from librarian.demands import torch as torch_demand
from librarian.errors import BadInput
from librarian.facts import BinaryFacts, BinaryFormat, WheelFacts
from librarian.machine import Gpu, Machine, Probed, TorchInfo
from librarian.probe import detect_machine
from librarian.probe.libc import find_libstdcxx, read_version_definitions
from librarian.probe.nvidia import NO_GPU, detect_gpus, visible_gpus
from librarian.probe.torch import cxx11abi_from_library, detect_torch, with_torch_exports

GPUS = [("NVIDIA GeForce RTX 4090", (8, 9), "GPU-aaaa"), ("NVIDIA H100 80GB HBM3", (9, 0), "GPU-bbbb")]


def _set(pointer: Any, value: int) -> None:
    # The probe passes ctypes pointers, as the real C functions need; a fake writes through them.
    assert isinstance(pointer, ctypes._Pointer), f"expected a ctypes pointer, got {pointer!r}"
    pointer.contents.value = value


class FakeNvml:
    """``libnvidia-ml.so.1`` as ctypes sees it: functions returning nvmlReturn_t (0 = success)."""

    def __init__(
        self, gpus: list[tuple[str, tuple[int, int], str]], cuda: int = 12080, init: int = 0
    ) -> None:
        self.gpus, self.cuda, self.init, self.shut = gpus, cuda, init, False

    def nvmlInit_v2(self) -> int:
        return self.init

    def nvmlShutdown(self) -> int:
        self.shut = True
        return 0

    def nvmlSystemGetCudaDriverVersion_v2(self, version: Any) -> int:
        _set(version, self.cuda)
        return 0

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        _set(count, len(self.gpus))
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: ctypes.c_uint, handle: Any) -> int:
        assert isinstance(index, ctypes.c_uint)
        _set(handle, index.value + 100)
        return 0

    def nvmlDeviceGetCudaComputeCapability(self, handle: ctypes.c_void_p, major: Any, minor: Any) -> int:
        cap = self.gpus[(handle.value or 0) - 100][1]
        _set(major, cap[0])
        _set(minor, cap[1])
        return 0

    def nvmlDeviceGetName(self, handle: ctypes.c_void_p, buf: Any, length: ctypes.c_uint) -> int:
        buf.value = self.gpus[(handle.value or 0) - 100][0].encode()[: length.value - 1]
        return 0

    def nvmlDeviceGetUUID(self, handle: ctypes.c_void_p, buf: Any, length: ctypes.c_uint) -> int:
        buf.value = self.gpus[(handle.value or 0) - 100][2].encode()
        return 0


class FakeCuda:
    """``libcuda.so.1``: CUresult-returning driver API functions."""

    def __init__(self, gpus: list[tuple[str, tuple[int, int], str]], version: int = 12090) -> None:
        self.gpus, self.version = gpus, version

    def cuInit(self, flags: int) -> int:
        return 0

    def cuDriverGetVersion(self, version: Any) -> int:
        _set(version, self.version)
        return 0

    def cuDeviceGetCount(self, count: Any) -> int:
        _set(count, len(self.gpus))
        return 0

    def cuDeviceGet(self, device: Any, ordinal: ctypes.c_int) -> int:
        _set(device, ordinal.value)
        return 0

    def cuDeviceGetAttribute(self, out: Any, attribute: ctypes.c_int, device: ctypes.c_int) -> int:
        cap = self.gpus[device.value][1]
        _set(out, {75: cap[0], 76: cap[1]}[attribute.value])
        return 0

    def cuDeviceGetName(self, buf: Any, length: ctypes.c_int, device: ctypes.c_int) -> int:
        buf.value = self.gpus[device.value][0].encode()
        return 0


def loader_for(**libs: Any) -> Any:
    names = {"nvml": "libnvidia-ml.so.1", "cuda": "libcuda.so.1"}
    table = {names[k]: v for k, v in libs.items()}

    def load(name: str) -> Any:
        if name not in table:
            raise OSError(f"{name}: cannot open shared object file")
        return table[name]

    return load


@pytest.fixture
def no_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=*) printf '0, NVIDIA GeForce RTX 4090, 8.9, 570.86.10, GPU-aaaa\\n"
        "1, NVIDIA H100 80GB HBM3, 9.0, 570.86.10, [N/A]\\n' ;;\n"
        "  *) echo '| NVIDIA-SMI 570.86.10    Driver Version: 570.86.10    CUDA Version: 12.8     |' ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    return script


# --- GPUs ---------------------------------------------------------------------------------------------------


def test_nvml_reports_each_gpu_and_the_driver(no_smi: None) -> None:
    nvml = FakeNvml(GPUS)
    gpus, driver = detect_gpus(loader_for(nvml=nvml))
    assert gpus.source == "NVML" and driver.value == (12, 8)
    assert gpus.value == (
        Gpu(0, "NVIDIA GeForce RTX 4090", (8, 9), "GPU-aaaa"),
        Gpu(1, "NVIDIA H100 80GB HBM3", (9, 0), "GPU-bbbb"),
    )
    assert nvml.shut


def test_driver_api_when_nvml_fails(no_smi: None) -> None:
    gpus, driver = detect_gpus(loader_for(nvml=FakeNvml(GPUS, init=9), cuda=FakeCuda(GPUS[1:])))
    assert gpus.source == "CUDA driver API" and driver.value == (12, 9)
    assert gpus.value == (Gpu(0, "NVIDIA H100 80GB HBM3", (9, 0)),)


def test_nvidia_smi_when_no_library_loads(fake_smi: Path) -> None:
    gpus, driver = detect_gpus(loader_for())
    assert gpus.source == "nvidia-smi" and driver.value == (12, 8)
    assert [(g.index, g.capability, g.uuid) for g in gpus.value or ()] == [
        (0, (8, 9), "GPU-aaaa"),
        (1, (9, 0), None),
    ]


def test_two_gpus_default_to_0_and_select_1(fake_smi: Path) -> None:
    m = detect_machine(loader=loader_for())
    assert m.selected == 0 and m.gpu is not None and m.gpu.capability == (8, 9)
    so = BinaryFacts("k/_C.so", BinaryFormat.ELF, "x86_64", sass=(GpuArch(9, 0),))
    facts = WheelFacts("k-1.0-cp312-cp312-linux_x86_64.whl", (so,))
    on_0 = judge(Wheel(WheelName.parse(facts.filename), facts), m).verdicts[0]
    on_1 = judge(Wheel(WheelName.parse(facts.filename), facts), m.with_overrides(gpu=1)).verdicts[0]
    assert (on_0.ok, on_1.ok) == (False, True)
    with pytest.raises(BadInput, match="--gpu 7"):
        m.with_overrides(gpu=7)


@pytest.mark.parametrize(
    ("visible", "picked"),
    [
        ("0,1", ["GPU-aaaa", "GPU-bbbb"]),
        ("1", ["GPU-bbbb"]),
        (" 1 , 0 ", ["GPU-bbbb", "GPU-aaaa"]),  # CUDA renumbers in the listed order
        ("GPU-bb", ["GPU-bbbb"]),  # a UUID prefix
        ("0,-1,1", ["GPU-aaaa"]),  # the first invalid entry ends the list
        ("0,0,1", ["GPU-aaaa"]),  # so does a repeat
        ("2", []),
        ("", []),
        ("MIG-1234", None),  # not applied: a MIG instance's parent is not known here
    ],
)
def test_cuda_visible_devices(visible: str, picked: list[str] | None) -> None:
    gpus = tuple(Gpu(i, name, cc, uuid) for i, (name, cc, uuid) in enumerate(GPUS))
    shown = visible_gpus(gpus, visible)
    if picked is None:
        assert shown is None
        return
    assert shown is not None
    assert [g.uuid for g in shown] == picked and [g.index for g in shown] == list(range(len(picked)))


def test_cuda_visible_devices_is_not_applied_twice_to_the_driver_api(
    no_smi: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver API already sees only the visible GPUs, numbered from 0.
    gpus, _ = detect_gpus(loader_for(nvml=FakeNvml(GPUS, init=9), cuda=FakeCuda(GPUS[1:])), visible="1")
    assert gpus.source == "CUDA driver API" and [g.capability for g in gpus.value or ()] == [(9, 0)]
    nvml, _ = detect_gpus(loader_for(nvml=FakeNvml(GPUS)), visible="1")
    assert nvml.source == "NVML, CUDA_VISIBLE_DEVICES=1" and [g.index for g in nvml.value or ()] == [0]


def test_no_gpu_anywhere_is_unknown_with_the_flag_to_pass(no_smi: None) -> None:
    gpus, driver = detect_gpus(loader_for())
    assert gpus.value is None and gpus.reason == NO_GPU == "no GPU found; pass --sm"
    assert driver.value is None and "--driver" in driver.reason


def test_broken_libraries_and_a_failing_smi_degrade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    (bindir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))

    def explode(name: str) -> Any:
        return object()  # loads, but has none of the functions: AttributeError inside the probe

    m = detect_machine(loader=explode, torch_path=[str(tmp_path)])
    assert m.gpus.reason == NO_GPU and m.torch.value is None and "--torch" in m.torch.reason
    assert m.os.value and m.cpu.value and m.python_tags.known


# --- torch, from a fake install ----------------------------------------------------------------------------


def fake_torch(site: Path, version: str, version_py: str | None, cmake_abi: str | None = None) -> Path:
    dist_info = site / f"torch-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    record = []
    if version_py is not None:
        (site / "torch").mkdir()
        (site / "torch" / "version.py").write_text(version_py)
        record.append("torch/version.py,,")
    if cmake_abi is not None:
        cmake = site / "torch/share/cmake/Torch/TorchConfig.cmake"
        cmake.parent.mkdir(parents=True)
        cmake.write_text(f'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={cmake_abi}")\n')
        record.append("torch/share/cmake/Torch/TorchConfig.cmake,,")
    (dist_info / "RECORD").write_text("\n".join(record) + "\n")
    return site


VERSION_PY = (
    "from typing import Optional\n__version__ = '2.8.0+cu128'\ndebug = False\ncuda: Optional[str] = {}\n"
)


@pytest.mark.parametrize(
    ("version", "version_py", "cuda"),
    [
        ("2.8.0+cu128", VERSION_PY.format("'12.8'"), (12, 8)),
        ("2.8.0", VERSION_PY.format("'12.8'"), (12, 8)),  # PyPI's default build has no label
        ("2.8.0+cpu", VERSION_PY.format("None"), None),
        ("2.7.1+cu126", None, (12, 6)),  # no version.py: the label says it
    ],
)
def test_torch_from_its_metadata(
    tmp_path: Path, version: str, version_py: str | None, cuda: tuple[int, int] | None
) -> None:
    info = detect_torch([str(fake_torch(tmp_path / "site", version, version_py, cmake_abi="1"))])
    assert info is not None
    assert (info.version, info.cuda, info.cxx11abi) == (version, cuda, True)
    assert info.minor == (int(version[0]), int(version[2]))


def test_machine_torch_parts_say_where_cuda_came_from(tmp_path: Path, no_smi: None) -> None:
    site = fake_torch(tmp_path / "site", "2.8.0+cpu", VERSION_PY.format("None"), cmake_abi="0")
    m = detect_machine(loader=loader_for(), torch_path=[str(site)])
    assert m.torch.value is not None and m.torch.value.cxx11abi is False
    assert m.cuda.value is None and "CPU build" in m.cuda.reason and "--cuda" in m.cuda.reason
    site2 = fake_torch(tmp_path / "site2", "2.9.0+cu130", VERSION_PY.format("'13.0'"))
    m2 = detect_machine(loader=loader_for(), torch_path=[str(site2)])
    assert m2.cuda.value == (13, 0) and "torch/version.py" in m2.cuda.source


def test_no_torch_installed(tmp_path: Path) -> None:
    assert detect_torch([str(tmp_path)]) is None


# --- overrides ----------------------------------------------------------------------------------------------


def test_overrides_build_a_machine_from_flags() -> None:
    m = Machine(cpu=Probed.found("x86_64", "test")).with_overrides(
        sm="120", torch="2.9", cuda="12.8", python="3.12", glibc="2.31", driver="13.0"
    )
    assert m.gpu is not None and m.gpu.capability == (12, 0) and m.gpus.source == "--sm"
    assert m.torch.value == TorchInfo("2.9", (12, 8)) and m.cuda.value == (12, 8)
    assert m.driver_cuda.value == (13, 0) and m.glibc.value == (2, 31)
    tags = {str(t) for t in m.python_tags.value or ()}
    assert "cp312-cp312-manylinux_2_31_x86_64" in tags and "cp312-cp312-manylinux2014_x86_64" in tags
    assert "cp312-cp312-manylinux_2_32_x86_64" not in tags and "cp311-abi3-linux_x86_64" in tags


def test_platform_override_and_keeping_the_installed_build() -> None:
    m = Machine().with_overrides(python="3.11", platform="manylinux_2_28_aarch64")
    tags = {str(t) for t in m.python_tags.value or ()}
    assert "cp311-cp311-manylinux_2_17_aarch64" in tags and "cp311-cp311-manylinux_2_28_x86_64" not in tags
    installed = TorchInfo("2.8.0+cu128", (12, 8), True, Path("/x/torch/lib"))
    m = Machine(torch=Probed.found(installed, "metadata"), cuda=Probed.found((12, 8), "metadata"))
    assert m.with_overrides(torch="2.8", cuda="12.8").torch.value == installed
    other = m.with_overrides(torch="2.9").torch.value
    assert other is not None and other.lib_dir is None and other.minor == (2, 9)


@pytest.mark.parametrize("flags", [{"sm": "banana"}, {"torch": "two"}, {"glibc": "2"}, {"python": "3.12"}])
def test_bad_override_values_are_refused(flags: dict[str, Any]) -> None:
    with pytest.raises(BadInput):
        Machine().with_overrides(**flags)


# --- C libraries --------------------------------------------------------------------------------------------


def test_libstdcxx_version_definitions() -> None:
    path = find_libstdcxx()
    if path is None:
        pytest.skip("no libstdc++.so.6 on this machine")
    names = read_version_definitions(path)
    assert "GLIBCXX_3.4" in names
    m = detect_machine(loader=loader_for(), torch_path=[])
    assert m.glibcxx.value is not None and m.glibcxx.value >= (3, 4)


# --- the torch C++ ABI, with real tiny libraries ------------------------------------------------------------

C10_SRC = "#include <string>\nnamespace c10 { int f(const std::string& s) { return (int)s.size(); } }\n"
EXT_SRC = (
    '#include <string>\nnamespace c10 { int f(const std::string& s); }\nint use() { return c10::f("x"); }\n'
)


def _gxx(*args: str) -> None:
    subprocess.run(["g++", "-shared", "-fPIC", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def abi_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    root = tmp_path_factory.mktemp("abi")
    (root / "c10.cpp").write_text(C10_SRC)
    (root / "ext.cpp").write_text(EXT_SRC)
    out = {}
    for name, abi in (("new", "1"), ("old", "0")):
        (root / name).mkdir()
        _gxx(f"-D_GLIBCXX_USE_CXX11_ABI={abi}", str(root / "c10.cpp"), "-o", str(root / name / "libc10.so"))
        out[name] = root / name
    _gxx(
        "-D_GLIBCXX_USE_CXX11_ABI=1",
        str(root / "ext.cpp"),
        "-L",
        str(out["new"]),
        "-lc10",
        "-o",
        str(root / "ext.so"),
    )
    out["ext"] = root / "ext.so"
    return out


def test_torch_symbols_pass_against_the_matching_libc10_and_name_the_missing_one(
    abi_libs: dict[str, Path],
) -> None:
    from librarian.wheel.elf_symbols import dynamic_symbols

    with abi_libs["ext"].open("rb") as f:
        undefined = dynamic_symbols(f)[1]
    needed = tuple(sorted(s for s in undefined if s.startswith("_ZN3c10")))
    assert needed and "cxx11" in needed[0]
    name = WheelName.parse("ext-1.0+cu128torch2.8-cp312-cp312-linux_x86_64.whl")
    facts = WheelFacts(
        str(name),
        (BinaryFacts("ext.so", BinaryFormat.ELF, "x86_64", needed=("libc10.so",), torch_symbols=needed),),
    )

    def machine_with(lib_dir: Path) -> Machine:
        info = TorchInfo("2.8.0+cu128", (12, 8), None, lib_dir)
        return with_torch_exports(Machine(torch=Probed.found(info, "test")))

    assert (
        torch_demand.check(torch_demand.needs(Wheel(name, facts)), machine_with(abi_libs["new"])).ok is True
    )
    v = torch_demand.check(torch_demand.needs(Wheel(name, facts)), machine_with(abi_libs["old"]))
    assert v.demand is Demand.TORCH and v.ok is False
    assert v.predicted_error == f"undefined symbol: {needed[0]}"
    assert cxx11abi_from_library(abi_libs["new"] / "libc10.so") is True
    assert cxx11abi_from_library(abi_libs["old"] / "libc10.so") is False
