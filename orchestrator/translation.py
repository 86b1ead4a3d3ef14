"""The translator's nodes around the brain: before it, the planner's route
(orchestrator/route.py) and the translator, which gives the brain the user's message in
English; after it, on a route with `translator_answer`, the brain's answer translated back into
the user's language.

Ports only, like the step (orchestrator/step.py), whose Started it reads: the translator is a
ChatModel. Its failure never fails the step: the outcome is a value, Translated or Untranslated,
and with the latter the text goes on as it was (the user's own to the brain, the brain's own to
the user), with a `warning`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from llm.completion import collect
from llm.errors import LLMError
from llm.ports import ChatModel
from llm.types import CompletionRequest, PromptMessage
from orchestrator.answer import AbortSignal, until_aborted
from orchestrator.context import assemble, prompt_message
from orchestrator.events import StepWarning
from orchestrator.route import RouteConfig, plan_route

if TYPE_CHECKING:
    from orchestrator.step import Started, StepDeps

log = logging.getLogger("jin.step")

# The model is told what the text is for, so it does not answer the question it translates.
INSTRUCTION = (
    "You are a translation step inside a chat system. Translate the user's message into "
    "English, faithfully: keep names, numbers, code, formatting and the exact things it "
    "names. Do not answer it, explain it or add anything. Reply with the translation only."
)
# The answer goes back into whatever language the user wrote in (Russian, Ukrainian, ...): the
# translator is shown the start of their message to tell which.
ANSWER_INSTRUCTION = (
    "You are a translation step inside a chat system. Translate the assistant's answer that "
    "follows into the language the user wrote in, faithfully: keep names, numbers, code, links, "
    "markdown and formatting. Do not answer it, explain it or add anything. Reply with the "
    "translation only. The user wrote: "
)
LANGUAGE_SAMPLE_CHARS = 200  # of the user's message: enough to tell its language
MIN_TOKENS = 64  # room for a short message's translation, whatever the estimate says


@dataclass(frozen=True)
class TranslatorConfig:
    timeout: float = 30.0  # seconds for the whole translation
    max_tokens: int = 2048


@dataclass(frozen=True)
class Translated:
    source: str
    text: str
    ms: float
    usage: dict[str, Any]
    target: str = "en"  # or "user": the language the user wrote in
    type: Literal["translated"] = "translated"

    def to_json(self) -> dict[str, Any]:
        """As stored with the step (its answer row's `meta.translation`, or
        `meta.answer_translation`) and shown by the context route and event."""
        return {"source": self.source, "text": self.text, "target": self.target,
                "ms": round(self.ms, 3), "usage": self.usage}


@dataclass(frozen=True)
class Untranslated:
    # translator_failed, translator_timeout, translator_empty, translator_truncated, aborted
    code: str
    text: str  # why, for a warning that then says what went on untranslated
    ms: float
    type: Literal["untranslated"] = "untranslated"


Translation = Translated | Untranslated


def token_cap(source_tokens: int, config: TranslatorConfig, factor: int = 2) -> int:
    """What a translation may take: about `factor` times the source (a text often takes more
    tokens in another language: English into Cyrillic most of all), at least MIN_TOKENS, at
    most the role's cap."""
    return min(config.max_tokens, max(MIN_TOKENS, factor * source_tokens + 16))


async def translate(
    translator: ChatModel, text: str, source_tokens: int, config: TranslatorConfig,
    abort: AbortSignal, instruction: str = INSTRUCTION, target: str = "en", factor: int = 2,
) -> Translation:
    """The translation of `text`, or why there is none. An abort stops it at once (the step
    then ends before the brain is asked). A translation the token cap cut short is none: half
    a text must not stand for the whole."""
    began = time.perf_counter()
    request = CompletionRequest(
        messages=[PromptMessage("system", instruction), PromptMessage("user", text)],
        max_tokens=token_cap(source_tokens, config, factor),
    )
    try:  # (a thinking model's reasoning is not the translation: collect leaves it out)
        async with asyncio.timeout(config.timeout), \
                aclosing(until_aborted(translator.stream(request), abort)) as deltas:
            answer = await collect(deltas)
    except TimeoutError:
        return Untranslated("translator_timeout",
                            f"the translator took over {config.timeout:.3g} s", _ms(began))
    except Exception as exc:  # the boundary of an optional node: log it, go on untranslated
        if not isinstance(exc, LLMError):
            log.exception("the translator call failed unexpectedly")
        why = exc.code if isinstance(exc, LLMError) else type(exc).__name__
        return Untranslated("translator_failed", f"the translator failed ({why})", _ms(began))
    translation = answer.text.strip()
    if abort.event.is_set():
        return Untranslated("aborted", "the step was stopped", _ms(began))
    if not translation:
        return Untranslated("translator_empty", "the translator answered nothing", _ms(began))
    if answer.cut:
        return Untranslated("translator_truncated", "the translation was cut short at "
                            f"{request.max_tokens} tokens", _ms(began))
    return Translated(text, translation, _ms(began), answer.usage, target)


async def take_route(
    deps: StepDeps, started: Started, abort: AbortSignal
) -> tuple[Started, StepWarning | None]:
    """The planner, then the translator if the route has it: the brain reads the translation
    as the new message; the user's own text stays their message (and the tail of later steps
    shows it). A translation that failed gives a warning, and the user's text goes on."""
    began = time.perf_counter()
    user = started.begun.user_message
    config = deps.config.route if deps.translator is not None else RouteConfig()
    route = plan_route(user.content, user.kind, config)
    started = dataclasses.replace(started, route=route,
                                  planner_ms=(time.perf_counter() - began) * 1000)
    if not route.translate_input or deps.translator is None:
        return started, None
    result = await translate(deps.translator, user.content, user.token_count,
                             deps.config.translator, abort)
    if isinstance(result, Untranslated):
        if result.code == "aborted":
            return dataclasses.replace(started, translation=result), None
        text = f"{result.text}; the message went to the brain untranslated"
        log.warning("step %s: %s", started.begun.step_id, text)
        return dataclasses.replace(started, translation=result), StepWarning(result.code, text)
    new = dataclasses.replace(prompt_message(user), content=result.text)
    plan = assemble(started.window, new, started.plan.budget, deps.counter)
    return dataclasses.replace(started, plan=plan, translation=result), None


async def translate_answer(
    deps: StepDeps, started: Started, answer: str, abort: AbortSignal
) -> tuple[Translation | None, StepWarning | None]:
    """The brain's answer in the user's language, on a route with `translator_answer` whose
    input was translated (a translator that just failed on the input is not asked again, and
    the brain then read the user's own words). None when there is nothing to translate. A
    failure gives a warning (its code prefixed `answer_`): the brain's answer stands."""
    if (not started.route.translate_answer or deps.translator is None or not answer.strip()
            or not isinstance(started.translation, Translated)):
        return None, None
    user = started.begun.user_message.content
    instruction = ANSWER_INSTRUCTION + repr(user[:LANGUAGE_SAMPLE_CHARS])
    result = await translate(deps.translator, answer, deps.counter.count(answer),
                             deps.config.translator, abort, instruction, "user", factor=3)
    if not isinstance(result, Untranslated) or result.code == "aborted":
        return result, None
    text = f"{result.text}; the answer stands as the brain wrote it"
    log.warning("step %s: %s", started.begun.step_id, text)
    return result, StepWarning(f"answer_{result.code}", text)


def _ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000
