"""A worker process of test_cluster's mutual-exclusion test: takes the lock
ROUNDS times and, holding it, checks that nobody else is inside, bumps a
counter file and records its fencing token.

Usage: worker.py ADDRS DIR ROUNDS (ADDRS comma-separated)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lockd  # noqa: E402


def main() -> None:
    addrs, d, rounds = sys.argv[1].split(","), Path(sys.argv[2]), int(sys.argv[3])
    client = lockd.Client(addrs)
    with client.session(ttl=10, name=f"worker-{os.getpid()}") as s:
        for _ in range(rounds):
            with s.lock("mx/counter", wait=60) as grant:
                try:  # nobody else may be inside
                    fd = os.open(d / "inside", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    (d / f"violation-{os.getpid()}").write_text("two holders at once\n")
                    continue
                n = int((d / "counter").read_text() or "0")
                (d / "counter").write_text(str(n + 1))
                with open(d / "tokens", "a") as f:
                    f.write(f"{grant.token}\n")
                os.close(fd)
                os.unlink(d / "inside")


if __name__ == "__main__":
    main()
