"""Each command's own options, declared once here, so that a command's signature is one line per flag and
its body parses and renders only (the options several commands share are :mod:`librarian.cli.options`')."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ListOpt = list[str] | None  # a repeatable option's values

# --- pull ---------------------------------------------------------------------------------------------
PackagesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Packages to fetch (pip's name matching: flash-attn finds flash_attn; NAME==VERSION pins).",
        show_default=False,
    ),
]
ServeGpuOpt = Annotated[
    int | None, typer.Option("--gpu", help="Which GPU to serve when there are several (default 0).")
]
PullOutOpt = Annotated[
    Path | None,
    typer.Option(
        "-o", "--out", help="Directory to put the wheels in (default: here; with --install, a temporary one)."
    ),
]
InstallOpt = Annotated[
    bool,
    typer.Option(
        "--install", help="Then pip install --force-reinstall --no-deps them into the target interpreter."
    ),
]
RequirementsOpt = Annotated[
    Path | None,
    typer.Option(
        "--requirements",
        help="Download nothing; write 'name @ URL --hash=sha256:...' lines to FILE for pip/uv.",
    ),
]
CompatibleOpt = Annotated[
    bool, typer.Option("--compatible", help="With no exact cell, take a wheel that runs on this GPU anyway.")
]
ForceInstallOpt = Annotated[
    bool, typer.Option("--force", help="--install even a wheel the verdicts say will not run here.")
]
BuildOnMissOpt = Annotated[
    bool,
    typer.Option(
        "--build", help="On a miss, build it for exactly this machine (GPU, torch, CUDA, Python) here."
    ),
]
SourceOpt = Annotated[
    str | None,
    typer.Option(
        "--source",
        help="With --build: what to build, an sdist or source folder (default: the name, from PyPI).",
    ),
]
PublishBuiltOpt = Annotated[
    bool,
    typer.Option("--publish", help="With --build: file what was built in the store, for the next machine."),
]
CreateForBuildOpt = Annotated[
    bool, typer.Option("--create", help="With --build --publish: create the Hub dataset repo if needed.")
]
FixOpt = Annotated[
    bool,
    typer.Option(
        "--fix",
        help="Replace each installed package of the target environment that will not run here "
        "(doctor --env) with the stored wheel that does, then judge it again.",
    ),
]
FixDryRunOpt = Annotated[bool, typer.Option("--dry-run", help="With --fix: say what it would do.")]

# --- doctor -------------------------------------------------------------------------------------------
DoctorWheelsArg = Annotated[
    list[Path] | None, typer.Argument(help="Wheels to judge, or directories of them.", show_default=False)
]
DoctorGlibcOpt = Annotated[str | None, typer.Option("--glibc", help="glibc version, e.g. 2.31.")]
ShowMachineOpt = Annotated[
    bool, typer.Option("--machine", help="Show what was detected about this machine, and how.")
]
EnvOpt = Annotated[
    bool,
    typer.Option(
        "--env",
        help="Judge every installed package with native code in the target environment (--python PATH, "
        "else the active venv, else librarian's own) instead of wheel files.",
    ),
]

# --- build --------------------------------------------------------------------------------------------
SpecArg = Annotated[
    str | None,
    typer.Argument(
        help="A requirement (flash-attn==2.8.3), an sdist or a source folder; with --job, default: its spec.",
        show_default=False,
    ),
]
ComboTorchOpt = Annotated[str | None, typer.Option("--torch", help="The combo's torch minor, e.g. 2.9.")]
ComboCudaOpt = Annotated[str | None, typer.Option("--cuda", help="The combo's CUDA line, e.g. 12.8.")]
BuildPythonOpt = Annotated[
    str | None, typer.Option("--python", help="The CPython to build for, e.g. 3.12 (default: this one).")
]
HostPlatformOpt = Annotated[
    str,
    typer.Option(
        "--platform",
        help="This host's own: PyTorch's name (linux-x86_64, linux-aarch64, windows-amd64) or a wheel tag of it.",
    ),
]
BuildSmOpt = Annotated[
    list[str] | None,
    typer.Option("--sm", help="A GPU to build for, e.g. 89 (repeatable): exactly these cells."),
]
BuildPtxOpt = Annotated[bool, typer.Option("--ptx", help="Add PTX of the newest arch (+PTX).")]
FloorGlibcOpt = Annotated[
    str | None,
    typer.Option(
        "--glibc", help="The glibc floor of the plan this build serves (default 2.28, torch's; as plan's)."
    ),
]
JobOpt = Annotated[
    str | None,
    typer.Option("--job", help="One entry of 'plan --json' jobs or 'plan --github' include, as JSON."),
]
BuildRepoOpt = Annotated[
    str | None,
    typer.Option("--repo", help="File the wheel into this store (as publish does); default: the project's."),
]
BuildStageOpt = Annotated[
    bool, typer.Option("--stage", help="Stage it for one later 'librarian reindex' (a CI fan-in).")
]
BuildManifestOpt = Annotated[
    Path | None,
    typer.Option("--manifest", help="With --stage: upload the bytes only and write the entries to FILE."),
]
BuildOutOpt = Annotated[
    Path | None,
    typer.Option("-o", "--out", help="Write the checked, labelled wheel to DIR instead of a store."),
]

# --- plan --------------------------------------------------------------------------------
PlanSpecsArg = Annotated[
    list[str],
    typer.Argument(
        help="What to build: NAME==VERSION (e.g. flash-attn==2.8.3), several allowed.", show_default=False
    ),
]
PlanSmOpt = Annotated[
    ListOpt, typer.Option("--sm", help="A GPU to serve, e.g. 89 (repeatable); or --sm-from store.")
]
PlanSmFromOpt = Annotated[
    str | None, typer.Option("--sm-from", help="'store': every GPU the store already serves.")
]
PlanTorchOpt = Annotated[ListOpt, typer.Option("--torch", help="torch minor(s), e.g. 2.9 (repeatable).")]
PlanNewestOpt = Annotated[
    int | None, typer.Option("--newest", help="The newest N torch lines (default 1 without --torch).")
]
PlanCudaOpt = Annotated[
    ListOpt,
    typer.Option("--cuda", help="CUDA line(s), e.g. 12.8 (repeatable; default: every line of each torch)."),
]
PlanPythonOpt = Annotated[
    ListOpt,
    typer.Option(
        "--python",
        help="Python version(s), e.g. 3.12 (repeatable; default: the combo's, free-threaded ones only when named).",
    ),
]
PlanPlatformOpt = Annotated[
    ListOpt,
    typer.Option(
        "--platform",
        help="linux-x86_64 (default), linux-aarch64, windows-amd64, or a wheel tag of one (repeatable).",
    ),
]
PlanStableOnlyOpt = Annotated[bool, typer.Option("--stable-only", help="Only stable CUDA lines.")]
PlanGlibcOpt = Annotated[
    str | None,
    typer.Option("--glibc", help="The oldest glibc the wheels must run on (default 2.28, torch's own)."),
]
PlanPtxOpt = Annotated[
    bool, typer.Option("--ptx", help="Add +PTX to each job's newest arch (JIT for GPUs newer than all).")
]
PlanBudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget",
        help="Each job's estimate within this time (e.g. 5h30m; GitHub-hosted jobs stop at 6h): a combo's "
        "GPUs cut into several jobs where they would take longer.",
    ),
]
PlanSourceOpt = Annotated[
    str | None,
    typer.Option(
        "--source",
        help="What the jobs build (a source folder or sdist; default: the release from the package "
        "index), compared with the failures and builds the store recorded.",
    ),
]
PlanRetryFailedOpt = Annotated[
    bool, typer.Option("--retry-failed", help="Plan the cells whose recorded build failed, again.")
]
PlanRebuildOtherSourceOpt = Annotated[
    bool,
    typer.Option(
        "--rebuild-other-source",
        help="Plan again the held cells built from another source of the version.",
    ),
]
