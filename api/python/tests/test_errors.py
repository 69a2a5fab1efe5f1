"""The client's table of error codes (lockd.errors) against the server's
own list (Go's api/wire.ErrorCodes, printed by ``go run
./api/wire/errorcodes``): a code the server answers with that this client
does not know, or maps to an exception of another status or retry class,
fails here."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from conftest import REPO, go_command

import lockd
from lockd import errors


@pytest.fixture(scope="module")
def server_codes() -> list[dict[str, Any]]:
    r = subprocess.run([go_command(), "run", "./api/wire/errorcodes"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    codes: list[dict[str, Any]] = json.loads(r.stdout)
    assert len(codes) > 10, codes
    return codes


def test_every_server_code_has_its_exception(server_codes: list[dict[str, Any]]) -> None:
    for c in server_codes:
        code, status = c["code"], c["status"]
        cls = errors._BY_CODE.get(code)
        assert cls is not None, f"{status} {code}: the client has no exception for it"
        assert cls.default_code == code, f"{code} maps to {cls.__name__}, the class of {cls.default_code}"
        assert issubclass(cls, lockd.NotFound) == (status == 404), f"{status} {code}: {cls.__name__}"
        assert issubclass(cls, lockd.ClusterUnavailable) == (status == 503), f"{status} {code}: {cls.__name__}"
        assert cls.retry == c["retry"], f"{code}: retry {cls.retry}, the server's list says {c['retry']}"
        err = errors.error_for(code, "m", http_status=status)
        assert type(err) is cls and err.code == code and err.http_status == status


def test_the_client_knows_no_code_the_server_does_not_send(server_codes: list[dict[str, Any]]) -> None:
    extra = set(errors._BY_CODE) - {c["code"] for c in server_codes}
    assert not extra, f"codes the server's list does not have: {sorted(extra)}"


def test_exceptions_are_exported() -> None:
    for cls in errors._BY_CODE.values():
        assert getattr(lockd, cls.__name__) is cls and cls.__name__ in lockd.__all__, cls
