"""Each MCP tool and resource, called by the SDK's client over /mcp with an engineer's token: what an agent reads
back is what the REST API and the pages say about the same rows."""

from __future__ import annotations

from dataclasses import replace

from benchmark import services
from benchmark.models import Kernel
from engine.platforms.nki.perf import estimate
from memory import services as memory
from memory.models import EntryStatus
from optimizer.models import Run
from tests.mcp_server.conftest import drive, error_text, http_client, payload
from tests.perf.builders import streaming_kernel


def _with_breakdown(fake_pipeline):
    report = estimate(streaming_kernel(32, 1024))
    base = fake_pipeline(backend="simulator", platform="trn1")
    fake_pipeline.calls.clear()
    return replace(base, latency_ms=report.latency_ms, profile=report.profile, timeline=report.to_dict()["timeline"],
                   breakdown=report.breakdown.to_dict())


def test_problems_are_listed_and_described_with_shapes_reference_baseline_and_peak(engineer, make_token, fake_pipeline,
                                                                                  silu_mini):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            listed = payload(await client.call_tool("list_problems", {"suite": "nkibench", "case": "mini"}))
            described = payload(await client.call_tool("describe_problem", {"problem": "silu:mini"}))
            return listed, described

    listed, described = drive(scenario)
    assert len(listed["problems"]) == 14 and {p["address"] for p in listed["problems"]} >= {"silu:mini", "adamw:mini"}
    assert described["shapes"] == {"M": 256, "N": 512}
    assert described["reference_source"] == silu_mini.reference_source
    assert described["baselines"]["trn1"]["latency_ms"] == silu_mini.baseline_kernel.evaluations.get().latency_ms
    assert described["theoretical_peak_ms"]["trn1"] > 0
    assert "trn1" in described["platforms"]


def test_evaluate_returns_verdict_latency_peak_fraction_and_the_breakdown(engineer, make_token, fake_pipeline,
                                                                          silu_mini):
    fake_pipeline.next_results.append(_with_breakdown(fake_pipeline))
    token = make_token(engineer)
    source = silu_mini.baseline_kernel.source + "\n# mine\n"

    async def scenario():
        async with http_client(token) as client:
            evaluated = payload(await client.call_tool("evaluate_kernel", {"source": source, "problem": "silu:mini"}))
            explained = payload(await client.call_tool("explain_kernel", {"kernel_id": evaluated["kernel_id"]}))
            return evaluated, explained

    evaluated, explained = drive(scenario)
    kernel = Kernel.objects.get(pk=evaluated["kernel_id"])
    assert kernel.author == engineer and kernel.source == source
    assert evaluated["verdict"] == "correct" and evaluated["latency_ms"] > 0 and evaluated["peak_fraction"] > 0
    assert evaluated["bound"] == "dma"
    assert evaluated["breakdown"].startswith("Where the time goes") and "| DMA" in evaluated["breakdown"]
    assert explained["explanation"].startswith("bound by")  # the model's verdict, as the kernel page shows it
    assert explained["bound"] == "dma" and explained["problem"] == "silu:mini"


def test_a_failing_kernel_comes_back_with_its_error_and_line(engineer, make_token, inline_evaluations, silu_mini):
    # 256 rows in one tile: more than the 128 partitions SBUF has (the hardware rule agents break most often).
    source = silu_mini.baseline_kernel.source.replace("tile_rows = _even_tile(rows, nl.tile_size.pmax)",
                                                      "tile_rows = rows")
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            return payload(await client.call_tool("evaluate_kernel", {"source": source, "problem": "silu:mini"}))

    evaluated = drive(scenario)
    assert evaluated["verdict"] in ("compile_error", "runtime_error") and evaluated["correct"] is not True
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "tile = nl.load(" in text)
    assert evaluated["error"]["line"] == line, evaluated["error"]
    assert "128" in evaluated["error"]["message"] or "partition" in evaluated["error"]["message"]


def test_memory_search_ranks_lessons_for_a_problem_and_a_proposal_waits_for_a_curator(
        engineer, curator, make_token, fake_pipeline, silu_mini, client):
    lesson = memory.add_entry(title="One activation instead of sigmoid then multiply", summary="fuse",
                              slow_kernel="y = nl.multiply(t, nl.sigmoid(t))", fast_kernel="y = nl.silu(t)",
                              speedup=1.1, problem=silu_mini)
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            found = payload(await client.call_tool("search_memory", {"problem": "silu:mini"}))
            by_text = payload(await client.call_tool("search_memory", {"text": "sigmoid"}))
            proposed = payload(await client.call_tool("propose_lesson", {
                "title": "Larger column tiles", "slow_kernel": "tile_cols = 256", "fast_kernel": "tile_cols = 2048",
                "speedup": 1.4, "problem": "silu:mini", "summary": "fewer, larger DMAs"}))
            again = payload(await client.call_tool("search_memory", {"problem": "silu:mini"}))
            return found, by_text, proposed, again

    found, by_text, proposed, again = drive(scenario)
    assert [entry["id"] for entry in found["lessons"]] == [lesson.pk]
    assert found["lessons"][0]["slow_kernel"] == lesson.slow_kernel and found["lessons"][0]["fast_kernel"]
    assert [entry["id"] for entry in by_text["lessons"]] == [lesson.pk]
    assert proposed["status"] == "proposed" and "curators' review" in proposed["note"]
    assert [entry["id"] for entry in again["lessons"]] == [lesson.pk]  # no Planner, no agent sees it yet
    # A curator accepts it (the API's accept, the page's button): now it is in the memory.
    response = client.post(f"/api/memory/{proposed['id']}/accept",
                           headers={"Authorization": f"Bearer {make_token(curator)}"}, content_type="application/json")
    assert response.status_code == 200 and response.json()["status"] == EntryStatus.ACTIVE
    assert proposed["id"] in [entry.pk for entry in memory.select_entries(problem=silu_mini)]


def test_a_run_and_a_campaign_are_launched_and_followed(engineer, make_token, fake_pipeline, silu_mini):
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            run = payload(await client.call_tool("launch_run", {"problem": "silu:mini",
                                                                "search": {"iterations": 1}}))
            progress = payload(await client.call_tool("run_progress", {"run_id": run["run_id"]}))
            campaign = payload(await client.call_tool("launch_campaign", {"problems": ["silu:mini"],
                                                                          "name": "from an agent"}))
            followed = payload(await client.call_tool("campaign_progress", {"campaign_id": campaign["id"]}))
            return run, progress, campaign, followed

    run, progress, campaign, followed = drive(scenario)
    row = Run.objects.get(pk=run["run_id"])
    assert row.owner == engineer and row.problem == silu_mini and run["status"] == "queued"
    assert progress["events"][0]["kind"] == "run.queued" and progress["run_id"] == row.pk
    assert campaign["name"] == "from an agent" and followed["id"] == campaign["id"]
    assert [r["problem"] for r in followed["rows"]] == ["silu:mini"]


def test_the_leaderboard_names_the_best_kernel_and_its_speedup(engineer, make_token, fake_pipeline, silu_mini):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")  # 10 us: the fake pipeline's first
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=silu_mini.baseline_kernel.source + "\n# 2\n",
                                          problem=silu_mini)
    services.request_evaluation(kernel, "trn1")  # 20 us: slower, so the baseline stays best
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            return payload(await client.call_tool("leaderboard", {"platform": "trn1", "case": "mini",
                                                                  "problem": "silu:mini"}))

    board = drive(scenario)
    (row,) = board["rows"]
    assert row["problem"] == "silu:mini"
    assert row["simulated"]["kernel_id"] == silu_mini.baseline_kernel_id and row["simulated"]["speedup"] == 1.0
    assert row["measured"] is None


def test_migrating_a_legacy_kernel_gives_its_nki_0_6_version_evaluated_or_names_what_blocks_it(
        engineer, make_token, silu_mini):
    legacy = silu_mini.baseline_kernel
    masked, _, _ = services.upload_kernel(engineer, problem=silu_mini, evaluate=False, kernel_source=legacy.source.replace(
        "tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols])",
        "tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols], mask=(nl.arange(tile_rows)[:, None] < rows))"))
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            return (payload(await client.call_tool("migrate_legacy_kernel", {"kernel_id": legacy.pk})),
                    error_text(await client.call_tool("migrate_legacy_kernel", {"kernel_id": masked.pk})))

    migrated, refused = drive(scenario)
    assert migrated["migrated_from"] == legacy.pk and migrated["generation"] == "current"
    assert migrated["verdict"] == "correct" and "import nki.language as nl" in migrated["source"]
    assert Kernel.objects.get(pk=migrated["kernel_id"]).parent_id == legacy.pk
    assert any(change["guide"] == "New namespace, new APIs" for change in migrated["changes"])
    assert "cannot be migrated mechanically" in refused and "mask=" in refused


def test_resources_give_the_coverage_table_a_reference_and_a_kernel_source(engineer, make_token, fake_pipeline,
                                                                          silu_mini):
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            listed = await client.list_resources()
            templates = await client.list_resource_templates()
            coverage = await client.read_resource("studio://nki/coverage")
            reference = await client.read_resource("studio://problems/silu:mini/reference")
            kernel = await client.read_resource(f"studio://kernels/{silu_mini.baseline_kernel_id}")
            return listed, templates, coverage, reference, kernel

    listed, templates, coverage, reference, kernel = drive(scenario)
    assert [r.uri for r in listed.resources] == ["studio://nki/coverage"]
    assert {t.uri_template for t in templates.resource_templates} == {
        "studio://problems/{problem}/reference", "studio://kernels/{kernel_id}"}
    assert "nl." in coverage.contents[0].text
    assert reference.contents[0].text == silu_mini.reference_source
    assert kernel.contents[0].text == silu_mini.baseline_kernel.source


def test_a_kernel_evaluated_against_its_own_reference_gets_a_private_problem(engineer, teammate, make_token,
                                                                            fake_pipeline, silu_mini):
    mine, theirs = make_token(engineer), make_token(teammate)
    source = silu_mini.baseline_kernel.source + "\n# against my reference\n"

    async def evaluate():
        async with http_client(mine) as client:
            return payload(await client.call_tool("evaluate_kernel", {
                "source": source, "reference_source": silu_mini.reference_source, "name": "my silu"}))

    evaluated = drive(evaluate)
    kernel = Kernel.objects.get(pk=evaluated["kernel_id"])

    async def look():
        async with http_client(theirs) as client:
            return error_text(await client.call_tool("describe_problem", {"problem": str(kernel.problem_id)}))

    assert evaluated["verdict"] == "correct" and evaluated["problem"].startswith("custom/")
    assert kernel.problem.owner == engineer
    assert f"no problem with id {kernel.problem_id}" in drive(look)
