"""The one credential rule, at the scrubbing module: every spelling of a request's own credential
(and of someone else's key) is gone from what the rule returns, judged by a reader that shares
no code with the scrubber (``_readback.py``).

The end-to-end property (every output of the mock, the proxy, cassettes, captures, reports and
readers, over real loopback HTTP) is ``test_credential_property.py``; this file holds the laws of
the rule itself, cheap enough for many examples: no spelling reads back, in a text, in any
string of a JSON value (one JSON level down too), in a body in any charset, in a URL, across the
events of a stream; scrubbing is idempotent; texts holding no secret come out as they went in.
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from dsh_testkit.scrub._scrubber import Scrubber, scrub_json, scrub_text, scrub_url
from dsh_testkit.scrub._spellings import KnownSecrets, base64_cores
from tests.testkit.scrub._readback import BODY_CHARSETS, SPELLINGS, Spelling, reads_back

tokens = st.text(
    alphabet=string.ascii_letters + string.digits + "-_./+=:~", min_size=12, max_size=48
).filter(lambda t: len(set(t)) >= 6)  # not "aaaaaaaaaaaa": it would turn up by chance
"""Bearer tokens, API keys, passwords: what a credential header presents (not key-shaped)."""
key_shaped = st.builds(
    lambda body: "sk-" + body, st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)
) | st.builds(
    lambda body: "sk-" + body,
    st.text(alphabet=string.ascii_letters + string.digits, min_size=32, max_size=40),
)
"""Someone else's DeepSeek/OpenAI-style key, pasted into a prompt: only its shape gives it away
(32 letters and digits or more: the shape that is a key even glued to a word, as the bytes
ahead of it in a longer base64 text glue it)."""
spellings = st.sampled_from(SPELLINGS)
prose = st.text(alphabet=string.ascii_letters + " ,.", max_size=30)


def _in_json_text(spelled: str, kind: str, around: tuple[str, str]) -> str:
    """A JSON document's text holding ``spelled`` in a string: as is for a ``json`` spelling
    (the parser undoes it), else as JSON writes the string."""
    before, after = around
    if kind == "json":
        return '{"content": "' + json.dumps(before)[1:-1] + spelled + json.dumps(after)[1:-1] + '"}'
    return json.dumps({"content": before + spelled + after})


@given(token=tokens, spelling=spellings, before=prose, after=prose)
def test_no_spelling_of_the_own_credential_reads_back(
    token: str, spelling: Spelling, before: str, after: str
) -> None:
    name, kind, build = spelling
    spelled = build(token)
    note(f"{name}: {spelled[:80]}")
    known = KnownSecrets([token, f"Bearer {token}"])
    text = _in_json_text(spelled, kind, (before, after))
    value = json.loads(text)
    nested = {"arguments": json.dumps(value), "list": [value["content"]], value["content"]: 1}
    outputs = {
        "text": scrub_text(value["content"], known),
        "json": json.dumps(scrub_json(value, known)),
        "json one level down": json.dumps(scrub_json(nested, known)),
        "url": scrub_url("https://h/p?note=" + spelled + "&x=1", known),
    }
    for label, out in outputs.items():
        assert reads_back(token, out) is None, f"{name} in {label}: {out[:200]}"
    assert scrub_json(json.loads(outputs["json"]), known) == json.loads(outputs["json"])


@given(key=key_shaped, spelling=spellings, before=prose)
def test_no_spelling_of_someone_elses_key_reads_back(
    key: str, spelling: Spelling, before: str
) -> None:
    """No credential header names this key: its shape alone must give it away, in any spelling."""
    name, kind, build = spelling
    value = json.loads(_in_json_text(build(key), kind, (before, " thanks")))
    nested = {"arguments": json.dumps(value)}
    for label, out in {
        "json": json.dumps(scrub_json(value)),
        "json one level down": json.dumps(scrub_json(nested)),
        "text": scrub_text(value["content"]),
    }.items():
        assert reads_back(key, out) is None, f"{name} in {label}: {out[:200]}"


@given(token=tokens, spelling=spellings, charset=st.sampled_from(BODY_CHARSETS))
def test_a_body_in_any_charset_loses_the_credential(
    token: str, spelling: Spelling, charset: str
) -> None:
    name, kind, build = spelling
    known = KnownSecrets([token])
    text = _in_json_text(build(token), kind, ("note ", " end"))
    body = text.encode(charset)
    headers = {"content-type": f"application/json; charset={charset}"}
    scrubbed = Scrubber().body(body, headers, part="request body", known=known)
    assert isinstance(scrubbed, bytes)
    assert reads_back(token, scrubbed) is None, f"{name} in {charset}"


@given(
    token=tokens,
    spelling=spellings,
    size=st.integers(min_value=1, max_value=9),
)
def test_a_stream_loses_the_credential_split_across_events(
    token: str, spelling: Spelling, size: int
) -> None:
    """An answer that repeats the credential, streamed a few characters per delta."""
    name, _, build = spelling
    content = "your key " + build(token) + " fails"
    events = [
        "data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": content[i : i + size]}}]})
        + "\n\n"
        for i in range(0, len(content), size)
    ]
    events.append("data: [DONE]\n\n")
    scrubbed = Scrubber().stream(events, KnownSecrets([token]))
    joined = "".join(json.loads(e[6:])["choices"][0]["delta"]["content"] for e in scrubbed[:-1])
    assert reads_back(token, joined) is None, f"{name}: {joined[:200]}"
    assert reads_back(token, "".join(scrubbed)) is None


@given(
    token=tokens,
    text=st.text(max_size=80)
    | st.builds(lambda b: base64.b64encode(b).decode(), st.binary(min_size=20, max_size=90))
    | st.builds(lambda b: b.hex(), st.binary(min_size=16, max_size=60)),
)
def test_texts_without_the_secret_come_out_as_they_went_in(token: str, text: str) -> None:
    """No false positive: ordinary text, a base64 image's worth of bytes, hex ids."""
    known = KnownSecrets([token])
    if known.in_text(text) or Scrubber().find(text):
        return  # the draw holds the token (or a key) by chance: nothing to say
    assert scrub_text(text, known) is text
    assert scrub_json({"a": [text]}, known) == {"a": [text]}


@given(token=tokens, spelling=spellings, before=prose)
def test_scrubbing_is_idempotent(token: str, spelling: Spelling, before: str) -> None:
    _, _, build = spelling
    known = KnownSecrets([token])
    once = scrub_text(before + build(token) + before, known)
    assert scrub_text(once, known) == once


def test_base64_cores_are_what_a_decoder_reads_at_every_alignment() -> None:
    data = b"dshTok_9f3Kq2Lm8Rz4Wx7Vb1"
    cores = base64_cores(data)
    for before in range(6):
        for after in range(4):
            encoded = base64.b64encode(b"x" * before + data + b"y" * after).decode()
            assert any(core in encoded for core in cores), (before, after)
            assert any(core in encoded.replace("+", "-").replace("/", "_") for core in cores)


@pytest.mark.parametrize(("name", "kind", "build"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_every_spelling_at_once_reads_back_nowhere(name: str, kind: str, build: Any) -> None:
    """The table, one fixed token with a ``/`` and ``=`` in it (a base64-ish credential): a
    readable list of what survives where, should one."""
    token = "dshTok/9f3Kq2=Lm8Rz4Wx7Vb1"
    known = KnownSecrets([token])
    value = json.loads(_in_json_text(build(token), kind, ("keep: ", " (the key)")))
    out = json.dumps(scrub_json({"messages": [value], "tool": json.dumps(value)}, known))
    assert reads_back(token, out) is None, out[:300]
    assert "keep: " in out  # the text around it is kept


@pytest.mark.parametrize(("name", "kind", "build"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_the_judge_reads_every_spelling_back(name: str, kind: str, build: Any) -> None:
    """Without the rule, every spelling is read back (so the laws above can fail)."""
    token = "dshTok/9f3Kq2=Lm8Rz4Wx7Vb1"
    value = json.loads(_in_json_text(build(token), kind, ("keep: ", " (the key)")))
    assert reads_back(token, json.dumps(value)) is not None
    assert reads_back(token, json.dumps({"tool": json.dumps(value)})) is not None
