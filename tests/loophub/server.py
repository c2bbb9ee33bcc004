"""The HTTP side of the loopback hub: sockets, faults, auth, accounting, and the :class:`LoopHub` object.

Stdlib ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive, bound to 127.0.0.1, so the real
``huggingface_hub`` client (httpx2) talks to it over real sockets.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .api import HubConfig, Reply, Request, error_reply, json_reply
from .faults import ConcurrentCommit, Fault, FaultKind, FaultPlan, Phase, Record, RequestLog
from .routes import UNAUTHENTICATED, WRITE_ENDPOINTS, Route, classify
from .storage import DEFAULT_LFS_THRESHOLD, HubError, Storage
from .transfer import LoopHubApi

logger = logging.getLogger(__name__)
MAX_BODY = 1 << 31  # refuse absurd Content-Length values rather than allocating them
POLL_S = 0.01  # seconds between the serving loop's checks for shutdown


class _Server(ThreadingHTTPServer):
    """Tracks open connections so that ``stop()`` can cut idle keep-alive sockets and join threads."""

    daemon_threads = True
    block_on_close = True  # server_close() joins the handler threads

    def __init__(self, addr: tuple[str, int], hub: LoopHub) -> None:
        self.hub = hub
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def cut_all(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30  # an idle keep-alive connection ends its thread after this
    # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus delayed ACKs cost
    # about 40 ms per response.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    # -- the request pipeline -------------------------------------------------------------------
    def _handle(self) -> None:
        hub = self.server.hub
        split = urlsplit(self.path)
        route = classify(split.path, self.command)
        hub._note_tokens(self.path, self.headers.get("Authorization"))
        if route.endpoint == "control":
            self._send(hub._control(route, self.command, self._read_body()), route, None, 0)
            return
        fault = hub.plan.take(route.endpoint, self.command, unquote(split.path))
        if fault is not None:
            logger.info("loophub fault %s on %s %s", fault.kind.value, self.command, self.path)
        if fault is not None and fault.kind is FaultKind.DELAY:
            hub._stopping.wait(fault.delay_s)
        if fault is not None and fault.kind is FaultKind.DROP and fault.phase is Phase.REQUEST:
            got = len(self._read_body(limit=fault.after_bytes or 0))
            self._record(route, 0, 0, got, fault)
            self._cut()
            return
        body = self._read_body()
        if fault is not None and fault.kind is FaultKind.ECHO:
            # Like a misconfigured proxy: the request's credentials and binary junk in the error text.
            junk = bytes(range(256)).decode("latin-1") * 40
            text = f"bad request; you sent Authorization: {self.headers.get('Authorization')}\n{junk}"
            self._send(json_reply({"error": text}, fault.status), route, fault, len(body))
            return
        if fault is not None and fault.kind is FaultKind.BAD_JSON:
            broken = Reply(200, {"Content-Type": "application/json"}, b'{"id": "team/wheels", "sha": ')
            self._send(broken, route, fault, len(body))
            return
        if fault is not None and fault.kind is FaultKind.BODY:
            reply = Reply(200, {"Content-Type": "application/json"}, fault.body.encode("latin-1"))
            self._send(reply, route, fault, len(body))
            return
        if fault is not None and fault.kind is FaultKind.REDIRECT_LOOP:
            self._send(Reply(302, {"Location": self.path}), route, fault, len(body))
            return
        if fault is not None and fault.kind is FaultKind.STATUS:
            extra = fault.headers()
            err = HubError(fault.status, f"loophub injected HTTP {fault.status}")
            self._send(error_reply(err, **extra), route, fault, len(body))
            return
        reply = self._dispatch(route, split.query, body)
        if fault is not None and fault.kind is FaultKind.LOSE_RESPONSE:
            self._record(route, 0, 0, len(body), fault)
            self._cut()
            return
        if fault is not None and fault.kind is FaultKind.TRICKLE:
            self._trickle(reply, route, fault, len(body))
            return
        self._send(reply, route, fault, len(body))

    def _trickle(self, reply: Reply, route: Route, fault: Fault, received: int) -> None:
        """Send the headers, then the body one byte per ``fault.delay_s`` (a server that never quite stalls)."""
        data = reply.body if reply.file is None else b""
        if reply.file is not None:
            path, offset, length = reply.file
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(length)
        self._record(route, reply.status, len(data), received, fault)
        try:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(len(data)):
                if self.server.hub._stopping.wait(fault.delay_s):
                    break
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self._cut()

    def _dispatch(self, route: Route, query: str, body: bytes) -> Reply:
        hub = self.server.hub
        if not hub._authorized(route, self.headers.get("Authorization")):
            err = HubError(401, "Invalid credentials in Authorization header")
            return error_reply(err)
        host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
        req = Request(
            self.command,
            route,
            parse_qs(query, keep_blank_values=True),
            self.headers,
            body,
            f"http://{host}",
            urlsplit(self.path).path,
        )
        try:
            return hub.api.dispatch(req)
        except HubError as e:
            return error_reply(e)
        except Exception as e:  # a bug in loophub: answer 500 and keep serving
            logger.exception("loophub failed on %s %s", self.command, self.path)
            return json_reply({"error": f"loophub internal error: {e!r}"}, 500)

    # -- bodies in and out ----------------------------------------------------------------------
    def _read_body(self, limit: int | None = None) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked(limit)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError(f"request body too large: {length}")
        return self.rfile.read(length if limit is None else min(limit, length))

    def _read_chunked(self, limit: int | None) -> bytes:
        out = bytearray()
        for _ in range(1 << 20):  # bounded: one iteration per chunk
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                break
            out += self.rfile.read(size)
            self.rfile.readline()
            if limit is not None and len(out) >= limit:
                return bytes(out[:limit])
        return bytes(out)

    def _send(self, reply: Reply, route: Route, fault: Fault | None, received: int) -> None:
        cut_after = None
        if fault is not None and fault.kind is FaultKind.DROP:
            if fault.after_bytes is None:
                self._record(route, 0, 0, received, fault)
                self._cut()
                return
            cut_after = fault.after_bytes
        body_len = 0 if self.command == "HEAD" else reply.length
        # Record before writing: once the client has the reply, a test may assert on the log at once.
        # (If the client hangs up mid-body, bytes_sent overstates what it got.)
        self._record(
            route, reply.status, body_len if cut_after is None else min(cut_after, body_len), received, fault
        )
        try:
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(reply.length))
            self.end_headers()
            if self.command != "HEAD":
                self._write_body(reply, cut_after)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        if cut_after is not None:
            self._cut()

    def _write_body(self, reply: Reply, cut_after: int | None) -> int:
        budget = reply.length if cut_after is None else min(cut_after, reply.length)
        if reply.file is None:
            self.wfile.write(reply.body[:budget])
            return budget
        path, offset, _ = reply.file
        sent = 0
        with open(path, "rb") as f:
            f.seek(offset)
            while sent < budget:
                chunk = f.read(min(1 << 16, budget - sent))
                if not chunk:
                    break
                self.wfile.write(chunk)
                sent += len(chunk)
        return sent

    def _cut(self) -> None:
        """Drop the connection without (the rest of) a response."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _record(self, route: Route, status: int, sent: int, received: int, fault: Fault | None) -> None:
        if route.endpoint == "control":
            return  # the test harness talking to us is not traffic under test
        path = (
            route.path if route.endpoint in ("resolve", "tree") else (route.extra[0] if route.extra else None)
        )
        self.server.hub.log.add(
            Record(
                self.command,
                route.endpoint,
                self.path,
                route.repo_key,
                path,
                status,
                sent,
                received,
                fault.kind.value if fault is not None else None,
            )
        )


class LoopHub:
    """A loopback Hugging Face Hub for tests: start it, point the client at ``url``, inject faults."""

    def __init__(
        self,
        root: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        page_size: int = 1000,
        token: str | None = None,
        auth_reads: bool = False,
        lfs_threshold: int = DEFAULT_LFS_THRESHOLD,
        lfs_redirect: str = "none",
        multipart_chunk_size: int | None = None,
        user: str = "loophub-user",
        lfs_batch_transfer: str = "basic",
    ) -> None:
        self.storage = Storage(Path(root), lfs_threshold=lfs_threshold)
        self.plan = FaultPlan()
        self.log = RequestLog()
        self.config = HubConfig(
            page_size, user, lfs_redirect, multipart_chunk_size, lfs_batch_transfer=lfs_batch_transfer
        )
        self.api = LoopHubApi(self.storage, self.plan, self.config)
        self.token, self.auth_reads = token, auth_reads
        self._seen_tokens: set[str] = {token} if token else set()
        self._stopping = threading.Event()
        self._host = host
        self._httpd = _Server((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._httpd.server_address[1]}"

    def start(self) -> LoopHub:
        # The poll interval is how long stop() waits for the serving loop to notice: 10 ms, as many tests
        # each start and stop a hub.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(POLL_S,), name="loophub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections, join every handler thread."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
        self._httpd.cut_all()
        self._httpd.server_close()

    def __enter__(self) -> LoopHub:  # noqa: PYI034 (typing.Self needs 3.11)
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- fault injection ------------------------------------------------------------------------
    def add_fault(self, kind: FaultKind | str, **match: Any) -> Fault:
        """Queue a fault; ``match`` takes the :class:`Fault` fields (endpoint, method, times, ...)."""
        return self.plan.add(Fault.from_json({"kind": FaultKind(kind), **match}))

    def fail(self, endpoint: str | None, times: int = 1, status: int = 503, **match: Any) -> Fault:
        """The next ``times`` matching requests get HTTP ``status`` (5xx burst)."""
        return self.add_fault(FaultKind.STATUS, endpoint=endpoint, times=times, status=status, **match)

    def rate_limit(
        self, endpoint: str | None, times: int = 1, retry_after: int | None = 0, **match: Any
    ) -> Fault:
        """The next ``times`` matching requests get 429 with ``Retry-After`` (client waits it + 1 s); with
        ``retry_after=None, ratelimit='"api";r=0;t=3'`` the IETF headers alone, as huggingface.co sends."""
        return self.fail(endpoint, times, 429, retry_after=retry_after, **match)

    def drop(
        self,
        endpoint: str | None,
        times: int = 1,
        phase: Phase | str = Phase.RESPONSE,
        after_bytes: int | None = None,
        **match: Any,
    ) -> Fault:
        """Close the socket mid-upload (phase="request") or mid-response (after ``after_bytes`` of body)."""
        return self.add_fault(
            FaultKind.DROP,
            endpoint=endpoint,
            times=times,
            phase=Phase(phase),
            after_bytes=after_bytes,
            **match,
        )

    def trickle(self, endpoint: str | None, seconds_per_byte: float, times: int = 1, **match: Any) -> Fault:
        """Answer the next ``times`` matching requests one body byte every ``seconds_per_byte``."""
        return self.add_fault(
            FaultKind.TRICKLE, endpoint=endpoint, times=times, delay_s=seconds_per_byte, **match
        )

    def echo_credentials(
        self, endpoint: str | None, times: int = 1, status: int = 400, **match: Any
    ) -> Fault:
        """Answer ``status`` with an error text that repeats the request's Authorization header and raw bytes."""
        return self.add_fault(FaultKind.ECHO, endpoint=endpoint, times=times, status=status, **match)

    def bad_json(self, endpoint: str | None, times: int = 1, **match: Any) -> Fault:
        """Answer the next ``times`` matching requests 200 with a truncated JSON body."""
        return self.add_fault(FaultKind.BAD_JSON, endpoint=endpoint, times=times, **match)

    def answer(self, endpoint: str | None, body: bytes, times: int = 1000, **match: Any) -> Fault:
        """Answer the next ``times`` matching requests 200 with ``body`` as JSON's content type."""
        return self.add_fault(
            FaultKind.BODY, endpoint=endpoint, times=times, body=body.decode("latin-1"), **match
        )

    def redirect_loop(self, endpoint: str | None, times: int = 1000, **match: Any) -> Fault:
        """Answer the next ``times`` matching requests with a redirect to the same URL."""
        return self.add_fault(FaultKind.REDIRECT_LOOP, endpoint=endpoint, times=times, **match)

    def delay(self, endpoint: str | None, seconds: float, times: int = 1, **match: Any) -> Fault:
        """Hold the next ``times`` matching requests for ``seconds`` before answering."""
        return self.add_fault(FaultKind.DELAY, endpoint=endpoint, times=times, delay_s=seconds, **match)

    def lose_response(self, endpoint: str = "commit", times: int = 1, **match: Any) -> Fault:
        """Apply the next matching request (e.g. the commit), then drop the connection unanswered."""
        return self.add_fault(FaultKind.LOSE_RESPONSE, endpoint=endpoint, times=times, **match)

    def land_concurrent_commit(
        self,
        repo_id: str,
        files: dict[str, bytes] | None = None,
        repo_type: str = "dataset",
        branch: str = "main",
    ) -> None:
        """Just before the next commit request on the repo, land another writer's commit first."""
        files = files if files is not None else {".loophub/concurrent.txt": b"another writer\n"}
        self.plan.add_concurrent(ConcurrentCommit(repo_type, repo_id, files, branch))

    def limit_commits(self, limit: int | None, window_s: float = 3600.0) -> None:
        """Answer 429 (the Hub's wording, with Retry-After) past ``limit`` commits per repo in ``window_s``."""
        self.config.commit_limit, self.config.commit_window_s = limit, window_s

    def commits_made(self, repo_id: str, repo_type: str = "dataset") -> int:
        """Commits the commit endpoint made on a repo (the repo's creation is not one)."""
        return self.api.commit_counts[f"{repo_type}:{repo_id}"]

    def clear_faults(self) -> None:
        self.plan.clear()

    # -- inspection -----------------------------------------------------------------------------
    def head(self, repo_id: str, repo_type: str = "dataset", branch: str = "main") -> str:
        """The commit sha at the tip of ``branch``."""
        return self.storage.get(repo_type, repo_id).branches[branch]

    def files(self, repo_id: str, repo_type: str = "dataset", revision: str = "main") -> dict[str, bytes]:
        """Every file's bytes at ``revision`` (for asserting what a commit wrote)."""
        commit = self.storage.get(repo_type, repo_id).resolve(revision)
        return {p: self.storage.content_path(e).read_bytes() for p, e in commit.tree.items()}

    @property
    def token_leaks(self) -> list[str]:
        return list(self.log.token_leaks)

    # -- internals used by the handler ----------------------------------------------------------
    def _note_tokens(self, url: str, authorization: str | None) -> None:
        """Remember bearer tokens seen and flag any URL that carries one (a secret in a log line)."""
        if authorization and authorization.lower().startswith("bearer "):
            self._seen_tokens.add(authorization[7:].strip())
        decoded = unquote(url)
        if any(tok and (tok in url or tok in decoded) for tok in self._seen_tokens):
            self.log.leak(url)

    def _authorized(self, route: Route, authorization: str | None) -> bool:
        if self.token is None or route.endpoint in UNAUTHENTICATED:
            return True
        if route.endpoint not in WRITE_ENDPOINTS and not self.auth_reads:
            return True
        return authorization == f"Bearer {self.token}"

    def _control(self, route: Route, method: str, body: bytes) -> Reply:
        """``/_loophub/control/...``: the same knobs over HTTP, for a server in another process."""
        try:
            return self._control_call(route.extra[0] if route.extra else "", method, body)
        except (ValueError, KeyError, TypeError) as e:
            return error_reply(HubError(400, f"bad control call: {e!r}"))

    def _control_call(self, what: str, method: str, body: bytes) -> Reply:
        data: dict[str, Any] = json.loads(body) if body else {}
        if what == "health":
            return json_reply({"ok": True})
        if what == "faults" and method == "POST":
            return json_reply({"fault": self.add_fault(**data).to_json()})
        if what == "faults" and method == "DELETE":
            self.clear_faults()
            return json_reply({})
        if what == "faults":
            return json_reply({"faults": [f.to_json() for f in self.plan.pending()]})
        if what == "concurrent-commit" and method == "POST":
            files = {p: base64.b64decode(b) for p, b in (data.get("files") or {}).items()}
            self.land_concurrent_commit(
                data["repo_id"], files or None, data.get("repo_type", "dataset"), data.get("branch", "main")
            )
            return json_reply({})
        if what == "config" and method == "POST":
            for key, value in data.items():
                if not hasattr(self.config, key):
                    raise KeyError(key)
                setattr(self.config, key, value)
            return json_reply({})
        if what == "stats" and method == "DELETE":
            self.log.clear()
            return json_reply({})
        if what == "stats":
            return json_reply(self.log.to_json())
        return error_reply(HubError(404, f"unknown control call: {method} {what}"))
