"""Map a request path onto a named Hub endpoint, the repo it names and the path inside the repo.

The client quotes revisions with ``safe=""`` (``refs/pr/1`` -> ``refs%2Fpr%2F1``) and the ``tree``
sub-path too, so the raw path is split on ``/`` first and each segment unquoted after.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

PLURAL_TO_TYPE = {"models": "model", "datasets": "dataset", "spaces": "space"}
TYPE_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}

API_ACTIONS = {
    "revision": "repo_info",
    "tree": "tree",
    "paths-info": "paths_info",
    "commits": "commits",
    "preupload": "preupload",
    "commit": "commit",
    "refs": "refs",
    "branch": "branch",
}
LFS_ACTIONS = {"verify": "lfs_verify", "part": "lfs_part", "complete": "lfs_complete"}
# Endpoints that change state: these need the write token when the server is configured with one.
# The LFS upload URLs (PUT, multipart parts, multipart completion) get no auth header from the client,
# as they would go to pre-signed S3 URLs on the Hub.
WRITE_ENDPOINTS = frozenset(
    {
        "create_repo",
        "delete_repo",
        "preupload",
        "commit",
        "lfs_batch",
        "lfs_verify",
        "branch",
        "lfs_files",
        "lfs_files_batch",
    }
)
UNAUTHENTICATED = frozenset({"lfs_upload", "lfs_part", "lfs_complete", "lfs_download"})


@dataclass(frozen=True)
class Route:
    """What a request is about."""

    endpoint: str  # "tree", "resolve", ... or "unknown"
    repo_type: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    path: str | None = None  # file or folder path inside the repo
    extra: tuple[str, ...] = ()  # remaining segments (lfs oid, part number)

    @property
    def repo_key(self) -> str | None:
        return None if self.repo_id is None else f"{self.repo_type}:{self.repo_id}"


def classify(raw_path: str, method: str) -> Route:
    """Route a raw URL path (no query) to an endpoint."""
    segs = [unquote(s) for s in raw_path.split("/")[1:]]
    if segs and segs[-1] == "" and len(segs) > 1:
        segs = segs[:-1]
    if segs[:1] == ["_loophub"]:
        return _classify_loophub(segs[1:], method)
    if segs[:1] == ["api"]:
        return _classify_api(segs[1:])
    return _classify_git(segs)


def _classify_api(segs: list[str]) -> Route:
    if segs[:2] == ["repos", "create"]:
        return Route("create_repo")
    if segs[:2] == ["repos", "delete"]:
        return Route("delete_repo")
    if segs[:1] == ["whoami-v2"]:
        return Route("whoami")
    if segs[:1] == ["validate-yaml"]:
        return Route("validate_yaml")
    if len(segs) >= 3 and segs[0] in PLURAL_TO_TYPE:
        rtype, rid = PLURAL_TO_TYPE[segs[0]], f"{segs[1]}/{segs[2]}"
        rest = segs[3:]
        if not rest:
            return Route("repo_info", rtype, rid)
        if rest[0] == "lfs-files":
            return Route("lfs_files_batch" if rest[1:] == ["batch"] else "lfs_files", rtype, rid)
        action = API_ACTIONS.get(rest[0])
        if action is None:
            return Route("unknown", rtype, rid)
        revision = rest[1] if len(rest) > 1 else None
        path = "/".join(rest[2:]).strip("/") or None
        if action == "branch":  # the client does not quote branch names here
            revision, path = "/".join(rest[1:]) or None, None
        return Route(action, rtype, rid, revision, path)
    return Route("unknown")


def _classify_git(segs: list[str]) -> Route:
    rtype = "model"
    if segs and segs[0] in ("datasets", "spaces"):
        rtype, segs = PLURAL_TO_TYPE[segs[0]], segs[1:]
    if len(segs) >= 5 and segs[2] == "resolve":
        return Route("resolve", rtype, f"{segs[0]}/{segs[1]}", segs[3], "/".join(segs[4:]))
    if len(segs) == 6 and segs[1].endswith(".git") and segs[2:] == ["info", "lfs", "objects", "batch"]:
        return Route("lfs_batch", rtype, f"{segs[0]}/{segs[1][:-4]}")
    return Route("unknown", rtype)


def _classify_loophub(segs: list[str], method: str) -> Route:
    if segs[:1] == ["control"]:
        return Route("control", extra=tuple(segs[1:]))
    # lfs/<type>/<ns>/<name>/<oid>[/verify | /part/<n> | /complete]
    if len(segs) >= 5 and segs[0] == "lfs":
        rtype, rid, oid, rest = segs[1], f"{segs[2]}/{segs[3]}", segs[4], segs[5:]
        if not rest:
            return Route("lfs_upload" if method == "PUT" else "lfs_download", rtype, rid, extra=(oid,))
        if rest[0] in LFS_ACTIONS:
            return Route(LFS_ACTIONS[rest[0]], rtype, rid, extra=(oid, *rest[1:]))
    return Route("unknown")


def repo_url(base: str, repo_type: str, repo_id: str) -> str:
    """The web URL of a repo, which the client parses back into a ``RepoUrl``."""
    return f"{base}/{TYPE_URL_PREFIX[repo_type]}{repo_id}"
