"""A client's keepalives, gathered into batches.

A process that keeps thousands of sessions would send thousands of
keepalives a second, one HTTP request each, and a leader's CPU goes to
those requests rather than to the deadlines they move. So a client's
sessions hand their keepalives to its :class:`Keeper`, which holds each
one for a moment (a tenth of the session's pause before it, at most
:data:`MAX_LINGER`) and sends those gathered in one ``POST
/v1/sessions/keepalive``. Sessions answered together wake together a
keepalive interval later, so they stay in one batch. A batch of one goes
to the session's own keepalive path, and after a node answered that it
does not know the batched call (an older build: ``404 not_found``) each
session's own call goes for :data:`OLDER_NODE_FOR`, then batches are tried
again. The Go client's keeper (api/client/keeper.go) does the same.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ._transport import Transport, quote
from .errors import InternalError, NotFound, error_for

#: How long a keepalive waits for others to join it, at most (seconds).
MAX_LINGER = 0.5
#: The most sessions one batched keepalive names (the server's bound).
MAX_BATCH = 1000
#: How long the keeper sends single keepalives after a node answered that
#: it does not serve the batched call (an older build, during a rolling
#: upgrade); then it tries batches again (seconds).
OLDER_NODE_FOR = 60.0


class _Request:
    """One session's keepalive waiting in the keeper."""

    def __init__(self, session_id: str, attempt: float, deadline: float) -> None:
        self.session_id = session_id
        self.attempt = attempt
        self.deadline = deadline
        self.done = threading.Event()
        self.answer: dict[str, Any] = {}
        #: A LockdError, or what went unexpectedly wrong (a bug): raised on
        #: the session's thread, which reports it.
        self.error: BaseException | None = None

    def settle(self, answer: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        self.answer, self.error = answer or {}, error
        self.done.set()


class Keeper:
    """Sends the keepalives of one client's sessions, batched."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._mu = threading.Lock()
        self._queue: list[_Request] = []
        self._timer: threading.Timer | None = None
        self._flush_at = 0.0
        #: Until then (time.monotonic()), single keepalives: a node did not
        #: serve the batched call.
        self._single_until = 0.0

    def keep_alive(self, session_id: str, *, pause: float, attempt: float, deadline: float) -> dict[str, Any]:
        """Keeps session_id alive with others due about now and returns
        its answer (``ttl``, ``revoked``), or raises the error its own
        keepalive would have: :class:`SessionNotFound`, ``Forbidden``, or
        the batch's failure (no leader, or an unexpected exception). ``pause`` is how long the session
        waited since its last try, ``deadline`` (time.monotonic()) when it
        stops trying: the call ends by then."""
        req = _Request(session_id, attempt, deadline)
        self._add(req, min(pause / 10, MAX_LINGER))
        req.done.wait()  # set by the send, which ends by the earliest deadline of its batch
        if req.error is not None:
            raise req.error
        return req.answer

    def _add(self, req: _Request, linger: float) -> None:
        with self._mu:
            self._queue.append(req)
            if len(self._queue) >= MAX_BATCH:
                threading.Thread(target=self._flush, name="lockd-keepalives", daemon=True).start()
                return
            at = time.monotonic() + linger
            if self._timer is not None and at >= self._flush_at:
                return
            if self._timer is not None:
                self._timer.cancel()  # if it fired already, its flush finds what it finds
            self._timer, self._flush_at = threading.Timer(linger, self._flush), at
            self._timer.daemon = True
            self._timer.start()

    def _flush(self) -> None:
        with self._mu:
            queue, single = self._queue, time.monotonic() < self._single_until
            self._queue, self._timer = [], None
        for i in range(0, len(queue), MAX_BATCH):
            batch = queue[i:i + MAX_BATCH]
            if i + MAX_BATCH >= len(queue):
                self._send(batch, single)  # the last one on this thread
            else:
                threading.Thread(target=self._send, args=(batch, single), name="lockd-keepalives",
                                 daemon=True).start()

    def _send(self, batch: list[_Request], single: bool) -> None:
        """Keeps batch's sessions alive and settles each of them, even when
        something unexpected fails: a session's thread waits for it, and
        reports what went wrong as the session's end."""
        try:
            if len(batch) == 1 or single:
                self._send_each(batch)
            else:
                self._send_batch(batch)
        except BaseException as e:
            for r in batch:
                if not r.done.is_set():
                    r.settle(error=e)

    def _send_batch(self, batch: list[_Request]) -> None:
        deadline = min(r.deadline for r in batch)
        attempt = min(r.attempt for r in batch)
        try:
            ans = self._transport.do("POST", "/v1/sessions/keepalive", attempt=attempt, deadline=deadline,
                                     body={"sessions": [r.session_id for r in batch]})
        except NotFound as e:
            if e.code != "not_found":
                raise
            with self._mu:
                self._single_until = time.monotonic() + OLDER_NODE_FOR  # a node older than this client
            self._send_each(batch)
            return
        kept = (ans.data or {}).get("sessions") or []
        if len(kept) != len(batch):
            raise InternalError(f"batched keepalive: {len(kept)} answers for {len(batch)} sessions")
        for r, k in zip(batch, kept):
            e = k.get("error")
            if e:
                r.settle(error=error_for(str(e.get("code", "")), str(e.get("message", "")),
                                         http_status=int(k.get("status") or 0)))
            else:
                r.settle(answer=k)

    def _send_each(self, batch: list[_Request]) -> None:
        threads = [threading.Thread(target=self._send_one, args=(r,), name="lockd-keepalive", daemon=True)
                   for r in batch[1:]]
        for t in threads:
            t.start()
        self._send_one(batch[0])
        for t in threads:
            t.join()

    def _send_one(self, r: _Request) -> None:
        try:
            ans = self._transport.do("POST", f"/v1/sessions/{quote(r.session_id)}/keepalive",
                                     attempt=r.attempt, deadline=r.deadline)
        except BaseException as e:
            r.settle(error=e)
            return
        r.settle(answer=ans.data or {})
