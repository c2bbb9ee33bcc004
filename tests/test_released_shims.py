"""The stable-ABI table from the headers of released torch (issue 52, item 1): the guards parsed from the
header text, releases folded (a function a header marks earlier than the release that first declares it
gets the later line), and ``matrix refresh --shims URL`` reading each release's headers from its wheel by
range requests against a loopback index (PEP 691 JSON), never the whole wheel.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from librarian.pytorch.shim_headers import declared, floors_of_releases, release_declarations
from tests.conftest import Run
from tests.loophub.transfer import parse_range
from tests.test_stable_abi import stable_wheel

HEADER = """\
#pragma once
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
// AOTI_TORCH_EXPORT in_a_comment(void);
/* AOTI_TORCH_EXPORT
   in_a_block_comment(void); */
AOTI_TORCH_EXPORT AOTITorchError old_function(int x);
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_10_0
AOTI_TORCH_EXPORT AOTITorchError
two_line_function(size_t size, void* ret);
#ifdef USE_CUDA
AOTI_TORCH_EXPORT AOTITorchError cuda_function(
    void* stream,
    int32_t device_index);
#endif // USE_CUDA
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_13_0
AOTI_TORCH_EXPORT int32_t nested_function();
#endif
#else
AOTI_TORCH_EXPORT AOTITorchError the_else_branch(void);
#endif
AOTI_TORCH_EXPORT AOTITorchError after_the_guard(void);
"""


def test_each_exported_function_gets_the_guard_around_it() -> None:
    assert declared(HEADER) == {
        "old_function": None,
        "two_line_function": (2, 10),
        "cuda_function": (2, 10),
        "nested_function": (2, 13),
        "the_else_branch": None,
        "after_the_guard": None,
    }


def test_a_function_marked_earlier_than_its_first_release_gets_the_later_line() -> None:
    releases = {
        (2, 9): {"old_function": None},
        (2, 10): {"old_function": None, "guarded": (2, 10)},
        # first declared in 2.12, though its header says 2.11: 2.11 never had it
        (2, 12): {"old_function": None, "guarded": (2, 10), "late": (2, 11), "unguarded_new": None},
    }
    assert floors_of_releases(releases) == {
        "old_function": (2, 9), "guarded": (2, 10), "late": (2, 12), "unguarded_new": (2, 12),
    }  # fmt: skip
    later = (
        "#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_14_0\nAOTI_TORCH_EXPORT void old_function();\n#endif\n"
    )
    assert release_declarations([HEADER, later])["old_function"] == (2, 14)


def torch_wheel(line: str, header: str) -> bytes:
    """A stand-in for torch ``line``.0's wheel: its shim header, and a big member never to be fetched."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("torch/lib/libtorch_cpu.so", b"\x7fELF" + bytes(2 << 20))  # 2 MB, stored first
        z.writestr("torch/include/torch/csrc/stable/c/shim.h", header)
        z.writestr(f"torch-{line}.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return out.getvalue()


class Index:
    """A loopback PEP 691 page of torch and its wheels, served with range requests (or, ``ranges=False``,
    without); what each request asked is kept."""

    def __init__(self, wheels: dict[str, bytes], ranges: bool = True) -> None:
        self.wheels, self.ranges, self.served = wheels, ranges, 0
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/simple/torch/":
                    files = [{"filename": n, "url": f"/files/{n}", "size": len(b),
                              "hashes": {"sha256": hashlib.sha256(b).hexdigest()}} for n, b in index.wheels.items()]  # fmt: skip
                    return self._send(200, json.dumps({"files": files}).encode(), {})
                data = index.wheels[self.path.removeprefix("/files/")]
                rng = parse_range(self.headers.get("Range"), len(data)) if index.ranges else None
                if rng is None:
                    return self._send(200, data, {})
                start, end = rng
                index.served += end - start + 1
                self._send(206, data[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/torch/"


@pytest.fixture
def serve() -> Iterator[type[Index]]:
    started: list[Index] = []

    class Started(Index):
        def __init__(self, wheels: dict[str, bytes], ranges: bool = True) -> None:
            super().__init__(wheels, ranges)
            threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
            started.append(self)

    yield Started
    for index in started:
        index.httpd.shutdown()


RELEASES = {
    "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl": torch_wheel(
        "2.9", "AOTI_TORCH_EXPORT AOTITorchError aoti_torch_empty_strided(void);\n"
    ),
    "torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl": torch_wheel(
        "2.16",
        "AOTI_TORCH_EXPORT AOTITorchError aoti_torch_empty_strided(void);\n"
        "#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_16_0\n"
        "AOTI_TORCH_EXPORT AOTITorchError torch_new_in_2_16(void);\n#endif\n",
    ),
    "torch-2.16.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl": b"a local label: not the release",
}


def test_refresh_from_released_headers_reads_them_by_range_and_sets_the_floor(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: type[Index]
) -> None:
    """The day 2.16 lands: its headers read in (a few KB of each wheel, not its 2 MB library), a 2.17 build
    importing a 2.16 function is served to 2.16, and the override records each line's wheel."""
    wheel = stable_wheel(tmp_path, "fresh", ("aoti_torch_empty_strided", "torch_new_in_2_16"))
    assert run("publish", str(wheel), "--torch", "2.17", "--cuda", "12.8", "--sm", "89",
               "--allow-unknown-combo").code == 0  # fmt: skip
    machine = ("--sm", "89", "--cuda", "12.8", "--python", "3.12", "--platform", "linux_x86_64")
    assert run("pull", "fresh", "--torch", "2.16", *machine, "-o", "b").code == 1  # not known: its build line
    index = serve(RELEASES)
    override = tmp_path / "abi.toml"
    monkeypatch.setenv("LIBRARIAN_STABLE_ABI", str(override))

    done = run("matrix", "refresh", "--shims", index.url, "--json")

    assert done.code == 0, done.err
    doc = json.loads(done.out)
    assert doc["through"] == "2.16" and doc["sources"]["2.16"].startswith("torch-2.16.0-cp312-cp312-")
    assert index.served < 1 << 20  # the headers and the zip's directory, never the 2 MB member
    after = run("pull", "fresh", "--torch", "2.16", *machine, "-o", "a")
    assert after.code == 0 and "needs torch >= 2.16: torch_new_in_2_16 since 2.16" in after.err, after.err
    assert run("pull", "fresh", "--torch", "2.15", *machine, "-o", "c").code == 1


def test_a_server_without_ranges_or_an_older_release_list_is_one_line_and_nothing_written(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: type[Index]
) -> None:
    override = tmp_path / "abi.toml"
    monkeypatch.setenv("LIBRARIAN_STABLE_ABI", str(override))
    no_ranges = run("matrix", "refresh", "--shims", serve(RELEASES, ranges=False).url)
    assert no_ranges.code != 0 and no_ranges.err.count("\n") == 1, no_ranges.err
    assert "does not answer range requests" in no_ranges.err and not override.exists()
    older = {n: b for n, b in RELEASES.items() if "2.9.0" in n}
    stale = run("matrix", "refresh", "--shims", serve(older).url)
    assert stale.code == 2 and "older than librarian's own table" in stale.err and not override.exists()
