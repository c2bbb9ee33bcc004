"""Run the loopback hub by hand: ``python -m tests.loophub --port 8765 --root DIR``."""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
from pathlib import Path

from .server import LoopHub


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
        # Said inside the try: whoever reads the line may press Ctrl-C (send SIGINT) at once, and this
        # thread may not have reached the wait yet (a race the tests met on a loaded machine).
        print(
            f"loophub serving {root} at {hub.url}  (HF_ENDPOINT={hub.url} HF_HUB_DISABLE_XET=1)", flush=True
        )
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
