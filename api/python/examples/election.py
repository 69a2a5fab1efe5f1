"""Leader election with lockd: replicas of a service campaign for one
name, the elected one serves and the others wait as candidates; clients
follow the leader and route every request to it.

    export LOCKD_ADDR=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
    python3 election.py replica --name svc/hello --id a &
    python3 election.py replica --name svc/hello --id b &
    python3 election.py client --name svc/hello

Each replica listens on a port of its own from the start, campaigns with
its URL as the value, and answers requests only while it leads (503
otherwise), with its fencing token. Stop the leader (SIGTERM or Ctrl-C):
it resigns, the next candidate takes over at once, and the client
follows it. A leader that is deposed (its hold revoked, its session
lost) learns it with its next keepalive and stops serving; the token,
which every later leader has larger, keeps what it sends meanwhile out
of a store that checks it.

From a checkout, without installing the package: PYTHONPATH=api/python.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import lockd


def replica(client: lockd.Client, name: str, rid: str) -> None:
    """Campaigns for name until stopped; serves while elected."""
    leading: list[lockd.Leadership] = []  # the current leadership, if any

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            lead = leading[0] if leading else None
            if lead is None or lead.lost.is_set():
                self.send_error(503, "not the leader")
                return
            # The fencing token goes with everything the leader does: a
            # store that remembers the largest it saw refuses a deposed one.
            body = f"{rid} token={lead.token}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    while True:
        lost = threading.Event()  # set when a hold of the session is lost
        try:
            with client.session(ttl=10, name=f"replica-{rid}", on_lost=lambda *_: lost.set()) as s:
                print(f"{rid}: candidate for {name} at {url}", flush=True)
                with s.campaign(name, url) as lead:
                    leading[:] = [lead]
                    print(f"{rid}: elected (token {lead.token})", flush=True)
                    lost.wait()  # until the leadership is lost, or a signal ends the program
                    print(f"{rid}: leadership lost: {lead.lost_reason}", flush=True)
        except lockd.LockdError as e:  # no cluster to campaign in: try again
            print(f"{rid}: {e}", flush=True)
        finally:
            leading.clear()
        time.sleep(1)  # then stand again, in a new session


def route(client: lockd.Client, name: str, every: float) -> None:
    """Sends a request to the leader every `every` seconds, following the
    leader as it changes; prints each answer that differs from the last."""
    current: list[lockd.Leader] = []
    changed = threading.Condition()

    def follow() -> None:
        for leader in client.observe(name):
            with changed:
                current[:] = [leader]
                changed.notify_all()
    threading.Thread(target=follow, daemon=True).start()
    last = ""
    while True:
        with changed:
            changed.wait_for(lambda: current)
            leader = current[0]
        try:
            with urllib.request.urlopen(leader.value, timeout=5) as r:
                answer = r.read().decode().strip()
        except (OSError, urllib.error.URLError):
            # Not serving (yet, or any more): wait for the next leader,
            # or try this one again shortly (it may not know yet that it won).
            with changed:
                changed.wait_for(lambda: current[0] is not leader, timeout=every)
            continue
        if answer != last:
            print(f"client: leader token {leader.token} at {leader.value} answered: {answer}", flush=True)
            last = answer
        time.sleep(every)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("role", choices=["replica", "client"])
    p.add_argument("--name", default="svc/hello", help="the name the replicas campaign for")
    p.add_argument("--id", default="replica", help="a replica's name in its answers")
    p.add_argument("--every", type=float, default=0.2, help="seconds between a client's requests")
    args = p.parse_args()
    # SIGTERM ends the program as Ctrl-C does: the with blocks resign and
    # close the session on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    client = lockd.Client()  # LOCKD_ADDR, LOCKD_TOKEN, ...
    try:
        if args.role == "replica":
            replica(client, args.name, args.id)
        else:
            route(client, args.name, args.every)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
