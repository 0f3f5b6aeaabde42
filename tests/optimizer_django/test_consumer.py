"""The websocket at /ws/runs/<id>/: replay after the client's last seq, then live, each seq exactly once;
private runs only for their owner."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from optimizer import events, services
from optimizer.consumers import CLOSE_NOT_ALLOWED
from optimizer.events import EVENT_MESSAGE_TYPE, EVENTS_MESSAGE_TYPE, group_name, record_events
from optimizer.models import RunEvent
from optimizer.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


def application():
    return URLRouter(websocket_urlpatterns)


async def connect(run_id: int, user, query: str = ""):
    communicator = WebsocketCommunicator(application(), f"/ws/runs/{run_id}/{query}")
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


async def received_seqs(communicator, count: int) -> list[int]:
    return [(await communicator.receive_json_from(timeout=2))["event"]["seq"] for _ in range(count)]


@database_sync_to_async
def make_run(owner, problem, *, public: bool = False, events: int = 0):
    run = services.create_run(owner, problem, is_public=public)  # writes run.queued (seq 1)
    record_events(run.pk, [("test.tick", {"n": n}) for n in range(events)])
    return run


@database_sync_to_async
def add_events(run, count: int):
    return [e.seq for e in record_events(run.pk, [("test.tick", {"n": n}) for n in range(count)])]


async def test_a_client_gets_the_events_after_its_last_seq_then_live_ones(problem, owner):
    run = await make_run(owner, problem, events=4)  # seqs 1..5
    communicator, connected, _ = await connect(run.pk, owner, "?after=2")
    assert connected
    assert await received_seqs(communicator, 3) == [3, 4, 5]
    assert await add_events(run, 2) == [6, 7]
    assert await received_seqs(communicator, 2) == [6, 7]
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_each_message_carries_the_event_as_json_and_as_an_html_fragment(problem, owner):
    run = await make_run(owner, problem)
    communicator, _, _ = await connect(run.pk, owner)
    message = await communicator.receive_json_from(timeout=2)
    assert message["event"]["kind"] == "run.queued" and message["event"]["run"] == run.pk
    assert f'id="run-{run.pk}-event-1"' in message["html"] and "hx-swap-oob" in message["html"]
    await communicator.disconnect()


async def test_a_live_message_already_replayed_is_not_sent_again(problem, owner):
    run = await make_run(owner, problem, events=2)  # seqs 1..3
    communicator, _, _ = await connect(run.pk, owner)
    assert await received_seqs(communicator, 3) == [1, 2, 3]
    # A publish that arrives after the replay already read the same event from the database.
    stale = await database_sync_to_async(lambda: RunEvent.objects.get(run=run, seq=3).to_dict())()
    await get_channel_layer().group_send(group_name(run.pk), {"type": EVENT_MESSAGE_TYPE, "event": stale})
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_a_gap_in_the_live_stream_is_filled_from_the_database(problem, owner):
    run = await make_run(owner, problem)
    communicator, _, _ = await connect(run.pk, owner)
    assert await received_seqs(communicator, 1) == [1]
    # Events 2 and 3 are stored but only 3 is delivered live (2's message lost).
    await database_sync_to_async(
        lambda: RunEvent.objects.bulk_create([RunEvent(run=run, seq=s, kind="test.tick") for s in (2, 3)])
    )()
    latest = await database_sync_to_async(lambda: RunEvent.objects.get(run=run, seq=3).to_dict())()
    await get_channel_layer().group_send(group_name(run.pk), {"type": EVENT_MESSAGE_TYPE, "event": latest})
    assert await received_seqs(communicator, 2) == [2, 3]
    await communicator.disconnect()


async def test_html_format_sends_bare_fragments_for_htmx(problem, owner):
    run = await make_run(owner, problem)
    communicator, _, _ = await connect(run.pk, owner, "?format=html")
    fragment = await communicator.receive_from(timeout=2)
    assert fragment.lstrip().startswith("<div hx-swap-oob=")
    await communicator.disconnect()


async def test_a_private_run_is_refused_to_anonymous_visitors(problem, owner):
    run = await make_run(owner, problem)
    _, connected, code = await connect(run.pk, AnonymousUser())
    assert (connected, code) == (False, CLOSE_NOT_ALLOWED)


async def test_a_private_run_is_refused_to_another_engineer(problem, owner, teammate):
    run = await make_run(owner, problem)
    _, connected, code = await connect(run.pk, teammate)
    assert (connected, code) == (False, CLOSE_NOT_ALLOWED)


async def test_a_public_run_can_be_watched_by_anyone(problem, owner):
    run = await make_run(owner, problem, public=True)
    communicator, connected, _ = await connect(run.pk, AnonymousUser())
    assert connected
    assert await received_seqs(communicator, 1) == [1]
    await communicator.disconnect()


async def test_an_unknown_run_is_refused(db, owner):
    _, connected, code = await connect(999_999, owner)
    assert (connected, code) == (False, CLOSE_NOT_ALLOWED)


async def test_the_site_application_routes_the_socket_and_knows_the_signed_in_owner(problem, owner, client):
    """Through accelopt_site.asgi: origin check, session auth from the cookie, then this consumer."""
    from accelopt_site.asgi import application as site_application

    run = await make_run(owner, problem)
    await database_sync_to_async(client.force_login)(owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://127.0.0.1:8000"), (b"cookie", cookie)]
    communicator = WebsocketCommunicator(site_application, f"/ws/runs/{run.pk}/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    assert await received_seqs(communicator, 1) == [1]
    await communicator.disconnect()
    anonymous = WebsocketCommunicator(site_application, f"/ws/runs/{run.pk}/", headers=headers[:1])
    assert (await anonymous.connect()) == (False, CLOSE_NOT_ALLOWED)


async def test_a_fragment_that_fails_to_render_does_not_break_the_stream(problem, owner, settings, tmp_path):
    broken = tmp_path / "optimizer" / "partials"
    broken.mkdir(parents=True)
    (broken / "event.html").write_text("{% load no_such_library %}")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path], "APP_DIRS": False}]
    run = await make_run(owner, problem, events=1)
    communicator, _, _ = await connect(run.pk, owner)
    messages = [await communicator.receive_json_from(timeout=2) for _ in range(2)]
    assert [m["event"]["seq"] for m in messages] == [1, 2] and messages[0]["html"] == ""
    await communicator.disconnect()


async def test_the_events_of_one_transaction_reach_a_live_client_as_its_replay_shows_them(problem, owner):
    run = await make_run(owner, problem)  # seq 1
    live, _, _ = await connect(run.pk, owner)
    assert await received_seqs(live, 1) == [1]
    assert await add_events(run, 3) == [2, 3, 4]  # one transaction: published as one channel-layer message
    streamed = [await live.receive_json_from(timeout=2) for _ in range(3)]
    late, _, _ = await connect(run.pk, owner, "?after=1")
    replayed = [await late.receive_json_from(timeout=2) for _ in range(3)]
    assert [m["event"]["seq"] for m in streamed] == [2, 3, 4]
    assert streamed == replayed  # encoded once by the publisher, the same message as the database replay
    assert await live.receive_nothing(timeout=0.2)
    await live.disconnect()
    await late.disconnect()


async def test_a_live_batch_skips_what_was_sent_and_fills_a_gap_from_the_database(problem, owner):
    run = await make_run(owner, problem, events=2)  # seqs 1..3
    communicator, _, _ = await connect(run.pk, owner)
    assert await received_seqs(communicator, 3) == [1, 2, 3]
    # 4 and 5 are stored, but the batch that reaches this process names 3 (already sent) and 5 (4 lost).
    await database_sync_to_async(
        lambda: RunEvent.objects.bulk_create([RunEvent(run=run, seq=s, kind="test.tick") for s in (4, 5)])
    )()
    items = [{"seq": seq, "html": "", "text": json.dumps({"type": "event", "event": {"seq": seq}, "html": ""})}
             for seq in (3, 5)]
    await get_channel_layer().group_send(group_name(run.pk), {"type": EVENTS_MESSAGE_TYPE, "events": items})
    assert await received_seqs(communicator, 2) == [4, 5]
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_html_clients_get_each_live_event_of_a_batch_as_its_fragment(problem, owner):
    run = await make_run(owner, problem)
    communicator, _, _ = await connect(run.pk, owner, "?format=html")
    await communicator.receive_from(timeout=2)
    await add_events(run, 2)
    fragments = [await communicator.receive_from(timeout=2) for _ in range(2)]
    assert [f'data-seq="{seq}"' in fragment for seq, fragment in zip((2, 3), fragments, strict=True)] == [True, True]
    await communicator.disconnect()


async def test_with_the_measurement_hook_on_every_hop_is_stamped(problem, owner, monkeypatch, tmp_path):
    """optimizer.events.TRACE_DIR (measurements/ws_fanout_scaleout.py --trace): the client's message carries
    the publisher's and the consumer's clock readings, the publisher's file when each group_send returned."""
    monkeypatch.setattr(events, "TRACE_DIR", str(tmp_path))
    run = await make_run(owner, problem)
    communicator, _, _ = await connect(run.pk, owner)
    await communicator.receive_json_from(timeout=2)
    await add_events(run, 2)
    messages = [await communicator.receive_json_from(timeout=2) for _ in range(2)]
    trace = messages[1]["trace"]
    assert trace["publish"] <= trace["send"] <= trace["consumer_received"] <= trace["consumer_send"]
    assert trace["batch"] == 2 and messages[1]["event"]["seq"] == 3
    lines = [json.loads(line) for path in tmp_path.glob("publish-*.jsonl") for line in path.read_text().splitlines()]
    assert [line["seq"] for line in lines if line["run"] == run.pk] == [1, 2, 3]  # run.queued was published too
    await communicator.disconnect()
