"""Librarian's readers against one single-threaded pass over the same bytes: the floors it should beat on N cores.

    .venv/bin/python benchmarks/bench_parallel.py                       # every case (~3 min on 2 cores)
    .venv/bin/python benchmarks/bench_parallel.py --cases inspect,retag --wheel cupy_cuda12x-14.2.0-...whl
    .venv/bin/python benchmarks/bench_parallel.py --code /tmp/before   # the same cases on another checkout

Cases (each measurement a fresh interpreter reporting wall time and peak RSS, best of ``--repeat``):

* ``inspect``: ``inspect_wheel`` of a big multi-member wheel (default: built here from nvcc ``.so`` files
  grown by padding sections, plus large random members and 2,000 small ones; ``--wheel`` for a real one)
  against one single-threaded streaming inflate of its native members. Target <= 0.75x on 2 cores.
* ``retag``: ``retag(verify=True)`` of the same wheel against one single-threaded inflate + sha256 of
  every member. Target <= 0.85x on 2 cores.
* ``deep``: ``librarian verify --deep`` of a local store of ``--store-wheels`` wheels against one
  single-threaded inflate + sha256 of every member of every wheel.
* ``many``: a wheel of 70,000 small members: ``librarian publish`` and ``librarian verify --deep``
  against one stdlib read (``ZipFile.read``) of every member. Target <= 3x.
* ``startup``: ``librarian --version`` and a local ``librarian pull`` against ``python -c "import packaging"``,
  and the pull against a bare typer app parsing the same command line (the CLI layer's own floor).

``--code`` points every child at another checkout (``git archive <rev> | tar -x -C DIR``) for the
before column; options that checkout lacks (``jobs``) are left out.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import inspect
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import elfpad  # beside this script

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
KERNEL = '__global__ void k{n}(float* x) {{ x[threadIdx.x] += {n}; }}\nextern "C" void go{n}(float* x) {{ k{n}<<<1,32>>>(x); }}\n'
TAGS = (
    f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
)


# ---------------------------------------------------------------- children (run in a fresh interpreter)


def _takes_jobs(func: object) -> bool:
    return "jobs" in inspect.signature(func).parameters  # type: ignore[arg-type]


def child(op: str, args: list[str]) -> None:
    """One measurement: print wall seconds and peak RSS (MiB) as JSON."""
    start = time.perf_counter()
    jobs = int(os.environ["BENCH_JOBS"]) if os.environ.get("BENCH_JOBS") else None
    if op == "import":
        import librarian.wheel.binaries
        import librarian.wheel.wheelfile  # noqa: F401
    elif op == "inflate-native":
        from librarian.wheel.binaries import is_device_code, is_native

        with zipfile.ZipFile(args[0]) as zf:
            for info in zf.infolist():
                if is_native(info.filename) or is_device_code(info.filename):
                    with zf.open(info) as m:
                        while m.read(MIB):
                            pass
    elif op == "inflate-sha":
        for wheel in args:
            with zipfile.ZipFile(wheel) as zf:
                for info in zf.infolist():
                    h = hashlib.sha256()
                    with zf.open(info) as m:
                        while chunk := m.read(MIB):
                            h.update(chunk)
    elif op == "stdlib-read":
        with zipfile.ZipFile(args[0]) as zf:
            for info in zf.infolist():
                zf.read(info)
    elif op == "inspect":
        from librarian.wheel.members import inspect_wheel

        inspect_wheel(Path(args[0]), **({"jobs": jobs} if jobs and _takes_jobs(inspect_wheel) else {}))
    elif op == "retag":
        from librarian.coords import Label
        from librarian.wheel.relabel import retag

        kwargs = {"jobs": jobs} if jobs and _takes_jobs(retag) else {}
        retag(Path(args[0]), Label.parse("cu130torch2.9"), Path(args[1]), verify=True, **kwargs)  # type: ignore[arg-type]
    else:
        raise SystemExit(f"unknown op {op}")
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss": _peak_mib(), "cpu": time.process_time()}))


def _peak_mib() -> float:
    # VmHWM is this process's own peak; ru_maxrss also counts the parent's peak from before exec.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(code: Path, op: str, *args: str, repeat: int, jobs: int | None = None) -> dict[str, float]:
    """Best of ``repeat`` fresh-interpreter runs of ``op``."""
    env = {**os.environ, "PYTHONPATH": str(code), "BENCH_JOBS": str(jobs or "")}
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--child", op, *args],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return min(runs, key=lambda r: r["seconds"])


def paired(runs: list[Callable[[], dict[str, float]]], repeat: int) -> list[dict[str, float]]:
    """Each run's best of ``repeat``, the runs interleaved (a, b, a, b, ...) so that load from elsewhere on
    the machine falls on both sides of a ratio alike."""
    results: list[list[dict[str, float]]] = [[] for _ in runs]
    for _ in range(repeat):
        for i, run in enumerate(runs):
            results[i].append(run())
    return [min(r, key=lambda x: x["seconds"]) for r in results]


def measure_cli(code: Path, argv: list[str], repeat: int, cwd: Path | None = None) -> dict[str, float]:
    """Best of ``repeat`` runs of a command line (``librarian ...`` is this Python's ``-m librarian``): wall
    time and the child's CPU time (user + system: on a loaded machine the steadier of the two), no RSS (a
    child's ``ru_maxrss`` would include this process's peak from before ``exec``)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    runs = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        # In ``code``: ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH, so
        # run from anywhere else it would measure that directory's librarian, not ``code``'s.
        subprocess.run(argv, env=env, check=True, capture_output=True, cwd=cwd or code)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        runs.append({"seconds": seconds, "cpu": cpu})
    return min(runs, key=lambda r: r["seconds"])


# ---------------------------------------------------------------- inputs


def _digest(h: hashlib._Hash) -> str:
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


class WheelWriter:
    """A wheel written member by member with its RECORD: ``name-1.0-TAGS.whl``."""

    def __init__(self, directory: Path, name: str, level: int = 6) -> None:
        self.path = directory / f"{name}-1.0-{TAGS}.whl"
        self.dist_info = f"{name}-1.0.dist-info"
        self.zf = zipfile.ZipFile(self.path, "w", compresslevel=level)
        self.record: list[str] = []
        self.name = name

    def add(self, member: str, parts: list[bytes] | bytes) -> None:
        info = zipfile.ZipInfo(member, date_time=(2025, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o100644 << 16
        h, size = hashlib.sha256(), 0
        with self.zf.open(info, "w", force_zip64=True) as w:
            for part in [parts] if isinstance(parts, bytes) else parts:
                w.write(part)
                h.update(part)
                size += len(part)
        self.record.append(f"{member},{_digest(h)},{size}")

    def close(self) -> Path:
        self.add(
            f"{self.dist_info}/METADATA",
            f"Metadata-Version: 2.1\nName: {self.name}\nVersion: 1.0\n\n".encode(),
        )
        self.add(
            f"{self.dist_info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAGS}\n".encode()
        )
        self.zf.writestr(
            f"{self.dist_info}/RECORD", "\n".join([*self.record, f"{self.dist_info}/RECORD,,"]) + "\n"
        )
        self.zf.close()
        return self.path


def nvcc_sos(work: Path, count: int) -> list[bytes]:
    """``count`` small real CUDA ``.so`` files (nvcc on PATH), SASS for sm_80 and sm_90a plus PTX."""
    out = []
    for n in range(count):
        (work / f"k{n}.cu").write_text(KERNEL.format(n=n))
        subprocess.run(
            [
                "nvcc",
                "-shared",
                "-Xcompiler",
                "-fPIC",
                "-cudart",
                "shared",
                "-gencode",
                "arch=compute_80,code=[sm_80,compute_80]",
                "-gencode",
                "arch=compute_90a,code=sm_90a",
                "-o",
                f"k{n}.so",
                f"k{n}.cu",
            ],
            cwd=work,
            check=True,
        )
        out.append((work / f"k{n}.so").read_bytes())
    return out


def code_like(rng: random.Random, size: int) -> bytes:
    """Bytes that deflate about 2.5:1 like machine code: random runs between repeats."""
    pages = []
    for _ in range(size // 4096):
        noise = rng.randbytes(1536)
        pages.append(noise + noise[:512] * 5)
    return b"".join(pages)


def grown(so: bytes, pad: bytes) -> bytes:
    """``so`` with a ``.lbench_pad`` section of ``pad`` appended, its section headers moved after it."""
    head, tail = elfpad.grow(so, len(pad))
    return head + pad + tail


def big_wheel(work: Path, sos: list[bytes], scale: int = 1) -> Path:
    """~250 MiB inflated at scale 1: 24 grown nvcc ``.so`` (1 to 24 MiB), 4 random 8 MiB blobs, 2,000 small files."""
    rng = random.Random(1)
    w = WheelWriter(work, "bigkern")
    pads = [code_like(rng, MIB) for _ in range(4)]
    for n in range(24 * scale):
        w.add(
            f"bigkern/lib/_k{n:02d}.so",
            grown(sos[n % len(sos)], b"".join(pads[(n + i) % 4] for i in range(n % 24 + 1))),
        )
        if n % 6 == 0:
            w.add(f"bigkern/data/blob{n:02d}.bin", [rng.randbytes(MIB) for _ in range(8)])
    for n in range(2000):
        w.add(f"bigkern/py/m{n:04d}.py", rng.randbytes(200) * rng.randrange(1, 20))
    return w.close()


def many_wheel(work: Path, count: int = 70_000) -> Path:
    """A wheel of ``count`` small members (~120 bytes each)."""
    rng = random.Random(2)
    w = WheelWriter(work, "manykern", level=6)
    for n in range(count):
        w.add(
            f"manykern/d{n // 1000:03d}/m{n:05d}.py",
            f"VALUE = {rng.random()!r}\nNAME = 'm{n:05d}'\n".encode() * 2,
        )
    return w.close()


def small_store_wheels(work: Path, sos: list[bytes], count: int) -> list[Path]:
    """``count`` wheels of a few members each (an nvcc .so grown to 1-3 MiB and some python)."""
    rng = random.Random(3)
    pad = code_like(rng, MIB)
    out = []
    for n in range(count):
        d = work / f"w{n}"
        d.mkdir(exist_ok=True)
        w = WheelWriter(d, f"pkg{n:03d}")
        w.add(f"pkg{n:03d}/_k.so", grown(sos[n % len(sos)], pad * (1 + n % 3)))
        for i in range(5):
            w.add(f"pkg{n:03d}/m{i}.py", rng.randbytes(300) * 4)
        out.append(w.close())
    return out


# ---------------------------------------------------------------- cases


def fill_store(cli: list[str], store: Path, wheels: list[Path]) -> None:
    """Publish ``wheels`` into the local ``store`` with this checkout's librarian (inputs, not measured)."""
    subprocess.run(
        [*cli, "-q", "publish", "--repo", str(store), "--cuda", "13.0", "--torch", "2.9", *map(str, wheels)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
        stdout=subprocess.DEVNULL,
    )


def row(
    what: str, ours: dict[str, float], floor: dict[str, float], base_rss: float, target: str = ""
) -> None:
    rss = (
        f"  RSS {ours['rss']:>4.0f} MiB (+{ours['rss'] - base_rss:.0f} over start-up)"
        if "rss" in ours
        else ""
    )
    cpu = (
        f"  CPU {ours['cpu']:.2f} s ({ours['cpu'] / floor['cpu']:.2f}x)"
        if "cpu" in ours and floor.get("cpu")
        else ""
    )
    print(
        f"{what:<34} {ours['seconds']:>7.2f} s  {ours['seconds'] / floor['seconds']:>5.2f}x floor{cpu}{rss} {target}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", default="inspect,retag,deep,many,startup")
    parser.add_argument("--wheel", type=Path, help="a real wheel for inspect and retag (e.g. cupy-cuda12x)")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose librarian is measured")
    parser.add_argument("--jobs", type=int, help="-j for librarian (default: its own, the cores)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store-wheels", type=int, default=200)
    parser.add_argument("--members", type=int, default=70_000)
    parser.add_argument("--work", type=Path, help="keep inputs here (built once, reused)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1:])
        return
    cases = set(args.cases.split(","))
    code, rep = args.code.resolve(), args.repeat
    work = (args.work or Path(tempfile.mkdtemp(prefix="bench-parallel-"))).resolve()  # children run elsewhere
    work.mkdir(parents=True, exist_ok=True)
    jobs_flag = ["-j", str(args.jobs)] if args.jobs else []
    # An installed librarian runs from bytecode (pip compiles it at install). Where PYTHONDONTWRITEBYTECODE
    # is set (this project's machines, many containers) every child would compile all it imports again,
    # ~0.2 s on a command's start-up; compiled once here, it is read from __pycache__ like an install.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "librarian")], check=True)
    print(
        f"code {code}, {len(os.sched_getaffinity(0))} cores, jobs {args.jobs or 'default'}, inputs in {work}"
    )
    base = measure(code, "import", repeat=rep)
    cli = [sys.executable, "-m", "librarian"]
    sos: list[bytes] = []
    if cases & {"inspect", "retag", "deep", "startup"} and not (work / "sos.done").exists():
        (work / "nvcc").mkdir(exist_ok=True)
        for n, so in enumerate(nvcc_sos(work / "nvcc", 4)):
            (work / f"k{n}.so").write_bytes(so)
        (work / "sos.done").touch()
    sos = [(work / f"k{n}.so").read_bytes() for n in range(4)] if (work / "sos.done").exists() else []
    if cases & {"inspect", "retag"}:
        wheel = args.wheel.resolve() if args.wheel else None
        if wheel is None:
            wheel = next(work.glob("bigkern-*.whl"), None) or big_wheel(work, sos)
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
        print(
            f"wheel {wheel.name}: {wheel.stat().st_size / MIB:.0f} MiB, {sum(i.file_size for i in infos) / MIB:.0f} MiB "
            f"inflated, {len(infos)} members"
        )
        if "inspect" in cases:
            floor, ours = paired(
                [
                    lambda: measure(code, "inflate-native", str(wheel), repeat=1),
                    lambda: measure(code, "inspect", str(wheel), repeat=1, jobs=args.jobs),
                ],
                rep,
            )
            print(
                f"{'floor: inflate native members':<34} {floor['seconds']:>7.2f} s  RSS {floor['rss']:.0f} MiB"
            )
            row("inspect", ours, floor, base["rss"], "(target <= 0.75x, RSS +64)")
        if "retag" in cases:
            out = work / "retag-out"
            out.mkdir(exist_ok=True)
            floor, ours = paired(
                [
                    lambda: measure(code, "inflate-sha", str(wheel), repeat=1),
                    lambda: measure(code, "retag", str(wheel), str(out), repeat=1, jobs=args.jobs),
                ],
                rep,
            )
            print(
                f"{'floor: inflate + sha256 all':<34} {floor['seconds']:>7.2f} s  RSS {floor['rss']:.0f} MiB"
            )
            row("retag (RECORD checked)", ours, floor, base["rss"], "(target <= 0.85x)")
            shutil.rmtree(out)
    if "deep" in cases:
        store = work / f"store{args.store_wheels}"
        wheels = sorted((work / f"deep{args.store_wheels}").glob("w*/*.whl"))
        if not store.exists():
            (work / f"deep{args.store_wheels}").mkdir(exist_ok=True)
            wheels = small_store_wheels(work / f"deep{args.store_wheels}", sos, args.store_wheels)
            for chunk in range(0, len(wheels), 50):
                fill_store(cli, store, wheels[chunk : chunk + 50])
        # Each wheel is filed under several cells (hard links): the floor reads each distinct blob once, as verify does.
        stored = sorted(
            {(p.stat().st_dev, p.stat().st_ino): p for p in sorted(store.rglob("*.whl"))}.values()
        )
        floor, ours = paired(
            [
                lambda: measure(code, "inflate-sha", *map(str, stored), repeat=1),
                lambda: measure_cli(
                    code, [*cli, "-q", "verify", "--deep", "--repo", str(store), *jobs_flag], 1
                ),
            ],
            rep,
        )
        print(
            f"{'floor: inflate + sha256, ' + str(len(stored)) + ' wheels':<34} {floor['seconds']:>7.2f} s  CPU {floor['cpu']:.2f} s"
        )
        row("verify --deep (process)", ours, floor, base["rss"])
    if "many" in cases:
        wheel = next(work.glob("manykern-*.whl"), None) or many_wheel(work, args.members)
        store = work / "manystore"
        pub = [
            *cli,
            "-q",
            "publish",
            "--repo",
            str(store),
            "--cuda",
            "13.0",
            "--torch",
            "2.9",
            "--sm",
            "89",
            *jobs_flag,
        ]

        def publish() -> dict[str, float]:
            shutil.rmtree(store, ignore_errors=True)
            return measure_cli(code, [*pub, str(wheel)], 1)

        floor, ours = paired([lambda: measure(code, "stdlib-read", str(wheel), repeat=1), publish], rep)
        print(
            f"{'floor: ZipFile.read every member':<34} {floor['seconds']:>7.2f} s  CPU {floor['cpu']:.2f} s  "
            f"({wheel.stat().st_size / MIB:.1f} MiB)"
        )
        row("publish (process)", ours, floor, base["rss"], "(target <= 3x)")
        _, ours = paired(
            [
                lambda: measure(code, "stdlib-read", str(wheel), repeat=1),
                lambda: measure_cli(
                    code, [*cli, "-q", "verify", "--deep", "--repo", str(store), *jobs_flag], 1
                ),
            ],
            rep,
        )
        row("verify --deep (process)", ours, floor, base["rss"], "(target <= 3x)")
    if "startup" in cases:
        floor = measure_cli(code, [sys.executable, "-c", "import packaging.version"], rep)
        print(f"{'floor: import packaging':<34} {floor['seconds']:>7.2f} s")
        row("librarian --version", measure_cli(code, [*cli, "--version"], rep), floor, base["rss"])
        store = work / "pullstore"
        if not store.exists() and sos:
            src = work / "pullsrc"
            src.mkdir(exist_ok=True)
            w = WheelWriter(src, "pullkern")
            w.add("pullkern/_k.so", sos[0])
            fill_store(cli, store, [w.close()])
        if store.exists():
            dest = work / "pulled"
            shutil.rmtree(dest, ignore_errors=True)
            pull = [
                *cli,
                "-q",
                "pull",
                "pullkern",
                "--repo",
                str(store),
                "--sm",
                "90",
                "--cuda",
                "13.0",
                "--torch",
                "2.9",
                "--python",
                f"{sys.version_info[0]}.{sys.version_info[1]}",
                "--platform",
                "manylinux_2_28_x86_64",
                "-o",
                str(dest),
            ]
            ours = measure_cli(code, pull, rep)
            row("librarian pull (local store)", ours, floor, base["rss"])
            # The CLI layer's own floor: typer (0.2x coerces every option through pydantic) parsing the
            # same command line into a command that does nothing.
            app = Path(__file__).with_name("typer_floor.py")
            layer = measure_cli(code, [sys.executable, str(app), *pull[len(cli) :]], rep)
            print(f"{'floor: typer parsing pull':<34} {layer['seconds']:>7.2f} s")
            row("librarian pull over typer's floor", ours, layer, base["rss"])


if __name__ == "__main__":
    main()
