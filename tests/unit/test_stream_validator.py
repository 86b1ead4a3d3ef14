"""The stream validator: loops stopped, legitimate repetition passed, leading HTML stripped,
whatever the chunking."""

from __future__ import annotations

import time

import pytest

from chat.types import ModelSettings
from orchestrator.leading_html import LeadingHtml
from orchestrator.repetition import Loop, RepetitionDetector
from orchestrator.stream_validator import StreamValidator, ValidatorConfig


def first_loop(text: str, size: int = 3, **thresholds: int) -> tuple[int, Loop] | None:
    """Feed text in chunks of `size` characters: where the first loop was found, and which."""
    detector = RepetitionDetector(**thresholds)
    for at in range(0, len(text), size):
        if (loop := detector.feed(text[at:at + size])) is not None:
            return at + size, loop
    return None


@pytest.mark.parametrize("size", [1, 3, 7, 50])
def test_eight_identical_words_stop_at_the_eighth(size: int) -> None:
    text = "Sure, here it is: " + "very " * 40
    found = first_loop(text, size)
    assert found is not None
    at, loop = found
    assert loop.rule == "word_loop" and loop.block == 1
    assert loop.preview == "very very very very very very very very"
    # Found once the eighth word is whole (its following space), whatever the chunking.
    eighth = len("Sure, here it is: " + "very " * 8)
    assert eighth <= at < eighth + size


def test_seven_identical_words_and_a_block_of_words_too_long_for_the_window_pass() -> None:
    assert first_loop("It was " + "very " * 7 + "good.") is None
    # A block of 4 words 8 times is 32 words: beyond a window of 30.
    assert first_loop("one two three four " * 8 + "end.") is None
    assert first_loop("one two three four " * 8 + "end.", word_window=32) is not None


def test_a_short_phrase_repeated_without_punctuation_is_a_word_loop() -> None:
    found = first_loop("Then " + "and then " * 12)
    assert found is not None
    assert found[1].rule == "word_loop" and found[1].block == 2


def test_a_block_of_sentences_repeated_ten_times_stops() -> None:
    block = "The cat sat down. It looked at me. Then it slept. "
    found = first_loop("Let me explain. " + block * 12)
    assert found is not None
    at, loop = found
    assert (loop.rule, loop.block, loop.repeats) == ("sentence_cycle", 3, 10)
    assert loop.preview == block.strip()
    assert at <= len("Let me explain. " + block * 10) + 3
    assert first_loop("Let me explain. " + block * 9) is None


def test_a_block_of_32_sentences_is_caught_and_33_is_not() -> None:
    def block(n: int) -> str:
        return " ".join(f"Point number {i} matters." for i in range(n))
    found = first_loop(block(32) + " " + (block(32) + " ") * 10, size=40)
    assert found is not None and found[1].block == 32
    assert first_loop((block(33) + " ") * 11, size=40) is None
    assert first_loop((block(33) + " ") * 11, size=40, sentence_block=33) is not None


def test_one_paragraph_three_times_in_a_row_stops_and_twice_does_not() -> None:
    paragraph = "Rain is good for the garden. It also fills the wells."
    found = first_loop(f"Intro.\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n\nMore.")
    assert found is not None
    assert (found[1].rule, found[1].preview) == ("paragraph_cycle", paragraph)
    assert first_loop(f"Intro.\n\n{paragraph}\n\n{paragraph}\n\nMore.") is None


def test_a_preview_is_at_most_160_characters() -> None:
    paragraph = "A very long sentence that goes on and on about nothing at all, " * 5 + "end."
    found = first_loop(f"{paragraph}\n\n" * 3)
    assert found is not None
    assert len(found[1].preview) <= 160


LEGITIMATE = {
    "numbered list": "".join(f"{i}. Done.\n" for i in range(1, 40)),
    "table": "| name | ok | ok | ok |\n|---|---|---|---|\n"
             + "".join(f"| row {i} | yes | yes | yes | yes | yes | yes | yes | yes |\n"
                       for i in range(30)),
    "table of zeros": "| a | b |\n|---|---|\n" + "| 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |\n" * 20,
    "code": "```python\n" + "x = x + 1\n" * 8 + "matrix = [\n"
            + "    [0, 0, 0, 0, 0, 0, 0, 0, 0],\n" * 12 + "]\n" + "}\n" * 12 + "```\n",
    "refrain": "\n\n".join(["First verse, about the sea.", "Oh la la, sing along. Oh la la.",
                            "Second verse, about the hills.", "Oh la la, sing along. Oh la la.",
                            "Third verse, about the town.", "Oh la la, sing along. Oh la la.",
                            "Oh la la, sing along. Oh la la."]) + "\n\n",
    "rules": "Part one.\n\n---\n\nPart two.\n\n---\n\nPart three.\n\n---\n\n***\n\n---\n\n",
    "emphasis": "It was very, very, very good. " * 3,
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
@pytest.mark.parametrize("size", [1, 4, 1000])
def test_legitimate_repetition_is_not_a_loop(name: str, size: int) -> None:
    assert first_loop(LEGITIMATE[name], size) is None


def test_a_loop_inside_a_code_block_still_stops() -> None:
    found = first_loop("```python\n" + "print('hello world')\n" * 20)
    assert found is not None and found[1].rule == "sentence_cycle"


def test_the_work_per_chunk_does_not_grow_with_the_answer() -> None:
    chunk = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    words = chunk.split()
    detector = RepetitionDetector()

    def feed(n: int) -> float:
        # The thread's own CPU time, the least of a few runs: what other processes on the
        # machine do must not look like the detector's work.
        costs = []
        for _ in range(3):
            began = time.thread_time()
            for i in range(n):
                detector.feed(f"{words[i % 8]} {i} {words[(i * 3) % 8]}. ")
            costs.append((time.thread_time() - began) / n)
        return min(costs)

    feed(2000)
    early = feed(2000)
    feed(20_000)
    late = feed(2000)
    assert late < early * 3  # a re-scan of the whole answer would be ~10x slower by now


def feed_html(chunks: list[str]) -> str:
    strip = LeadingHtml()
    return "".join(strip.feed(c) for c in chunks) + strip.flush()


@pytest.mark.parametrize("chunks, shown", [
    (["<div>", "Hello"], "Hello"),
    (["<te", "xtarea>", "  Hi there"], "Hi there"),
    (["  <p", ">", "</p>\n", "<pre><code class=", "'lang-py'>", "print(1)"], "print(1)"),
    (["<divПривет"], "Привет"),
    (["<texПривіт"], "Привіт"),
    (["<", "b", "r/>ok <div> inside stays"], "ok <div> inside stays"),
    (["<3 you"], "<3 you"),
    (["< 5 is true"], "< 5 is true"),
    (["<divide> and rule"], "<divide> and rule"),
    (["Hello <div>"], "Hello <div>"),
    (["  Indented text"], "  Indented text"),
    (["<p"], ""),
])
def test_leading_html_is_stripped_until_the_text_starts(chunks: list[str], shown: str) -> None:
    assert feed_html(chunks) == shown


def test_a_tag_split_anywhere_is_stripped() -> None:
    text = "<div class='answer'>\n<p>The answer is 4.</p>"
    for cut in range(1, len(text)):
        assert feed_html([text[:cut], text[cut:]]) == "The answer is 4.</p>", cut


def test_the_validator_passes_text_on_as_it_comes_and_drops_the_chunk_of_a_loop() -> None:
    validator = StreamValidator(ValidatorConfig(), "answer")
    assert validator.feed("<p>") == ("", None)
    assert validator.feed("Hello. ") == ("Hello. ", None)
    for _ in range(7):
        assert validator.feed("no ") == ("no ", None)
    text, stop = validator.feed("no ")
    assert text == "" and stop is not None
    assert (stop.where, stop.loop.rule) == ("answer", "word_loop")


def test_the_reasoning_keeps_its_tags_and_is_checked_for_loops() -> None:
    validator = StreamValidator(ValidatorConfig(), "reasoning")
    assert validator.feed("<p>hmm ") == ("<p>hmm ", None)
    stops = [validator.feed("wait ")[1] for _ in range(8)]
    assert stops[-1] is not None and stops[-1].where == "reasoning"


def test_a_chat_overrides_the_deployment_thresholds() -> None:
    deployment = ValidatorConfig(word_repeats=8)
    chat = deployment.for_chat(ModelSettings(validator_word_repeats=4, validator_strip_html=False))
    assert (chat.word_repeats, chat.strip_html, chat.sentence_repeats) == (4, False, 10)
    assert deployment.for_chat(ModelSettings()) is deployment
    validator = StreamValidator(chat, "answer")
    assert validator.feed("<p>a a a ") == ("<p>a a a ", None)
    assert validator.feed("a ")[1] is not None
    off = StreamValidator(deployment.for_chat(ModelSettings(validator=False)), "answer")
    assert off.feed("<p>" + "a " * 50) == ("<p>" + "a " * 50, None)
