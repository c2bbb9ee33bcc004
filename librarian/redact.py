"""Text that came from elsewhere (a server, an exception) made safe to print: one line, short, no secrets.

Servers echo headers and bodies into their error text: a token, raw bytes of a zip, pages of HTML. Every
line librarian prints on stderr passes through :func:`clean`, in the CLI's one error funnel and its log
handler. Stdlib only.
"""

from __future__ import annotations

import functools
import os
import re

MAX_CHARS = 300
ERROR_CHARS = 1000  # an error or log line longer than this is cut (a server once sent 19 KB of zip bytes)
MASK = "***"
TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")

_secrets: set[str] = set()


# Compiled on the first line cleaned, not at import: every command imports this, few print through it.
@functools.cache
def _secret_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """A token, an Authorization header's value, URL credentials."""
    return (
        re.compile(r"\b(?:hf|api|hf_oauth)_[A-Za-z0-9]{8,}\b"),
        re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s\"',;]+"),
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"),
    )


@functools.cache
def _unprintable() -> re.Pattern[str]:
    return re.compile(r"[^\x20-\x7e\u00a0-\uffff]+")


@functools.cache
def _controls() -> re.Pattern[str]:
    # C0, DEL, C1, and the bidirectional overrides that reorder what a terminal shows
    return re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` (a name read from a disk: a dist-info folder, a member) with each control character written
    as an escape (``\\x1b``), so that printing it can neither move the cursor nor retitle the terminal."""
    return _controls().sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text
    )


def register_secret(secret: str | None) -> None:
    """Mask ``secret`` (a token librarian uses) wherever it appears in printed text."""
    if secret and len(secret) >= 4:
        _secrets.add(secret)


def mask(text: str) -> str:
    """``text`` with every known secret, ``hf_...`` token, bearer value and URL password replaced by ``***``."""
    for secret in sorted(
        _secrets | {v for k in TOKEN_ENV if len(v := os.environ.get(k, "")) >= 4}, key=len, reverse=True
    ):
        text = text.replace(secret, MASK)
    token, bearer, userinfo = _secret_patterns()
    text = token.sub(MASK, text)
    text = bearer.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    return userinfo.sub(lambda m: f"{m[1]}{MASK}@", text)


def one_line(text: str, limit: int = MAX_CHARS) -> str:
    """Whitespace and unprintable runs collapsed, cut to ``limit`` characters (with an ellipsis)."""
    flat = " ".join(_unprintable().sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def clean(text: str, limit: int = MAX_CHARS) -> str:
    """One short line without secrets: what may be printed of text that came from a server."""
    return one_line(mask(text), limit)
