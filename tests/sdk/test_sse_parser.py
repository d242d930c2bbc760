"""The SSE frame parser follows the text/event-stream rules the event service relies on."""

from soorma._sse import SSEFrame, SSELineSplitter, SSEParser


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


def split(chunks: list[bytes]) -> list[str]:
    splitter = SSELineSplitter()
    return [line for chunk in chunks for line in splitter.feed(chunk)]


def test_lines_end_at_lf_crlf_and_cr_only():
    text = 'data: {"t": "a\u2028b\u2029c\u0085d\x0be\x0cf\x1cg"}'
    assert split([f"{text}\nx\r\ny\rz\n".encode()]) == [text, "x", "y", "z"]


def test_a_crlf_split_across_chunks_is_one_line_end():
    assert split([b"a\r", b"\nb\r", b"", b"\n", b"\n"]) == ["a", "b", ""]


def test_lines_and_utf8_characters_cut_across_chunks_are_reassembled():
    raw = "data: é\u2028ü\n\n".encode()
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    assert split(chunks) == ["data: é\u2028ü", ""]


def test_an_unfinished_line_waits_for_its_line_end():
    splitter = SSELineSplitter()
    assert splitter.feed(b"data: par") == []
    assert splitter.feed(b"tial\n") == ["data: partial"]
