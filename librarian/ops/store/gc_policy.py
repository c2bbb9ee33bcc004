"""gc's policy: which wheels to drop, parsed from its flags once (``--keep-torch``, ``--drop-torch``,
``--keep-versions``, ``--older-than``, ``--purge-grace``); a policy that prunes nothing is refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from librarian.coords import MajorMinor, parse_torch
from librarian.errors import BadInput
from librarian.pytorch.matrix import load_matrix

DEFAULT_PURGE_GRACE = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class GcPolicy:
    """Which wheels to drop; all rules combine."""

    keep_torch: int | None = None  # keep the newest N torch minors present in the store (or in `lines`)
    drop_torch: tuple[MajorMinor, ...] = ()
    keep_versions: int | None = None  # per (cell, python, platform)
    older_than_days: int | None = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    lines: tuple[MajorMinor, ...] | None = None  # the torch lines to count the newest N from (the matrix's)
    # --purge spares LFS objects pushed within this many seconds: wheels `publish --stage` uploaded for a
    # reindex yet to come are referenced by no commit until then.
    purge_grace: float = DEFAULT_PURGE_GRACE
    drop_serving: bool = False  # drop a stale line's wheels even where their bytes serve a line kept

    @property
    def empty(self) -> bool:
        """Whether no rule is set (gc then removes nothing)."""
        return (
            self.keep_torch is None
            and not self.drop_torch
            and self.keep_versions is None
            and self.older_than_days is None
        )


def policy_from_flags(
    keep_torch: int | None,
    keep_torch_from: str,
    drop_torch: Sequence[str],
    keep_versions: int | None,
    older_than_days: int | None,
    *,
    purge: bool = False,
    purge_grace_hours: float | None = None,
    drop_serving: bool = False,
) -> GcPolicy:
    """The policy gc's flags ask for (``--keep-torch`` counted over the store's or the matrix's torch lines).

    Refuses a ``keep_torch_from`` other than ``store`` or ``matrix``, and a policy that would prune nothing.
    """
    if keep_torch_from not in ("store", "matrix"):
        raise BadInput(f"--keep-torch-from {keep_torch_from}: expected 'store' or 'matrix'")
    lines = load_matrix().torch_versions() if keep_torch_from == "matrix" else None
    if purge_grace_hours is not None and (not purge or purge_grace_hours < 0):
        raise BadInput(
            f"--purge-grace {purge_grace_hours:g}: "
            + ("goes with --purge" if not purge else "must be 0 or more")
        )
    grace = DEFAULT_PURGE_GRACE if purge_grace_hours is None else purge_grace_hours * 3600.0
    policy = GcPolicy(
        keep_torch,
        tuple(parse_torch(t) for t in drop_torch),
        keep_versions,
        older_than_days,
        lines=lines,
        purge_grace=grace,
        drop_serving=drop_serving,
    )
    if policy.empty and not purge:  # --purge alone frees what earlier gcs left in the history
        raise BadInput(
            "gc: say what to prune: --keep-torch N, --drop-torch X.Y, --keep-versions K, --older-than DAYS "
            "or --purge"
        )
    return policy
