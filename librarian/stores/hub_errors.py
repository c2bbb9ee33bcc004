"""The Hub client's errors, translated into librarian's in one place: one line, the store and the problem.

The store's callers see :class:`~librarian.errors.StoreError` and :class:`~librarian.errors.Unreachable`
only (exit 2 and 3); the subclasses here tell the Hub store itself what happened, so that it can fall back
to its read cache (:class:`CannotReach`), re-plan (:class:`Conflict`), look a lost commit up in the history
(:class:`Transient`) or wait out a short rate limit (:class:`RateLimited`). No message carries the token.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from librarian.errors import LibrarianError, StoreError, Unreachable
from librarian.redact import clean
from librarian.stores.hub_http import RETRY_STATUS, describe, rate_limit_wait, server_words


class NoRepo(StoreError):
    """The dataset repo does not exist (exit 2)."""


class NoEntry(StoreError):
    """The file is not at that commit."""


class Conflict(StoreError):
    """A commit's ``parent_commit`` is no longer the head: the repo moved on (re-plan)."""


class Transient(StoreError):
    """A commit failed in a way that may not recur (5xx, network); its answer may have been lost."""


class RateLimited(Unreachable):
    """A 429: ``wait`` seconds as the Hub asks (``None`` if it did not say), ``words`` its message;
    ``commits`` when it refused a commit (the Hub's budget of commits per repo)."""

    def __init__(self, message: str, wait: float | None, words: str, commits: bool) -> None:
        super().__init__(message)
        self.wait, self.words, self.commits = wait, words, commits


class CannotReach(Unreachable):
    """The Hub cannot be reached (or HF_HUB_OFFLINE is set); ``reason`` says why, for the read cache's note."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def no_repo(location: str) -> NoRepo:
    """The error for a repo that is not there."""
    return NoRepo(f"{location}: no such dataset repo (publish --create makes it)")


@contextmanager
def translated(
    location: str, revision: str, what: str, *, max_wait: float, conflicts: bool = False
) -> Iterator[None]:
    """Turn the client's errors raised inside into ours; ``conflicts`` for a commit (412, 5xx, lost answers
    are the commit loop's to handle). A 429 asking for more than ``max_wait`` seconds ends the command."""
    try:
        yield
    except RepositoryNotFoundError as e:
        response = e.response
        if (
            response is not None
            and response.status_code == 401
            and response.headers.get("X-Error-Code") != "RepoNotFound"
        ):
            # huggingface_hub reads any 401 from an https:// Hub as "no such repo"; a bad token is not that.
            raise Unreachable(
                f"{location}: {what}: refused (HTTP 401); check HF_TOKEN or `hf auth login`"
            ) from e
        raise no_repo(location) from e
    except RevisionNotFoundError as e:
        raise StoreError(f"{location}: no revision {revision!r}") from e
    except EntryNotFoundError as e:
        raise NoEntry(f"{location}/{what}: no such file") from e
    except OfflineModeIsEnabled as e:
        raise CannotReach(
            f"{location}: HF_HUB_OFFLINE is set; {what} needs the network", "HF_HUB_OFFLINE is set"
        ) from e
    except HfHubHTTPError as e:
        raise _http_error(e, location, what, max_wait=max_wait, conflicts=conflicts) from e
    except httpx2.TooManyRedirects as e:
        # A server (or a proxy before it) that redirects a request back to itself: not ours to wait out.
        raise Unreachable(f"{location}: {what}: the Hub's answer is a redirect loop") from e
    except json.JSONDecodeError as e:
        # A proxy's error page, or a reply cut short, where the API promises JSON.
        raise Unreachable(
            f"{location}: {what}: the Hub answered with something that is not JSON ({e.msg} at byte {e.pos})"
        ) from e
    except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as e:
        # JSON of another shape than the API's ([] for an object, a number for a date, nesting past what
        # json reads): huggingface_hub's models fail on it with a bare Python error. Only those raised
        # inside the client are the server's.
        if isinstance(e, LibrarianError) or not _raised_in_client(e):
            raise
        raise Unreachable(
            f"{location}: {what}: the Hub's answer is not in the shape its API has ({type(e).__name__}: {_short(e)})"
        ) from e
    except RuntimeError as e:
        # huggingface_hub wraps a failed LFS upload: RuntimeError("Error while uploading ...") from the cause.
        cause = e.__cause__
        if not isinstance(cause, (HfHubHTTPError, httpx2.TransportError, OSError)):
            raise
        if conflicts:
            raise Transient(f"{what}: upload failed ({type(cause).__name__})") from e
        raise Unreachable(f"{location}: {what}: upload failed ({_short(cause)})") from e
    except (httpx2.TransportError, ConnectionError, TimeoutError) as e:
        if conflicts:
            raise Transient(f"{what}: {type(e).__name__}") from e
        why = f"cannot reach the Hub ({describe(e)}, also after retries)"
        raise CannotReach(f"{location}: {what}: {why}", why) from e


def _http_error(
    e: HfHubHTTPError, location: str, what: str, *, max_wait: float, conflicts: bool
) -> StoreError:
    """Ours for an HTTP error status (the retries of a read are spent by now)."""
    status = e.response.status_code if e.response is not None else None
    if conflicts and status == 412:
        return Conflict(f"{location}: the repo moved on")
    if status == 429:
        # Not a conflict: the Hub allows no more of these for a while (a read has waited what it may); say how long.
        wait, words = rate_limit_wait(e), server_words(e)
        said = f"; {clean(words, 160)}" if words else ""
        message = f"{location}: {what}: the Hub is limiting our requests (HTTP 429{said}); retry in {say_wait(wait)}"
        return RateLimited(message, wait, words, conflicts)
    if conflicts and status is not None and status >= 500:
        return Transient(f"{what}: HTTP {status}")
    if status in (401, 403):
        return Unreachable(f"{location}: {what}: refused (HTTP {status}); check HF_TOKEN or `hf auth login`")
    if status in RETRY_STATUS:
        why = f"the Hub answered HTTP {status}, also after retries"
        return CannotReach(f"{location}: {what}: {why}; try again later", why)
    return StoreError(f"{location}: {what}: HTTP {status} {_short(e)}")


def commits_refused(location: str, e: RateLimited) -> Unreachable:
    """The error that ends a command when the Hub refuses commits for longer than we wait."""
    when = f"retry in {say_wait(e.wait)}" if e.wait is not None else "retry later"
    words = f" ({clean(e.words, 160)})" if e.words else ""
    return Unreachable(
        f"{location}: the Hub refuses more commits to this repo for now{words}; {when}, or publish a build "
        "matrix on the fan-in path: 'publish --stage --manifest FILE' per job (no commit), one 'reindex --manifest' "
        "(uploaded wheels stay on the Hub and are not sent again)"
    )


def say_wait(seconds: float | None) -> str:
    """``43 min``, ``25 s``, ``2 h 5 min``."""
    if seconds is None:
        return "a while"
    s = max(0, round(seconds))
    if s < 120:
        return f"{s} s"
    minutes = -(-s // 60)
    if minutes <= 60:
        return f"{minutes} min"
    return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def _raised_in_client(e: BaseException) -> bool:
    """Whether ``e`` was raised in huggingface_hub's own code (reading a reply), not in ours."""
    # The traceback runs from here down to the raise: a client frame in it means the client was reading
    # when it failed (our code that ran after a client call returned has no client frame below it).
    tb = e.__traceback__
    while tb is not None:
        if f"{os.sep}huggingface_hub{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _short(e: BaseException) -> str:
    server = getattr(e, "server_message", None)
    return clean(str(server or e or type(e).__name__), 200)
