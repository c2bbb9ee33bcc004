"""The stage manifest: what one ``publish --stage --manifest`` job put in a store, for ``reindex --manifest``. Pure.

A CI job of a build matrix uploads its wheels' bytes (on the Hub: LFS objects, no commit) and writes
this small file; the last job collects every job's manifest and merges them into the index in one
change. ::

    {"schema": 1, "kind": "librarian-stage-manifest", "repo": "hf://datasets/team/wheels",
     "revision": "main", "planned_against": "<commit sha, or null>", "created": "2026-...Z",
     "blobs": [{"sha256": ..., "size": ...}],
     "wheels": [<the index entry of each cell path, as its shard will hold it: path, sha256, size, ...>],
     "metadata": {"<sha256 of a METADATA>": "<its text>"}}

``metadata`` carries each wheel's METADATA (a few kB): it is served beside the wheel as ``<wheel>.metadata``
(PEP 658), a file too small for the Hub to keep as a pre-uploaded LFS object, so reindex commits it.

``blobs`` lists each stored content once (a wheel filed in several cells is one blob).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from librarian.errors import BadInput, StoreError
from librarian.index import IndexEntry
from librarian.index_files import READABLE_SCHEMAS, SCHEMA

KIND = "librarian-stage-manifest"


@dataclass(frozen=True, slots=True)
class Manifest:
    """One job's staged wheels: their index entries, and the store and head they were planned against."""

    repo: str
    revision: str
    planned_against: str | None
    created: str
    entries: tuple[IndexEntry, ...]
    metadata: Mapping[str, str] = field(default_factory=dict)  # sha256 -> METADATA text (PEP 658 files)

    def to_json(self) -> dict[str, Any]:
        """The manifest as written."""
        blobs = {e.sha256: e.size for e in self.entries}
        return {
            "schema": SCHEMA,
            "kind": KIND,
            "repo": self.repo,
            "revision": self.revision,
            "planned_against": self.planned_against,
            "created": self.created,
            "blobs": [{"sha256": sha, "size": size} for sha, size in sorted(blobs.items())],
            "wheels": [e.to_json() for e in sorted(self.entries, key=lambda e: e.path)],
            "metadata": dict(sorted(self.metadata.items())),
        }


# A job's manifest holds its wheels' entries and METADATA texts: kilobytes each. The limit keeps a wrong or
# hostile file from costing memory; reading stops at it (see read_manifest_bytes).
MAX_MANIFEST_BYTES = 64 << 20


def render_manifest(manifest: Manifest) -> bytes:
    """The manifest's bytes (sorted keys, so the same stage writes the same file)."""
    return (json.dumps(manifest.to_json(), indent=1, sort_keys=True) + "\n").encode()


def parse_manifest(text: bytes, source: str) -> Manifest:
    """Read a manifest; ``source`` names it in errors (BadInput: it is a file the user gave)."""
    if len(text) > MAX_MANIFEST_BYTES:
        raise BadInput(f"{source}: over the {MAX_MANIFEST_BYTES >> 20} MiB limit for a stage manifest")
    try:
        data = json.loads(text)
    except RecursionError as e:
        raise BadInput(f"{source}: not a stage manifest (JSON nested too deeply)") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadInput(f"{source}: not a stage manifest (not valid JSON: {e})") from e
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise BadInput(f"{source}: not a stage manifest (written by 'publish --stage --manifest')")
    if isinstance(data.get("schema"), bool) or data.get("schema") not in READABLE_SCHEMAS:
        raise BadInput(
            f"{source}: unsupported manifest schema {data.get('schema')!r} (this librarian reads {SCHEMA})"
        )
    wheels = data.get("wheels")
    if not isinstance(wheels, list) or not isinstance(data.get("repo"), str):
        raise BadInput(f"{source}: malformed stage manifest (no repo or wheels list)")
    try:
        entries = tuple(IndexEntry.from_json(w, source) for w in wheels)
    except StoreError as e:
        raise BadInput(str(e)) from e
    planned = data.get("planned_against")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise BadInput(f"{source}: malformed stage manifest (metadata is not a map of sha256 to text)")
    for sha, body in metadata.items():
        if hashlib.sha256(metadata_bytes(body)).hexdigest() != sha:
            raise BadInput(f"{source}: a METADATA in the manifest does not match its sha256 {sha[:12]}…")
    return Manifest(
        str(data["repo"]),
        str(data.get("revision") or "main"),
        str(planned) if planned else None,
        str(data.get("created", "")),
        entries,
        metadata,
    )


def metadata_text(data: bytes) -> str:
    """METADATA's bytes as JSON can carry them (UTF-8; any other byte kept by ``surrogateescape``)."""
    return data.decode("utf-8", "surrogateescape")


def metadata_bytes(text: str) -> bytes:
    """The exact bytes back from :func:`metadata_text`."""
    return text.encode("utf-8", "surrogateescape")


def merge_metadata(manifests: Sequence[Manifest]) -> dict[str, str]:
    """Pure: every METADATA text the manifests carry, by sha256."""
    return {sha: text for m in manifests for sha, text in m.metadata.items()}


def merge_manifests(manifests: Sequence[tuple[str, Manifest]]) -> tuple[IndexEntry, ...]:
    """Pure: every entry of ``manifests`` (name, manifest) once; BadInput when two name one path with other bytes."""
    seen: dict[str, tuple[str, IndexEntry]] = {}
    for name, manifest in manifests:
        for entry in manifest.entries:
            other = seen.get(entry.path)
            if other is not None and other[1].sha256 != entry.sha256:
                raise BadInput(
                    f"{entry.path}: staged with other bytes by {other[0]} and {name} "
                    f"(sha256 {other[1].sha256[:12]}… and {entry.sha256[:12]}…)"
                )
            seen.setdefault(entry.path, (name, entry))
    return tuple(e for _, e in sorted(seen.values(), key=lambda v: v[1].path))
