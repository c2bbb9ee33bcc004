"""Fault injection and request accounting for the loopback hub.

A :class:`Fault` matches requests by endpoint name (see ``server.classify``), method and a substring
of the URL path, and fires on the next ``times`` matching requests. Rules are consumed first come,
first served, so a test can queue "2 x 503 on preupload, then drop the commit response".
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any


class FaultKind(str, Enum):
    """What a fault does to a matching request."""

    STATUS = "status"  # answer `status` (5xx, or 429 with Retry-After) without handling the request
    DROP = "drop"  # close the socket: mid-upload (phase=request) or mid-response (phase=response)
    DELAY = "delay"  # sleep `delay_s`, then handle normally
    LOSE_RESPONSE = "lose_response"  # handle normally (a commit is applied), then close without replying
    TRICKLE = "trickle"  # handle normally, then send the body one byte every `delay_s` seconds
    ECHO = "echo"  # answer `status` with an error text that echoes the Authorization header and raw bytes
    BAD_JSON = "bad_json"  # answer 200 with a JSON content type and a body that is not JSON
    BODY = "body"  # answer 200 with a JSON content type and ``body`` (text, latin-1 for bytes)
    REDIRECT_LOOP = "redirect_loop"  # answer 302 to the very URL asked (every time: the fault stays live)


class Phase(str, Enum):
    """Where a DROP cuts the connection."""

    REQUEST = "request"  # after reading `after_bytes` of the request body (None: before reading any)
    RESPONSE = (
        "response"  # after sending headers and `after_bytes` of the body (None: before the status line)
    )


@dataclass
class Fault:
    """One fault rule; ``times`` counts down as it fires."""

    kind: FaultKind
    endpoint: str | None = None  # "commit", "preupload", "resolve", "tree", ... (None: any)
    method: str | None = None  # "GET", "HEAD", ... (None: any)
    path_contains: str | None = None  # substring of the decoded URL path (None: any)
    times: int = 1
    status: int = 503
    retry_after: int | None = None  # seconds, sent as Retry-After (useful with 429/503)
    # The IETF draft's headers, as huggingface.co sends them on a 429: RateLimit '"api";r=0;t=30' (t: seconds
    # until the window resets) and RateLimit-Policy '"fixed window";"api";q=500;w=300' (w: the window).
    ratelimit: str | None = None
    ratelimit_policy: str | None = None
    # A rate-limit window: the fault answers every matching request for this many seconds after it first
    # fires (``times`` is then ignored), and a ``ratelimit`` header's ``t=`` counts down the seconds left.
    window_s: float | None = None
    started: float | None = None
    delay_s: float = 0.0
    phase: Phase = Phase.RESPONSE
    after_bytes: int | None = None
    body: str = ""  # BODY's reply, as latin-1 text (JSON carries it)
    skip: int = 0  # matching requests to let through untouched before the fault starts firing
    fired: int = 0

    def live(self) -> bool:
        if self.window_s is None:
            return self.times > 0
        return self.started is None or time.monotonic() - self.started < self.window_s

    def headers(self) -> dict[str, str]:
        """The rate-limit headers to send now (a window's ``t=`` is the seconds it has left)."""
        extra = {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}
        if self.ratelimit is not None:
            text = self.ratelimit
            if self.window_s is not None and self.started is not None:
                left = max(1, math.ceil(self.window_s - (time.monotonic() - self.started)))
                text = re.sub(r"t=\d+", f"t={left}", text)
            extra["RateLimit"] = text
        if self.ratelimit_policy is not None:
            extra["RateLimit-Policy"] = self.ratelimit_policy
        return extra

    def matches(self, endpoint: str, method: str, path: str) -> bool:
        return (
            self.live()
            and self.endpoint in (None, endpoint)
            and (self.method is None or self.method.upper() == method)
            and (self.path_contains is None or self.path_contains in path)
        )

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"], d["phase"] = self.kind.value, self.phase.value
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fault:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        kw = dict(d)
        kw["kind"] = FaultKind(kw["kind"])
        if "phase" in kw:
            kw["phase"] = Phase(kw["phase"])
        return cls(**kw)


@dataclass
class ConcurrentCommit:
    """A commit another writer lands just before the next commit request on a repo."""

    repo_type: str
    repo_id: str
    files: dict[str, bytes]
    branch: str = "main"
    title: str = "concurrent commit (loophub)"


class FaultPlan:
    """The queued faults and concurrent commits; safe to use from the test and handler threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.faults: list[Fault] = []
        self.concurrent: list[ConcurrentCommit] = []

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def take(self, endpoint: str, method: str, path: str) -> Fault | None:
        """The first live rule that matches, with one firing consumed; None if none."""
        with self._lock:
            for fault in self.faults:
                if fault.matches(endpoint, method, path):
                    if fault.skip > 0:
                        fault.skip -= 1
                        return None
                    fault.times -= 1
                    fault.fired += 1
                    if fault.window_s is not None and fault.started is None:
                        fault.started = time.monotonic()
                    return fault
        return None

    def add_concurrent(self, cc: ConcurrentCommit) -> None:
        with self._lock:
            self.concurrent.append(cc)

    def take_concurrent(self, repo_type: str, repo_id: str, branch: str) -> ConcurrentCommit | None:
        with self._lock:
            for i, cc in enumerate(self.concurrent):
                if (cc.repo_type, cc.repo_id, cc.branch) == (repo_type, repo_id, branch):
                    return self.concurrent.pop(i)
        return None

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.concurrent.clear()

    def pending(self) -> list[Fault]:
        """Rules that have not fired their full count yet."""
        with self._lock:
            return [f for f in self.faults if f.live()]


@dataclass(frozen=True)
class Record:
    """One request as the server saw it."""

    method: str
    endpoint: str
    url: str  # path and query as sent
    repo: str | None  # "dataset:ns/name"
    path: str | None  # the file path inside the repo for resolve, tree, ...
    status: int  # 0 when the connection was dropped before a status line
    bytes_sent: int  # response body bytes written
    bytes_received: int  # request body bytes read
    fault: str | None  # the fault kind that fired, if any


@dataclass
class RequestLog:
    """Every request, for assertions like "pull downloaded only these two files"."""

    records: list[Record] = field(default_factory=list)
    token_leaks: list[str] = field(default_factory=list)  # URLs that carried a bearer token
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, rec: Record) -> None:
        with self._lock:
            self.records.append(rec)

    def leak(self, url: str) -> None:
        with self._lock:
            self.token_leaks.append(url)

    def select(
        self, endpoint: str | None = None, method: str | None = None, path: str | None = None
    ) -> list[Record]:
        with self._lock:
            recs = list(self.records)
        return [
            r
            for r in recs
            if endpoint in (None, r.endpoint) and method in (None, r.method) and path in (None, r.path)
        ]

    def count(self, endpoint: str | None = None, method: str | None = None, path: str | None = None) -> int:
        """How many requests matched."""
        return len(self.select(endpoint, method, path))

    def downloaded(self) -> list[str]:
        """File paths whose content was served by a successful resolve GET, in order."""
        return [r.path for r in self.select("resolve", "GET") if r.path and r.status in (200, 206)]

    def bytes_served(self, endpoint: str | None = None, path: str | None = None) -> int:
        return sum(r.bytes_sent for r in self.select(endpoint, None, path))

    def clear(self) -> None:
        with self._lock:
            self.records.clear()
            self.token_leaks.clear()

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"records": [asdict(r) for r in self.records], "token_leaks": list(self.token_leaks)}
