"""pull, and on a miss ``--build``: what the store holds is fetched; what it does not is built for exactly
this machine (its GPU, torch, CUDA line and Python), checked by its bytes as publish checks, and with
``publish`` filed in the store for the next machine.

What would be built, and nvcc, are checked (:func:`build_requests`) before the store or any index is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from librarian.coords import MajorMinor, package_key
from librarian.layout import Layout
from librarian.machine import Machine
from librarian.ops.machine import pull as pull_op
from librarian.stores.base import Store

if TYPE_CHECKING:
    from librarian.ops.build.build import BuildSettings
    from librarian.ops.build.build_request import BuildRequest


class Voice(Protocol):
    """How a build speaks while it runs: a line (``say``), a compile step (``step``, redrawn on a
    terminal), and ``clear`` to end a redrawn line."""

    def say(self, text: str) -> None: ...
    def step(self, text: str) -> None: ...
    def clear(self) -> None: ...


@dataclass(frozen=True)
class OnMiss:
    """``pull --build``: what to build for each package (by its key) for ``machine``, how (``installer``,
    ``torch_index``, ``keep``: the build's flags), and whether to file it."""

    requests: dict[str, BuildRequest]
    machine: Machine
    installer: str = "auto"
    torch_index: str | None = None
    keep: bool = False
    publish: bool = False
    repair: bool = False
    variants: bool = False  # file a variant copy beside what it files (the store's settings say)
    compile_cache: Path | None = None  # the compile cache's folder (None: uncached)


def build_requests(
    packages: Sequence[str],
    source: str | None,
    wants: pull_op.Wants,
    repair: bool,
    floor: MajorMinor | None = None,
) -> tuple[dict[str, BuildRequest], str | None]:
    """What ``--build`` would build for each package, checked (host, nvcc, auditwheel) before anything is
    downloaded or read; and the warning the check gives, if any. ``floor``: the glibc the store's plan counts
    at (``--publish``: what is filed is held to it, as ``build`` holds it); else the machine's own."""
    # Imported here: a plain pull loads neither the build nor the binary readers (tests/test_startup.py).
    from librarian.ops.build import build_and_file
    from librarian.pytorch.matrix import load_matrix

    matrix = load_matrix()
    pins = [pull_op.parse_pin(p) for p in packages]
    requests = {
        pin.key: build_and_file.machine_request(matrix, source or text, wants, pin.name, floor)
        for pin, text in zip(pins, packages, strict=True)
    }
    return requests, build_and_file.check_before(next(iter(requests.values())), repair=repair)


def _settings(on_miss: OnMiss) -> BuildSettings:
    """How ``pull --build`` builds: against the target's own torch where it is the combo's (no download)."""
    from librarian.ops.build.build import BuildSettings, target_torch

    target = on_miss.machine.interpreter.value
    combo = next(iter(on_miss.requests.values())).combo
    torch_from = target_torch(Path(target), combo) if target else None
    return BuildSettings(
        installer=on_miss.installer,
        torch_index=on_miss.torch_index,
        keep=on_miss.keep,
        torch_from=torch_from,
        compile_cache=on_miss.compile_cache,
    )


def pull_or_build(
    store: Store,
    layout: Layout,
    packages: Sequence[str],
    wants: pull_op.Wants,
    out: Path,
    *,
    compatible: bool,
    requirements: Path | None,
    on_miss: OnMiss | None,
    voice: Voice,
) -> tuple[pull_op.PullReport, list[Path]]:
    """Pull ``packages``; on a miss with ``on_miss``, pull what the store has and build the rest (the
    wheels built, in ``out``). Without ``on_miss`` a miss raises :class:`~librarian.ops.machine.pull.NoMatch`."""
    try:
        report = pull_op.pull(
            store, layout, packages, wants, out, compatible=compatible, requirements=requirements
        )
        return report, []
    except pull_op.NoMatch as miss:
        if on_miss is None:
            raise
        return _build_misses(store, layout, packages, wants, out, miss, on_miss, compatible, voice)


def _build_misses(
    store: Store,
    layout: Layout,
    packages: Sequence[str],
    wants: pull_op.Wants,
    out: Path,
    miss: pull_op.NoMatch,
    on_miss: OnMiss,
    compatible: bool,
    voice: Voice,
) -> tuple[pull_op.PullReport, list[Path]]:
    # Imported here, only on a miss with --build: see build_requests.
    from librarian.ops.build.build_and_file import Destination, build_and_file
    from librarian.ops.store.prepare import PublishOptions

    missed = {package_key(r.package) for r in miss.misses}
    voice.say(f"{miss}; building {', '.join(sorted(missed))} for this machine")
    hits = [p for p in packages if pull_op.pin_key(p) not in missed]
    report = (
        pull_op.pull(store, layout, hits, wants, out, compatible=compatible)
        if hits
        else pull_op.PullReport(store.location, wants, (), ())
    )
    options = PublishOptions(layout=layout, variants=on_miss.variants)
    to = Destination(store if on_miss.publish else None, out=out)
    settings = _settings(on_miss)
    built = []
    for key in sorted(missed):
        try:
            done = build_and_file(
                on_miss.requests[key],
                settings,
                options,
                to,
                voice.say,
                voice.step,
                repair=on_miss.repair,
            )
        finally:
            voice.clear()
        if done.published is not None:  # what publish says, a line each (stdout is pull's own)
            rendered = done.published.render(store.location, dry_run=False, stage=False, manifest=None)
            for line in rendered.splitlines():
                voice.say(line.strip())
        assert done.wheel is not None
        built.append(done.wheel)
    return report, built
