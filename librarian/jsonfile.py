"""librarian's JSON files (index, shards, pending entries) as bytes: written sorted and indented with no
number JSON cannot hold, read bounded in size and refused in one line naming the file."""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any

from librarian.errors import StoreError

# No index file of a real store comes near this (a shard entry is about 2 KB: 100,000 wheels of one package):
# a bound, checked by size before a byte is read or parsed (parsing costs about 3x the file in memory).
MAX_JSON_BYTES = 256 << 20


def short(e: BaseException) -> str:
    """An exception as a short one-line reason (a missing key says which)."""
    text = str(e) if not isinstance(e, KeyError) else f"no {e.args[0]!r}"
    return " ".join(text.split())[:200] or type(e).__name__


def dump_json(data: Any) -> bytes:
    """A file's bytes: sorted, indented, no number JSON cannot hold."""
    return (json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json_object(text: bytes, source: str, what: str, schemas: Collection[int]) -> dict[str, Any]:
    """The JSON object in ``text``, of a ``schema`` among ``schemas``; StoreError naming ``source`` if it is
    too big, not JSON (``NaN`` and ``Infinity`` are not), not an object, or of another schema."""
    if len(text) > MAX_JSON_BYTES:
        raise StoreError(
            f"{source}: {len(text)} bytes, over the {MAX_JSON_BYTES}-byte limit for an {what} file"
        )
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError as e:
        raise StoreError(f"{source}: not valid JSON (nested too deeply)") from e
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, integers past the digit limit
        raise StoreError(f"{source}: not valid JSON ({short(e)})") from e
    if not isinstance(data, dict):
        raise StoreError(f"{source}: expected a JSON object")
    schema = data.get("schema")
    if isinstance(schema, bool) or schema not in schemas:
        readable = ", ".join(map(str, schemas))
        raise StoreError(f"{source}: unsupported {what} schema {schema!r} (this librarian reads {readable})")
    return data


def finite(value: Any) -> Any:
    """The JSON value with every number JSON cannot write (``1e400`` read as infinity) made its text: a bad
    entry is written back as it was read, and no file librarian writes is one its reader refuses."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, list):
        return [finite(v) for v in value]
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    return value
