"""Fixtures that build lockd once per test session and start real lockd
processes on free loopback ports: a dev node, 3-node clusters and a dev
node with TLS (client certificates) and ACLs."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import typing
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent  # api/python
REPO = PACKAGE.parent.parent
sys.path.insert(0, str(PACKAGE))

import lockd  # noqa: E402

# Election timeouts scale with this (lockd --raft-timing): short keeps the
# tests quick; LOCKD_TEST_TIMING overrides it, as for the Go tests
# (make test-elections).
RAFT_TIMING = os.environ.get("LOCKD_TEST_TIMING", "0.5")
START_TIMEOUT = 60.0


def eventually(cond: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.05) -> Any:
    """Polls cond until it returns something truthy; fails after timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - the last error is reported
            last = e
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s; last: {last!r}")
        time.sleep(every)


def _port_range() -> tuple[int, int]:
    """Where free_ports draws ports: outside Linux's ephemeral range, as
    lockdtest.FreePorts does (20000 up to its first port, else above its
    last; 20000-32768 when neither side has room)."""
    first, last = 32768, 60999
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first, last = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        pass
    if first > last:
        first, last = 32768, 60999
    if first >= 21000:
        return 20000, first
    if last <= 64535:
        return last + 1, 65536
    return 20000, 32768


# Claims on the ports drawn, held until the test run ends (the kernel
# drops them with the process).
_claims: list[typing.IO[bytes]] = []


def _claim(port: int) -> bool:
    """Reserve port against other processes that draw ports, as
    lockdtest.FreePorts does: an flock on a file named after it in the
    same directory. False: another process holds it."""
    d = os.path.join(tempfile.gettempdir(), "lockd-test-ports")
    os.makedirs(d, exist_ok=True)
    f = open(os.path.join(d, str(port)), "ab")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return False
    _claims.append(f)
    return True


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports free for TCP and UDP (gossip uses both),
    drawn outside the kernel's ephemeral range and claimed (_claim): they
    are closed again before a node binds them, and a port the kernel may
    hand out meanwhile (for a bind to port 0, or an outgoing connection, in
    any process), or another test process's draw, could take it first."""
    lo, hi = _port_range()
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        for _ in range(100 * n):
            port = random.randrange(lo, hi)
            if port in ports or not _claim(port):
                continue
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            held += [t, u]
            try:
                t.bind(("127.0.0.1", port))
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
            ports.append(port)
            if len(ports) == n:
                return ports
        raise RuntimeError(f"no {n} free ports in [{lo}, {hi})")
    finally:
        for s in held:
            s.close()


def _die_with_parent() -> None:
    """In the child: SIGKILL when the test process dies (PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


@dataclass
class Node:
    """One lockd process."""

    id: str
    http_addr: str
    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, binary: str) -> None:
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen([binary, *self.args], stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError as e:
            return str(e)


@dataclass
class Cluster:
    """lockd processes started by a test; killed at its end."""

    nodes: list[Node]
    scheme: str = "http"
    ssl_context: Any = None
    files: dict[str, str] = field(default_factory=dict)

    @property
    def addrs(self) -> list[str]:
        return [n.http_addr for n in self.nodes]

    def status(self, node: Node) -> dict[str, Any]:
        url = f"{self.scheme}://{node.http_addr}/v1/status"
        with urllib.request.urlopen(url, timeout=2, context=self.ssl_context) as r:
            return dict(json.load(r))

    def leader(self, among: list[Node] | None = None) -> Node:
        """Waits until every node of among names the same leader, one of them."""
        nodes = among or [n for n in self.nodes if n.proc and n.proc.poll() is None]

        def agreed() -> Node | None:
            for n in nodes:
                if n.proc is not None and n.proc.poll() is not None:
                    pytest.fail(f"lockd {n.id} exited with {n.proc.returncode}:\n{n.tail()}")
            names = {self.status(n)["leader"].get("http_addr", "") for n in nodes}
            if len(names) == 1:
                addr = names.pop()
                return next((n for n in nodes if n.http_addr == addr), None)
            return None
        return eventually(agreed, "one leader agreed on", timeout=START_TIMEOUT)  # type: ignore[no-any-return]

    def stop(self) -> None:
        for n in self.nodes:
            n.kill()


def go_command() -> str:
    """The go command that builds what the tests run from the repository."""
    go = shutil.which(os.environ.get("LOCKD_GO") or "go")  # make passes its $(GO)
    if go is None:
        pytest.fail("the tests run lockd's Go code: no go command on PATH")
    return go


@pytest.fixture(scope="session")
def lockd_bin() -> Iterator[str]:
    """lockd built with go build into a temporary directory, once."""
    go = go_command()
    d = tempfile.mkdtemp(prefix="lockd-py-bin-")
    binary = os.path.join(d, "lockd")
    env = dict(os.environ, CGO_ENABLED="0")
    r = subprocess.run([go, "build", "-o", binary, "./cmd/lockd"], cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"go build ./cmd/lockd failed:\n{r.stdout}{r.stderr}")
    yield binary
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start_dev(lockd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Cluster]]:
    """Starts dev nodes (extra flags allowed); kills them when the test ends."""
    started: list[Cluster] = []

    def start(*extra: str, ssl_context: Any = None) -> Cluster:
        c = _dev(lockd_bin, tmp_path_factory.mktemp("dev"), list(extra), ssl_context)
        started.append(c)
        return c
    yield start
    for c in started:
        c.stop()


def _dev(binary: str, d: Path, extra: list[str], ssl_context: Any = None) -> Cluster:
    http, raft = free_ports(2)
    node = Node("dev", f"127.0.0.1:{http}", ["--dev", "--http-addr", f"127.0.0.1:{http}",
                                              "--raft-addr", f"127.0.0.1:{raft}", *extra], d / "dev.log")
    node.start(binary)
    c = Cluster([node], scheme="https" if ssl_context else "http", ssl_context=ssl_context)
    try:
        c.leader()
    except BaseException:
        print(node.tail())
        c.stop()
        raise
    return c


@pytest.fixture(scope="module")
def dev(lockd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A dev node shared by a test module."""
    c = _dev(lockd_bin, tmp_path_factory.mktemp("dev"), [])
    yield c
    c.stop()


@pytest.fixture
def client(dev: Cluster) -> lockd.Client:
    return lockd.Client(dev.addrs)


def _cluster(binary: str, d: Path, n: int, extra: list[str]) -> Cluster:
    ports = free_ports(3 * n)
    gossip = [f"127.0.0.1:{ports[3 * i + 2]}" for i in range(n)]
    nodes = []
    for i in range(n):
        others = ",".join(g for j, g in enumerate(gossip) if j != i)
        nid = f"n{i + 1}"
        args = ["--node-id", nid, "--data-dir", str(d / nid), "--http-addr", f"127.0.0.1:{ports[3 * i]}",
                "--raft-addr", f"127.0.0.1:{ports[3 * i + 1]}", "--gossip-addr", gossip[i],
                "--join", others, "--bootstrap-expect", str(n), "--raft-timing", RAFT_TIMING, *extra]
        nodes.append(Node(nid, f"127.0.0.1:{ports[3 * i]}", args, d / f"{nid}.log"))
    c = Cluster(nodes)
    try:
        for nd in nodes:
            nd.start(binary)
        c.leader()
    except BaseException:
        c.stop()
        raise
    return c


@pytest.fixture(scope="module")
def cluster(lockd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 3-node cluster on loopback (--bootstrap-expect 3) shared by a test
    module; a test that kills nodes runs last."""
    c = _cluster(lockd_bin, tmp_path_factory.mktemp("cluster"), 3, [])
    yield c
    c.stop()


@pytest.fixture
def start_cluster(lockd_bin: str, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[Callable[..., Cluster]]:
    """Starts 3-node clusters of the test's own (for tests that freeze or
    kill nodes); resumes and kills their nodes when the test ends, and
    prints their logs' tails if it failed."""
    started: list[Cluster] = []

    def start(*extra: str) -> Cluster:
        c = _cluster(lockd_bin, tmp_path_factory.mktemp("cluster"), 3, list(extra))
        started.append(c)
        return c
    yield start
    rep = getattr(request.node, "rep_call", None)
    for c in started:
        if rep is not None and rep.failed:
            for n in c.nodes:
                print(f"---- {n.id} ({n.http_addr}) ----\n{n.tail()}")
        for n in c.nodes:
            if n.proc and n.proc.poll() is None:
                n.signal(signal.SIGCONT)
        c.stop()


@pytest.fixture
def silent_addr() -> Iterator[str]:
    """host:port of a loopback listener that completes no connection, as
    a dead host or a stopped container does (their SYNs go unanswered):
    it listens with a backlog of 0 and one connection it never accepts
    fills its accept queue, and Linux drops the SYNs of a listener whose
    accept queue is full. (A closed port answers RST at once, and a
    SIGSTOPped process's port still completes the handshake.)"""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    addr = srv.getsockname()
    filler = socket.create_connection(addr, timeout=5)
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.settimeout(0.3)
    try:
        probe.connect(addr)
        pytest.fail("a full listener completed a connection: this kernel answers SYNs it cannot queue")
    except TimeoutError:
        pass
    finally:
        probe.close()
    yield f"{addr[0]}:{addr[1]}"
    filler.close()
    srv.close()


#: What a fake node answers a request: an HTTP status and a JSON body
#: (and headers to add), or None to close the connection without an
#: answer (a node that took the request and died).
Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]] | None


@contextlib.contextmanager
def fake_node(route: Callable[[str, str], Reply]) -> Iterator[str]:
    """An HTTP server on a loopback port standing in for a lockd node, for
    answers a real one gives only in an outage: route(method, path with
    its query) says what each request gets (it may block: each request
    has a thread). Yields its host:port."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def serve(self) -> None:
            n = int(self.headers.get("Content-Length", 0) or 0)
            if n:
                self.rfile.read(n)
            reply = route(self.command, self.path)
            if reply is None:
                self.close_connection = True
                return
            status, body = reply[0], reply[1]
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in (reply[2] if len(reply) > 2 else {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = serve

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(autouse=True)
def _node_logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for name in ("dev",):
            if name in request.fixturenames:
                c = request.getfixturevalue(name)
                for n in c.nodes:
                    print(f"---- {n.id} ({n.http_addr}) ----\n{n.tail()}")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # type: ignore[misc]
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, "rep_" + rep.when, rep)


# A fresh venv for test_packaging, made while the other tests run (making
# one installs pip into it, which takes a while on a busy machine).
_venv: dict[str, Any] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    import importlib.util
    if importlib.util.find_spec("ensurepip") is None:
        return
    if any(item.nodeid.startswith("tests/test_packaging.py") or "test_packaging.py" in item.nodeid
           for item in session.items):
        d = tempfile.mkdtemp(prefix="lockd-py-venv-")
        _venv["dir"] = d
        _venv["proc"] = subprocess.Popen([sys.executable, "-m", "venv", os.path.join(d, "venv")],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def pytest_sessionfinish(session: pytest.Session) -> None:
    proc = _venv.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    if "dir" in _venv:
        shutil.rmtree(_venv["dir"], ignore_errors=True)


@pytest.fixture
def fresh_venv() -> Path:
    """The path of a venv made with `python3 -m venv` for this test session."""
    proc = _venv.get("proc")
    if proc is None:
        pytest.skip("no ensurepip for this python: apt-get install -y python3-venv")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    return Path(_venv["dir"]) / "venv"
