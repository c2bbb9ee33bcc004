"""Building for this machine: the one build that makes a package for exactly the machine a pull resolves for
(its GPU, its torch and CUDA line, its CPython and platform), checked before anything is downloaded, and the
built wheel checked and labelled as publish would (``pull --build``, ``build -o``)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from librarian.coords import format_version
from librarian.errors import BadInput
from librarian.ops.build import BuildSettings, build, find_nvcc
from librarian.ops.build_request import BuildRequest, check_nvcc, request_from_flags
from librarian.ops.build_run import Say, build_folder
from librarian.ops.prepare import PublishOptions
from librarian.ops.publish import PublishPlan, publish
from librarian.ops.pull import Wants
from librarian.ops.retag import retag_each
from librarian.pytorch.matrix import Matrix
from librarian.pytorch.releases import Platform
from librarian.stores.base import Store
from librarian.stores.local import LocalStore

# The machine's (OS, CPU) as torch's CUDA builds name their platforms.
_PLATFORMS = {
    ("linux", "x86_64"): Platform.LINUX_X86_64,
    ("linux", "aarch64"): Platform.LINUX_AARCH64,
    ("win32", "x86_64"): Platform.WINDOWS_AMD64,
}


def machine_request(matrix: Matrix, spec: str, wants: Wants) -> BuildRequest:
    """The build of ``spec`` for exactly the machine ``wants`` describes: one cell, its GPU.

    BadInput, naming the flag, where the machine does not say enough to build for it (a torch without CUDA,
    no interpreter version, a platform torch ships no CUDA build for)."""
    machine = wants.machine
    if wants.cuda is None:
        raise BadInput(
            "pull --build: the target's torch has no CUDA line (a CPU build of torch?); a CUDA extension "
            "needs torch's CUDA build: install one, or pass --cuda X.Y"
        )
    version = machine.python.value
    if not version or len(version) < 2:
        raise BadInput("pull --build: the target interpreter's version is unknown; pass --python 3.12")
    where = (machine.os.value, machine.cpu.value)
    platform = _PLATFORMS.get((str(where[0]), str(where[1])))
    if platform is None:
        raise BadInput(
            f"pull --build: torch ships no CUDA build for {where[0] or 'an unknown OS'} on "
            f"{where[1] or 'an unknown CPU'}; build on a Linux (x86_64, aarch64) or Windows machine"
        )
    return request_from_flags(
        matrix,
        spec,
        format_version(wants.torch),
        format_version(wants.cuda),
        f"{version[0]}.{version[1]}",
        platform.value,
        [str(wants.sm.number)],
    )


def check_toolchain(request: BuildRequest) -> str | None:
    """nvcc found and of the combo's CUDA major (BadInput otherwise), before anything is downloaded; the
    warning torch would give for another minor."""
    return check_nvcc(find_nvcc(), request.combo.cuda)


def label_checked(wheel: Path, options: PublishOptions, out: Path) -> Path:
    """``wheel`` through publish's checks (into a scratch store: nothing filed), then labelled into ``out``."""
    with tempfile.TemporaryDirectory(prefix="librarian-check-") as scratch:
        publish(LocalStore(Path(scratch) / "store", may_create=True), [wheel], options, dry_run=True)
    out.mkdir(parents=True, exist_ok=True)
    (done,) = retag_each([wheel], options.label, out)
    return done.path


def publish_options(request: BuildRequest, options: PublishOptions) -> PublishOptions:
    """``options`` with the request's label and exactly its cells (no ``--trust-sm``: the bytes must serve
    each natively, or publish refuses it by name)."""
    return replace(options, label=request.combo.label, sms=request.sms, trust_sm=False)


@dataclass(frozen=True, slots=True)
class BuiltHere:
    """A wheel built for this machine: labelled in ``wheel``, its log, and the publish it was filed by."""

    wheel: Path
    log: Path
    published: PublishPlan | None


def build_here(
    request: BuildRequest,
    settings: BuildSettings,
    options: PublishOptions,
    out: Path,
    say: Say,
    step: Say,
    store: Store | None = None,
) -> BuiltHere:
    """Build ``request``, check and label the wheel into ``out``, and file it in ``store`` when given."""
    options = publish_options(request, options)
    with build_folder(settings.keep) as folder:
        if settings.keep:
            say(f"build folder (kept): {folder}")
        built = build(request, settings, folder, say, step)
        labelled = label_checked(built.wheel, options, out)
    plan = publish(store, [labelled], options) if store is not None else None
    return BuiltHere(labelled, built.log, plan)
