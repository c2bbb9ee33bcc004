"""Failed builds remembered in a store (:mod:`librarian.build_failure`): written in one step that touches no
index (the stage step: one commit on the Hub, never in conflict with another job's), read back for plan,
verify and the card. A record that is corrupt or contradicts its path is a problem named, never a failure
believed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from librarian.build_failure import (
    FAILURES_DIR,
    MAX_RECORD_BYTES,
    BuildFailure,
    parse_failure,
    render_failure,
)
from librarian.errors import BadInput
from librarian.stores.base import Listing, ListsFolders, Stages, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FailureRecords:
    """The failure records read from a store, and those that could not be believed (path, why)."""

    failures: tuple[BuildFailure, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()


def record_failure(store: Store, failure: BuildFailure) -> str:
    """Store ``failure`` at its path (replacing an earlier record of the same cells); returns the commit's
    URL, or ``""``. BadInput where the store cannot add a file without its index."""
    if not isinstance(store, Stages):
        raise BadInput(f"{store.location}: a {store.kind} store cannot keep failure records")
    c = failure.cells
    message = f"librarian build: {c.package} {c.version} failed for {c.combo_name} ({failure.step})"
    return store.stage((), {failure.path: render_failure(failure)}, message)


def failure_paths(listing: Listing, packages: Iterable[str] | None = None) -> list[str]:
    """The failure records a store's tree holds (of ``packages`` only, when given)."""
    keys = None if packages is None else {f"{FAILURES_DIR}/{p}/" for p in packages}
    return sorted(
        f.path
        for f in listing.files
        if f.path.startswith(FAILURES_DIR + "/")
        and f.path.endswith(".json")
        and (keys is None or any(f.path.startswith(k) for k in keys))
    )


def read_failures(
    store: Store, packages: Iterable[str] | None = None, listing: Listing | None = None
) -> FailureRecords:
    """The failure records of ``packages`` (all, when ``None``) in ``store``, each checked against its path."""
    if listing is not None:
        listed = listing
    elif isinstance(store, ListsFolders):
        listed = store.list_folder(FAILURES_DIR)
    else:
        listed = store.list_files()
    sizes = {f.path: f.size for f in listed.files}
    failures: list[BuildFailure] = []
    problems: list[tuple[str, str]] = []
    for path in failure_paths(listed, packages):
        if sizes.get(path, 0) > MAX_RECORD_BYTES:
            problems.append((path, f"failure record larger than {MAX_RECORD_BYTES} bytes"))
            continue
        data = store.read_file(path)
        if data is None:
            continue
        try:
            failures.append(parse_failure(data, path))
        except ValueError as e:
            problems.append((path, f"not a failure record ({e})"))
    for path, why in problems:
        log.warning("%s/%s: %s; ignored", store.location, path, why)
    return FailureRecords(tuple(failures), tuple(problems))
