"""Bounded, retried HTTP for the Hub store: every call has time-outs, idempotent reads are retried.

huggingface_hub's shared client has no time-out, and some calls (``dataset_info``, ``paths-info``) pass
``timeout=None`` explicitly, which overrides any client default: a server that accepts and never answers
hangs them forever. So :func:`bound_session` adds two hooks to the shared client: one fills in (or caps)
the connect and read time-outs of every request, one cuts a response whose body trickles in slower than
``MIN_RATE`` once the read time-out has passed. :func:`retrying` retries an idempotent read on 408, 429,
5xx, time-outs and network errors, bounded in count and in total time. Settings come from the environment
(``LIBRARIAN_HUB_TIMEOUT``, ``LIBRARIAN_HUB_CONNECT_TIMEOUT``, ``LIBRARIAN_HUB_RETRIES``,
``LIBRARIAN_HUB_RETRY_BUDGET``, ``LIBRARIAN_HUB_BACKOFF``, ``LIBRARIAN_HUB_MAX_WAIT``, ``LIBRARIAN_HUB_COMMIT_OPS``,
``LIBRARIAN_HUB_COMMIT_BACKOFF``).

huggingface.co limits commits, not bytes: past 128 commits per hour on a repo it answers 429 with
``Retry-After`` and "You can retry this action in 43 minutes". :func:`rate_limit_wait` reads that wait;
the store waits out a short one (up to ``max_wait``) and ends the command at once on a long one.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
from huggingface_hub import get_session
from huggingface_hub.errors import HfHubHTTPError

from librarian.errors import BadInput
from librarian.redact import clean

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
MIN_RATE = 1024  # bytes per second, on average, that a response body must keep up after the read time-out


@dataclass(frozen=True, slots=True)
class NetPolicy:
    """Time-outs and retry bounds for every Hub call."""

    connect: float = 10.0  # seconds to open a connection
    read: float = 30.0  # seconds to wait for any byte of an answer
    retries: int = 4  # retries of one idempotent read after its first try
    budget: float = 60.0  # seconds one read may take, retries and waits included
    backoff: float = 0.5  # first wait between tries; doubles, with jitter, up to 8 s
    # A 429's wait (Retry-After, or the RateLimit header's t=) is waited out up to this many seconds in all,
    # per call; a longer one ends the command (exit 3). The Hub's API windows are up to 300 s.
    max_wait: float = 300.0
    commit_ops: int = 100  # files per commit; a bigger change is split (wheels first, index last)
    # Seconds before the first re-plan of a commit; doubles, with jitter. A commit rate limit's own wait
    # gets up to 4x this on top, so that jobs the limit held do not all commit again in step.
    commit_backoff: float = 0.25

    @classmethod
    def from_env(cls) -> NetPolicy:
        """The policy with the ``LIBRARIAN_HUB_*`` overrides applied."""
        default = cls()
        return cls(
            connect=_env_float("LIBRARIAN_HUB_CONNECT_TIMEOUT", default.connect),
            read=_env_float("LIBRARIAN_HUB_TIMEOUT", default.read),
            retries=int(_env_float("LIBRARIAN_HUB_RETRIES", default.retries, minimum=0)),
            budget=_env_float("LIBRARIAN_HUB_RETRY_BUDGET", default.budget, minimum=0),
            backoff=_env_float("LIBRARIAN_HUB_BACKOFF", default.backoff, minimum=0),
            max_wait=_env_float("LIBRARIAN_HUB_MAX_WAIT", default.max_wait, minimum=0),
            commit_ops=int(_env_float("LIBRARIAN_HUB_COMMIT_OPS", default.commit_ops, minimum=2)),
            commit_backoff=_env_float("LIBRARIAN_HUB_COMMIT_BACKOFF", default.commit_backoff, minimum=0),
        )

    def wait(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (1-based) of a read."""
        return backoff(attempt, self.backoff)


def backoff(attempt: int, first: float) -> float:
    """Seconds to wait before try ``attempt + 1``: ``first``, doubling up to 8 s, with jitter, so that racing
    clients spread out instead of colliding again in step. The read retries and the commit loop both wait so."""
    return float(min(8.0, first * 2.0 ** (attempt - 1)) * (0.5 + random.random()))


def _env_float(name: str, default: float, minimum: float = 0.001) -> float:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"{name}={text}: expected a number of seconds") from None
    if value < minimum:
        raise BadInput(f"{name}={text}: must be at least {minimum:g}")
    return value


_policy = NetPolicy()


def bound_session(policy: NetPolicy) -> None:
    """Make every request of huggingface_hub's shared client obey ``policy``'s time-outs (idempotent)."""
    global _policy
    _policy = policy
    hooks = get_session().event_hooks
    if _bound_timeouts not in hooks["request"]:
        hooks["request"].append(_bound_timeouts)
    if _pace_body not in hooks["response"]:
        hooks["response"].append(_pace_body)
    if _log_response not in hooks["response"]:
        hooks["response"].append(_log_response)


def _log_response(response: httpx2.Response) -> None:
    # -vv: each HTTP request and its answer (headers only: the status comes before the body). The URL
    # carries no credentials (the token travels in a header, never printed); clean() masks one if it did.
    if log.isEnabledFor(logging.DEBUG):
        request = response.request
        log.debug("HTTP %s %s -> %d", request.method, clean(str(request.url), 300), response.status_code)


def _cap(value: Any, limit: float) -> float:
    return limit if value is None else min(float(value), limit)


def _bound_timeouts(request: httpx2.Request) -> None:
    given = request.extensions.get("timeout") or {}
    request.extensions = {
        **request.extensions,
        "timeout": {
            "connect": _cap(given.get("connect"), _policy.connect),
            "read": _cap(given.get("read"), _policy.read),
            "write": _cap(given.get("write"), _policy.read),
            "pool": _cap(given.get("pool"), _policy.read),
        },
    }


class _Paced(httpx2.SyncByteStream):
    """A body that must average ``MIN_RATE`` once ``read`` seconds have passed (a trickle is cut)."""

    def __init__(self, inner: httpx2.SyncByteStream, request: httpx2.Request, read: float) -> None:
        self.inner, self.request, self.read = inner, request, read

    def __iter__(self) -> Iterator[bytes]:
        start, got = time.monotonic(), 0
        for chunk in self.inner:
            got += len(chunk)
            elapsed = time.monotonic() - start
            if elapsed > self.read and got < MIN_RATE * elapsed:
                raise httpx2.ReadTimeout(
                    f"the answer trickles in ({got} bytes in {elapsed:.0f} s)", request=self.request
                )
            yield chunk

    def close(self) -> None:
        self.inner.close()


def _pace_body(response: httpx2.Response) -> None:
    if isinstance(response.stream, httpx2.SyncByteStream) and not isinstance(response.stream, _Paced):
        response.stream = _Paced(response.stream, response.request, _policy.read)


def retryable(error: BaseException) -> bool:
    """Whether trying the same read again may succeed (408/429/5xx, time-outs, network errors)."""
    if isinstance(error, HfHubHTTPError):
        status = error.response.status_code if error.response is not None else None
        return status in RETRY_STATUS
    return isinstance(error, (httpx2.TransportError, ConnectionError, TimeoutError))


def refused(error: BaseException) -> bool:
    """Whether a network error is a refused connection (``ECONNREFUSED``), down its chain of causes."""
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def retry_after(error: BaseException) -> float | None:
    """The server's ``Retry-After`` in seconds, when it sent one."""
    response = getattr(error, "response", None)
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return None if value is None else float(str(value))
    except ValueError:
        return None


_RETRY_IN = re.compile(r"retry (?:this action )?in (\d+(?:\.\d+)?) ?(second|minute|hour)s?", re.IGNORECASE)
_RATELIMIT_T = re.compile(r";\s*t=(\d+)")
_POLICY_W = re.compile(r";\s*w=(\d+)")
_UNIT = {"second": 1.0, "minute": 60.0, "hour": 3600.0}


def rate_limit_wait(error: BaseException) -> float | None:
    """Seconds a 429 asks us to wait: ``Retry-After``, else the ``RateLimit`` header's ``t=`` (the IETF
    draft's seconds until the window resets: ``"api";r=0;t=30``), else the Hub's own words ("You can retry
    this action in 43 minutes"), else ``RateLimit-Policy``'s window ``w=`` (at most that long); ``None``
    when it says nothing."""
    after = retry_after(error)
    if after is not None:
        return after
    response = getattr(error, "response", None)
    headers = response.headers if response is not None else {}
    header = headers.get("ratelimit")
    if header and (m := _RATELIMIT_T.search(str(header))):
        return float(m[1])
    text = str(getattr(error, "server_message", None) or "")
    if m := _RETRY_IN.search(text):
        return float(m[1]) * _UNIT[m[2].lower()]
    policy = headers.get("ratelimit-policy")
    if policy and (m := _POLICY_W.search(str(policy))):
        return float(m[1])
    return None


def is_rate_limit(error: BaseException) -> bool:
    """Whether the error is an HTTP 429."""
    response = getattr(error, "response", None)
    return isinstance(error, HfHubHTTPError) and response is not None and response.status_code == 429


def server_words(error: BaseException) -> str:
    """The server's own message for an HTTP error, or ``""``."""
    return " ".join(str(getattr(error, "server_message", None) or "").split())


def retrying(what: str, call: Callable[[], T], policy: NetPolicy) -> T:
    """``call()``, retried while :func:`retryable` and within ``policy``'s count and total time.

    The retry loop of every idempotent Hub call (reads, listings, ``create_repo``). Commits are retried one
    level up, by the store's commit loop (``HubStore._attempts``): they are re-planned, not repeated.
    """
    start = time.monotonic()
    attempt = 0
    limited = 0.0  # seconds waited on 429s that said how long: bounded by max_wait, not by the retry budget
    while True:
        try:
            return call()
        except Exception as e:
            if not retryable(e):
                raise
            asked = rate_limit_wait(e) if is_rate_limit(e) else None
            if asked is not None:
                if limited + asked > policy.max_wait:
                    raise  # translated to one line naming the wait (exit 3)
                if limited == 0:
                    log.warning(
                        "%s: the Hub limits our requests (HTTP 429); waiting %s as it asks (up to %s in "
                        "all: LIBRARIAN_HUB_MAX_WAIT)",
                        what,
                        _seconds(asked),
                        _seconds(policy.max_wait),
                    )
                else:
                    log.info("%s: HTTP 429 again; waiting %s", what, _seconds(asked))
                limited += asked
                time.sleep(asked + random.random() * policy.backoff)
                continue
            attempt += 1
            wait = max(policy.wait(attempt), retry_after(e) or 0.0)
            # A refused connection is an answer (nothing listens there), not a slow network: one retry only
            # (a loopback Hub once took 9 s of backoffs to say so, and then the cached index was used).
            retries = 1 if refused(e) else policy.retries
            if attempt > retries or time.monotonic() - start + wait > policy.budget:
                raise
            log.info(
                "%s: %s; trying again in %.1f s (%d of %d)", what, describe(e), wait, attempt, policy.retries
            )
            time.sleep(wait)


def _seconds(s: float) -> str:
    return f"{s:.0f} s"


def describe(error: BaseException) -> str:
    """A few words on a network failure: ``HTTP 503``, ``ReadTimeout``, ``ConnectError``."""
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return f"HTTP {error.response.status_code}"
    return type(error).__name__
