"""``matrix refresh``: index pages from files and a loopback HTTP server into the user's override file."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from librarian.coords import Label
from librarian.errors import BadInput, StoreError
from librarian.pytorch import refresh as matrix_refresh
from librarian.pytorch.matrix import CPython, Platform, Status, load_matrix, read_override
from librarian.pytorch.refresh import refresh
from tests.conftest import Run

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "torch-index"
TODAY = dt.date(2026, 9, 1)
NEW = "torch-2.14.0+cu134-cp312-cp312-manylinux_2_28_x86_64.whl"  # a CUDA line no release row has


def html_page(names: list[str]) -> str:
    links = "".join(f'<a href="{n.replace("+", "%2B")}#sha256={"0" * 64}">{n}</a><br/>\n' for n in names)
    return f"<!DOCTYPE html><html><body>\n{links}</body></html>"


def json_page(names: list[str]) -> str:
    return json.dumps(
        {"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": n} for n in names]}
    )


class Pages:
    """A loopback index: path -> (body, content type); other paths answer 404."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, str]] = {}
        self.accept: list[str] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Pages]]:
    pages = Pages()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            pages.accept.append(self.headers.get("Accept", ""))
            if self.path not in pages.pages:
                self.send_error(404)
                return
            body, ctype = pages.pages[self.path]
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", pages
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "librarian" / "matrix.toml"
    monkeypatch.setenv("LIBRARIAN_MATRIX", str(path))
    return path


def packaged_digest() -> str:
    return hashlib.sha256((ROOT / "librarian" / "data" / "matrix.toml").read_bytes()).hexdigest()


def test_refresh_from_a_file_adds_a_combo(tmp_path: Path, override: Path) -> None:
    before = packaged_digest()
    page = tmp_path / "cu134.html"
    page.write_text(html_page([NEW]))
    assert not load_matrix().is_shipped(Label.parse("cu134torch2.14"))
    result = refresh(str(page), today=TODAY)
    assert result.path == override and result.sources == (str(page),)
    assert [(str(c.label), str(c.python), c.platform, c.status) for c in result.added] == [
        ("cu134torch2.14", "cp312", Platform.LINUX_X86_64, Status.SERVED)
    ]
    assert result.removed == ()
    m = load_matrix()
    assert m.is_shipped(Label.parse("cu134torch2.14"))
    assert (13, 4) in m.cuda_lines_for("2.14")
    assert packaged_digest() == before  # the installed package is never written
    assert [p.name for p in override.parent.iterdir()] == ["matrix.toml"]  # no temp file left


def test_checked_in_page_adds_only_what_the_release_rows_lack(override: Path) -> None:
    result = refresh(str(DATA / "cu128-torch.html"), today=TODAY)
    # cu128 for 2.7 and 2.8 are release rows already, so the page adds no combo.
    assert result.added == () and result.served == 5 and result.skipped == 2
    doc = read_override(override)
    assert doc is not None
    assert [(s.torch, s.cuda, s.platform) for s in doc.served] == [
        ((2, 7), (12, 8), Platform.LINUX_X86_64),
        ((2, 8), (12, 8), Platform.LINUX_X86_64),
        ((2, 8), (12, 8), Platform.LINUX_AARCH64),
        ((2, 8), (12, 8), Platform.WINDOWS_AMD64),
    ]
    assert doc.served[1].python == (CPython(3, 12), CPython(3, 13, True))
    assert doc.served[3].python == (CPython(3, 12),)  # the pairing of Python and platform is kept
    assert doc.served[1].date == TODAY and doc.served[1].source.endswith("cu128-torch.html")


def test_refresh_over_http_json_then_removal(server: tuple[str, Pages], override: Path) -> None:
    url, pages = server
    extra = "torch-2.14.0+cu134-cp313-cp313-manylinux_2_28_aarch64.whl"
    pages.pages["/whl/cu134/torch/"] = (json_page([NEW, extra]), "application/vnd.pypi.simple.v1+json")
    first = refresh(f"{url}/whl/cu134/torch/", today=TODAY)
    assert len(first.added) == 2
    assert "application/vnd.pypi.simple.v1+json" in pages.accept[0]
    pages.pages["/whl/cu134/torch/"] = (html_page([NEW]), "text/html")
    second = refresh(f"{url}/whl/cu134/torch/", today=TODAY)
    assert second.added == ()
    assert [(str(c.python), c.platform) for c in second.removed] == [("cp313", Platform.LINUX_AARCH64)]
    assert load_matrix().combos(torch="2.14", cuda="13.4", python="3.13") == ()


def test_a_page_replaces_only_its_own_cuda_lines(tmp_path: Path, override: Path) -> None:
    (tmp_path / "a.html").write_text(html_page([NEW]))
    (tmp_path / "b.json").write_text(json_page(["torch-2.14.0+cu135-cp312-cp312-win_amd64.whl"]))
    refresh(str(tmp_path / "a.html"), today=TODAY)
    refresh(str(tmp_path / "b.json"), today=TODAY)
    m = load_matrix()
    assert m.is_shipped(Label.parse("cu134torch2.14")) and m.is_shipped(Label.parse("cu135torch2.14"))


def test_default_sources_skip_lines_no_longer_served(
    server: tuple[str, Pages], override: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, pages = server
    monkeypatch.setattr(matrix_refresh, "DEFAULT_INDEX", f"{url}/whl")
    pages.pages["/whl/cu130/torch/"] = (
        html_page(["torch-2.15.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"]),
        "text/html",
    )
    result = refresh(today=TODAY)  # every other cuXYZ page answers 404
    assert result.sources == (f"{url}/whl/cu130/torch/",)
    assert load_matrix().is_shipped(Label.parse("cu130torch2.15"))


def test_errors(server: tuple[str, Pages], tmp_path: Path, override: Path) -> None:
    url, _ = server
    with pytest.raises(StoreError, match=r"/whl/cu999/torch/: HTTP 404"):
        refresh(f"{url}/whl/cu999/torch/")
    with pytest.raises(StoreError, match="cannot be read"):
        refresh(str(tmp_path / "absent.html"))
    (tmp_path / "empty.html").write_text(html_page(["numpy-2.0.0-cp312-cp312-win_amd64.whl"]))
    with pytest.raises(BadInput, match="no torch CUDA wheels"):
        refresh(str(tmp_path / "empty.html"))
    assert not override.exists()
    override.parent.mkdir(parents=True)
    override.write_text("schema = 1\nbogus = true\n")
    (tmp_path / "ok.html").write_text(html_page([NEW]))
    with pytest.raises(BadInput, match=f"^{override}: .*bogus"):
        refresh(str(tmp_path / "ok.html"))


def test_refresh_keeps_the_users_own_rows(tmp_path: Path, override: Path) -> None:
    override.parent.mkdir(parents=True)
    override.write_text(
        'schema = 1\n[[torch]]\nversion = "2.15"\n[[torch.cuda]]\nline = "13.4"\nstatus = "stable"\n'
        'abi = "cxx11"\npython = ["cp312"]\nplatforms = ["linux-x86_64"]\nsource = "me"\ndate = 2026-10-01\n'
    )
    (tmp_path / "p.html").write_text(html_page([NEW]))
    refresh(str(tmp_path / "p.html"), today=TODAY)
    m = load_matrix()
    assert m.status(Label.parse("cu134torch2.15")) is Status.STABLE
    assert m.status(Label.parse("cu134torch2.14")) is Status.SERVED


def test_refresh_offline_exits_3_in_one_line(
    run: Run, override: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nothing listens on: what an unreachable index looks like
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(matrix_refresh, "DEFAULT_INDEX", f"{closed}/whl")
    for argv in (("matrix", "refresh"), ("matrix", "refresh", "--from", f"{closed}/whl/cu128/torch/")):
        result = run(*argv)
        assert result.code == 3, result.err
        assert result.err.startswith("librarian: error: ") and result.err.count("\n") == 1
        assert "cannot be reached" in result.err
    assert not override.exists()


def test_a_page_nested_100000_levels_deep_is_one_line(run: Run, tmp_path: Path, override: Path) -> None:
    """Issue 46 item 2: a RecursionError traceback, where the TOML override and reindex --manifest give one
    line."""
    page = tmp_path / "nested.json"
    page.write_text('{"a":' * 100_000 + "{}" + "}" * 100_000)
    result = run("matrix", "refresh", "--from", str(page))
    assert result.code == 2 and result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err == f"librarian: error: {page}: not a PEP 691 project page (nested too deeply to read)\n"
