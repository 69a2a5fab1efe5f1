"""TLS with client certificates and ACL tokens, against a real dev node
started with --tls-* --tls-client-auth --acl (certificates made by lockd's
own `lockd tls` commands)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lockd
from conftest import Cluster, eventually


@pytest.fixture
def secure(lockd_bin: str, start_dev: Callable[..., Cluster], tmp_path: Path) -> tuple[Cluster, dict[str, str]]:
    d = str(tmp_path)
    for args in (["tls", "ca", "--out", d], ["tls", "cert", "--ca", d, "--name", "dev", "--out", d],
                 ["tls", "cert", "--ca", d, "--client", "--name", "ops", "--out", d]):
        subprocess.run([lockd_bin, *args], check=True, capture_output=True)
    f = {"ca": f"{d}/ca.pem", "cert": f"{d}/ops.pem", "key": f"{d}/ops-key.pem"}
    ctx = lockd.tls_context(f["ca"], f["cert"], f["key"])
    node = start_dev("--acl", "--tls-ca", f["ca"], "--tls-cert", f"{d}/dev.pem", "--tls-key", f"{d}/dev-key.pem",
                     "--tls-client-auth", ssl_context=ctx)
    return node, f


def test_tls_and_acl(secure: tuple[Cluster, dict[str, str]]) -> None:
    node, f = secure
    tls: dict[str, Any] = {"ca_cert": f["ca"], "client_cert": f["cert"], "client_key": f["key"]}
    anon = lockd.Client(node.addrs, token="", **tls)
    st = anon.status()  # status needs no token
    assert st.state == "leader" and not st.quorum_lost and st.log_store == "wal"
    assert st.reachable == ("dev",) and st.needed == 1
    assert anon.endpoints[0].startswith("https://")
    with pytest.raises(lockd.Unauthorized) as e401:
        anon.locks()
    assert e401.value.http_status == 401
    root = anon.bootstrap_acl()
    assert root.secret and root.rules == [lockd.Rule("", "admin")]
    with pytest.raises(lockd.Forbidden):
        anon.bootstrap_acl()  # once per cluster
    admin = lockd.Client(node.addrs, token=root.secret, **tls)
    job_token = admin.create_token("backup-jobs", [("jobs/", "write")])
    assert {t.name for t in admin.tokens()} == {"bootstrap", "backup-jobs"}
    assert all(t.secret == "" for t in admin.tokens())
    job = lockd.Client(node.addrs, token=job_token.secret, **tls)
    s = job.session(ttl=3, name="job")
    g = s.lock("jobs/nightly", wait=5)
    with pytest.raises(lockd.Forbidden) as e403:
        s.lock("db/orders", wait=0)
    assert e403.value.http_status == 403 and "db/orders" in e403.value.message
    with pytest.raises(lockd.Forbidden):
        job.revoke("jobs/nightly")  # revoke is an admin's
    with pytest.raises(lockd.Forbidden):
        job.tokens()
    assert [r.token for r in admin.revoke("jobs/nightly")] == [g.token]
    assert g.lost.wait(10) and isinstance(g.lost_reason, lockd.Revoked)
    admin.delete_token(job_token.id)
    with pytest.raises(lockd.Unauthorized):
        job.locks()
    # The deleted token's session cannot be kept alive: reported lost.
    assert s.lost.wait(10) and s.state == "lost"
    assert isinstance(s.error, lockd.SessionLost) and isinstance(s.error.__cause__, lockd.Unauthorized)
    s.close()
    with pytest.raises(lockd.TokenNotFound):
        admin.delete_token(job_token.id)


def test_tls_refusals_are_not_retried(secure: tuple[Cluster, dict[str, str]]) -> None:
    node, f = secure
    no_cert = lockd.Client(node.addrs, ca_cert=f["ca"], token="x")
    with pytest.raises(lockd.TLSError):
        no_cert.locks()
    no_ca = lockd.Client(node.addrs, client_cert=f["cert"], client_key=f["key"], token="x")
    with pytest.raises(lockd.TLSError) as verify:
        no_ca.locks()
    assert "certificate" in str(verify.value).lower()
    plain = lockd.Client(["http://" + node.addrs[0]])
    with pytest.raises(lockd.LockdError) as e:
        plain.locks()
    assert e.value.http_status == 400 and not isinstance(e.value, lockd.ClusterUnavailable)


def test_environment(secure: tuple[Cluster, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    node, f = secure
    root = lockd.Client(node.addrs, ca_cert=f["ca"], client_cert=f["cert"], client_key=f["key"]).bootstrap_acl()
    monkeypatch.setenv("LOCKD_ADDR", node.addrs[0])
    monkeypatch.setenv("LOCKD_TOKEN", root.secret)
    monkeypatch.setenv("LOCKD_CACERT", f["ca"])
    monkeypatch.setenv("LOCKD_CLIENT_CERT", f["cert"])
    monkeypatch.setenv("LOCKD_CLIENT_KEY", f["key"])
    c = lockd.Client()
    with c.session(ttl=5) as s, s.lock("env/x") as g:
        assert c.check("env/x", g.token)
    eventually(lambda: c.locks("env/") == [], "released")
