"""A build refused for its glibc floor, kept: the wheel and what it was built with, under the build cache
(``<cache>/refused/<key>``), so that a rerun of the same build with ``--glibc`` (a floor that admits it)
files it without compiling again (a real extension compiles for minutes to hours). The key is what makes
the build: the spec, the combo and the arch list. The kept wheel goes once it is filed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from librarian.build_record import BuildRecord
from librarian.coords import parse_cuda
from librarian.machine import TorchInfo
from librarian.ops.build.build import Built, build_cache
from librarian.ops.build.build_request import BuildRequest
from librarian.safeio import atomic_write, read_regular

log = logging.getLogger(__name__)
_RECORD = "built.json"


def kept_folder(request: BuildRequest, cache: Path | None = None) -> Path:
    """Where a build of ``request`` refused for its floor is kept."""
    what = json.dumps([request.spec, str(request.combo), request.arch_list, [a.sm for a in request.sms]])
    return (cache or build_cache()) / "refused" / hashlib.sha256(what.encode()).hexdigest()[:16]


def keep(built: Built, request: BuildRequest, cache: Path | None = None) -> Path:
    """Keep ``built`` (its wheel copied) for a rerun of ``request``; where it was kept."""
    folder = kept_folder(request, cache)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.whl"):
        old.unlink()
    shutil.copy2(built.wheel, folder / built.wheel.name)
    record = {
        "wheel": built.wheel.name,
        "log": str(built.log),
        "torch": built.torch.version,
        "cuda": f"{built.torch.cuda[0]}.{built.torch.cuda[1]}" if built.torch.cuda else None,
        "arch_list": built.arch_list,
        "environment": sorted(built.environment_packages),
        "seconds": built.seconds,
        "build": built.record.to_json() if built.record is not None else None,
    }
    atomic_write(folder / _RECORD, json.dumps(record, indent=1).encode())
    return folder


def kept(request: BuildRequest, cache: Path | None = None) -> Built | None:
    """The build of ``request`` kept by an earlier run, if any (anything unreadable: none, said in the log)."""
    folder = kept_folder(request, cache)
    try:
        record = json.loads(read_regular(folder / _RECORD, 1 << 20))
        wheel = folder / str(record["wheel"])
        if not wheel.is_file() or "/" in str(record["wheel"]):
            return None
        torch = TorchInfo(str(record["torch"]), parse_cuda(record["cuda"]) if record["cuda"] else None)
        environment = frozenset(str(p) for p in record["environment"])
        made = BuildRecord.from_json(record["build"]) if record.get("build") is not None else None
        seconds = float(record.get("seconds") or 0)
        return Built(wheel, Path(str(record["log"])), torch, str(record["arch_list"]), environment, seconds,
                     None, made)  # fmt: skip
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        log.info("%s: a kept build that cannot be read (%s); building again", folder, e)
        return None


def forget(request: BuildRequest, cache: Path | None = None) -> None:
    """Remove the kept build of ``request`` (filed at last)."""
    shutil.rmtree(kept_folder(request, cache), ignore_errors=True)
