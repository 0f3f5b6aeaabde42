"""The memory browser filters by kernel language (NKI / Triton), like its other filters: a query parameter kept
in the pager and export links, the same filter in the API; each row says the language it was learned in."""

from __future__ import annotations

import re

from memory.models import MemoryEntry


def _titles(html: str) -> list[str]:
    return re.findall(r'<a href="/memory/\d+/">([^<]+)</a>', html)


def test_the_language_filter_shows_only_that_languages_lessons(client, engineer, make_entry):
    client.force_login(engineer)
    make_entry(title="tile the loads", language="nki")
    make_entry(title="raise num_warps", language="triton")
    everything = client.get("/memory/").content.decode()
    assert set(_titles(everything)) == {"tile the loads", "raise num_warps"}
    assert '<option value="triton">Triton</option>' in everything
    triton = client.get("/memory/", {"language": "triton"}).content.decode()
    assert _titles(triton) == ["raise num_warps"]
    assert '<option value="triton" selected>Triton</option>' in triton
    assert 'href="/memory/export/?language=triton"' in triton  # the export takes the same filter
    assert _titles(client.get("/memory/", {"language": "nki"}).content.decode()) == ["tile the loads"]


def test_the_export_and_the_api_filter_by_language_too(client, engineer, make_entry):
    client.force_login(engineer)
    make_entry(title="tile the loads", language="nki")
    make_entry(title="raise num_warps", language="triton")
    exported = client.get("/memory/export/", {"language": "triton"}).json()
    assert [e["title"].strip("*") for e in exported] == ["raise num_warps"]  # AccelOpt bolds titles
    listed = client.get("/api/memory", {"language": "nki"}).json()
    assert [(e["title"], e["language"]) for e in listed] == [("tile the loads", "nki")]
    response = client.get("/api/memory", {"language": "cuda"})
    assert response.status_code == 400 and "unknown language 'cuda'" in response.json()["detail"]
    assert MemoryEntry.objects.count() == 2
