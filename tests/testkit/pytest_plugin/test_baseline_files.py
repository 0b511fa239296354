"""``--dsh-cache-baseline``'s files stay where they belong: one file per test id (whatever its
characters, case or length), never written through a link out of the baseline folder, and never
compared with another test's traffic. Run as a user runs the plugin (pytester)."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.pytest_plugin._baseline import NAME_BYTES, decode_name, encode_name

pytest_plugins = ["pytester"]

INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider -p no:randomly
filterwarnings = error
xfail_strict = true
asyncio_default_fixture_loop_scope = function
"""

LONG = "L" * 300

SUITE = f'''
import httpx
import pytest

pytestmark = pytest.mark.dsh_lenient


def ask(dsh_mock, text):
    with httpx.Client(transport=dsh_mock.transport("httpx"), base_url="http://mock") as client:
        response = client.post(
            "/chat/completions",
            json={{"model": "deepseek-chat", "messages": [{{"role": "user", "content": text}}]}},
            headers={{"authorization": "Bearer sk-test-0000"}},
        )
        assert response.status_code == 200


@pytest.mark.parametrize("x", ["a/b", "a_b", "A_B", "é", "{unicodedata.normalize("NFD", "é")}"])
def test_p(dsh_mock, x):
    ask(dsh_mock, "case " + x * (1 + len(x)))


@pytest.mark.parametrize("x", ["{LONG}"], ids=["{LONG}"])
def test_long(dsh_mock, x):
    ask(dsh_mock, "a test with a long id")


def test_linked(dsh_mock):
    ask(dsh_mock, "the baseline of this one is a committed link")
'''


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_ids=SUITE)
    return pytester


def headers(folder: Path) -> dict[str, str]:
    """Each baseline file (relative path) → the test its header names."""
    return {
        p.relative_to(folder).as_posix(): json.loads(p.read_bytes().split(b"\n")[0])["scenario"]
        for p in sorted(folder.rglob("*.trace.jsonl"))
    }


# -- names -------------------------------------------------------------------------------------


def test_every_test_id_has_a_file_of_its_own(suite: pytest.Pytester) -> None:
    written = suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", "-k", "not linked"
    )
    written.assert_outcomes(passed=6)
    files = headers(suite.path / "baseline")
    ids = [
        "test_ids.py::test_p[a/b]",
        "test_ids.py::test_p[a_b]",
        "test_ids.py::test_p[A_B]",
        "test_ids.py::test_p[\\xe9]",
        "test_ids.py::test_p[e\\u0301]",
        f"test_ids.py::test_long[{LONG}]",
    ]
    assert sorted(files.values()) == sorted(ids)  # six tests, six files, each naming its test
    assert len({name.lower() for name in files}) == 6  # apart on a case-insensitive disk too
    assert "test_ids/test_p[a%2Fb].trace.jsonl" in files
    assert "test_ids/test_p[!a_!b].trace.jsonl" in files
    assert all(len(Path(name).name.encode()) <= 255 for name in files)
    # and each test is compared with its own traffic next time: no regression, none unread
    compared = suite.runpytest("--dsh-cache-baseline=baseline", "-k", "not linked")
    compared.assert_outcomes(passed=6)
    assert "cache: 6 tests · efficiency" in compared.stdout.str()
    assert "no regression" in compared.stdout.str()


def test_a_baseline_whose_header_names_another_test_fails_its_test(suite: pytest.Pytester) -> None:
    suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", "-k", "test_p"
    ).assert_outcomes(passed=5)
    folder = suite.path / "baseline" / "test_ids"
    (folder / "test_p[a_b].trace.jsonl").write_bytes(
        (folder / "test_p[a%2Fb].trace.jsonl").read_bytes()
    )
    result = suite.runpytest("--dsh-cache-baseline=baseline", "-k", "test_p")
    result.assert_outcomes(passed=4, failed=1)
    out = result.stdout.str()
    assert "FAILED test_ids.py::test_p[a_b]" in out
    assert (
        f"the cache baseline of test_ids.py::test_p[a_b] does not read: "
        f"{folder / 'test_p[a_b].trace.jsonl'} is the baseline of test_ids.py::test_p[a/b], "
        "not of this test"
    ) in out


def test_a_baseline_under_its_earlier_name_is_read_then_renamed(suite: pytest.Pytester) -> None:
    """Before, every character outside ``[A-Za-z0-9_.-[]=+,]`` was ``_`` and case was kept:
    such a file is still the test's baseline when its header names the test."""
    only = "test_ids.py::test_p[A_B]"
    suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", only
    ).assert_outcomes(passed=1)
    folder = suite.path / "baseline" / "test_ids"
    new, old = folder / "test_p[!a_!b].trace.jsonl", folder / "test_p[A_B].trace.jsonl"
    new.rename(old)
    compared = suite.runpytest("--dsh-cache-baseline=baseline", only)
    compared.assert_outcomes(passed=1)
    assert "no regression" in compared.stdout.str()  # compared with the old file
    only = "test_ids.py::test_p[A_B]"
    suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", only
    ).assert_outcomes(passed=1)
    assert new.is_file() and not old.exists()


# -- links -------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_update_never_writes_through_a_committed_link(suite: pytest.Pytester) -> None:
    outside = suite.path / "outside.txt"
    outside.write_text("not a baseline\n", encoding="utf-8")
    folder = suite.path / "baseline" / "test_ids"
    folder.mkdir(parents=True)
    (folder / "test_linked.trace.jsonl").symlink_to(os.path.relpath(outside, folder))
    result = suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", "-k", "linked"
    )
    result.assert_outcomes(failed=1, deselected=6)
    assert "cannot write the cache baseline of test_ids.py::test_linked: " in result.stdout.str()
    assert (
        f"{folder / 'test_linked.trace.jsonl'} is a symbolic link; baselines are written only "
        f"inside {suite.path / 'baseline'}, never through a link: remove it"
    ) in result.stdout.str()
    assert outside.read_text(encoding="utf-8") == "not a baseline\n"
    assert (folder / "test_linked.trace.jsonl").is_symlink()


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")
def test_update_never_writes_through_a_linked_folder(suite: pytest.Pytester) -> None:
    elsewhere = suite.path / "elsewhere"
    elsewhere.mkdir()
    (suite.path / "baseline").mkdir()
    (suite.path / "baseline" / "test_ids").symlink_to(elsewhere, target_is_directory=True)
    result = suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", "-k", "linked"
    )
    result.assert_outcomes(failed=1, deselected=6)
    assert f"{suite.path / 'baseline' / 'test_ids'} is a symbolic link" in result.stdout.str()
    assert list(elsewhere.iterdir()) == []
    # The baseline folder itself may be a link (the user's choice): resolved once, written into.
    (suite.path / "linked-baseline").symlink_to(elsewhere, target_is_directory=True)
    suite.runpytest(
        "--dsh-cache-baseline=linked-baseline", "--dsh-cache-baseline-update", "-k", "linked"
    ).assert_outcomes(passed=1, deselected=6)
    assert headers(elsewhere) == {"test_ids/test_linked.trace.jsonl": "test_ids.py::test_linked"}


# -- the encoding --------------------------------------------------------------------------------


@given(st.text(min_size=1, max_size=400))
def test_names_are_reversible_short_and_apart_whatever_the_case(name: str) -> None:
    encoded = encode_name(name)
    assert len(encoded.encode("utf-8")) <= NAME_BYTES
    assert encoded.isascii() and "/" not in encoded and "\\" not in encoded
    assert not encoded.startswith(".") and not encoded.endswith((".", " "))
    back = decode_name(encoded)
    assert back == name or (back is None and "~" in encoded)  # a long one is hashed


@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=60))
def test_two_names_never_share_a_file(first: str, second: str) -> None:
    if first != second:
        assert encode_name(first).lower() != encode_name(second).lower()


def test_long_names_are_hashed_apart_and_keep_a_readable_head() -> None:
    one = encode_name("test_long[" + "L" * 300 + "]")
    two = encode_name("test_long[" + "L" * 299 + "M]")
    assert one != two
    assert len(one.encode()) <= NAME_BYTES and len(two.encode()) <= NAME_BYTES
    assert one.startswith("test_long[!l!l") and decode_name(one) is None
    assert encode_name("nul") != "nul" and encode_name(".hidden").startswith("%2E")
