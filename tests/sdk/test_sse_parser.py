"""The SSE frame parser follows the text/event-stream rules the event service relies on."""

from soorma._sse import SSEFrame, SSEParser


def feed(lines: list[str]) -> list[SSEFrame]:
    parser = SSEParser()
    return [f for f in (parser.feed(line) for line in lines) if f is not None]


def test_parses_event_id_and_data_frames():
    frames = feed(["event: message", "id: t=1-0", 'data: {"a": 1}', "", "event: heartbeat", ""])
    assert frames == [
        SSEFrame(event="message", data='{"a": 1}', id="t=1-0"),
        SSEFrame(event="heartbeat", data="", id=None),
    ]


def test_multi_line_data_is_joined_and_comments_are_ignored():
    frames = feed([": keep-alive", "", "data: one", "data:two", ""])
    assert frames == [SSEFrame(event="message", data="one\ntwo", id=None)]


def test_frame_without_event_name_is_a_message():
    assert feed(["data: x", ""])[0].event == "message"
