"""What a build was made from and with, as values: its source (an sdist's sha256, a source tree's digest and
its checkout's URL, commit and dirtiness, or a requirement an index serves), its toolchain (nvcc, the host
compiler, torch and its CUDA line), its seconds and the runner it ran on. A stored wheel's index entry
records its build; a failed build's record (:mod:`librarian.build_failure`) records the same. Pure: each
value parses its JSON strictly (ValueError/TypeError on anything else) and prints no credential (a URL's
``user:password@`` is never kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MAX_TEXT = 512  # a field's longest string: a URL, a compiler's version line
SOURCE_KINDS = ("sdist", "folder", "requirement")


def clean_url(url: str) -> str:
    """``url`` less any ``user:password@``, query and fragment (a token in them is never stored)."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url[:MAX_TEXT]
    host = parts.hostname or ""
    host += f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, host, parts.path, "", ""))[:MAX_TEXT]


def _text(data: dict[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ValueError(f"{key!r} is not a string of at most {MAX_TEXT} characters")
    return value


@dataclass(frozen=True, slots=True)
class Source:
    """What was compiled. ``kind``: ``sdist`` (a file or URL; ``sha256`` its bytes), ``folder`` (``sha256``
    the digest of its files; ``vcs_url``, ``commit``, ``dirty`` where it is a checkout) or ``requirement``
    (``name==version`` as an index serves it: its files are immutable there). ``name``: how it was given
    (a file's or folder's name, a URL without credentials, the requirement)."""

    kind: str
    name: str
    sha256: str = ""
    vcs_url: str = ""
    commit: str = ""
    dirty: bool = False

    @property
    def key(self) -> str:
        """What two builds compare to tell whether they compiled the same thing."""
        if self.kind == "requirement":
            return f"requirement:{self.name}"
        if self.commit and not self.dirty:
            return f"commit:{self.commit}"
        return f"sha256:{self.sha256}"

    def describe(self) -> str:
        """One phrase: ``git https://github.com/o/r @ 1a2b3c4d5e6f (dirty)``, ``sdist x.tar.gz (sha256 ...)``."""
        if self.kind == "requirement":
            return f"{self.name} from the package index"
        if self.commit:
            where = self.vcs_url or self.name
            return f"git {where} @ {self.commit[:12]}{' (dirty)' if self.dirty else ''}"
        return f"{self.kind} {self.name} (sha256 {self.sha256[:12]})"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.sha256:
            data["sha256"] = self.sha256
        if self.commit:
            data.update({"vcs_url": self.vcs_url, "commit": self.commit, "dirty": self.dirty})
        return data

    @classmethod
    def from_json(cls, data: Any) -> Source:
        if not isinstance(data, dict):
            raise TypeError("'source' is not an object")
        kind = _text(data, "kind")
        if kind not in SOURCE_KINDS:
            raise ValueError(f"'source' kind {kind[:40]!r} is not one of {', '.join(SOURCE_KINDS)}")
        sha = _text(data, "sha256", "")
        if sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
            raise ValueError("'source' sha256 is not 64 hex digits")
        commit = _text(data, "commit", "")
        if commit and not all(c in "0123456789abcdef" for c in commit):
            raise ValueError("'source' commit is not hex")
        dirty = data.get("dirty", False)
        if not isinstance(dirty, bool):
            raise TypeError("'source' dirty is not true or false")
        if kind != "requirement" and not sha and not commit:
            raise ValueError(f"a {kind} source without its sha256")
        return cls(kind, _text(data, "name"), sha, clean_url(_text(data, "vcs_url", "")), commit, dirty)


@dataclass(frozen=True, slots=True)
class Toolchain:
    """What compiled it: nvcc's release (``13.0.88``), the host compiler's version line, torch's version
    (``2.9.1+cu128``) and CUDA line (``12.8``); ``""`` where not known (a build that failed before it)."""

    nvcc: str = ""
    compiler: str = ""
    torch: str = ""
    cuda: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """What a rebuild compares: a new nvcc, compiler or torch may compile what failed before."""
        return (self.nvcc, self.compiler, self.torch)

    def describe(self) -> str:
        parts = [
            f"nvcc {self.nvcc}" if self.nvcc else "",
            self.compiler,
            f"torch {self.torch}" if self.torch else "",
        ]
        return ", ".join(p for p in parts if p) or "toolchain unknown"

    def to_json(self) -> dict[str, str]:
        return {"nvcc": self.nvcc, "compiler": self.compiler, "torch": self.torch, "cuda": self.cuda}

    @classmethod
    def from_json(cls, data: Any) -> Toolchain:
        if not isinstance(data, dict):
            raise TypeError("'toolchain' is not an object")
        return cls(*(_text(data, k, "") for k in ("nvcc", "compiler", "torch", "cuda")))


@dataclass(frozen=True, slots=True)
class BuildRecord:
    """One build of a stored wheel: its source, toolchain, seconds (the compile step's), runner (a CI job's
    URL or a host name) and when it finished (ISO 8601 UTC)."""

    source: Source
    toolchain: Toolchain
    seconds: int
    runner: str = ""
    date: str = ""
    archs: int = 1  # the GPU archs the build compiled (its seconds are for all of them)

    def describe(self) -> str:
        """One line for ``verify`` and the card."""
        on = f" on {self.runner}" if self.runner else ""
        return f"built from {self.source.describe()} with {self.toolchain.describe()} in {self.seconds} s{on}"

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source.to_json(),
            "toolchain": self.toolchain.to_json(),
            "seconds": self.seconds,
            "runner": self.runner,
            "date": self.date,
            "archs": self.archs,
        }

    @classmethod
    def from_json(cls, data: Any) -> BuildRecord:
        if not isinstance(data, dict):
            raise TypeError("'build' is not an object")
        seconds = data.get("seconds")
        if not isinstance(seconds, int) or isinstance(seconds, bool) or not 0 <= seconds <= 10**7:
            raise ValueError("'build' seconds is not a count of seconds")
        archs = data.get("archs", 1)
        if not isinstance(archs, int) or isinstance(archs, bool) or not 1 <= archs <= 256:
            raise ValueError("'build' archs is not a count of GPU archs")
        return cls(
            Source.from_json(data.get("source")),
            Toolchain.from_json(data.get("toolchain")),
            seconds,
            clean_url(_text(data, "runner", "")),
            _text(data, "date", ""),
            archs,
        )
