"""Wheels from where people publish them (issue 51): ``publish URL`` and ``publish --from PAGE|STORE``, against
a loopback HTTP server (tests never reach the internet): a find-links page's wheels, checked against its
``#sha256=``; a wheelhouse URL's path is its claim; one line per URL that cannot be taken, the rest
published; a stall, a redirect loop, a page of 10,000 links, credentials that must not follow a redirect
to another host and must never be printed."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from librarian.sources.links import shown, wheel_links
from tests.conftest import Run
from tests.loophub.server import LoopHub

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "dist"
CP311 = "tinykern-0.1.0-cp311-cp311-linux_x86_64.whl"
CP312 = "tinykern-0.1.0-cp312-cp312-linux_x86_64.whl"
LABEL = ("--torch", "2.9", "--cuda", "13.0")


class Site:
    """A loopback web server: files from a folder, plus routes that redirect, stall or trickle; it keeps the
    Authorization header of every request it answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.routes: dict[str, Callable[[http.server.BaseHTTPRequestHandler], None]] = {}
        self.auth: list[tuple[str, str | None]] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                site.auth.append((self.path, self.headers.get("Authorization")))
                route = site.routes.get(self.path.split("?")[0])
                if route is not None:
                    route(self)
                    return
                file = site.root / self.path.lstrip("/").split("?")[0]
                if not file.is_file():
                    self.send_error(404)
                    return
                data = file.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/{path}"

    def redirect(self, path: str, to: str) -> None:
        def go(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(302)
            h.send_header("Location", to)
            h.send_header("Content-Length", "0")
            h.end_headers()

        self.routes[f"/{path}"] = go

    def stall(self, path: str, every: float, chunk: bytes = b"PK") -> None:
        """Answer with headers, then ``chunk`` every ``every`` seconds (a stall, or a trickle)."""

        def slow(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(200)
            h.send_header("Content-Length", str(10**7))
            h.end_headers()
            try:
                for _ in range(200):
                    h.wfile.write(chunk)
                    h.wfile.flush()
                    time.sleep(every)
            except OSError:
                pass  # the client gave up, as it should

        self.routes[f"/{path}"] = slow


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    root = tmp_path / "www"
    (root / "wheels").mkdir(parents=True)
    for wheel in SAMPLES.glob("*.whl"):
        shutil.copyfile(wheel, root / "wheels" / wheel.name)
    served = Site(root)
    yield served
    served.server.shutdown()
    served.server.server_close()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def page(site: Site, name: str, links: list[str]) -> str:
    (site.root / name).write_text(
        "<html><body>\n" + "\n".join(f'<a href="{h}">{h}</a><br>' for h in links) + "\n</body></html>\n"
    )
    return site.url(name)


def test_a_find_links_page_is_read_as_pip_reads_it() -> None:
    html = (
        '<html><head><base href="/base/"></head><body>'
        '<a href="x-1.0-py3-none-any.whl#sha256=ABCDEF">x</a>'
        '<a href="../y-1.0-py3-none-any.whl#md5=abc" data-requires-python="&gt;=3.10">y</a>'
        '<a href="x-1.0-py3-none-any.whl#sha256=abcdef">again</a>'
        '<a href="z-1.0.tar.gz">sdist</a><a href="other.html">page</a></body></html>'
    )
    links = wheel_links(html, "https://host/simple/x/")
    assert [(l.url, l.hash_name, l.hash_value, l.requires_python) for l in links] == [
        ("https://host/base/x-1.0-py3-none-any.whl", "sha256", "abcdef", ""),
        ("https://host/y-1.0-py3-none-any.whl", "", "", ">=3.10"),
    ]
    assert shown("https://user:tok@host:8/a/b.whl?X-Amz-Signature=s") == "https://host:8/a/b.whl?…"


def test_publish_from_a_page_takes_its_wheels_and_refuses_one_whose_hash_differs(
    run: Run, site: Site, tmp_path: Path
) -> None:
    good, other = site.root / "wheels" / CP311, site.root / "wheels" / CP312
    url = page(
        site, "links.html", [f"wheels/{CP311}#sha256={sha(good)}", f"wheels/{CP312}#sha256={sha(good)}"]
    )
    done = run("publish", "--from", url, *LABEL, "--json")
    assert done.code == 1, done.err
    report = json.loads(done.out)
    assert {f["source"] for f in report["filings"]} == {site.url(f"wheels/{CP311}")}
    assert [s.split(": ", 1)[0] for s in report["skipped"]] == [site.url(f"wheels/{CP312}")]
    assert (
        f"the page says {sha(good)[:16]}" in report["skipped"][0] and sha(other)[:16] in report["skipped"][0]
    )
    stored = {p.name for p in (tmp_path / "wheelhouse").rglob("*.whl")}
    assert stored == {"tinykern-0.1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"}  # nothing of the other
    assert not list((tmp_path / "wheelhouse").rglob("*cp312*"))


def test_a_wheelhouse_url_is_its_claim_and_only_narrows_a_page(run: Run, site: Site, tmp_path: Path) -> None:
    cell = site.root / "house/tinykern/sm89/torch2.9-cu130"
    cell.mkdir(parents=True)
    shutil.copyfile(site.root / "wheels" / CP312, cell / CP312)
    done = run("publish", site.url(f"house/tinykern/sm89/torch2.9-cu130/{CP312}"))  # no --torch/--cuda
    assert done.code == 0, done.err
    assert "added  tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp312" in done.out
    url = page(site, "all.html", [f"wheels/{p.name}" for p in SAMPLES.glob("*.whl")])
    narrowed = run("publish", "--from", url, "--only", "*cp310*", *LABEL, "--dry-run")
    assert narrowed.code == 0 and "cp310" in narrowed.out and "cp311" not in narrowed.out


def test_a_page_of_ten_thousand_links_is_one_line_and_the_rest_is_published(run: Run, site: Site) -> None:
    crowd = page(site, "crowd.html", [f"wheels/k{i}-1.0-py3-none-any.whl" for i in range(10_000)])
    done = run("publish", "--from", crowd, site.url(f"wheels/{CP311}"), *LABEL)
    assert done.code == 1
    skipped = [line for line in done.out.splitlines() if line.strip().startswith("skipped")]
    assert skipped == [
        (
            f"      skipped  {crowd}: 10,000 wheels, more than the 2,000 one import takes: narrow it with "
            "--only PATTERN (e.g. 'flash_attn-2.8.3*cp312*')"
        )
    ]
    assert "added  tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp311" in done.out


def test_a_stall_a_trickle_a_redirect_loop_and_a_missing_file_are_one_line_each(
    run: Run, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRARIAN_DOWNLOAD_TIMEOUT", "3")  # far below the stall, far above a loaded loopback
    site.stall(f"stall/{CP311}", every=30)  # two bytes, then nothing for far longer than the time-out
    site.stall(f"trickle/{CP311}", every=0.2)  # ten bytes a second: under the rate floor
    site.redirect(f"a/{CP311}", site.url(f"b/{CP311}"))
    site.redirect(f"b/{CP311}", site.url(f"a/{CP311}"))
    urls = [site.url(f"{d}/{CP311}") for d in ("stall", "trickle", "a", "gone")]
    done = run("publish", *urls, site.url(f"wheels/{CP312}"), *LABEL)
    assert done.code == 1 and "Traceback" not in done.err
    said = {line.split("skipped  ", 1)[1] for line in done.out.splitlines() if "skipped  " in line}
    assert said == {
        f"{urls[0]}: stalled (no bytes for 3 s)",
        f"{urls[2]}: a redirect loop (back to {urls[2]})",
        f"{urls[3]}: HTTP 404",
    } | {s for s in said if s.startswith(f"{urls[1]}: stalled (")}
    assert len(said) == 4
    assert "added  tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp312" in done.out


def test_credentials_go_to_their_own_host_only_and_are_never_printed(run: Run, site: Site) -> None:
    other = Site(site.root)  # another host name for the same machine: localhost
    try:
        site.redirect(f"away/{CP311}", other.url(f"wheels/{CP311}", host="localhost"))
        secret = f"http://alice:s3cr3t-pass@127.0.0.1:{site.port}"
        done = run("publish", f"{secret}/away/{CP311}", f"{secret}/nope/{CP312}", *LABEL, "-v")
        assert done.code == 1
        assert "s3cr3t" not in done.out + done.err and "alice" not in done.out + done.err
        assert site.auth[0][1] is not None and site.auth[0][1].startswith("Basic ")  # its own host: sent
        assert other.auth == [(f"/wheels/{CP311}", None)]  # the other host: never
        assert "added  tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp311" in done.out
    finally:
        other.server.shutdown()
        other.server.server_close()


def test_publish_from_another_store_and_a_hub_file(
    run: Run, tmp_path: Path, make_loophub: Callable[..., LoopHub]
) -> None:
    make_loophub()
    dist = [str(p) for p in sorted(SAMPLES.glob("*.whl"))]
    assert run("publish", *dist, *LABEL, "--repo", "hf://datasets/team/theirs", "--create").code == 0
    copied = run("publish", "--from", "hf://datasets/team/theirs", "--repo", "ours")
    assert copied.code == 0, copied.err
    ours = {p.relative_to(tmp_path / "ours").as_posix() for p in (tmp_path / "ours").rglob("*.whl")}
    assert len(ours) == 12 and all("+cu130torch2.9" in p for p in ours)
    one = "tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp311-cp311-linux_x86_64.whl"
    single = run("publish", f"hf://datasets/team/theirs/{one}", "--repo", "single", "--json")
    assert single.code == 0, single.err
    assert json.loads(single.out)["filings"][0]["source"] == f"hf://datasets/team/theirs/{one}"
    assert run("publish", "hf://datasets/team/theirs/tinykern/missing.whl", "--repo", "single").code == 1


def test_a_page_on_this_machine_links_the_files_beside_it(run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "house"
    folder.mkdir()
    for wheel in SAMPLES.glob("*.whl"):
        shutil.copyfile(wheel, folder / wheel.name)
    good = folder / CP311
    (folder / "index.html").write_text(
        f'<a href="{CP311}#sha256={sha(good)}">a</a><a href="{CP312}#sha256={"0" * 64}">b</a>'
    )
    done = run("publish", "--from", str(folder / "index.html"), *LABEL)
    assert done.code == 1
    assert f"{folder / CP312}: its bytes' sha256 is not the one its page names: not imported" in done.out
    assert "added  tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp311" in done.out
    assert not list((tmp_path / "wheelhouse").rglob("*cp312*"))


def test_skip_refused_skips_an_input_that_is_a_fifo_a_folder_or_missing(run: Run, tmp_path: Path) -> None:
    """Issue 54 item 7: one unusable input no longer stops a --skip-refused batch."""
    import os

    os.mkfifo(tmp_path / "pipe.whl")
    (tmp_path / "folder.whl").mkdir()
    good = str(SAMPLES / CP311)
    done = run("publish", "pipe.whl", "folder.whl", "missing.whl", good, *LABEL, "--skip-refused")
    assert done.code == 1
    skipped = [line.split("skipped  ", 1)[1] for line in done.out.splitlines() if "skipped  " in line]
    assert skipped == [
        "pipe.whl: a FIFO, not a file",
        "folder.whl: a folder, not a file",
        "missing.whl: no such file",
    ]
    assert "added  tinykern/sm89/torch2.9-cu130/tinykern-0.1.0+cu130torch2.9-cp311" in done.out
    alone = run("publish", "pipe.whl", good, *LABEL)  # without the flag: refused, nothing filed
    assert alone.code == 2 and alone.err == "librarian: error: pipe.whl: a FIFO, not a file\n"


def test_a_publish_warning_names_the_input_once(run: Run, tmp_path: Path) -> None:
    """Issue 54 item 7: the symbolic-link warning named the relabelled temp copy, twice."""
    import zipfile

    from tests.builders import make_wheel

    made = make_wheel(tmp_path / "dist", "tinykern", "0.1.0", "cp311-cp311-linux_x86_64",
                      {"tinykern/__init__.py": b"", "tinykern/link": b"__init__.py"})  # fmt: skip
    with zipfile.ZipFile(made) as zf:
        members = [(i, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(made, "w") as zf:
        for info, data in members:
            if info.filename == "tinykern/link":
                info.external_attr = 0o120777 << 16  # a symbolic link
            zf.writestr(info, data)
    done = run("publish", str(made), "--torch", "2.9", "--cuda", "12.8", "--sm", "89", "--dry-run")
    assert done.code == 0, done.err
    assert done.err == (
        f"librarian: {made}: 1 member(s) are symbolic links (tinykern/link); pip installs them as plain files\n"
    )
