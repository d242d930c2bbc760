"""The audit redaction skips a pattern whose needle is not in the text: the same output as
running every pattern over every text, and each kind of credential still redacted."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soorma.ai._redact import _PATTERNS, REDACTED, redact_text

# Pieces of credentials and of the names that announce one, in the cases and look-alike
# characters re matches case-insensitively (the long s, the Kelvin sign, the dotted and
# dotless i), so that generated texts hit the patterns and their edges.
FRAGMENTS = [
    "sk-",
    "sk-proj-",
    "Bearer ",
    "BEARER\t",
    "eyJ",
    ".",
    "AKIA",
    "AIza",
    "ghp_",
    "gho_",
    "xoxb-",
    "gsk_",
    "hf_",
    "api_key=",
    "API-KEY: ",
    '"secret": "',
    "\u017fecret=",  # long s
    "password=",
    "pa\u017f\u017fwd:",
    "access_token=",
    "auth-to\u212aen=",  # Kelvin sign
    "private_key='",
    "client_secret=",
    "\u0130",
    "\u0131",
    "task-",
    "through",
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ_-",
    " ",
    ",",
    "}",
]


def redact_every_pattern(text: str) -> str:
    """The redaction without the needles: every pattern over every text."""
    for _needles, _fold, pattern in _PATTERNS:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=24))
def test_skipping_by_needle_changes_nothing(parts: list[str]) -> None:
    text = "".join(parts)
    assert redact_text(text) == redact_every_pattern(text)


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuv",
        "Bearer abc.def-ghijkl",
        "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
        "AKIAABCDEFGHIJKLMNOP",
        "AIza" + "x" * 30,
        "ghp_" + "a" * 30,
        "xoxb-1234567890ab",
        "gsk_" + "a" * 20,
        "hf_" + "a" * 20,
    ],
)
def test_each_kind_of_credential_is_redacted(secret: str) -> None:
    assert redact_text(f"use {secret} now") == f"use {REDACTED} now"


@pytest.mark.parametrize(
    "name", ["api_key", "API-KEY", "\u017fecret", "pa\u017f\u017fword", "auth_to\u212aen"]
)
def test_a_value_named_as_a_secret_is_redacted_whatever_the_case(name: str) -> None:
    assert redact_text(f"{name}=hunter22 rest") == f"{name}={REDACTED} rest"


def test_case_folding_maps_what_re_matches_to_the_needles_letters() -> None:
    # The needles of the case-insensitive patterns are looked for in the case-folded text:
    # every character that re matches to one of their letters must fold to that letter.
    letters = sorted({c for _n, fold, _p in _PATTERNS if fold for n in _n for c in n})
    assert "i" not in letters  # the dotless i folds to itself, yet re takes it for "i"
    every_character = "".join(map(chr, range(sys.maxunicode + 1)))
    found = re.findall(f"(?i)[{''.join(letters)}]", every_character)
    assert len(found) > 2 * len(letters)  # the ASCII ones and their look-alikes
    for char in found:
        for letter in letters:
            if re.fullmatch(f"(?i){letter}", char):
                assert char.casefold() == letter, (letter, hex(ord(char)))
