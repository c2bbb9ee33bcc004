"""The Hub endpoints: a request (already routed) in, a :class:`Reply` out. No socket work here.

Shapes follow /work/shared/reference/hub-api.md (what huggingface_hub 2.4.0 sends and parses).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from email.message import Message
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from .faults import FaultPlan
from .routes import Route, repo_url
from .storage import Commit, Entry, HubError, Repo, Storage, dir_oid, lfs_pointer

JSON = "application/json"
LFS_JSON = "application/vnd.git-lfs+json"


@dataclass
class Request:
    """A routed request with its body read."""

    method: str
    route: Route
    query: dict[str, list[str]]
    headers: Message
    body: bytes
    base: str  # scheme://host:port as the client addressed us
    raw_path: str


@dataclass
class Reply:
    """What to send back: a body in memory or a slice of a file on disk."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    file: tuple[Path, int, int] | None = None  # (path, offset, length)

    @property
    def length(self) -> int:
        return self.file[2] if self.file is not None else len(self.body)


def json_reply(
    data: Any, status: int = 200, headers: dict[str, str] | None = None, content_type: str = JSON
) -> Reply:
    return Reply(status, {"Content-Type": content_type, **(headers or {})}, json.dumps(data).encode())


def error_reply(err: HubError, **headers: str) -> Reply:
    """The Hub's error shape: JSON ``error`` plus ``X-Error-Code`` / ``X-Error-Message`` headers."""
    extra = {**err.headers, **headers}
    if err.code:
        extra["X-Error-Code"] = err.code
    extra["X-Error-Message"] = err.message
    return json_reply({"error": err.message}, err.status, extra)


@dataclass
class HubConfig:
    """Knobs a test may turn."""

    page_size: int = 1000  # tree and commits pages; small in tests to exercise Link pagination
    user: str = "loophub-user"
    lfs_redirect: str = "none"  # "none": serve LFS bytes from resolve; "cross": 302 to http://localhost
    multipart_chunk_size: int | None = None  # LFS uploads above this go multipart
    # huggingface.co allows 128 commits per hour per repo and answers 429 past that; None: no limit here.
    commit_limit: int | None = None
    commit_window_s: float = 3600.0
    # "xet": the LFS batch endpoint answers as a Xet-backed repo's does, {"transfer": "xet", ...}, where an
    # object's actions say nothing of whether the Hub holds it (here: every object gets upload actions, so
    # that huggingface_hub's legacy uploader, HF_HUB_DISABLE_XET=1, still works; a stored one is sent again).
    lfs_batch_transfer: str = "basic"


class HubApi:
    """Endpoint implementations over a :class:`Storage`."""

    def __init__(self, storage: Storage, plan: FaultPlan, config: HubConfig) -> None:
        self.storage = storage
        self.plan = plan
        self.config = config
        self.commit_times: dict[str, deque[float]] = defaultdict(deque)  # repo key -> times of its commits
        self.commit_counts: dict[str, int] = defaultdict(int)  # repo key -> commits made through the API
        self._limit_lock = threading.Lock()

    def dispatch(self, req: Request) -> Reply:
        handler = getattr(self, "ep_" + req.route.endpoint, None)
        if handler is None:
            raise HubError(404, f"Not found: {req.method} {req.raw_path}")
        reply: Reply = handler(req)
        return reply

    # -- helpers -------------------------------------------------------------------------------
    def _repo(self, req: Request) -> Repo:
        assert req.route.repo_type is not None and req.route.repo_id is not None
        return self.storage.get(req.route.repo_type, req.route.repo_id)

    def _commit(self, req: Request, repo: Repo) -> Commit:
        return repo.resolve(req.route.revision or "main")

    def _form(self, req: Request) -> dict[str, Any]:
        ctype = req.headers.get("Content-Type", "")
        if "json" in ctype:
            data: dict[str, Any] = json.loads(req.body or b"{}")
            return data
        return {k: v for k, v in parse_qs(req.body.decode()).items()}

    def _file_json(self, repo: Repo, commit: Commit, path: str, entry: Entry, expand: bool) -> dict[str, Any]:
        d: dict[str, Any] = {"type": "file", "oid": entry.oid, "size": entry.size, "path": path}
        if entry.lfs is not None:
            pointer = len(lfs_pointer(entry.lfs, entry.size))
            d["lfs"] = {"oid": entry.lfs, "size": entry.size, "pointerSize": pointer}
        if expand:
            d["lastCommit"] = self._last_commit(repo, commit, lambda t: t.get(path))
        return d

    def _dir_json(self, repo: Repo, commit: Commit, path: str, expand: bool) -> dict[str, Any]:
        d: dict[str, Any] = {"type": "directory", "oid": dir_oid(commit.tree, path), "path": path}
        if expand:
            d["lastCommit"] = self._last_commit(repo, commit, lambda t: dir_oid(t, path))
        return d

    def _last_commit(self, repo: Repo, head: Commit, key: Any) -> dict[str, str]:
        """The newest commit that changed what ``key(tree)`` returns (walks history once)."""
        hist = repo.history(head.id)
        found = hist[-1]
        for commit, parent in pairwise(hist):
            if key(commit.tree) != key(parent.tree):
                found = commit
                break
        return {"id": found.id, "title": found.title, "date": found.date}

    def _page(self, req: Request, items: list[Any]) -> Reply:
        """One page of ``items`` with a GitHub-style ``Link`` to the next, as the client follows."""
        try:
            start = max(0, int(req.query.get("cursor", ["0"])[0]))
        except ValueError as e:
            raise HubError(400, "Invalid cursor") from e
        size = max(1, self.config.page_size)
        headers: dict[str, str] = {}
        if start + size < len(items):
            query = {k: v for k, v in req.query.items() if k != "cursor"}
            query["cursor"] = [str(start + size)]
            headers["Link"] = f'<{req.base}{req.raw_path}?{urlencode(query, doseq=True)}>; rel="next"'
        return json_reply(items[start : start + size], headers=headers)

    # -- repos ---------------------------------------------------------------------------------
    def ep_create_repo(self, req: Request) -> Reply:
        data = json.loads(req.body or b"{}")
        name, org = str(data.get("name", "")), data.get("organization") or self.config.user
        rtype = data.get("type") or "model"
        if not re.fullmatch(r"[\w.-]+", name) or not re.fullmatch(r"[\w.-]+", org):
            raise HubError(400, f"Invalid repo name: {org}/{name}")
        rid = f"{org}/{name}"
        url = repo_url(req.base, rtype, rid)
        private = bool(data.get("private")) or data.get("visibility") == "private"
        try:
            self.storage.create_repo(rtype, rid, private, self.config.user)
        except HubError as e:
            # exist_ok in the client reads body["url"] from the 409 (KeyError without it).
            return json_reply({"error": e.message, "url": url}, e.status, {"X-Error-Message": e.message})
        return json_reply({"url": url, "name": rid, "id": rid})

    def ep_delete_repo(self, req: Request) -> Reply:
        data = json.loads(req.body or b"{}")
        org = data.get("organization") or self.config.user
        self.storage.delete_repo(data.get("type") or "model", f"{org}/{data.get('name')}")
        return json_reply({})

    def ep_whoami(self, req: Request) -> Reply:
        return json_reply(
            {"type": "user", "name": self.config.user, "fullname": self.config.user, "orgs": []}
        )

    def ep_validate_yaml(self, req: Request) -> Reply:
        # create_commit posts any README.md here first; loophub has no YAML parser, so all is valid.
        return json_reply({"errors": [], "warnings": []})

    def ep_repo_info(self, req: Request) -> Reply:
        repo = self._repo(req)
        commit = self._commit(req, repo)
        blobs = req.query.get("blobs", ["false"])[0] == "true"
        siblings = []
        for path in sorted(commit.tree):
            sib: dict[str, Any] = {"rfilename": path}
            entry = commit.tree[path]
            if blobs:
                sib.update(size=entry.size, blobId=entry.oid)
                if entry.lfs is not None:
                    pointer = len(lfs_pointer(entry.lfs, entry.size))
                    sib["lfs"] = {"size": entry.size, "sha256": entry.lfs, "pointerSize": pointer}
            siblings.append(sib)
        first = repo.commits[repo.order[0]]
        return json_reply(
            {
                "_id": hashlib.sha1(repo.id.encode()).hexdigest()[:24],
                "id": repo.id,
                "author": repo.id.split("/")[0],
                "sha": commit.id,
                "private": repo.private,
                "disabled": False,
                "gated": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "createdAt": first.date,
                "lastModified": commit.date,
                "siblings": siblings,
            }
        )

    def ep_refs(self, req: Request) -> Reply:
        repo = self._repo(req)
        branches = [
            {"name": b, "ref": f"refs/heads/{b}", "targetCommit": sha}
            for b, sha in sorted(repo.branches.items())
        ]
        return json_reply({"branches": branches, "tags": [], "converts": [], "pullRequests": []})

    def ep_branch(self, req: Request) -> Reply:
        repo = self._repo(req)
        branch = req.route.revision or ""
        if req.method == "DELETE":
            self.storage.delete_branch(repo, branch)
        else:
            start = json.loads(req.body or b"{}").get("startingPoint")
            self.storage.set_branch(repo, branch, start)
        return json_reply({})

    # -- listings ------------------------------------------------------------------------------
    def ep_tree(self, req: Request) -> Reply:
        repo = self._repo(req)
        commit = self._commit(req, repo)
        prefix = (req.route.path or "").strip("/")
        recursive = req.query.get("recursive", ["false"])[0] == "true"
        expand = req.query.get("expand", ["false"])[0] == "true"
        under = [p for p in commit.tree if not prefix or p.startswith(prefix + "/")]
        if prefix and not under:
            raise HubError(404, f"Entry not found: {prefix}", "EntryNotFound")
        files: list[str] = []
        dirs: set[str] = set()
        cut = len(prefix) + 1 if prefix else 0
        for path in under:
            parts = path[cut:].split("/")
            if recursive:
                files.append(path)
                dirs.update(path[:cut] + "/".join(parts[:i]) for i in range(1, len(parts)))
            elif len(parts) == 1:
                files.append(path)
            else:
                dirs.add(path[:cut] + parts[0])
        items = [self._dir_json(repo, commit, d, expand) for d in sorted(dirs)]
        items += [self._file_json(repo, commit, p, commit.tree[p], expand) for p in sorted(files)]
        return self._page(req, sorted(items, key=lambda d: str(d["path"])))

    def ep_paths_info(self, req: Request) -> Reply:
        repo = self._repo(req)
        commit = self._commit(req, repo)
        form = self._form(req)
        paths = form.get("paths", [])
        paths = [paths] if isinstance(paths, str) else paths
        expand_val = form.get("expand", ["false"])
        expand = str(expand_val[0] if isinstance(expand_val, list) else expand_val).lower() == "true"
        out = []
        for raw in paths:
            path = str(raw).strip("/")
            if path in commit.tree:
                out.append(self._file_json(repo, commit, path, commit.tree[path], expand))
            elif any(p.startswith(path + "/") for p in commit.tree):
                out.append(self._dir_json(repo, commit, path, expand))
        return json_reply(out)

    def ep_commits(self, req: Request) -> Reply:
        repo = self._repo(req)
        commit = self._commit(req, repo)
        items = [
            {
                "id": c.id,
                "title": c.title,
                "message": c.message,
                "date": c.date,
                "authors": [{"user": c.author, "avatar": None}],
            }
            for c in repo.history(commit.id)
        ]
        return self._page(req, items)

    def ep_lfs_files(self, req: Request) -> Reply:
        """``GET /api/{type}s/{repo}/lfs-files``: the LFS objects stored for the repo, paginated."""
        return self._page(req, self.storage.lfs_files(self._repo(req)))

    def ep_lfs_files_batch(self, req: Request) -> Reply:
        """``POST .../lfs-files/batch`` with ``{"deletions": {"sha": [...], "rewriteHistory": bool}}``."""
        deletions = json.loads(req.body or b"{}").get("deletions") or {}
        shas = deletions.get("sha")
        if not isinstance(shas, list) or not all(isinstance(x, str) for x in shas):
            raise HubError(400, "deletions.sha must be a list of oids")
        rewrite = deletions.get("rewriteHistory", True)
        if not isinstance(rewrite, bool):
            raise HubError(400, "deletions.rewriteHistory must be a boolean")
        self.storage.delete_lfs(self._repo(req), shas, rewrite)
        return json_reply({})

    # -- writes --------------------------------------------------------------------------------
    def ep_preupload(self, req: Request) -> Reply:
        repo = self._repo(req)
        commit = self._commit(req, repo)
        files = json.loads(req.body or b"{}").get("files", [])
        out = []
        for f in files:
            path = str(f["path"])
            sample = base64.b64decode(f.get("sample", ""))
            mode = self.storage.upload_mode(commit, path, int(f.get("size", 0)), sample)
            item: dict[str, Any] = {"path": path, "uploadMode": mode, "shouldIgnore": False}
            existing = commit.tree.get(path)
            if existing is not None:
                # The client compares this with its own oid: sha256 for LFS, git blob sha1 otherwise.
                item["oid"] = existing.lfs if existing.lfs is not None else existing.oid
            out.append(item)
        return json_reply({"files": out, "commitOid": commit.id})

    def ep_commit(self, req: Request) -> Reply:
        repo = self._repo(req)
        if req.query.get("create_pr", ["0"])[0] not in ("0", "false"):
            raise HubError(400, "loophub does not implement pull requests (create_pr)")
        branch = req.route.revision or "main"
        lines = [json.loads(line) for line in req.body.decode().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The commit body must start with a header line")
        header = lines[0].get("value") or {}
        # Check, commit and count as one step, so that racing commits cannot overrun the limit.
        with self._limit_lock:
            self._check_commit_budget(f"{repo.type}:{repo.id}")
            cc = self.plan.take_concurrent(repo.type, repo.id, branch)
            if cc is not None:
                # Another writer lands first, so this commit's parentCommit (if any) is now stale.
                ops = [
                    {"key": "file", "value": {"path": p, "content": base64.b64encode(b).decode()}}
                    for p, b in cc.files.items()
                ]
                self.storage.commit(repo, branch, ops, cc.title, "", None, "concurrent-writer")
            commit = self.storage.commit(
                repo,
                branch,
                lines[1:],
                str(header.get("summary", "")),
                str(header.get("description", "")),
                header.get("parentCommit"),
                self.config.user,
            )
            self.commit_times[f"{repo.type}:{repo.id}"].append(time.monotonic())
            self.commit_counts[f"{repo.type}:{repo.id}"] += 1
        url = f"{repo_url(req.base, repo.type, repo.id)}/commit/{commit.id}"
        return json_reply({"success": True, "commitOid": commit.id, "commitUrl": url, "hookOutput": ""})

    def _check_commit_budget(self, key: str) -> None:
        """(Under ``_limit_lock``.) 429 past ``commit_limit`` commits in the window, worded as huggingface.co words it, with Retry-After."""
        limit = self.config.commit_limit
        if limit is None:
            return
        window = float(self.config.commit_window_s)
        times, now = self.commit_times[key], time.monotonic()
        while times and times[0] <= now - window:
            times.popleft()
        if len(times) < limit:
            return
        wait = max(1, math.ceil(times[0] + window - now))
        per = "hour" if window == 3600 else f"{window:g} seconds"
        when = f"{math.ceil(wait / 60)} minutes" if wait >= 60 else f"{wait} seconds"
        raise HubError(
            429,
            f"You have exceeded the rate limit for repository commits ({limit} per {per}). "
            f"You can retry this action in {when}.",
            headers={"Retry-After": str(wait)},
        )
