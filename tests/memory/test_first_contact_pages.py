"""The memory pages' rough edges (issue 20): the family filter lists each family once, a negative entry shows
its slowdown as a slowdown, and summaries render their Markdown (code fences as code), escaped."""

from __future__ import annotations

from memory.markdown import render_markdown
from memory.services import entry_families


def test_the_family_filter_lists_each_family_once(make_entry):
    for _ in range(3):
        make_entry(family="elementwise")
    make_entry(family="matmul")
    assert entry_families() == ["elementwise", "matmul"]


def test_a_negative_entry_shows_its_slowdown(client, make_entry, engineer):
    client.force_login(engineer)
    entry = make_entry(polarity="negative", speedup=1.0 / 0.58)
    html = client.get(f"/memory/{entry.pk}/").content.decode()
    headline = html[html.index('data-testid="entry-effect"'):]
    assert headline.split("·")[0].endswith("0.58× (slower) ")
    assert "0.58× (slower)" in client.get("/memory/").content.decode()


def test_a_summary_renders_its_markdown_with_code_fences_as_code(client, make_entry, engineer):
    client.force_login(engineer)
    entry = make_entry(summary="**Fuse** the loops.\n\n```python\nfor i in range(4):\n    y = x * s\n```\n- one\n- two")
    html = client.get(f"/memory/{entry.pk}/").content.decode()
    assert "<strong>Fuse</strong>" in html and '<pre><code class="language-python">for i in range(4):' in html
    assert "<ul><li>one</li><li>two</li></ul>" in html


def test_markdown_is_escaped_before_it_is_rendered():
    assert render_markdown("<script>alert(1)</script> `<b>`") == (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt; <code>&lt;b&gt;</code></p>"
    )
