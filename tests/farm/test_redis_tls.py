"""The farm over ``rediss://``: a real redis-server speaking only TLS (with client certificates
required), a real worker, a real job. Certificates come from a CA made for the test (trustme)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import trustme

from producer import Client
from tests.farm.conftest import BUCKET, CREDENTIALS, PREFIX, WorkerProcess, farm_env, free_port, wait_for
from ttsfarm.core.errors import BrokerUnavailable, SettingsError
from ttsfarm.core.settings import Settings


@dataclass(frozen=True)
class TlsRedis:
    url: str
    ca_file: Path
    cert_file: Path
    key_file: Path

    def settings(self, **changes: str | None) -> Settings:
        files = {
            "redis_tls_ca_file": str(self.ca_file),
            "redis_tls_cert_file": str(self.cert_file),
            "redis_tls_key_file": str(self.key_file),
        }
        return Settings(broker_url=self.url, **{**files, **changes})


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    folder = tmp_path_factory.mktemp("tls-redis")
    ca = trustme.CA()
    ca_file, server_file, client_cert, client_key = (
        folder / name for name in ("ca.pem", "server.pem", "client.pem", "client.key")
    )
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server_file))
    client = ca.issue_cert("ttsfarm-client@example.org")
    client.cert_chain_pems[0].write_to_path(str(client_cert))
    client.private_key_pem.write_to_path(str(client_key))
    port = free_port()
    log = folder / "redis.log"
    process = subprocess.Popen(
        [
            *("redis-server", "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(port)),
            *("--tls-cert-file", str(server_file), "--tls-key-file", str(server_file)),
            *("--tls-ca-cert-file", str(ca_file), "--tls-auth-clients", "yes"),
            *("--save", "", "--appendonly", "no", "--logfile", str(log)),
        ]
    )
    time.sleep(0.3)
    if process.poll() is not None:
        output = log.read_text() if log.exists() else ""
        if "TLS" in output and ("not supported" in output or "Bad directive" in output):
            pytest.skip("this redis-server was built without TLS")
        pytest.fail(f"redis-server with TLS did not start:\n{output}")
    server = TlsRedis(f"rediss://127.0.0.1:{port}/0", ca_file, client_cert, client_key)
    wait_for(lambda: _answers(server), 10, "redis-server to answer over TLS")
    yield server
    process.terminate()
    process.wait(10)


def _answers(server: TlsRedis) -> bool:
    try:
        Client(server.settings()).ping()
        return True
    except BrokerUnavailable:
        return False


def test_a_job_runs_through_a_worker_over_tls(
    tls_redis: TlsRedis, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "TTSFARM_REDIS_TLS_CA_FILE": str(tls_redis.ca_file),
        "TTSFARM_REDIS_TLS_CERT_FILE": str(tls_redis.cert_file),
        "TTSFARM_REDIS_TLS_KEY_FILE": str(tls_redis.key_file),
    }
    worker = WorkerProcess(farm_env(tls_redis.url, s3_endpoint, **files), tmp_path / "worker.log", "tls")
    try:
        for key, value in CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        settings = tls_redis.settings(storage_url=f"s3://{BUCKET}/{PREFIX}", s3_endpoint_url=s3_endpoint)
        with Client(settings) as client:
            assert client.workers(timeout=5), "the worker answers a ping over TLS"
            job_id = client.submit("Spoken over an encrypted broker.")
            result = client.wait(job_id, timeout=120)
            client.fetch(job_id, tmp_path / "tls.wav")
        assert result.duration > 0.5
        assert (tmp_path / "tls.wav").stat().st_size == result.size
    finally:
        worker.stop()
    assert "insecure" not in worker.log_path.read_text()  # kombu's warning for rediss:// without options


def test_the_servers_certificate_is_checked(tls_redis: TlsRedis) -> None:
    """Without the CA the client trusts only the system's store, where the test CA is not."""
    client = Client(tls_redis.settings(redis_tls_ca_file=None))
    with pytest.raises(BrokerUnavailable, match="certificate verify failed"):
        client.ping()


def test_a_client_without_its_certificate_is_refused(tls_redis: TlsRedis) -> None:
    settings = tls_redis.settings(redis_tls_cert_file=None, redis_tls_key_file=None)
    with pytest.raises(BrokerUnavailable):
        Client(settings).ping()


def test_plain_redis_is_not_spoken_to_a_tls_port(tls_redis: TlsRedis) -> None:
    plain = redis.Redis.from_url(tls_redis.url.replace("rediss://", "redis://"), socket_timeout=3)
    with pytest.raises(redis.exceptions.ConnectionError):
        plain.ping()


def test_tls_files_that_do_not_exist_are_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"TTSFARM_REDIS_TLS_CA_FILE=.*no such file"):
        Settings(redis_tls_ca_file=str(tmp_path / "missing.pem")).redis_tls()
    with pytest.raises(SettingsError, match="REDIS_TLS_KEY_FILE is set without"):
        Settings(redis_tls_key_file=str(tmp_path / "key.pem")).redis_tls()
