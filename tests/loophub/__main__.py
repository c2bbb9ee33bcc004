"""Run the loopback hub by hand: ``python -m tests.loophub --port 8765 --root DIR``."""

from __future__ import annotations

import argparse
import logging
import signal
import tempfile
from pathlib import Path

from .server import LoopHub

# Ctrl-C and a plain kill. Taken with sigwait, not as KeyboardInterrupt: a process started by a
# non-interactive shell's `&` (CI, a backgrounded pytest) inherits SIGINT ignored, and Python then
# installs no KeyboardInterrupt handler, so a Ctrl-C stop never came (the child ran on for 34 minutes).
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tests.loophub", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (loopback only, please)")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--root", type=Path, default=None, help="storage directory (default: a temp dir)")
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--token", default=None, help="require this bearer token for writes")
    parser.add_argument("--lfs-redirect", choices=("none", "cross"), default="none")
    parser.add_argument("--multipart-chunk-size", type=int, default=None)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    root = args.root or Path(tempfile.mkdtemp(prefix="loophub-"))
    # Blocked before any thread starts (threads inherit the mask), so the kernel leaves both signals
    # pending for this thread's sigwait, whatever their disposition was and whenever they arrive, even
    # before the wait. SIG_DFL: POSIX may discard an ignored signal even while it is blocked.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    hub = LoopHub(
        root,
        host=args.host,
        port=args.port,
        page_size=args.page_size,
        token=args.token,
        lfs_redirect=args.lfs_redirect,
        multipart_chunk_size=args.multipart_chunk_size,
    ).start()
    try:
        print(
            f"loophub serving {root} at {hub.url}  (HF_ENDPOINT={hub.url} HF_HUB_DISABLE_XET=1)", flush=True
        )
        signum = signal.sigwait(STOP_SIGNALS)
        logging.getLogger(__name__).info("loophub: %s, stopping", signal.Signals(signum).name)
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
