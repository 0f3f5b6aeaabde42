"""Issue 36: one upload cap (ACCELOPT_MAX_UPLOAD_BYTES) on every path, checked before the body is read; and the
server's memory stays flat while a 50 MB upload is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db

MB = 1024 * 1024


def _big_file(size: int) -> SimpleUploadedFile:
    return SimpleUploadedFile("big.py", b"x = 1\n" * (size // 6))


def test_the_api_refuses_an_upload_over_the_cap_naming_it(client, engineer, make_token, settings):
    settings.ACCELOPT_MAX_UPLOAD_BYTES = 1 * MB
    response = client.post("/api/kernels/import", {"files": [_big_file(3 * MB)]},
                           headers={"Authorization": f"Bearer {make_token(engineer)}"})
    assert response.status_code == 413
    assert response.json() == {"detail": "the request body is 3 MiB; the limit is 1 MiB (ACCELOPT_MAX_UPLOAD_BYTES)"}


def test_the_pages_refuse_the_same_upload_with_the_same_cap(client, engineer, settings):
    settings.ACCELOPT_MAX_UPLOAD_BYTES = 1 * MB
    client.force_login(engineer)
    for path, field in (("/problems/import-flashinfer/", "files"), ("/kernels/upload/", "kernel_file")):
        response = client.post(path, {field: _big_file(3 * MB), "platform": "h100"})
        assert response.status_code == 413, path
        assert "the limit is 1 MiB (ACCELOPT_MAX_UPLOAD_BYTES)" in response.content.decode()


def test_a_json_body_over_the_cap_is_refused_too(client, engineer, make_token, settings):
    settings.ACCELOPT_MAX_UPLOAD_BYTES = 1 * MB
    body = '{"platform": "h100", "definitions": [{"name": "' + "a" * (2 * MB) + '"}]}'
    response = client.post("/api/flashinfer/import", body, content_type="application/json",
                           headers={"Authorization": f"Bearer {make_token(engineer)}"})
    assert response.status_code == 413
    assert "(ACCELOPT_MAX_UPLOAD_BYTES)" in response.json()["detail"]


def _memory_mb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no {key} for {pid}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_the_server_memory_stays_flat_while_a_50_mb_upload_is_refused(tmp_path, transactional_db):
    from tests.browser.conftest import seeded_server

    with seeded_server(tmp_path) as base:
        port = base.rsplit(":", 1)[1]
        pid = int(subprocess.run(["pgrep", "-f", f"daphne -b 127.0.0.1 -p {port} "], capture_output=True,
                                 text=True, check=True).stdout.split()[0])
        env = {**os.environ, "ACCELOPT_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "accelopt_site.settings",
               "DATABASE_URL": f"sqlite:///{tmp_path / 'browser.sqlite3'}"}
        token = subprocess.run(
            [sys.executable, "-c", "import django; django.setup(); from django.contrib.auth import get_user_model; "
             "from accounts.services import create_token; "
             "print(create_token(get_user_model().objects.get(username='erin'), 'upload').secret)"],
            env=env, capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2],
        ).stdout.strip()
        urllib.request.urlopen(f"{base}/problems/").read()  # the pages and the API loaded, as in use
        before = _memory_mb(pid, "VmRSS")
        boundary = uuid.uuid4().hex
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="big.py"\r\n\r\n'.encode()
                + b"x = 1\n" * (50 * MB // 6) + f"\r\n--{boundary}--\r\n".encode())
        request = urllib.request.Request(f"{base}/api/kernels/import", data=body, method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": f"multipart/form-data; boundary={boundary}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=120)
        peak = _memory_mb(pid, "VmHWM")  # the most the server ever held, the upload included
        assert peak - before < 20, f"the server went from {before} MB to a peak of {peak} MB for a 50 MB upload"
        assert refused.value.code == 413
        assert "the limit is 10 MiB" in refused.value.read().decode()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
def test_a_body_sent_without_its_length_is_stopped_at_the_cap_on_every_path(tmp_path, transactional_db):
    """Chunked, a body says no size before it arrives: the server counts it as it streams and answers 413 past the
    cap without keeping it, on the pages, the API and /mcp (which reads its bodies whole) alike."""
    import http.client

    from tests.browser.conftest import seeded_server

    with seeded_server(tmp_path) as base:
        port = int(base.rsplit(":", 1)[1])
        pid = int(subprocess.run(["pgrep", "-f", f"daphne -b 127.0.0.1 -p {port} "], capture_output=True,
                                 text=True, check=True).stdout.split()[0])
        urllib.request.urlopen(f"{base}/problems/").read()
        before = _memory_mb(pid, "VmRSS")
        for path in ("/mcp", "/api/kernels/import", "/kernels/upload/"):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            chunks = (b"x" * MB for _ in range(50))
            connection.request("POST", path, body=chunks, encode_chunked=True,
                               headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
            answer = connection.getresponse()
            assert answer.status == 413, (path, answer.status, answer.read()[:200])
            assert "the limit is 10 MiB" in answer.read().decode(), path
            connection.close()
        peak = _memory_mb(pid, "VmHWM")
        assert peak - before < 20, f"the server went from {before} MB to a peak of {peak} MB for 50 MB bodies"
