"""Byte transfer endpoints: the LFS batch API and its upload / verify / multipart URLs, and ``resolve``.

LFS upload URLs are our own (``/_loophub/lfs/<type>/<ns>/<name>/<sha256>``): the client PUTs to
them without an auth header, exactly as it does to the Hub's S3 URLs.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import re
import shutil
from typing import Any
from urllib.parse import urlsplit

from .api import LFS_JSON, HubApi, Reply, Request, error_reply, json_reply
from .storage import Entry, HubError, Repo

SHA256 = re.compile(r"[0-9a-f]{64}")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``Range: bytes=a-b`` -> (start, end inclusive); None to serve it all; HubError 416 if unsatisfiable."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None  # no range, or several ranges: answer 200 with everything, as RFC 9110 allows
    first, _, last = header[len("bytes=") :].strip().partition("-")
    try:
        if first == "":
            start, end = max(0, size - int(last)), size - 1
        else:
            start, end = int(first), (int(last) if last else size - 1)
    except ValueError:
        return None
    end = min(end, size - 1)
    if start > end or start >= size:
        raise HubError(416, f"Range not satisfiable: {header} (size {size})")
    return start, end


class LoopHubApi(HubApi):
    """All endpoints: the JSON API of :class:`HubApi` plus the byte transfers."""

    def _oid(self, req: Request) -> str:
        oid = req.route.extra[0] if req.route.extra else ""
        if not SHA256.fullmatch(oid):
            raise HubError(400, f"Invalid LFS oid: {oid!r}")
        return oid

    def _lfs_base(self, req: Request, repo: Repo, oid: str) -> str:
        return f"{req.base}/_loophub/lfs/{repo.type}/{repo.id}/{oid}"

    # -- LFS -----------------------------------------------------------------------------------
    def ep_lfs_batch(self, req: Request) -> Reply:
        repo = self._repo(req)
        data = json.loads(req.body or b"{}")
        operation = data.get("operation")
        objects: list[dict[str, Any]] = []
        for obj in data.get("objects", []):
            oid, size = str(obj.get("oid", "")), int(obj.get("size", 0))
            item: dict[str, Any] = {"oid": oid, "size": size}
            if not SHA256.fullmatch(oid):
                item["error"] = {"code": 422, "message": f"Invalid oid {oid!r}"}
            elif operation == "download":
                if self.storage.has_lfs(repo, oid, size):
                    item["actions"] = {"download": {"href": self._lfs_base(req, repo, oid)}}
                else:
                    item["error"] = {"code": 404, "message": "Object does not exist"}
            elif self.config.lfs_batch_transfer == "xet" or not self.storage.has_lfs(repo, oid, size):
                # Basic: no "actions" at all means "already stored", and the client skips the upload. Xet:
                # actions come whether it is stored or not.
                item["actions"] = self._upload_actions(req, repo, oid, size)
            objects.append(item)
        return json_reply(
            {"transfer": self.config.lfs_batch_transfer, "objects": objects}, content_type=LFS_JSON
        )

    def _upload_actions(self, req: Request, repo: Repo, oid: str, size: int) -> dict[str, Any]:
        base = self._lfs_base(req, repo, oid)
        verify: dict[str, Any] = {"href": f"{base}/verify"}
        chunk = self.config.multipart_chunk_size
        if chunk is None or size <= chunk:
            return {"upload": {"href": base}, "verify": verify}
        header: dict[str, str] = {"chunk_size": str(chunk)}
        for n in range(1, -(-size // chunk) + 1):
            header[str(n)] = f"{base}/part/{n}"
        return {"upload": {"href": f"{base}/complete", "header": header}, "verify": verify}

    def ep_lfs_upload(self, req: Request) -> Reply:
        repo, oid = self._repo(req), self._oid(req)
        tmp = self.storage.tmp_path(oid)
        tmp.write_bytes(req.body)
        self.storage.add_lfs(repo, tmp, oid, len(req.body))
        return Reply(200, {"ETag": f'"{hashlib.md5(req.body).hexdigest()}"'})

    def ep_lfs_part(self, req: Request) -> Reply:
        self._repo(req)
        oid = self._oid(req)
        part = int(req.route.extra[1])
        pdir = self.storage.root / "objects/tmp" / f"parts-{oid}"
        pdir.mkdir(exist_ok=True)
        (pdir / str(part)).write_bytes(req.body)
        # The client needs an ETag per part and sends them back in the completion call.
        return Reply(200, {"ETag": f'"{hashlib.md5(req.body).hexdigest()}"'})

    def ep_lfs_complete(self, req: Request) -> Reply:
        repo, oid = self._repo(req), self._oid(req)
        parts = json.loads(req.body or b"{}").get("parts", [])
        pdir = self.storage.root / "objects/tmp" / f"parts-{oid}"
        tmp = self.storage.tmp_path(oid)
        with open(tmp, "wb") as out:
            for n, part in enumerate(sorted(parts, key=lambda p: int(p["partNumber"])), start=1):
                src = pdir / str(n)
                if int(part["partNumber"]) != n or not src.exists():
                    raise HubError(400, f"Missing part {n} of {oid}")
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out)
        self.storage.add_lfs(repo, tmp, oid, tmp.stat().st_size)
        shutil.rmtree(pdir, ignore_errors=True)
        return json_reply({})

    def ep_lfs_verify(self, req: Request) -> Reply:
        repo, oid = self._repo(req), self._oid(req)
        size = json.loads(req.body or b"{}").get("size")
        if not self.storage.has_lfs(repo, oid, None if size is None else int(size)):
            raise HubError(404, f"LFS object {oid} not found", "EntryNotFound")
        return json_reply({"success": True})

    def ep_lfs_download(self, req: Request) -> Reply:
        repo, oid = self._repo(req), self._oid(req)
        if not self.storage.has_lfs(repo, oid):
            raise HubError(404, f"LFS object {oid} not found")
        path = self.storage.lfs_path(oid)
        return self._serve(req, path.stat().st_size, path, {"ETag": f'"{oid}"'})

    # -- resolve -------------------------------------------------------------------------------
    def ep_resolve(self, req: Request) -> Reply:
        repo = self._repo(req)
        commit = repo.resolve(req.route.revision or "main")
        path = (req.route.path or "").strip("/")
        entry = commit.tree.get(path)
        if entry is None:
            # X-Repo-Commit lets the client record the miss under .no_exist/<commit>/.
            err = HubError(404, f"Entry not found: {path}", "EntryNotFound")
            return error_reply(err, **{"X-Repo-Commit": commit.id})
        if entry.lfs is not None and not self.storage.has_lfs(repo, entry.lfs):
            # The pointer is still in this commit (a purge without rewriting history), its object is gone.
            err = HubError(404, f"Entry not found: {path} (its LFS object was deleted)", "EntryNotFound")
            return error_reply(err, **{"X-Repo-Commit": commit.id})
        headers = self._file_headers(commit.id, entry)
        # Regular files get a type by their extension, as a web server would (pip reads find-links pages
        # only when served as text/html). Whether huggingface.co does the same for .html is unverified.
        kind = mimetypes.guess_type(path)[0] if entry.lfs is None else None
        if kind is not None:
            headers["Content-Type"] = kind + ("; charset=utf-8" if kind.startswith("text/") else "")
        if entry.lfs is not None and self.config.lfs_redirect == "cross":
            # Like the Hub's CDN redirect: another origin, so the client reads metadata off the 302.
            host = urlsplit(req.base)
            location = f"http://localhost:{host.port}/_loophub/lfs/{repo.type}/{repo.id}/{entry.lfs}"
            return Reply(302, {**headers, "Location": location, "Content-Length": "0"})
        return self._serve(req, entry.size, self.storage.content_path(entry), headers)

    def _file_headers(self, commit_id: str, entry: Entry) -> dict[str, str]:
        headers = {"X-Repo-Commit": commit_id, "ETag": f'"{entry.oid}"', "Accept-Ranges": "bytes"}
        if entry.lfs is not None:
            # The client names its cache blob after X-Linked-Etag (or ETag), so LFS files use sha256.
            headers.update({"X-Linked-Etag": f'"{entry.lfs}"', "X-Linked-Size": str(entry.size)})
            headers["ETag"] = f'"{entry.lfs}"'
        return headers

    def _serve(self, req: Request, size: int, path: Any, headers: dict[str, str]) -> Reply:
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes", **headers}
        try:
            rng = parse_range(req.headers.get("Range"), size)
        except HubError as e:
            return error_reply(e, **{"Content-Range": f"bytes */{size}"})
        if rng is None:
            return Reply(200, headers, file=(path, 0, size))
        start, end = rng
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return Reply(206, headers, file=(path, start, end - start + 1))
