"""``librarian pull``: the wheel this machine wants, fetched and sha256-checked (or installed, or listed)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from librarian.cli import flags as f
from librarian.cli import options as o
from librarian.cli import rules, ui
from librarian.errors import BadInput
from librarian.machine import Machine
from librarian.ops.machine import installer, pull_build
from librarian.ops.machine import pull as pull_op

app = typer.Typer(rich_markup_mode=None)


@app.command()
def pull(
    packages: f.PackagesArg = None, sm: o.SmOpt = None, torch: o.TorchOpt = None, cuda: o.CudaOpt = None,
    python: o.PythonOpt = None, platform: o.PlatformOpt = None, gpu: f.ServeGpuOpt = None, repo: o.RepoOpt = None,
    out: f.PullOutOpt = None, install: f.InstallOpt = False, requirements: f.RequirementsOpt = None,
    compatible: f.CompatibleOpt = False, force: f.ForceInstallOpt = False, driver: o.DriverOpt = None,
    glibc: o.GlibcOpt = None, preset: o.PresetOpt = None, cpu: o.CpuOpt = None, os: o.OsOpt = None,
    build: f.BuildOnMissOpt = False, source: f.SourceOpt = None, publish: f.PublishBuiltOpt = False,
    create: f.CreateForBuildOpt = False, keep: o.KeepOpt = False, repair: o.RepairOpt = False,
    build_installer: o.InstallerOpt = "auto", torch_index: o.TorchIndexOpt = None,
    compile_cache: o.CompileCacheOpt = None, no_cache: o.NoCompileCacheOpt = False, fix: f.FixOpt = False,
    dry_run: f.FixDryRunOpt = False, as_json: o.JsonOpt = False,
) -> None:  # fmt: skip
    """Fetch the exact wheel for this machine (newest version), sha256-checked.

    Example: librarian pull flash-attn --sm 89 --torch 2.9 --python 3.12 --install
    """
    given = dict(locals())
    rules.check("pull", given)
    o.check_installer(build_installer)
    if source is not None and len(packages or []) > 1:
        raise BadInput("--source: names what to build for one package; pull one package with it")
    # The machine first: a --python that --install contradicts is refused before the store is touched.
    found = o.machine_of(o.MachineFlags.of(given), installing=install or fix)
    if fix:
        _fix(found, repo, out, dry_run=dry_run, force=force)
        return
    wants = pull_op.Wants.of(found)
    with _wheels_folder(out, install) as out_dir:
        # what would be built, and nvcc, checked before the store or any index is read
        on_miss = _on_miss(given, found, wants) if build else None
        store, layout = o.store_and_layout(repo, create=create, publishing=build and publish)
        report, built = pull_build.pull_or_build(store, layout, packages or [], wants, out_dir,
                                                 compatible=compatible, requirements=requirements,
                                                 on_miss=on_miss, voice=ui.BuildProgress())  # fmt: skip
        for note in report.notes:
            ui.note(note)
        if as_json:
            ui.emit_json({**report.to_json(), "built": [str(f) for f in built]})
        else:
            ui.out("\n".join(filter(None, [report.render(), *(f"built -> {f}" for f in built)])))
        if install:
            installer.install_checked([*report.files, *built], found, force=force)


def _fix(found: Machine, repo: str | None, out: Path | None, *, dry_run: bool, force: bool) -> None:
    """``pull --fix``: the target environment's packages that will not run here, replaced; exit 1 if one
    cannot be."""
    from librarian.ops.machine import fix as fix_op  # only --fix reads an environment's binaries

    store, layout = o.store_and_layout(repo)
    with _wheels_folder(out, True) as out_dir:
        clean = fix_op.fix_environment(found, pull_op.Wants.of(found), store, layout, out_dir, ui.out,
                                       dry_run=dry_run, force=force)  # fmt: skip
    if not clean:
        raise typer.Exit(1)


def _on_miss(given: Mapping[str, Any], found: Machine, wants: pull_op.Wants) -> pull_build.OnMiss:
    """``pull --build``: what each package would be built as, and how (the build's flags)."""
    from librarian.machine import parse_major_minor
    from librarian.ops.build.build_request import DEFAULT_GLIBC

    glibc, publish = given["glibc"], given["publish"]
    # filed into the shared store: held to the floor plan counts at (--glibc, else torch's 2.28)
    floor = (parse_major_minor(glibc, "glibc") if glibc else DEFAULT_GLIBC) if publish else None
    requests, warning = pull_build.build_requests(given["packages"] or [], given["source"], wants,
                                                  given["repair"], floor)  # fmt: skip
    if warning:
        ui.note(f"warning: {warning}")
    return pull_build.OnMiss(requests, found, installer=given["build_installer"], torch_index=given["torch_index"],
                             keep=given["keep"], publish=publish, repair=given["repair"],
                             variants=o.variants_wanted(None),
                             compile_cache=o.cache_folder(given["compile_cache"], given["no_cache"], given["repo"]))  # fmt: skip


@contextmanager
def _wheels_folder(out: Path | None, install: bool) -> Iterator[Path]:
    """``-o``, else here; with ``--install`` and no ``-o``, a temporary folder: installed, not left behind."""
    if out is None and install:
        with tempfile.TemporaryDirectory(prefix="librarian-pull-") as tmp:
            yield Path(tmp)
    else:
        yield out or Path(".")
