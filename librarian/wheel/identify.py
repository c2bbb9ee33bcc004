"""Which native binary a member is: ELF, PE or Mach-O, and for which CPU, from its first bytes.

The one table of formats is :data:`librarian.wheel.binaries.FORMATS` (each reader's sniff, and how a member
of it is read); this name stays for the readers' tests.
"""

from __future__ import annotations

from librarian.wheel.binaries import FORMATS, identify

__all__ = ["FORMATS", "identify"]
