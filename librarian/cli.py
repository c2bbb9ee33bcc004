"""The command line: options -> ops -> output. The one place that prints, and the one error funnel.

Exit status: 0 done, 1 a finding (verify found problems, pull found no match, doctor says no),
2 bad usage or bad input (a missing store too), 3 the store could not be reached or refused us. Errors are one line on stderr: ``librarian: error: <file or value>: <problem>``;
a traceback only with ``LIBRARIAN_DEBUG=1``.

Each command imports its operation inside the function, on purpose: ``librarian --version`` and a pull from
a local store then load only what they use (no Hub client, no binary readers; tests/test_startup.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from librarian import __version__, progress
from librarian.coords import Label, WheelName, parse_cuda, parse_torch
from librarian.errors import BadInput, LibrarianError
from librarian.gpus import parse_real_sm
from librarian.layout import Layout
from librarian.probe.target import is_version
from librarian.redact import clean

log = logging.getLogger("librarian")
ERROR_CHARS = 1000  # an error line longer than this is cut (a server once sent 19 KB of zip bytes)

app = typer.Typer(
    name="librarian",
    help="Keep a cache of compiled CUDA / PyTorch extension wheels: retag, publish, verify, pull, prune.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[@REV]" is part of an address, not markup
    context_settings={"help_option_names": ["-h", "--help"]},
)

RepoOpt = Annotated[str | None, typer.Option("--repo", help="Store: a directory or hf://datasets/OWNER/NAME[@REV] (env LIBRARIAN_REPO).", show_default="./wheelhouse")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (with \"schema\": 1).")]
CudaOpt = Annotated[str | None, typer.Option("--cuda", help="CUDA line, e.g. 12.8 (default: the installed torch's).")]
TorchOpt = Annotated[str | None, typer.Option("--torch", help="torch minor, e.g. 2.8 (default: the installed torch's).")]
WheelsArg = Annotated[list[Path], typer.Argument(help="Wheel files.", show_default=False)]


@dataclass(slots=True)
class _Ui:
    """How this run talks to the user: set from the global options and ``--json``."""

    quiet: bool = False
    verbose: int = 0
    json: bool = False


_ui = _Ui()


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"librarian {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print librarian's version and exit.")] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors on stderr: no notes, no progress bars (anywhere on the line).")] = False,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True, show_default=False, help="More on stderr: -v says what is done, -vv debugs (anywhere on the line).")] = 0,
) -> None:
    """Keep a cache of compiled CUDA / PyTorch extension wheels: retag, publish, verify, pull, prune."""
    _ui.quiet, _ui.verbose = quiet, verbose
    level = "ERROR" if quiet else {0: os.environ.get("LIBRARIAN_LOG", "WARNING").upper(), 1: "INFO"}.get(verbose, "DEBUG")
    logging.getLogger("librarian").setLevel(level)
    if not quiet and not _ui.json and sys.stderr.isatty():  # bars for a person at a terminal only
        from librarian.terminal import RichReporter

        progress.set_reporter(RichReporter())


def _out(text: str) -> None:
    typer.echo(text)


def _note(text: str) -> None:
    """A note on stderr, silenced by ``-q``."""
    if not _ui.quiet:
        typer.echo(f"librarian: note: {text}", err=True)


def _emit_json(data: dict[str, Any]) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=True))


def _settings(repo: str | None, create: bool = False, publishing: bool = False) -> tuple[Any, Layout]:
    from librarian.config import load_layout, load_settings
    from librarian.stores import open_store

    settings = load_settings(repo)
    store = open_store(settings.repo, create=create, publishing=publishing, license=settings.license)
    return store, load_layout(settings.layout)


def _maybe(parse: Any, text: str | None) -> Any:
    return None if text is None else parse(text)


def _label(cuda: str | None, torch: str | None, python: str | None = None) -> Label | None:
    from librarian.ops.labels import label_from_flags
    from librarian.probe.target import find_target

    if python is not None and is_version(python):
        raise BadInput(f"--python {python}: retag takes an interpreter or venv path (whose torch gives the label)")
    return label_from_flags(_maybe(parse_cuda, cuda), _maybe(parse_torch, torch), find_target(python))


JobsOpt = Annotated[int | None, typer.Option("-j", "--jobs", min=1, help="Threads reading wheels (default: the cores available; -j 1: one).")]
RelabelOpt = Annotated[bool, typer.Option("--relabel", help="Replace the label a wheel already carries (ours or a foreign one).")]
OldForceOpt = Annotated[bool, typer.Option("--force", hidden=True, help="Deprecated: see --relabel and the other --allow-* flags.")]


def _deprecated_force(command: str, instead: str) -> None:
    log.warning("%s --force is deprecated (it meant several things); it now means %s", command, instead)


def _expand(paths: list[Path], suffixes: tuple[str, ...]) -> list[Path]:
    """Each file as given; a directory becomes every file inside it (recursively) with one of ``suffixes``."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes))
            if not inside:
                raise BadInput(f"{path}: a directory with no {' or '.join(suffixes)} file inside")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise BadInput(f"{path}: no such file or directory")
    return found


@app.command()
def retag(
    wheels: WheelsArg,
    cuda: CudaOpt = None,
    torch: TorchOpt = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Directory for the labelled wheels.")] = Path("."),
    relabel: RelabelOpt = False,
    force: OldForceOpt = False,
    python: Annotated[str | None, typer.Option("--python", help="Interpreter or venv whose torch gives the default label (default: the active venv, else librarian's own).")] = None,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite wheels with the label +cuXYZtorchA.B (filename, METADATA, .dist-info, RECORD)."""
    from librarian.ops.labels import choose_label
    from librarian.wheel.retag import retag as retag_wheel

    if force:
        _deprecated_force("retag", "--relabel")
        relabel = True
    label = _label(cuda, torch, python)
    written = []
    for path in wheels:
        if not path.is_file():
            raise BadInput(f"{path}: no such file")
        wanted = choose_label(WheelName.parse(path.name), label, relabel=relabel)
        new = retag_wheel(path, wanted, out, relabel=relabel, jobs=jobs)
        written.append({"source": str(path), "path": str(new), "label": str(wanted)})
        if not as_json:
            _out(str(new))
    if as_json:
        _emit_json({"schema": 1, "wheels": written})


@app.command()
def inspect(
    files: Annotated[list[Path], typer.Argument(help="Wheels, bare .so / .pyd files, or directories (every wheel inside).", show_default=False)],
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Also show each native member (the global -v).")] = False,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The seven demands of each wheel, read from its bytes (GPU archs, torch, CUDA, Python, CPU, OS, glibc)."""
    from librarian.ops.inspect import inspect_file, inspection_json, render_inspection

    items = [inspect_file(f, jobs=jobs) for f in _expand(files, (".whl",))]
    if as_json:
        _emit_json({"schema": 1, "files": [inspection_json(i) for i in items]})
    else:  # -v here or before the command: more detail, one meaning
        _out("\n\n".join(render_inspection(i, verbose or _ui.verbose > 0) for i in items))


SmOpt = Annotated[str | None, typer.Option("--sm", help="GPU arch, e.g. 89 (default: the detected GPU).")]
PythonOpt = Annotated[str | None, typer.Option("--python", help="An interpreter or venv to act for (default: the active venv, else librarian's own), or a version, e.g. 3.12, to resolve for.")]
PlatformOpt = Annotated[str | None, typer.Option("--platform", help="Platform tag, e.g. manylinux_2_28_x86_64.")]
GpuOpt = Annotated[int | None, typer.Option("--gpu", help="Which GPU to judge when there are several (default 0).")]
DriverOpt = Annotated[str | None, typer.Option("--driver", help="The driver's CUDA version, e.g. 12.8 (for PTX JIT).")]


@app.command()
def doctor(
    wheels: Annotated[list[Path] | None, typer.Argument(help="Wheels to judge, or directories of them.", show_default=False)] = None,
    sm: SmOpt = None,
    torch: TorchOpt = None,
    cuda: CudaOpt = None,
    python: PythonOpt = None,
    platform: PlatformOpt = None,
    glibc: Annotated[str | None, typer.Option("--glibc", help="glibc version, e.g. 2.31.")] = None,
    driver: DriverOpt = None,
    gpu: GpuOpt = None,
    machine: Annotated[bool, typer.Option("--machine", help="Show what was detected about this machine, and how.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Will it run here? Each of the seven demands against this machine (flags override detection). Exit 1 if not."""
    from librarian.ops.doctor import doctor as do_doctor
    from librarian.ops.doctor import doctor_json, machine_json, render_doctor, render_machine

    wheels = _expand(wheels, (".whl",)) if wheels else None
    found = _machine(sm, torch, cuda, python, platform, glibc, driver, gpu)
    if not wheels:
        if as_json:
            _emit_json({"schema": 1, "machine": machine_json(found)})
        else:
            _out(render_machine(found))
        return
    reports = [do_doctor(path, found) for path in wheels]
    if as_json:  # one JSON document, the machine in it when asked for
        shown = {"machine": machine_json(found)} if machine else {}
        _emit_json({"schema": 1, **shown, "wheels": [doctor_json(r) for r in reports]})
    else:
        machine_text = [render_machine(found)] if machine else []
        _out("\n\n".join([*machine_text, *(render_doctor(r) for r in reports)]))
    if any(r.runs is False for r in reports):
        raise typer.Exit(1)


@app.command()
def publish(
    wheels: WheelsArg,
    repo: RepoOpt = None,
    cuda: CudaOpt = None,
    torch: TorchOpt = None,
    sm: Annotated[list[str] | None, typer.Option("--sm", help="GPU arch to file under (repeatable); default: from the binaries.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; change nothing.")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a different wheel at the same path.")] = False,
    relabel: RelabelOpt = False,
    trust_sm: Annotated[bool, typer.Option("--trust-sm", help="File under each --sm even where the binaries have no code for it.")] = False,
    allow_glibc_mismatch: Annotated[bool, typer.Option("--allow-glibc-mismatch", help="Accept a manylinux tag older than the glibc the binaries need.")] = False,
    allow_cuda_mismatch: Annotated[bool, typer.Option("--allow-cuda-mismatch", help="Accept a label whose CUDA line the device code or libcudart contradicts.")] = False,
    allow_platform_mismatch: Annotated[bool, typer.Option("--allow-platform-mismatch", help="Accept a platform tag naming another CPU or OS than the binaries.")] = False,
    force: OldForceOpt = False,
    allow_unknown_combo: Annotated[bool, typer.Option("--allow-unknown-combo", help="Accept a torch/CUDA combo PyTorch never shipped.")] = False,
    create: Annotated[bool, typer.Option("--create", help="Create the Hub dataset repo if it does not exist.")] = False,
    stage: Annotated[bool, typer.Option("--stage", help="Fan-in: store the wheels and pending entries only; one final 'librarian reindex' indexes them.")] = False,
    manifest: Annotated[Path | None, typer.Option("--manifest", help="With --stage: upload the bytes only (no commit) and write the entries to FILE, for 'reindex --manifest'.")] = None,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Label, check and file wheels into the store, in one atomic change with the index (or --stage them)."""
    from librarian.ops.publish import PublishOptions
    from librarian.ops.publish import publish as do_publish

    if force:
        _deprecated_force("publish", "--relabel --trust-sm --allow-glibc-mismatch --allow-cuda-mismatch --allow-platform-mismatch")
        relabel = trust_sm = allow_glibc_mismatch = allow_cuda_mismatch = allow_platform_mismatch = True
    store, layout = _settings(repo, create=create, publishing=True)
    # Flags always make a label; without them only unlabelled wheels need one (from the installed torch).
    unlabelled = any(WheelName.parse(w.name).label is None for w in wheels if w.name.endswith(".whl"))
    label = _label(cuda, torch) if cuda is not None or torch is not None or unlabelled else None
    options = PublishOptions(
        label=label,
        sms=tuple(parse_real_sm(s) for s in sm or ()),
        replace=replace,
        relabel=relabel,
        trust_sm=trust_sm,
        allow_glibc_mismatch=allow_glibc_mismatch,
        allow_cuda_mismatch=allow_cuda_mismatch,
        allow_platform_mismatch=allow_platform_mismatch,
        allow_unknown_combo=allow_unknown_combo,
        layout=layout,
        jobs=jobs,
    )
    if manifest is not None and not stage:
        raise BadInput("--manifest: goes with --stage (publish --stage --manifest FILE)")
    plan = do_publish(store, wheels, options, dry_run=dry_run, stage=stage, manifest=manifest)
    if as_json:
        _emit_json(plan.to_json(store.location, dry_run=dry_run, stage=stage, manifest=manifest))
    else:
        _out(plan.render(store.location, dry_run=dry_run, stage=stage, manifest=manifest))


@app.command()
def reindex(
    repo: RepoOpt = None,
    adopt: Annotated[bool, typer.Option("--adopt", help="Also index wheels in the tree that have no entry, from their paths.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be merged; change nothing.")] = False,
    manifest: Annotated[list[Path] | None, typer.Option("--manifest", help="Merge the wheels these 'publish --stage --manifest' files (or folders of them) staged, in one commit (repeatable).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="With --manifest: overwrite a different wheel at the same path.")] = False,
    allow_unknown_combo: Annotated[bool, typer.Option("--allow-unknown-combo", help="With --manifest: accept a torch/CUDA combo PyTorch never shipped.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fan-in: merge every staged entry (publish --stage) into the index, in one commit. Exit 1 if any was dropped."""
    from librarian.ops.reindex import reindex as do_reindex
    from librarian.ops.reindex import reindex_json, render_reindex
    from librarian.ops.staged import ManifestOptions, reindex_manifests

    if manifest and adopt:
        raise BadInput("--adopt: not with --manifest (run 'reindex --adopt' on its own)")
    store, layout = _settings(repo)
    if manifest:
        options = ManifestOptions(replace=replace, allow_unknown_combo=allow_unknown_combo)
        report = reindex_manifests(store, layout, manifest, options, dry_run=dry_run)
    else:
        report = do_reindex(store, layout, adopt=adopt, dry_run=dry_run)
    if as_json:
        _emit_json({"schema": 1, "dry_run": dry_run, **reindex_json(report)})
    else:
        _out(render_reindex(report, dry_run))
    if report.findings:
        raise typer.Exit(1)


@app.command()
def verify(
    repo: RepoOpt = None,
    deep: Annotated[bool, typer.Option("--deep", help="Also read every byte: RECORD hashes, binaries against cells.")] = False,
    jobs: JobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check every stored wheel against its path, label, metadata and the index. Exit 1 on any problem."""
    from librarian.ops.verify import verify as do_verify

    store, layout = _settings(repo)
    report = do_verify(store, layout, deep=deep, jobs=jobs)
    _emit_json(report.to_json()) if as_json else _out(report.render())
    if report.problems:
        raise typer.Exit(1)


@app.command("ls")
def ls_command(
    packages: Annotated[list[str] | None, typer.Argument(help="Packages to show (default: all).", show_default=False)] = None,
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What is stored: a coverage table of packages x torch/CUDA combos x GPU archs; '-' marks a hole."""
    from librarian.coverage import render_coverage
    from librarian.ops.ls import coverage_json, ls

    store, layout = _settings(repo)
    cov = ls(store, layout, packages or ())
    if as_json:
        _emit_json(coverage_json(cov))
    else:
        _out(render_coverage(cov))


def _machine(sm: str | None, torch: str | None, cuda: str | None, python: str | None, platform: str | None,
             glibc: str | None = None, driver: str | None = None, gpu: int | None = None) -> Any:
    from librarian.probe import detect_machine
    from librarian.probe.target import find_target, is_version

    # --python is a version (resolve for it) or a path (act for that interpreter): uv's convention.
    version = python if python is not None and is_version(python) else None
    return detect_machine(target=find_target(python)).with_overrides(
        sm=sm, gpu=gpu, torch=torch, cuda=cuda, python=version, platform=platform, glibc=glibc, driver=driver
    )


@app.command()
def pull(
    packages: Annotated[list[str], typer.Argument(help="Packages to fetch (pip's name matching: flash-attn finds flash_attn).", show_default=False)],
    sm: Annotated[str | None, typer.Option("--sm", help="GPU arch, e.g. 89 (default: detected GPU).")] = None,
    torch: TorchOpt = None,
    cuda: CudaOpt = None,
    python: PythonOpt = None,
    platform: Annotated[str | None, typer.Option("--platform", help="Platform tag, e.g. manylinux_2_28_x86_64.")] = None,
    gpu: Annotated[int | None, typer.Option("--gpu", help="Which GPU to serve when there are several (default 0).")] = None,
    repo: RepoOpt = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Directory to put the wheels in.")] = Path("."),
    install: Annotated[bool, typer.Option("--install", help="Then pip install --force-reinstall --no-deps them into the target interpreter.")] = False,
    requirements: Annotated[Path | None, typer.Option("--requirements", help="Download nothing; write 'name @ URL --hash=sha256:...' lines to FILE for pip/uv.")] = None,
    compatible: Annotated[bool, typer.Option("--compatible", help="With no exact cell, take a wheel that runs on this GPU anyway.")] = False,
    force: Annotated[bool, typer.Option("--force", help="--install even a wheel the verdicts say will not run here.")] = False,
    driver: DriverOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch the exact wheel for this machine (newest version), sha256-checked."""
    from librarian.ops.pull import Wants
    from librarian.ops.pull import install as pip_install
    from librarian.ops.pull import pull as do_pull

    if install and requirements is not None:
        raise BadInput("--install and --requirements: choose one (the file is for installing without librarian)")
    store, layout = _settings(repo)
    found = _machine(sm, torch, cuda, python, platform, driver=driver, gpu=gpu)
    wants = Wants.of(found)
    report = do_pull(store, layout, packages, wants, out, compatible=compatible, requirements=requirements)
    for note in report.notes:
        _note(note)
    _emit_json(report.to_json()) if as_json else _out(report.render())
    if install:
        from librarian.ops.doctor import check_runs

        check_runs(report.files, found, force=force)
        pip_install(report.files, found.interpreter.value or sys.executable)


@app.command()
def gc(
    repo: RepoOpt = None,
    keep_torch: Annotated[int | None, typer.Option("--keep-torch", min=1, help="Keep the newest N torch lines in the store.")] = None,
    keep_torch_from: Annotated[str, typer.Option("--keep-torch-from", help="Count --keep-torch over the torch lines in the 'store' or the ones PyTorch shipped ('matrix').")] = "store",
    drop_torch: Annotated[list[str] | None, typer.Option("--drop-torch", help="Drop a torch line, e.g. 2.4 (repeatable).")] = None,
    keep_versions: Annotated[int | None, typer.Option("--keep-versions", min=1, help="Keep the newest K versions per cell.")] = None,
    older_than: Annotated[int | None, typer.Option("--older-than", min=0, help="Drop wheels published more than DAYS ago.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Act on the plan (without it, only print it).")] = False,
    purge: Annotated[bool, typer.Option("--purge", help="Hub: also delete the removed wheels' LFS objects for good (frees the storage).")] = False,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Accept a plan that removes every wheel of a package.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Prune stale torch lines and superseded versions; prints the plan, acts only with --yes."""
    from librarian.ops.gc import GcPolicy
    from librarian.ops.gc import gc as do_gc

    if keep_torch_from not in ("store", "matrix"):
        raise BadInput(f"--keep-torch-from {keep_torch_from}: expected 'store' or 'matrix'")
    lines = None
    if keep_torch_from == "matrix":
        from librarian.pytorch.matrix import load_matrix

        lines = load_matrix().torch_versions()
    policy = GcPolicy(keep_torch, tuple(parse_torch(t) for t in drop_torch or ()), keep_versions, older_than, lines=lines)
    if policy.empty:
        raise BadInput("gc: say what to prune: --keep-torch N, --drop-torch X.Y, --keep-versions K or --older-than DAYS")
    store, layout = _settings(repo)
    report = do_gc(store, layout, policy, act=yes, purge=purge, allow_empty=allow_empty)
    _emit_json(report.to_json(store.location)) if as_json else _out(report.render(store.location, purge_asked=purge))


matrix_app = typer.Typer(
    help="The (torch, CUDA, Python, platform) combos PyTorch shipped; 'matrix refresh' reads PyTorch's index.",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
)
app.add_typer(matrix_app, name="matrix")
ListOpt = list[str] | None


@matrix_app.callback()
def matrix(
    ctx: typer.Context,
    torch: Annotated[ListOpt, typer.Option("--torch", help="torch minor(s), e.g. 2.8 (repeatable).")] = None,
    cuda: Annotated[ListOpt, typer.Option("--cuda", help="CUDA line(s), e.g. 12.8 (repeatable).")] = None,
    python: Annotated[ListOpt, typer.Option("--python", help="Python version(s), e.g. 3.12 (repeatable).")] = None,
    platform: Annotated[ListOpt, typer.Option("--platform", help="Platform(s), e.g. linux-x86_64 (repeatable).")] = None,
    newest: Annotated[int | None, typer.Option("--newest", help="Only the newest N torch lines.")] = None,
    stable_only: Annotated[bool, typer.Option("--stable-only", help="Only stable CUDA lines (no experimental or served-only).")] = False,
    github: Annotated[bool, typer.Option("--github", help="Print a GitHub Actions strategy.matrix (JSON) of build jobs.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The combos PyTorch shipped, as a table, JSON, or a GitHub Actions build matrix."""
    if ctx.invoked_subcommand is not None:
        return
    from librarian.pytorch.matrix import Selection, github_matrix, load_matrix, matrix_json, render_table

    sel = Selection.parse(torch or (), cuda or (), python or (), platform or (), newest, stable_only)
    loaded = load_matrix()
    if github:
        _emit_json(github_matrix(loaded, sel))
        return
    combos = loaded.select(sel)
    if as_json:
        _emit_json(matrix_json(combos))
    else:
        _out(render_table(combos))


@matrix_app.command("refresh")
def matrix_refresh(
    source: Annotated[str | None, typer.Option("--from", help="An index page: URL or file (PEP 503 HTML or PEP 691 JSON). Default: PyTorch's index, every CUDA line.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Record what PyTorch's wheel index serves, in your user override file (not the installed package)."""
    from librarian.pytorch.refresh import refresh

    result = refresh(source)
    if as_json:
        _emit_json({"schema": 1, "path": str(result.path), "sources": list(result.sources), "served": result.served,
                    "skipped": result.skipped, "added": [str(c) for c in result.added],
                    "removed": [str(c) for c in result.removed]})  # fmt: skip
        return
    for combo in result.added:
        _out(f"added    {combo}")
    for combo in result.removed:
        _out(f"removed  {combo}")
    _out(f"read {result.served} served combo(s) from {len(result.sources)} page(s); wrote {result.path}")


def _fail(message: str, code: int, details: list[str] | None = None) -> NoReturn:
    # The one funnel: every error line is made one short line without tokens (server text is untrusted).
    line = clean(message, ERROR_CHARS)
    cleaned = [clean(d, ERROR_CHARS).strip() for d in details or ()]
    if _ui.json:  # scripts get the failure on stdout too, as the one JSON document they parse
        _emit_json({"schema": 1, "error": line, "exit": code, "details": cleaned})
    typer.echo(f"librarian: error: {line}", err=True)
    for detail in details or ():
        indent = detail[: len(detail) - len(detail.lstrip(" "))]
        typer.echo(indent + clean(detail, ERROR_CHARS), err=True)
    raise SystemExit(code)


def _is_global_flag(arg: str) -> bool:
    return arg in ("-q", "--quiet", "--verbose") or re.fullmatch(r"-v+", arg) is not None


def _hoist_global_flags(args: list[str]) -> list[str]:
    """``-q``/``-v`` anywhere before a ``--`` act as the global options (as pip and uv take them)."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if _is_global_flag(a)]
    return flags + [a for i, a in enumerate(args) if i >= end or not _is_global_flag(a)]


def _asks_json(args: list[str]) -> bool:
    """Whether ``--json`` is among the options (before a ``--``), known before typer parses anything."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


class _StderrHandler(logging.Handler):
    """Log lines as ``librarian: <message>`` on whatever ``sys.stderr`` is at the time of writing."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"librarian: {clean(record.getMessage(), ERROR_CHARS)}\n")
        except Exception:  # noqa: BLE001 - logging must never break a command
            self.handleError(record)


def _log_to_stderr() -> None:
    logger = logging.getLogger("librarian")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
        logger.propagate = False
    logger.setLevel(os.environ.get("LIBRARIAN_LOG", "WARNING").upper())


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; the one place errors become a line on stderr and an exit status."""
    args = _hoist_global_flags(sys.argv[1:] if argv is None else list(argv))
    _ui.quiet, _ui.verbose, _ui.json = False, 0, _asks_json(args)
    _log_to_stderr()
    try:
        _run(args)
    finally:
        progress.set_reporter(None)


def _run(args: list[str]) -> NoReturn:
    debug = os.environ.get("LIBRARIAN_DEBUG") == "1"
    try:
        result = app(args=args, prog_name="librarian", standalone_mode=False)
    except typer.Abort:
        _fail("aborted", 130)
    except typer.TyperException as e:  # typer's vendored click: usage errors, no such option, ...
        if debug:
            raise
        ctx = getattr(e, "ctx", None)
        if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
            typer.echo(ctx.get_help())
            raise SystemExit(2) from None
        message = e.format_message() if hasattr(e, "format_message") else str(e)
        name = getattr(ctx, "info_name", None)
        hint = f" (see 'librarian {name} --help')" if name and name != "librarian" else " (see 'librarian --help')"
        _fail(" ".join(message.split()) + hint, int(getattr(e, "exit_code", 2)))
    except LibrarianError as e:
        if debug:
            raise
        details = e.details() if hasattr(e, "details") else None
        _fail(str(e), e.exit_code, details)
    except OSError as e:
        if debug:
            raise
        where = e.filename if e.filename else "librarian"
        _fail(f"{where}: {e.strerror or e}", 2)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    raise SystemExit(result if isinstance(result, int) else 0)



