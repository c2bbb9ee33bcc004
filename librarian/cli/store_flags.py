"""The store commands' own options (``publish``, ``reindex``, ``gc``), declared once, so that each command's
signature is one line per few flags (the other commands' are :mod:`librarian.cli.flags`')."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# --- publish ----------------------------------------------------------------------------
PublishWheelsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Wheel files, or wheels' URLs (https://..., hf://datasets/OWNER/NAME[@REV]/path.whl).",
        show_default=False,
    ),
]
PublishSourcesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--from",
        metavar="PAGE|STORE",
        help="Also every wheel a page links (a find-links page, a PEP 503 project page, a release page: a URL "
        "or an HTML file) or another store holds (a folder, a Hub dataset) (repeatable).",
    ),
]
PublishOnlyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--only",
        metavar="PATTERN",
        help="With --from: only the wheels whose filename matches PATTERN, e.g. 'flash_attn-2.8.3*cp312*' (repeatable).",
    ),
]
PublishSmOpt = Annotated[
    list[str] | None,
    typer.Option("--sm", help="GPU arch to file under (repeatable); default: from the binaries."),
]
PublishReplaceOpt = Annotated[
    bool, typer.Option("--replace", help="Overwrite a different wheel at the same path.")
]
PublishTrustSmOpt = Annotated[
    bool,
    typer.Option("--trust-sm", help="File under each --sm even where the binaries have no code for it."),
]
PublishAllowGlibcMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-glibc-mismatch", help="Accept a manylinux tag older than the glibc the binaries need."
    ),
]
PublishAllowCudaMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-cuda-mismatch",
        help="Accept a label whose CUDA line the device code or libcudart contradicts.",
    ),
]
PublishAllowPlatformMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-platform-mismatch",
        help="Accept a platform tag naming another CPU or OS than the binaries.",
    ),
]
PublishAllowTorchMismatchOpt = Annotated[
    bool,
    typer.Option(
        "--allow-torch-mismatch",
        help="Accept a label whose torch line the wheel's own Requires-Dist on torch excludes.",
    ),
]
PublishSkipRefusedOpt = Annotated[
    bool,
    typer.Option(
        "--skip-refused",
        help="File the wheels that pass and name the refused ones (exit 1); without it a refusal files nothing.",
    ),
]
PublishStageOpt = Annotated[
    bool,
    typer.Option(
        "--stage",
        help="Fan-in: store the wheels and pending entries only; one final 'librarian reindex' indexes them.",
    ),
]
PublishManifestOpt = Annotated[
    Path | None,
    typer.Option(
        "--manifest",
        help="With --stage: upload the bytes only (no commit) and write the entries to FILE, for 'reindex --manifest'.",
    ),
]
PublishRefuseMacosOpt = Annotated[
    bool,
    typer.Option(
        "--refuse-macos", help="A macOS wheel among them is an error (default: skipped, with a warning)."
    ),
]

# --- reindex ----------------------------------------------------------------------------
ReindexAdoptOpt = Annotated[
    bool,
    typer.Option(
        "--adopt",
        help="Also take in the wheels of the tree that have no entry (a hand-made wheelhouse), each read from "
        "its bytes and indexed at its path where they serve its cell; the others are named (exit 1).",
    ),
]
ReindexRefileOpt = Annotated[
    bool,
    typer.Option(
        "--refile",
        help="With --adopt: file each misfiled wheel under the cells its bytes serve, and remove the misfiled copy.",
    ),
]
ReindexRelabelOpt = Annotated[
    bool,
    typer.Option(
        "--relabel",
        help="With --adopt: rewrite each wheel it files without its cell's label with that label (a new "
        "name: links to the old one break), and remove the old file.",
    ),
]
ReindexRefreshOpt = Annotated[
    bool,
    typer.Option(
        "--refresh",
        help="Re-read every indexed wheel's bytes and write its entry anew (stores from older versions).",
    ),
]
ReindexDryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Show what would be merged; change nothing.")
]
ReindexManifestOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--manifest",
        help="Merge the wheels these 'publish --stage --manifest' files (or folders of them) staged, in one commit (repeatable).",
    ),
]
ReindexReplaceOpt = Annotated[
    bool, typer.Option("--replace", help="With --manifest: overwrite a different wheel at the same path.")
]
ReindexAllowUnknownComboOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unknown-combo",
        help="With --manifest or --adopt: accept a torch/CUDA combo PyTorch never shipped.",
    ),
]
ReindexDeepOpt = Annotated[
    bool,
    typer.Option(
        "--deep",
        help="On the Hub too, judge each variant wheel against its source as verify --deep does (each wheel "
        "with a variant downloaded once), and make again those that are not their source's (a local "
        "store is judged so always).",
    ),
]

# --- gc -----------------------------------------------------------------------------------
GcKeepTorchOpt = Annotated[
    int | None, typer.Option("--keep-torch", min=1, help="Keep the newest N torch lines in the store.")
]
GcKeepTorchFromOpt = Annotated[
    str,
    typer.Option(
        "--keep-torch-from",
        help="Count --keep-torch over the torch lines in the 'store' or the ones PyTorch shipped ('matrix').",
    ),
]
GcDropTorchOpt = Annotated[
    list[str] | None, typer.Option("--drop-torch", help="Drop a torch line, e.g. 2.4 (repeatable).")
]
GcKeepVersionsOpt = Annotated[
    int | None, typer.Option("--keep-versions", min=1, help="Keep the newest K versions per cell.")
]
GcOlderThanOpt = Annotated[
    int | None, typer.Option("--older-than", min=0, help="Drop wheels published more than DAYS ago.")
]
GcYesOpt = Annotated[bool, typer.Option("--yes", help="Act on the plan (without it, only print it).")]
GcDryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Only print the plan (what gc does without --yes), said explicitly."),
]
GcPurgeOpt = Annotated[
    bool,
    typer.Option(
        "--purge",
        help="Hub: also delete for good every LFS object no branch or tag references (this gc's removals and earlier ones'); frees the storage.",
    ),
]
GcPurgeGraceOpt = Annotated[
    float | None,
    typer.Option(
        "--purge-grace",
        help="With --purge: spare objects pushed within HOURS (default 24: staged wheels awaiting reindex).",
    ),
]
GcAllowEmptyOpt = Annotated[
    bool, typer.Option("--allow-empty", help="Accept a plan that removes every wheel of a package.")
]
GcDropServingOpt = Annotated[
    bool,
    typer.Option(
        "--drop-serving",
        help="Drop a dropped line's wheels even where their bytes serve a line kept (a stable-ABI or "
        "torch-free build filed under it).",
    ),
]
