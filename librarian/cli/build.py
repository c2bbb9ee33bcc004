"""``librarian build``: compile one combo's wheel for exactly the cells asked, check it, file it as publish would."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import typer

from librarian.cli import flags as f
from librarian.cli import options as o
from librarian.cli import rules, ui
from librarian.config import load_layout, load_settings
from librarian.errors import BadInput
from librarian.ops.build.build import BuildSettings
from librarian.ops.build.build_and_file import BuildOutcome, Destination, build_and_file
from librarian.ops.build.build_request import BuildRequest, request_from_flags, request_from_job
from librarian.ops.store.prepare import PublishOptions
from librarian.pytorch.matrix import load_matrix

app = typer.Typer(rich_markup_mode=None)


@app.command()
def build(
    spec: f.SpecArg = None, torch: f.ComboTorchOpt = None, cuda: f.ComboCudaOpt = None,
    python: f.BuildPythonOpt = None, platform: f.HostPlatformOpt = "linux-x86_64", sm: f.BuildSmOpt = None,
    ptx: f.BuildPtxOpt = False, glibc: f.FloorGlibcOpt = None, job: f.JobOpt = None, repo: f.BuildRepoOpt = None,
    stage: f.BuildStageOpt = False, manifest: f.BuildManifestOpt = None, create: o.CreateOpt = False,
    out: f.BuildOutOpt = None, installer: o.InstallerOpt = "auto", torch_index: o.TorchIndexOpt = None,
    keep: o.KeepOpt = False, sandbox: o.SandboxOpt = False, compile_cache: o.CompileCacheOpt = None,
    no_cache: o.NoCompileCacheOpt = False, repair: o.RepairOpt = False, as_json: o.JsonOpt = False,
) -> None:  # fmt: skip
    """Compile SPEC for one combo and exactly the cells asked, check it by its bytes, and file it.

    Example: librarian build flash-attn==2.8.3 --torch 2.9 --cuda 12.8 --python 3.12 --sm 80 --sm 90
    """
    given = dict(locals())
    rules.check("build", given)
    o.check_installer(installer)
    request = _request(given)
    if out is None:
        store, layout = o.store_and_layout(repo, create=create, publishing=True)
        to = Destination(store, stage, manifest)
    else:  # no store: the project's layout, for the checks' cells
        layout = load_layout(load_settings(None).layout)
        to = Destination(out=out)
    settings = BuildSettings(installer=installer, torch_index=torch_index, keep=keep, sandbox=sandbox,
                             compile_cache=o.cache_folder(compile_cache, no_cache, repo))  # fmt: skip
    options = PublishOptions(layout=layout, variants=o.variants_wanted(None))
    progress = ui.BuildProgress()
    try:
        done = build_and_file(request, settings, options, to, progress.say, progress.step, repair=repair)
    finally:
        progress.clear()
    render(done, to)


def _request(given: Mapping[str, Any]) -> BuildRequest:
    """What to build: one plan job as it is (``--job``), or the combo and cells the flags name."""
    matrix = load_matrix()
    if given["job"] is not None:
        return request_from_job(matrix, given["job"], given["spec"])
    spec, torch, cuda = given["spec"], given["torch"], given["cuda"]
    if spec is None or torch is None or cuda is None:
        raise BadInput("build: pass SPEC --torch X.Y --cuda X.Y --sm N (repeatable), or --job JSON")
    version = given["python"] or f"{sys.version_info[0]}.{sys.version_info[1]}"
    request = request_from_flags(matrix, spec, torch, cuda, version, given["platform"], given["sm"] or (),
                                 given["ptx"], given["glibc"])  # fmt: skip
    return request.expecting()


def render(done: BuildOutcome, to: Destination) -> None:
    """What was filed (publish's lines), or the wheel's path; ``--json``: one document."""
    if ui.state.json:
        published, built = done.published, done.built
        location = to.store.location if to.store is not None else None
        ui.emit_json(
            {
                "schema": 1,
                "wheel": str(done.wheel) if done.wheel else done.filename,
                "log": str(done.log),
                "TORCH_CUDA_ARCH_LIST": done.arch_list,
                "torch": done.torch.version,
                "seconds": round(built.seconds) if built else None,
                "compile_cache": built.cache.to_json() if built and built.cache else None,
                "build": built.record.to_json() if built and built.record else None,
                "published": published.to_json(
                    location or "", dry_run=False, stage=to.stage, manifest=to.manifest
                )
                if published is not None
                else None,
            }
        )
        return
    if done.published is not None and to.store is not None:
        ui.result(
            done.published.render(to.store.location, dry_run=False, stage=to.stage, manifest=to.manifest),
            len(done.published.filings),
        )
    elif done.wheel is not None:
        ui.out(str(done.wheel))
