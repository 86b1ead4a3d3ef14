"""Verification without a model: what a summary must keep, and what is put back when lost."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import coverage
from orchestrator.coverage import QUESTION, extract, keep_missing, verify

SPAN = """user: Deploy build_42 to https://staging.example.com/app by 2026-03-14.
user: Ping ops@example.com.
assistant: Done. The error rate fell to 0.3% and latency to 120 ms; ticket OPS-7781 is closed.
user: My colleague Maria Lopez asked "can we keep the old banner" - what do you think?"""


def kinds(items: list) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        out.setdefault(item.kind, []).append(item.text)
    return out


def test_extract_finds_each_kind_of_item() -> None:
    found = kinds(extract(SPAN))
    assert found["url"] == ["https://staging.example.com/app"]
    assert found["email"] == ["ops@example.com"]
    assert found["date"] == ["2026-03-14"]
    assert "build_42" in found["identifier"] and "OPS-7781" in found["identifier"]
    assert "0.3%" in found["number"] and "120" in found["number"]
    assert found["quoted"] == ["can we keep the old banner"]
    assert "Maria Lopez" in found["name"]
    assert any("what do you think?" in q for q in found["question"])


def test_a_faithful_summary_covers_everything_and_a_lossy_one_is_repaired() -> None:
    items = extract(SPAN)
    lossy = "## Facts\n- build_42 deployed to https://staging.example.com/app"
    report = verify(items, lossy, memory=["ops@example.com is the ops contact"])
    assert 0 < report.coverage < 1
    assert "ops@example.com" not in [i.text for i in report.missing]  # found in memory
    repaired = keep_missing(lossy, report)
    assert verify(items, repaired, memory=[]).coverage == 1.0
    assert repaired.startswith(lossy) and "## Kept verbatim" in repaired


def test_nothing_to_check_is_full_coverage() -> None:
    report = verify(extract("ok, thanks"), "", [])
    assert report.total == 0 and report.coverage == 1.0
    assert keep_missing("summary", report) == "summary"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab ?.!\n,A1", max_size=80))
def test_questions_are_the_sentences_that_end_in_a_question_mark(text: str) -> None:
    # The definition: the leftmost-longest runs without . ! ? or a newline, then a "?".
    expected = [m.group(0) for m in re.finditer(r"[^.!?\n]*\?", text)]
    assert [m.group(0) for m in QUESTION.finditer(text)] == expected



@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='abfJnaMy AZ19-_:/@."“”?,\n', max_size=120))
def test_a_line_skipped_for_a_kind_holds_none_of_it(text: str) -> None:
    # What a line must hold for a kind (a digit, an "@"...) only saves work: the items are the
    # same as when every pattern runs on every line.
    shortcut = extract(text)
    kinds = coverage._KINDS
    coverage._KINDS = tuple((kind, pattern, None) for kind, pattern, _ in kinds)
    try:
        assert shortcut == extract(text)
    finally:
        coverage._KINDS = kinds


def test_a_lost_line_that_is_a_list_item_is_kept_as_it_was_pass_after_pass() -> None:
    summary = "## Facts\n- Ana's flight to Porto is on 2026-03-14"
    for _ in range(3):  # each pass's helper drops it again
        summary = keep_missing("## Facts\n- (none)", verify(extract(summary), "", []))
    assert summary.splitlines()[-1] == "- Ana's flight to Porto is on 2026-03-14"
    said = keep_missing("", verify(extract("[user] my flight is on 2026-03-14"), "", []))
    assert said.splitlines()[-1] == "- [user] my flight is on 2026-03-14"


def test_a_lost_numbered_line_keeps_its_number() -> None:
    lost = "12. März: dentist at 10:30"
    kept = keep_missing("## Facts\n- (none)", verify(extract(lost), "", []))
    assert kept.splitlines()[-1] == "- 12. März: dentist at 10:30"
