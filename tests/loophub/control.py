"""Drive a loophub in another process over its control endpoint (``/_loophub/control/...``)."""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any


class RemoteControl:
    """The fault and stats knobs of :class:`~tests.loophub.server.LoopHub`, over HTTP."""

    def __init__(self, url: str, timeout: float = 10) -> None:
        self.base = url.rstrip("/") + "/_loophub/control"
        self.timeout = timeout

    def _call(self, method: str, what: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        body = None if data is None else json.dumps(data).encode()
        req = urllib.request.Request(f"{self.base}/{what}", data=body, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            result: dict[str, Any] = json.loads(resp.read() or b"{}")
            return result

    def add_fault(self, kind: str, **match: Any) -> dict[str, Any]:
        """Queue a fault; same fields as :class:`~tests.loophub.faults.Fault` (kind, endpoint, times...)."""
        return self._call("POST", "faults", {"kind": kind, **match})["fault"]  # type: ignore[no-any-return]

    def pending_faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "faults")["faults"]  # type: ignore[no-any-return]

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    def land_concurrent_commit(
        self,
        repo_id: str,
        files: dict[str, bytes] | None = None,
        repo_type: str = "dataset",
        branch: str = "main",
    ) -> None:
        """Before the next commit request on the repo, land another writer's commit."""
        enc = {p: base64.b64encode(b).decode() for p, b in (files or {}).items()}
        self._call(
            "POST",
            "concurrent-commit",
            {"repo_id": repo_id, "repo_type": repo_type, "branch": branch, "files": enc},
        )

    def configure(self, **config: Any) -> None:
        """Change ``HubConfig`` knobs (page_size, lfs_redirect, multipart_chunk_size) on the fly."""
        self._call("POST", "config", config)

    def stats(self) -> dict[str, Any]:
        """``{"records": [...], "token_leaks": [...]}`` as the server logged them."""
        return self._call("GET", "stats")

    def reset_stats(self) -> None:
        self._call("DELETE", "stats")
