"""The options several commands share, declared once, and the helpers that turn them into values."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from librarian.config import load_layout, load_settings
from librarian.coords import Label, MajorMinor, format_version, parse_cuda, parse_torch
from librarian.errors import BadInput
from librarian.gpus import find_gpu
from librarian.layout import Layout
from librarian.machine import Machine, Probed, parse_major_minor, parse_python
from librarian.ops.labels import label_from_flags
from librarian.platforms import parse_platform, platform_for, platform_tag_of
from librarian.presets import find_preset, presets
from librarian.probe import detect_machine
from librarian.probe.target import find_target, is_version

if TYPE_CHECKING:
    from librarian.stores.base import Store

log = logging.getLogger("librarian")
T = TypeVar("T")

RepoOpt = Annotated[
    str | None,
    typer.Option(
        "--repo",
        help="Store: a directory or hf://datasets/OWNER/NAME[@REV] (env LIBRARIAN_REPO).",
        show_default="./wheelhouse",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help='Machine-readable output (with "schema": 1).')]
CudaOpt = Annotated[
    str | None, typer.Option("--cuda", help="CUDA line, e.g. 12.8 (default: the installed torch's).")
]
TorchOpt = Annotated[
    str | None, typer.Option("--torch", help="torch minor, e.g. 2.8 (default: the installed torch's).")
]
WheelsArg = Annotated[list[Path], typer.Argument(help="Wheel files.", show_default=False)]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "-j", "--jobs", min=1, help="Threads reading wheels (default: the cores available; -j 1: one)."
    ),
]
RelabelOpt = Annotated[
    bool, typer.Option("--relabel", help="Replace the label a wheel already carries (ours or a foreign one).")
]
OldForceOpt = Annotated[
    bool,
    typer.Option("--force", hidden=True, help="Deprecated: see --relabel and the other --allow-* flags."),
]
SmOpt = Annotated[str | None, typer.Option("--sm", help="GPU arch, e.g. 89 (default: the detected GPU).")]
GithubOpt = Annotated[
    bool,
    typer.Option(
        "--github", help="Print the build jobs as a GitHub Actions strategy.matrix (JSON; at most 256 jobs)."
    ),
]
SplitOpt = Annotated[
    bool,
    typer.Option(
        "--split", help='With --github: past 256 jobs, print {"matrices": [...]} of at most 256 each.'
    ),
]
PythonOpt = Annotated[
    str | None,
    typer.Option(
        "--python",
        help="An interpreter or venv to act for (default: the active venv, else librarian's own), or a version, e.g. 3.12, to resolve for.",
    ),
]
PlatformOpt = Annotated[
    str | None,
    typer.Option(
        "--platform",
        help="A wheel tag (manylinux_2_28_x86_64, win_amd64) or PyTorch's name (linux-x86_64, linux-aarch64, "
        "windows-amd64).",
    ),
]
GpuOpt = Annotated[
    int | None, typer.Option("--gpu", help="Which GPU to judge when there are several (default 0).")
]
DriverOpt = Annotated[
    str | None, typer.Option("--driver", help="The driver's CUDA version, e.g. 12.8 (for PTX JIT).")
]
GlibcOpt = Annotated[
    str | None, typer.Option("--glibc", help="The machine's glibc, e.g. 2.31 (default: detected).")
]
CpuOpt = Annotated[
    str | None, typer.Option("--cpu", help="With --os, instead of --platform: x86_64 or aarch64.")
]
OsOpt = Annotated[
    str | None, typer.Option("--os", help="With --cpu, instead of --platform: linux, windows or macos.")
]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="A common machine: jetson-orin, gh200, rtx4090-linux, windows-rtx4090, mac (flags given win).",
    ),
]
CreateOpt = Annotated[
    bool, typer.Option("--create", help="Create the Hub dataset repo if it does not exist.")
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show the plan; change nothing.")]
AllowUnknownComboOpt = Annotated[
    bool, typer.Option("--allow-unknown-combo", help="Accept a torch/CUDA combo PyTorch never shipped.")
]


def maybe(parse: Callable[[str], T], text: str | None) -> T | None:
    """``parse(text)``, or ``None`` for an option not given."""
    return None if text is None else parse(text)


def store_and_layout(
    repo: str | None, *, create: bool = False, publishing: bool = False
) -> tuple[Store, Layout]:
    """The store ``--repo`` (else the environment, else the project's settings) names, and its layout."""
    settings = load_settings(repo)
    from librarian.stores import HubCard, open_store  # here: a command that opens no store never loads them

    card = HubCard(license=settings.license, install=settings.install)
    store = open_store(settings.repo, create=create, publishing=publishing, card=card)
    return store, load_layout(settings.layout)


VariantsOpt = Annotated[
    bool | None,
    typer.Option(
        "--variants/--no-variants",
        help="File a wheel-variant copy beside each wheel and variants/*-variants.json, for uv's wheel-variants "
        "preview (default: [tool.librarian] variants, else off).",
    ),
]


def variants_wanted(flag: bool | None) -> bool:
    """``--variants``/``--no-variants``, else the project's ``variants`` setting."""
    return load_settings().variants if flag is None else flag


LabelPythonOpt = Annotated[
    str | None,
    typer.Option(
        "--python",
        help="Interpreter or venv whose torch gives the default label (default: the active venv, else librarian's own).",
    ),
]


def label_of(cuda: str | None, torch: str | None, python: str | None = None) -> Label | None:
    """The label ``--cuda``/``--torch`` ask for, else the installed torch's (of ``--python``'s interpreter)."""
    if python is not None and is_version(python):
        raise BadInput(f"--python {python}: give an interpreter or venv path (whose torch gives the label)")
    return label_from_flags(maybe(parse_cuda, cuda), maybe(parse_torch, torch), find_target(python))


def contradiction(platform: str | None, glibc: str | None) -> None:
    """BadInput for a described machine that cannot exist: a glibc below what its platform tag promises
    (``manylinux_2_28_x86_64`` with ``--glibc 2.27``)."""
    floor = parse_platform(platform).glibc if platform else None
    if floor is not None and glibc is not None and parse_major_minor(glibc, "glibc") < floor:
        raise BadInput(
            f"no such machine: --platform {platform} promises glibc {floor[0]}.{floor[1]} or newer, and --glibc "
            f"{glibc} says older; drop one of them"
        )


@dataclass(frozen=True, slots=True)
class MachineFlags:
    """The flags that describe a machine, as ``pull`` and ``doctor`` name their parameters alike: read from
    a command's parameters once (:meth:`of`), never passed one by one."""

    sm: str | None = None
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    platform: str | None = None
    glibc: str | None = None
    driver: str | None = None
    gpu: int | None = None
    preset: str | None = None
    cpu: str | None = None
    os: str | None = None

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> MachineFlags:
        """From a command's parameters (``locals()`` at its top): the ones of these names."""
        return cls(**{f.name: params.get(f.name) for f in fields(cls)})


def machine_of(flags: MachineFlags, installing: bool = False) -> Machine:
    """This machine as detected (for ``--python``'s interpreter), with what the flags say over it; with
    ``--preset``, the common machine it names (nothing of this one detected), the flags over it.

    ``installing``: a ``--python VERSION`` must be the target interpreter's own (``--install`` installs into
    it), refused before anything is downloaded."""
    own_driver = flags.driver  # said on the command line, not by a preset
    f = _with_preset(_with_cpu_os(flags))
    floor = maybe(lambda g: parse_major_minor(g, "glibc"), f.glibc)
    # either vocabulary, one machine: a machine's name at --glibc (else PyTorch's 2.28), a wheel tag as given
    platform = platform_tag_of(f.platform, floor) if f.platform is not None else None
    contradiction(platform, f.glibc)
    # --python is a version (resolve for it) or a path (act for that interpreter): uv's convention.
    version = f.python if f.python is not None and is_version(f.python) else None
    detected = _detected(f, version, installing)
    machine = detected.with_overrides(sm=f.sm, gpu=f.gpu, torch=f.torch, cuda=f.cuda, python=version,
                                      platform=platform, glibc=f.glibc, driver=f.driver)  # fmt: skip
    if f.preset is not None and own_driver is None and machine.driver_cuda.value is not None and f.driver:
        # The preset's driver, said as such: a refusal it causes names --driver, which overrides it.
        machine = replace(machine, driver_cuda=replace(machine.driver_cuda, source=f"--preset {f.preset}"))
    if (cannot := machine.impossible()) is not None:  # judged, it would be called native where nothing runs
        raise BadInput(f"no such machine: {cannot}; {_describe_instead(machine)}")
    if f.cuda is not None and f.driver is not None:  # both said (flags or a preset), not found here
        _runtime_above_driver(parse_major_minor(f.cuda, "--cuda"), parse_major_minor(f.driver, "--driver"),
                              f.preset if own_driver is None else None)  # fmt: skip
    return machine


def _with_cpu_os(f: MachineFlags) -> MachineFlags:
    """``--cpu``/``--os`` (given together, without ``--platform``: :mod:`librarian.cli.rules`): the
    platform tag they mean."""
    if f.cpu is None or f.os is None:
        return f
    return replace(
        f, platform=platform_for(f.os, f.cpu, maybe(lambda g: parse_major_minor(g, "glibc"), f.glibc))
    )


def _with_preset(f: MachineFlags) -> MachineFlags:
    """``--preset``: the common machine's values where the flags say none."""
    if f.preset is None:
        return f
    named = find_preset(f.preset)
    return replace(f, sm=f.sm or named.get("sm"), platform=f.platform or named.get("platform"),
                   driver=f.driver or named.get("driver"), cuda=f.cuda or named.get("cuda"),
                   glibc=f.glibc or named.get("glibc"), python=f.python or named.get("python"))  # fmt: skip


def _detected(f: MachineFlags, version: str | None, installing: bool) -> Machine:
    """This machine, as detected for the target interpreter; another machine (a preset resolved for a
    version) has nothing of this one. A ``--python VERSION`` that ``--install`` contradicts is refused."""
    target = find_target(f.python)
    if f.preset is not None and version is not None and not installing:
        why = f"--preset {f.preset} names no NVIDIA GPU; pass --sm"
        return Machine(
            gpus=Probed.unknown(why), interpreter=Probed.unknown(f"--preset {f.preset}: another machine")
        )
    detected = detect_machine(target=target)
    if installing and version is not None and detected.python.value is not None:
        have = detected.python.value[:2]
        if parse_python(version) != have:
            raise BadInput(
                f"--python {version}: --install installs into {target.executable}, which is Python "
                f"{have[0]}.{have[1]}; pass --python PATH of a {version} interpreter, or drop --install"
            )
    return detected


def _runtime_above_driver(cuda: MajorMinor, driver: MajorMinor, preset: str | None) -> None:
    """BadInput for a described torch whose CUDA runtime no driver of that machine runs: a CUDA 13 torch
    beside a CUDA 12.8 driver cannot initialise CUDA at all (minor-version compatibility spans one major)."""
    if cuda[0] <= driver[0]:
        return
    said = (
        f"--preset {preset}'s driver, CUDA {format_version(driver)}"
        if preset
        else f"--driver {format_version(driver)}"
    )
    raise BadInput(
        f"no such machine: a torch built for CUDA {format_version(cuda)} needs a CUDA {cuda[0]} driver, and "
        f"{said} is older; pass --driver {cuda[0]}.0 or newer, or --cuda {driver[0]}.x"
    )


def _describe_instead(machine: Machine) -> str:
    """How to describe a machine with that GPU that exists: a preset of it, else a --platform of its CPU."""
    gpu = machine.gpu
    assert gpu is not None
    named = [name for name, p in sorted(presets().items()) if p.get("sm") == str(gpu.arch.number)]
    if named:
        return f"describe it with --preset {named[0]}"
    known = find_gpu(gpu.capability)
    cpu = min(known.cpus) if known is not None else "x86_64"
    return f"describe it with --platform manylinux_2_28_{cpu} (and --driver, --cuda of its own)"


def deprecated_force(command: str, instead: str) -> None:
    """Warn that ``command --force`` is deprecated and what it now means."""
    log.warning("%s --force is deprecated (it meant several things); it now means %s", command, instead)


# --- what build and pull --build share ---------------------------------------------------------------

InstallerOpt = Annotated[
    str,
    typer.Option(
        "--installer",
        envvar="LIBRARIAN_BUILD_INSTALLER",
        help="Build environments: auto (uv where installed), uv or pip.",
    ),
]
TorchIndexOpt = Annotated[
    str | None,
    typer.Option(
        "--torch-index",
        envvar="LIBRARIAN_TORCH_INDEX",
        help="Install torch from this index URL or folder of wheels (default: PyTorch's, as plan says).",
    ),
]
RepairOpt = Annotated[
    bool,
    typer.Option(
        "--repair",
        help="auditwheel repair (the CUDA and torch libraries never bundled) and the manylinux tag it meets.",
    ),
]
KeepOpt = Annotated[bool, typer.Option("--keep", help="Keep the build folder (its path is printed).")]
CompileCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache",
        metavar="DIR",
        help="The compile cache's folder: nvcc and the host compiler run through ccache (on PATH, else "
        "installed into the build environment). Default: LIBRARIAN_BUILD_CACHE, [tool.librarian] build-cache, "
        "else the user's cache's ccache folder. CCACHE_REMOTE_STORAGE passes through. Anything wrong with "
        "it: built uncached, said in one line.",
    ),
]
NoCompileCacheOpt = Annotated[
    bool, typer.Option("--no-cache", help="Compile without the compile cache (ccache).")
]
SandboxOpt = Annotated[
    bool,
    typer.Option(
        "--sandbox",
        help="Run the build backend in bubblewrap (bwrap): the machine read-only but its build folder. "
        "Refused where there is no bwrap.",
    ),
]


def cache_folder(flag: Path | None, off: bool, repo: str | None) -> Path | None:
    """The compile cache's folder (``None``: uncached) from the flags, the environment and the settings."""
    from librarian.ops.build.build_env import compile_cache_folder  # here: a plain pull loads no build

    if flag is not None and off:
        raise BadInput("--cache and --no-cache: choose one")
    return compile_cache_folder(flag, off, load_settings(repo).build_cache)


def check_installer(installer: str) -> str:
    """``--installer``: auto, uv or pip."""
    if installer not in ("auto", "uv", "pip"):
        raise BadInput(f"--installer {installer}: auto, uv or pip")
    return installer
