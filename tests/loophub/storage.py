"""Repos, commits and blobs of the loopback hub, kept on disk under one root.

Layout under ``root``::

    objects/git/<sha1>           regular file contents, named by git blob sha1 (the Hub's ``oid``)
    objects/lfs/<sha256>         LFS contents, named by sha256 (the Hub's ``lfs.oid``)
    repos/<type>/<ns>/<name>/commits.jsonl   append-only, one commit per line with a full tree snapshot
    repos/<type>/<ns>/<name>/refs.json       branch -> commit sha (rewritten atomically)
    repos/<type>/<ns>/<name>/lfs.txt         sha256 oids uploaded to this repo (append-only)

Full snapshots per commit are wasteful but make every revision resolvable with a dict lookup,
which is what a test server wants.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# The Hub puts this in every new repo's first commit; ours adds *.whl so wheels go to LFS even when
# a test builds a wheel with no NUL byte in its first 512 bytes (the Hub would also see it as binary).
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.7z",
        "*.arrow",
        "*.bin",
        "*.bz2",
        "*.ckpt",
        "*.gz",
        "*.h5",
        "*.lz4",
        "*.npy",
        "*.npz",
        "*.onnx",
        "*.parquet",
        "*.pickle",
        "*.pkl",
        "*.pt",
        "*.pth",
        "*.safetensors",
        "*.tar",
        "*.tar.*",
        "*.tgz",
        "*.whl",
        "*.xz",
        "*.zip",
        "*.zst",
    )
)
# huggingface.co forces LFS above 10 MiB (huggingface_hub issue #2666).
DEFAULT_LFS_THRESHOLD = 10 * 1024 * 1024


class HubError(Exception):
    """A failure the server turns into an HTTP error with the Hub's ``X-Error-Code``."""

    def __init__(
        self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})  # extra response headers (Retry-After)


def git_blob_sha1(data: bytes) -> str:
    """The git blob id of ``data``: what the Hub reports as a regular file's ``oid``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer text that git stores in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def hub_date(ts: float) -> str:
    """A timestamp in the one format huggingface_hub's ``parse_datetime`` accepts."""
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class Entry:
    """One file in a tree snapshot."""

    size: int
    oid: str  # git blob sha1 (of the pointer for LFS files), as the Hub reports it
    lfs: str | None = None  # sha256 when the file is stored in LFS

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "oid": self.oid, "lfs": self.lfs}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entry:
        return cls(size=int(d["size"]), oid=str(d["oid"]), lfs=d.get("lfs"))


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit: message, parent and the whole tree after it."""

    id: str
    parent: str | None
    title: str
    message: str
    author: str
    timestamp: float
    tree: dict[str, Entry]

    @property
    def date(self) -> str:
        return hub_date(self.timestamp)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in ("id", "parent", "title", "message", "author")}
        d["timestamp"] = self.timestamp
        d["tree"] = {p: e.to_json() for p, e in self.tree.items()}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Commit:
        tree = {p: Entry.from_json(e) for p, e in d["tree"].items()}
        return cls(d["id"], d["parent"], d["title"], d["message"], d["author"], d["timestamp"], tree)


@dataclass
class Repo:
    """A repo's history, branches and the LFS objects uploaded to it."""

    type: str  # "model" | "dataset" | "space"
    id: str  # "ns/name"
    dir: Path
    private: bool = False
    commits: dict[str, Commit] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # commit ids, oldest first
    branches: dict[str, str] = field(default_factory=dict)
    lfs_oids: set[str] = field(default_factory=set)

    def resolve(self, revision: str) -> Commit:
        """Branch name, full sha or unique sha prefix (>= 7) -> commit; else RevisionNotFound."""
        if revision in self.branches:
            return self.commits[self.branches[revision]]
        rev = revision.lower()
        if rev in self.commits:
            return self.commits[rev]
        if len(rev) >= 7 and all(c in "0123456789abcdef" for c in rev):
            hits = [c for c in self.order if c.startswith(rev)]
            if len(hits) == 1:
                return self.commits[hits[0]]
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def history(self, head: str) -> list[Commit]:
        """Commits reachable from ``head``, newest first (bounded by the number of commits)."""
        out: list[Commit] = []
        cur: str | None = head
        while cur is not None and len(out) < len(self.order):
            commit = self.commits[cur]
            out.append(commit)
            cur = commit.parent
        return out


class Storage:
    """All repos under ``root``; every mutation holds one lock, so commits are serialised."""

    def __init__(self, root: Path, lfs_threshold: int = DEFAULT_LFS_THRESHOLD) -> None:
        self.root = Path(root)
        self.lfs_threshold = lfs_threshold
        self.lock = threading.RLock()
        self.repos: dict[tuple[str, str], Repo] = {}
        self._counter = 0
        for sub in ("objects/git", "objects/lfs", "objects/tmp", "repos"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._load()

    # -- repos ---------------------------------------------------------------------------------
    def _load(self) -> None:
        for commits_file in sorted(self.root.glob("repos/*/*/*/commits.jsonl")):
            rdir = commits_file.parent
            if rdir.name.startswith(".deleted-"):
                continue
            repo = Repo(type=rdir.parent.parent.name, id=f"{rdir.parent.name}/{rdir.name}", dir=rdir)
            for line in commits_file.read_text().splitlines():
                if line.strip():
                    commit = Commit.from_json(json.loads(line))
                    repo.commits[commit.id] = commit
                    repo.order.append(commit.id)
            repo.branches = json.loads((rdir / "refs.json").read_text())
            lfs_txt = rdir / "lfs.txt"
            repo.lfs_oids = set(lfs_txt.read_text().split()) if lfs_txt.exists() else set()
            self.repos[(repo.type, repo.id)] = repo

    def get(self, repo_type: str, repo_id: str) -> Repo:
        """The repo, or a RepoNotFound error."""
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            raise HubError(404, f"Repository not found: {repo_type} {repo_id}", "RepoNotFound")
        return repo

    def create_repo(self, repo_type: str, repo_id: str, private: bool, author: str) -> Repo:
        """Create a repo with the Hub's initial commit (``.gitattributes``); 409 if it exists."""
        with self.lock:
            if (repo_type, repo_id) in self.repos:
                raise HubError(409, f"You already created this {repo_type} repo")
            rdir = self.root / "repos" / repo_type / repo_id
            rdir.mkdir(parents=True, exist_ok=True)
            repo = Repo(type=repo_type, id=repo_id, dir=rdir, private=private)
            attrs = DEFAULT_GITATTRIBUTES.encode()
            tree = {".gitattributes": Entry(len(attrs), self.put_git(attrs))}
            self._append_commit(repo, "main", None, "initial commit", "", author, tree)
            # Seen only once it has its main branch: readers do not take the lock, and the Hub never shows a
            # repo without its initial commit (a concurrent `publish --create` read "no revision 'main'").
            self.repos[(repo_type, repo_id)] = repo
            return repo

    def delete_repo(self, repo_type: str, repo_id: str) -> None:
        """Forget a repo (its files stay on disk under a tombstone name so ids never collide)."""
        with self.lock:
            repo = self.get(repo_type, repo_id)
            del self.repos[(repo_type, repo_id)]
            repo.dir.rename(repo.dir.with_name(f".deleted-{repo.dir.name}-{time.time_ns()}"))

    # -- blobs ---------------------------------------------------------------------------------
    def put_git(self, data: bytes) -> str:
        """Store a regular file's bytes; return its git blob sha1."""
        sha1 = git_blob_sha1(data)
        self._write_atomic(self.root / "objects/git" / sha1, data)
        return sha1

    def lfs_path(self, sha256: str) -> Path:
        return self.root / "objects/lfs" / sha256

    def tmp_path(self, name: str) -> Path:
        return self.root / "objects/tmp" / f"{name}-{threading.get_ident()}-{time.time_ns()}"

    def add_lfs(self, repo: Repo, tmp: Path, sha256: str, size: int) -> None:
        """Move an uploaded temp file into LFS after checking its hash and size."""
        digest = hashlib.sha256()
        with open(tmp, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        actual = tmp.stat().st_size
        if digest.hexdigest() != sha256 or actual != size:
            tmp.unlink(missing_ok=True)
            raise HubError(400, f"LFS upload does not match oid {sha256} / size {size}")
        os.replace(tmp, self.lfs_path(sha256))
        with self.lock:
            if sha256 not in repo.lfs_oids:
                repo.lfs_oids.add(sha256)
                with open(repo.dir / "lfs.txt", "a") as f:
                    f.write(sha256 + "\n")

    def lfs_files(self, repo: Repo) -> list[dict[str, Any]]:
        """The repo's LFS objects as ``GET .../lfs-files`` lists them (a filename that references each)."""
        names: dict[str, str] = {}
        for cid in reversed(repo.order):
            for path, entry in repo.commits[cid].tree.items():
                if entry.lfs is not None:
                    names.setdefault(entry.lfs, path)
        out = []
        for oid in sorted(repo.lfs_oids):
            path = self.lfs_path(oid)
            if path.exists():
                stat = path.stat()
                out.append(
                    {
                        "fileOid": oid,
                        "oid": oid,
                        "filename": names.get(oid, ""),
                        "size": stat.st_size,
                        "pushedAt": hub_date(stat.st_mtime),
                        "ref": "main",
                    }
                )
        return out

    def delete_lfs(self, repo: Repo, oids: list[str], rewrite_history: bool = True) -> None:
        """Permanently delete LFS objects of a repo (the bytes go when no other repo holds them).

        With ``rewrite_history`` (huggingface_hub's default), as the Hub does: every commit from the first
        one whose tree points at a deleted object is rewritten without those pointers, so it and every
        commit after it get new ids and the old ids answer 404; branches follow. Without it, commits and
        their ids stay, and a pointer to a deleted object answers 404 when resolved.
        """
        with self.lock:
            gone = set(oids)
            repo.lfs_oids.difference_update(gone)
            (repo.dir / "lfs.txt").write_text("".join(f"{o}\n" for o in sorted(repo.lfs_oids)))
            for oid in gone:
                if not any(oid in other.lfs_oids for other in self.repos.values()):
                    self.lfs_path(oid).unlink(missing_ok=True)
            if rewrite_history:
                self._rewrite(repo, gone)

    def _rewrite(self, repo: Repo, gone: set[str]) -> None:
        """(Under the lock.) Drop pointers to ``gone`` from history: new ids from the first affected commit on."""
        first = next(
            (
                i
                for i, cid in enumerate(repo.order)
                if any(e.lfs in gone for e in repo.commits[cid].tree.values())
            ),
            None,
        )
        if first is None:
            return
        renamed: dict[str, str] = {}
        for cid in repo.order[first:]:
            old = repo.commits.pop(cid)
            tree = {p: e for p, e in old.tree.items() if e.lfs not in gone}
            new_id = hashlib.sha1(f"rewritten:{cid}:{sorted(gone)}".encode()).hexdigest()
            parent = renamed.get(old.parent, old.parent) if old.parent is not None else None
            repo.commits[new_id] = Commit(
                new_id, parent, old.title, old.message, old.author, old.timestamp, tree
            )
            renamed[cid] = new_id
        repo.order = [renamed.get(c, c) for c in repo.order]
        repo.branches = {b: renamed.get(c, c) for b, c in repo.branches.items()}
        tmp = repo.dir / "commits.jsonl.tmp"
        tmp.write_text("".join(json.dumps(repo.commits[c].to_json()) + "\n" for c in repo.order))
        os.replace(tmp, repo.dir / "commits.jsonl")
        self._write_refs(repo)

    def has_lfs(self, repo: Repo, sha256: str, size: int | None = None) -> bool:
        path = self.lfs_path(sha256)
        ok = sha256 in repo.lfs_oids and path.exists()
        return ok and (size is None or path.stat().st_size == size)

    def content_path(self, entry: Entry) -> Path:
        """Where a tree entry's bytes live."""
        if entry.lfs is not None:
            return self.lfs_path(entry.lfs)
        return self.root / "objects/git" / entry.oid

    def _write_atomic(self, path: Path, data: bytes) -> None:
        if path.exists():
            return
        tmp = self.tmp_path(path.name)
        tmp.write_bytes(data)
        os.replace(tmp, path)

    # -- commits -------------------------------------------------------------------------------
    def _append_commit(
        self,
        repo: Repo,
        branch: str,
        parent: str | None,
        title: str,
        message: str,
        author: str,
        tree: dict[str, Entry],
    ) -> Commit:
        self._counter += 1
        stamp = time.time()
        seed = json.dumps([repo.id, parent, title, message, stamp, self._counter, sorted(tree)])
        commit = Commit(hashlib.sha1(seed.encode()).hexdigest(), parent, title, message, author, stamp, tree)
        with open(repo.dir / "commits.jsonl", "a") as f:
            f.write(json.dumps(commit.to_json()) + "\n")
        repo.commits[commit.id] = commit
        repo.order.append(commit.id)
        repo.branches[branch] = commit.id
        self._write_refs(repo)
        return commit

    def _write_refs(self, repo: Repo) -> None:
        tmp = repo.dir / "refs.json.tmp"
        tmp.write_text(json.dumps(repo.branches))
        os.replace(tmp, repo.dir / "refs.json")

    def set_branch(self, repo: Repo, branch: str, start: str | None) -> None:
        """Create ``branch`` at revision ``start`` (default: main's head); 409 if it exists."""
        with self.lock:
            if branch in repo.branches:
                raise HubError(409, f"Reference already exists: refs/heads/{branch}")
            repo.branches[branch] = repo.resolve(start or "main").id
            self._write_refs(repo)

    def delete_branch(self, repo: Repo, branch: str) -> None:
        """Delete a branch other than main; its commits stay resolvable by sha."""
        with self.lock:
            if branch == "main" or branch not in repo.branches:
                raise HubError(404 if branch != "main" else 403, f"Cannot delete branch {branch}")
            del repo.branches[branch]
            self._write_refs(repo)

    def commit(
        self,
        repo: Repo,
        branch: str,
        ops: list[dict[str, Any]],
        summary: str,
        description: str,
        parent_commit: str | None,
        author: str,
    ) -> Commit:
        """Apply NDJSON operations on top of ``branch`` as one commit; 412 on a stale parent."""
        with self.lock:
            if branch not in repo.branches:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            head = repo.branches[branch]
            if parent_commit is not None and not head.startswith(parent_commit.lower()):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            tree = dict(repo.commits[head].tree)
            for op in ops:
                self._apply(repo, tree, op)
            return self._append_commit(repo, branch, head, summary, description, author, tree)

    def _apply(self, repo: Repo, tree: dict[str, Entry], op: dict[str, Any]) -> None:
        key, value = op.get("key"), op.get("value") or {}
        path = str(value.get("path", "")).strip("/")
        if not path or ".." in path.split("/"):
            raise HubError(400, f"Invalid path in commit operation: {value.get('path')!r}")
        if key == "file":
            data = base64.b64decode(value.get("content", ""))
            tree[path] = Entry(len(data), self.put_git(data))
        elif key == "lfsFile":
            oid, size = str(value.get("oid", "")), value.get("size")
            if not self.has_lfs(repo, oid, None if size is None else int(size)):
                raise HubError(
                    400,
                    f"Your push was rejected because an LFS pointer pointed to a file that does not exist: {oid}",
                )
            real = self.lfs_path(oid).stat().st_size
            tree[path] = Entry(real, git_blob_sha1(lfs_pointer(oid, real)), lfs=oid)
        elif key == "deletedFile":
            if path not in tree:
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            del tree[path]
        elif key == "deletedFolder":
            doomed = [p for p in tree if p.startswith(path + "/")]
            if not doomed:
                raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
            for p in doomed:
                del tree[p]
        else:
            raise HubError(400, f"Unknown commit operation key: {key!r}")

    # -- queries -------------------------------------------------------------------------------
    def upload_mode(self, commit: Commit, path: str, size: int, sample: bytes) -> str:
        """``lfs`` or ``regular``, decided as the Hub does: .gitattributes, size, binary content."""
        if size == 0:
            return "regular"
        if size >= self.lfs_threshold or b"\0" in sample:
            return "lfs"
        attrs = commit.tree.get(".gitattributes")
        if attrs is not None:
            text = self.content_path(attrs).read_text(errors="replace")
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 2 and "filter=lfs" in parts[1:]:
                    pattern = parts[0]
                    target = path if "/" in pattern else path.rsplit("/", 1)[-1]
                    if fnmatch.fnmatchcase(target, pattern):
                        return "lfs"
        return "regular"


def dir_oid(tree: dict[str, Entry], prefix: str) -> str:
    """A stable fake tree id for a folder: the sha1 of its files' paths and oids."""
    h = hashlib.sha1(prefix.encode())
    for path in sorted(p for p in tree if p.startswith(prefix + "/")):
        h.update(f"{path}\0{tree[path].oid}\n".encode())
    return h.hexdigest()
