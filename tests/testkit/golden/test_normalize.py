"""The golden normalizer: cwd spellings and their boundaries, id tokens, UUID sweep, times."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.golden._normalize import CWD_TOKEN, Normalizer, cwd_spellings

CWD = "/tmp/work-7"


def scrub(text: str, cwd: str = CWD, *aliases: str) -> str:
    return Normalizer(cwd=cwd, cwd_aliases=aliases).cwd(text)


# ---------------------------------------------------------------------------------------------
# The working directory


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CWD, "{{cwd}}"),
        (f"{CWD}/src/a.py", "{{cwd}}/src/a.py"),
        (f"cd {CWD} && ls", "cd {{cwd}} && ls"),
        (f"file://{CWD}/x", "file://{{cwd}}/x"),
        (f"file:///{CWD.lstrip('/')}", "file://{{cwd}}"),
        (f"({CWD}).", "({{cwd}})."),
        (f"in {CWD}.", "in {{cwd}}."),
        (f"{CWD}.,", "{{cwd}}.,"),
        (f'"{CWD}"', '"{{cwd}}"'),
        (f"path={CWD};", "path={{cwd}};"),
        (f"<path>{CWD}</path>", "<path>{{cwd}}</path>"),
        (f"`{CWD}`", "`{{cwd}}`"),
        (f"[{CWD}]", "[{{cwd}}]"),
        (f"/private{CWD}/x", "{{cwd}}/x"),
        (f"{CWD}\\sub", "{{cwd}}/sub"),
    ],
)
def test_cwd_is_replaced_at_boundaries(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        f"{CWD}-backup",
        f"{CWD}.backup",
        f"{CWD}x",
        f"/other{CWD}",
        f"x{CWD}",
        f"{CWD}_old/y",
    ],
)
def test_cwd_is_not_replaced_inside_another_name(text: str) -> None:
    assert scrub(text) == text


def test_every_spelling_is_replaced_longest_first(tmp_path: Path) -> None:
    real = tmp_path / "real-dir"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    normalizer = Normalizer(cwd=link, cwd_aliases=["/alias/w"])
    text = f"{link}/a {real}/b /alias/w/c /private{real}/d"
    assert normalizer.cwd(text) == "{{cwd}}/a {{cwd}}/b {{cwd}}/c {{cwd}}/d"
    spellings = normalizer.spellings
    assert list(spellings) == sorted(spellings, key=lambda s: (-len(s), s))
    assert f"/private{real}" in spellings and str(real) in spellings


def test_windows_backslashes_become_slashes_only_in_cwd_rooted_paths() -> None:
    normalizer = Normalizer(cwd="C:\\Users\\me\\w")
    text = (
        "C:\\Users\\me\\w\\src\\a.py and C:\\other\\b.py, regex \\d+ then C:\\Users\\me\\w\\x y\\z"
    )
    assert normalizer.cwd(text) == (
        "{{cwd}}/src/a.py and C:\\other\\b.py, regex \\d+ then {{cwd}}/x y\\z"
    )


@pytest.mark.parametrize("root", ["/", "", "C:\\", "C:/"])
def test_the_filesystem_root_is_never_a_spelling(root: str) -> None:
    assert cwd_spellings([root]) == ()
    assert Normalizer(cwd=root).cwd("/usr/bin and C:\\x") == "/usr/bin and C:\\x"


def test_default_cwd_is_the_process_working_directory() -> None:
    assert Normalizer().cwd(os.path.join(os.getcwd(), "f.txt")) == f"{CWD_TOKEN}/f.txt"


def test_add_cwd_ignores_the_token_and_empty_values() -> None:
    normalizer = Normalizer(cwd=CWD)
    before = normalizer.spellings
    normalizer.add_cwd(None)
    normalizer.add_cwd("")
    normalizer.add_cwd(CWD_TOKEN)
    assert normalizer.spellings == before
    normalizer.add_cwd("/srv/other")
    assert normalizer.cwd("/srv/other/x") == "{{cwd}}/x"


_BOUNDARY = st.sampled_from(list(" \n\t<>'\"`()[]{},;:!?="))


@given(before=_BOUNDARY, after=st.sampled_from(["", "/", "\\", " ", ".", ". ", ")", ",", "\n"]))
def test_property_the_cwd_never_survives_between_boundaries(before: str, after: str) -> None:
    assert CWD not in scrub(f"x{before}{CWD}{after}")
    assert CWD not in scrub(f"x{before}{CWD}{after} tail")


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="/\\-")))
def test_property_text_without_paths_or_uuids_is_unchanged(text: str) -> None:
    assert Normalizer(cwd=CWD).text(text) == text


_PIECES = st.sampled_from(
    [CWD, f"{CWD}/a", "/private" + CWD, str(uuid.UUID(int=7)), "call_00_abcdefgh", " ", "-", "x"]
)


@given(st.lists(_PIECES | st.text(max_size=5), max_size=8).map("".join))
def test_property_normalizing_twice_changes_nothing(text: str) -> None:
    normalizer = Normalizer(cwd=CWD)
    normalizer.token("call", "call_00_abcdefgh")
    once = normalizer.text(text)
    assert normalizer.text(once) == once
    assert CWD_TOKEN.join(once.split(CWD_TOKEN)) == once


# ---------------------------------------------------------------------------------------------
# Ids and UUIDs


def test_tokens_are_numbered_per_kind_in_first_seen_order() -> None:
    normalizer = Normalizer(cwd=CWD)
    assert normalizer.token("msg", "m-a") == "{{msg-1}}"
    assert normalizer.token("call", "c-a") == "{{call-1}}"
    assert normalizer.token("msg", "m-b") == "{{msg-2}}"
    assert normalizer.token("msg", "m-a") == "{{msg-1}}"
    # first registration wins, whatever kind is asked later
    assert normalizer.token("call", "m-b") == "{{msg-2}}"
    assert normalizer.known("c-a") == "{{call-1}}" and normalizer.known("zzz") is None
    # a token is never re-tokenized
    assert normalizer.token("msg", "{{msg-1}}") == "{{msg-1}}"


def test_a_uuid_id_is_one_id_whatever_its_case() -> None:
    normalizer = Normalizer(cwd=CWD)
    value = "9F941AD4-6768-4045-8D85-3C42AC6B589B"
    assert normalizer.token("session", value) == normalizer.token("session", value.lower())
    assert normalizer.text(f"session {value.lower()} ended") == "session {{session-1}} ended"


def test_an_invalid_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="lower-case letters and digits"):
        Normalizer(cwd=CWD).token("Msg", "x")


def test_long_ids_are_swept_from_text_short_ones_only_by_structure() -> None:
    normalizer = Normalizer(cwd=CWD)
    normalizer.token("call", "call_00_2yW4Acq9GFz6")
    normalizer.token("msg", "m1")
    text = "answered call_00_2yW4Acq9GFz6 and m1 (not xcall_00_2yW4Acq9GFz6)"
    assert normalizer.text(text) == "answered {{call-1}} and m1 (not xcall_00_2yW4Acq9GFz6)"


def test_stray_uuids_get_their_own_tokens_in_first_seen_order() -> None:
    normalizer = Normalizer(cwd=CWD)
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    known = str(uuid.uuid4())
    normalizer.token("msg", known)
    text = f"{b} {a} {b.upper()} {known} x{a}y"
    # x…y glues letters to it: not a UUID on its own, but the hex run inside still is one
    out = normalizer.text(text)
    assert out.startswith("{{uuid-1}} {{uuid-2}} {{uuid-1}} {{msg-1}} ")
    assert re.fullmatch(r".*x\S+y", out)


# ---------------------------------------------------------------------------------------------
# JSON values and times


def test_json_zeroes_times_and_scrubs_strings_keys_included() -> None:
    normalizer = Normalizer(cwd=CWD)
    value = {
        "time": 1796211813151,
        "createdAt": 5,
        "time0": 9,
        "durationMs": 12,
        "dt": [3, -1, "x"],
        f"{CWD}/k": [f"{CWD}/v", ("t", 1)],
        "nested": {"time": True, "delayMs": 500},
    }
    assert normalizer.json(value) == {
        "time": 0,
        "createdAt": 0,
        "time0": 0,
        "durationMs": 0,
        "dt": [0, 0, "x"],
        "{{cwd}}/k": ["{{cwd}}/v", ["t", 1]],
        "nested": {"time": True, "delayMs": 500},
    }
    assert normalizer.json({"time": 7, "dt": [1]}, zero_times=False) == {"time": 7, "dt": [1]}
