"""A memory that stays clean: a repeated lesson strengthens its entry, near-duplicates are merged or proposed,
curators see merges and undo them, and the Planner's selection ranks by relevance and evidence."""

from __future__ import annotations

from django.urls import reverse

from engine.memory import lessons
from memory import learning, services
from memory.models import ChangeKind, EntryStatus, MemoryEntry, MergeProposal, ProposalStatus

SLOWER = ("Split tiles in two: slower on silu",
          "Splitting each tile doubles the instructions.\n\nApplied to silu, this rewrite made the kernel {x}x "
          "slower (simulated); avoid it for kernels of this shape. (rewrite: `split_tiles`, found by the offline "
          "rewrite search)\n\n```diff\n-    tile = nl.load(x[{n}])\n+    tile = nl.load(x[{n} // 2])\n```")


def learn(problem, n: int, *, x: float = 1.3, title: str = SLOWER[0], summary: str = SLOWER[1], polarity="negative",
          run: int = 7, **extra):
    return learning.learn(
        title=title, summary=summary.format(x=x, n=n), slow_kernel=f"nl.load(a{n})  # slow", fast_kernel=f"nl.load(b{n})",
        speedup=x, polarity=polarity, problem=problem, source_run_id=run, candidate_key=f"1.0.{n}.0",
        iteration=1, source_key=f"{run}:1.0.{n}.0", source_label=f"run {run}", **extra)


def test_the_same_lesson_learned_twice_is_one_entry_with_evidence_two(problem):
    first = learn(problem, 1, x=1.25)
    second = learn(problem, 2, x=1.6)  # another pair, other numbers and diff: the same lesson
    assert (first.action, second.action) == ("created", "strengthened")
    assert MemoryEntry.objects.count() == 1
    entry = MemoryEntry.objects.get()
    assert entry.evidence_count == 2 and second.entry == entry
    summary = learning.evidence_summary(entry)
    assert (summary.count, summary.speedup_min, summary.speedup_max, summary.problems) == (2, 1.25, 1.6, ["silu"])
    assert [(p.source_run_id, p.candidate_key) for p in summary.pairs] == [(7, "1.0.1.0"), (7, "1.0.2.0")]
    assert list(entry.versions.values_list("change", flat=True)) == [ChangeKind.CREATED, ChangeKind.STRENGTHENED]


def test_filing_the_same_source_pair_again_changes_nothing(problem):
    learn(problem, 1)
    learn(problem, 2)
    assert learn(problem, 2).action == "repeat"
    assert MemoryEntry.objects.get().evidence_count == 2


def test_the_entry_page_shows_the_evidence_and_links_to_every_source_pair(client, engineer, problem):
    learn(problem, 1, x=1.25)
    entry = learn(problem, 2, x=1.6).entry
    client.force_login(engineer)
    page = client.get(reverse("memory:entry", args=[entry.pk])).content.decode()
    assert "Learned <strong>2</strong> times" in page and "1.25×–1.60×" in page and "on silu" in page
    assert 'href="/runs/7/candidates/1.0.1.0/"' in page and 'href="/runs/7/candidates/1.0.2.0/"' in page


def test_a_lesson_of_the_other_polarity_is_kept_apart(problem):
    learn(problem, 1)
    other = learn(problem, 2, polarity="positive", title="Split tiles in two")
    assert other.action == "created" and MemoryEntry.objects.count() == 2


def test_a_near_duplicate_is_merged_and_a_curator_can_see_and_undo_it(client, curator, problem):
    keep = learn(problem, 1).entry
    near = learn(problem, 2, title="Split the tiles in two: slower on silu")
    assert near.action == "merged" and near.entry == keep
    merged = MemoryEntry.objects.exclude(pk=keep.pk).get()
    keep.refresh_from_db()
    assert (merged.status, merged.merged_into, keep.evidence_count) == (EntryStatus.MERGED, keep, 2)
    assert services.select_entries(problem=problem, limit=10) == [keep]  # the Planner sees one entry

    client.force_login(curator)
    page = client.get(reverse("memory:entry", args=[keep.pk])).content.decode()
    assert "Merged into this entry" in page and f"#{merged.pk} Split the tiles in two" in page
    assert client.get(reverse("memory:entries")).content.decode().count(f'data-entry="{merged.pk}"') == 0
    page = client.get(reverse("memory:entry", args=[merged.pk])).content.decode()
    assert "Merged into" in page and "Undo the merge" in page

    response = client.post(reverse("memory:unmerge", args=[merged.pk]))
    assert response.status_code == 302
    merged.refresh_from_db()
    keep.refresh_from_db()
    assert (merged.status, merged.merged_into, merged.evidence_count, keep.evidence_count) == (
        EntryStatus.ACTIVE, None, 1, 1)
    assert list(merged.versions.values_list("change", flat=True)) == [
        ChangeKind.CREATED, ChangeKind.MERGED, ChangeKind.UNMERGED]
    assert ChangeKind.ABSORBED in keep.versions.values_list("change", flat=True)
    assert set(services.select_entries(problem=problem, limit=10)) == {keep, merged}
    # Undone by a curator: the pair is not proposed again.
    assert MergeProposal.objects.get(entry=keep, duplicate=merged).status == ProposalStatus.REJECTED


def test_an_engineer_cannot_undo_a_merge(client, engineer, problem):
    learn(problem, 1)
    learn(problem, 2, title="Split the tiles in two: slower on silu")
    merged = MemoryEntry.objects.get(status=EntryStatus.MERGED)
    client.force_login(engineer)
    assert client.post(reverse("memory:unmerge", args=[merged.pk])).status_code == 403
    merged.refresh_from_db()
    assert merged.status == EntryStatus.MERGED


def test_a_merged_pinned_entry_gets_its_pin_back_when_the_merge_is_undone(curator, make_entry):
    keep, duplicate = make_entry(title="Hoist loads"), services.pin_entry(make_entry(title="Hoist the loads"))
    learning.merge_entries(keep, duplicate, curator)
    learning.unmerge_entry(duplicate, curator)
    duplicate.refresh_from_db()
    assert duplicate.status == EntryStatus.PINNED


def test_a_close_lesson_is_proposed_to_curators_who_merge_or_keep_apart(client, curator, problem):
    keep = learn(problem, 1).entry
    close = learn(problem, 2, title="Halve the tile width", summary="Narrower tiles mean more instructions and "
                  "more DMAs.\n\nApplied to silu, this rewrite made the kernel {x}x slower (simulated); avoid it "
                  "for kernels of this shape. (rewrite: `split_tiles`, found by the offline rewrite search)")
    score = lessons.similarity(learning._text(keep), learning._text(close.entry))
    assert lessons.PROPOSE_SIMILARITY <= score < lessons.AUTO_MERGE_SIMILARITY
    assert close.action == "created" and close.proposal is not None
    client.force_login(curator)
    listing = client.get(reverse("memory:entries")).content.decode()
    assert "Merges proposed to curators" in listing and f"#{close.entry.pk} Halve the tile width" in listing
    client.post(reverse("memory:proposal", args=[close.proposal.pk, "accept"]))
    close.entry.refresh_from_db()
    assert close.entry.status == EntryStatus.MERGED and close.entry.merged_into == keep
    assert "Merges proposed to curators" not in client.get(reverse("memory:entries")).content.decode()


def test_a_rejected_proposal_keeps_both_entries(client, curator, make_entry):
    keep, other = make_entry(), make_entry()
    proposal = MergeProposal.objects.create(entry=keep, duplicate=other, similarity=0.8)
    client.force_login(curator)
    client.post(reverse("memory:proposal", args=[proposal.pk, "reject"]))
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.REJECTED
    assert set(services.select_entries(limit=5)) == {keep, other}


# --- retrieval: relevance to the kernel at hand and evidence, within the limit --------------------------


def test_retrieval_ranks_by_operations_bottleneck_and_evidence_within_the_limit(make_entry, other_problem):
    def entry(title, operations=(), bottleneck="", evidence=1):
        e = make_entry(title=title, problem=other_problem)
        MemoryEntry.objects.filter(pk=e.pk).update(operations=list(operations), bottleneck=bottleneck,
                                                   evidence_count=evidence)
        return e

    matmul = entry("matmul lesson", ["nisa.nc_matmul", "nl.load", "nl.store"], "tensor")
    activation = entry("activation lesson", ["nl.load", "nl.store", "nl.silu"], "memory")
    well_supported = entry("often seen elsewhere", ["nl.exp"], "vector", evidence=8)
    unrelated = entry("unrelated and new", ["nl.exp"], "vector")
    kernel_ops = lessons.kernel_operations("t = nl.load(x[i])\nnl.store(o[i], value=nl.silu(t))")
    chosen = services.select_entries(limit=2, operations=kernel_ops, bottleneck="memory")
    assert chosen == [activation, matmul]
    chosen = services.select_entries(limit=3, operations=kernel_ops, bottleneck="memory")
    assert chosen == [activation, matmul, well_supported]
    assert unrelated not in chosen


def test_the_bottleneck_is_read_from_the_profile():
    assert lessons.profile_bottleneck({"scalar_engine_active_time_percent": 0.9}) == "scalar"
    assert lessons.profile_bottleneck({"scalar_engine_active_time_percent": 0.1,
                                       "vector_engine_active_time_percent": 0.2}) == "memory"
    assert lessons.profile_bottleneck({"spill_reload_bytes": 64.0}) == "spill"
    assert lessons.profile_bottleneck({}) == ""


def test_lesson_text_ignores_numbers_code_and_the_problem_name():
    a = lessons.lesson_text("Split: slower on silu", "made it 1.25x slower\n```diff\n-a\n+b\n```", problem_slug="silu")
    b = lessons.lesson_text("Split: slower on rope", "made it 1.6x slower\n```diff\n-c\n+d\n```", problem_slug="rope")
    assert a == b
