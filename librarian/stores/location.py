"""Where a store is, as the stores parse it: one value for every place that reads, compares or records a
``--repo``. A local folder is known by its path (compared resolved, recorded absolute: a merge may run from
another folder); anything with a scheme (``hf://``, ``https://``) is a URL, compared and recorded as written.
``C:\\wheels`` is a folder, not the scheme ``c``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A ``--repo`` value: its text, and its scheme (``""``: a local folder)."""

    text: str
    scheme: str = ""

    @classmethod
    def parse(cls, text: str) -> StoreLocation:
        return cls(text, urlsplit(text).scheme.lower() if "://" in text else "")

    @property
    def is_local(self) -> bool:
        return not self.scheme

    def recorded(self) -> str:
        """As a manifest records it: a folder by its absolute path, a URL as written."""
        return os.path.abspath(self.text) if self.is_local else self.text

    def same_as(self, other: StoreLocation) -> bool:
        """Whether both name one store: folders by their resolved paths, URLs as written."""
        if self.text == other.text:
            return True
        if not (self.is_local and other.is_local):
            return False
        return os.path.realpath(self.text) == os.path.realpath(other.text)
