"""The nodes before the brain: the planner's route (orchestrator/route.py), and the translator
node, which gives the brain the user's message in English.

Ports only, like the step (orchestrator/step.py), whose Started it reads: the translator is a
ChatModel. Its failure never fails the step: the outcome is a
value, Translated or Untranslated, and with the latter the user's own text goes on to the brain
(the step streams a `warning`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from llm.errors import LLMError
from llm.ports import ChatModel
from llm.types import CompletionRequest, ContentDelta, Finish, PromptMessage
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
    type: Literal["translated"] = "translated"

    def to_json(self) -> dict[str, Any]:
        """As stored with the step (its answer row's `meta.translation`) and shown by the
        context route and event."""
        return {"source": self.source, "text": self.text, "target": "en",
                "ms": round(self.ms, 3), "usage": self.usage}


@dataclass(frozen=True)
class Untranslated:
    code: str  # translator_failed, translator_timeout, translator_empty, aborted
    text: str
    ms: float
    type: Literal["untranslated"] = "untranslated"


Translation = Translated | Untranslated


def token_cap(source_tokens: int, config: TranslatorConfig) -> int:
    """What a translation may take: about twice the source (Cyrillic text often turns into
    more English tokens than it had), at least MIN_TOKENS, at most the role's cap."""
    return min(config.max_tokens, max(MIN_TOKENS, 2 * source_tokens + 16))


async def translate(
    translator: ChatModel, text: str, source_tokens: int, config: TranslatorConfig,
    abort: AbortSignal,
) -> Translation:
    """The translation of `text`, or why there is none. An abort stops it at once (the step
    then ends before the brain is asked)."""
    began = time.perf_counter()
    request = CompletionRequest(
        messages=[PromptMessage("system", INSTRUCTION), PromptMessage("user", text)],
        max_tokens=token_cap(source_tokens, config),
    )
    parts: list[str] = []
    usage: dict[str, Any] = {}
    try:
        async with asyncio.timeout(config.timeout), \
                aclosing(until_aborted(translator.stream(request), abort)) as deltas:
            async for delta in deltas:
                if isinstance(delta, ContentDelta):
                    parts.append(delta.text)
                elif isinstance(delta, Finish):
                    usage = delta.usage
                # (A thinking model's reasoning is not the translation: dropped.)
    except TimeoutError:
        return Untranslated("translator_timeout",
                            f"the translator took over {config.timeout:.3g} s; the message "
                            "went to the brain untranslated", _ms(began))
    except Exception as exc:  # the boundary of an optional node: log it, go on untranslated
        if not isinstance(exc, LLMError):
            log.exception("the translator call failed unexpectedly")
        why = exc.code if isinstance(exc, LLMError) else type(exc).__name__
        return Untranslated("translator_failed",
                            f"the translator failed ({why}); the message went to the brain "
                            "untranslated", _ms(began))
    translation = "".join(parts).strip()
    if abort.event.is_set():
        return Untranslated("aborted", "the step was stopped", _ms(began))
    if not translation:
        return Untranslated("translator_empty", "the translator answered nothing; the message "
                            "went to the brain untranslated", _ms(began))
    return Translated(text, translation, _ms(began), usage)


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
        log.warning("step %s: %s", started.begun.step_id, result.text)
        return (dataclasses.replace(started, translation=result),
                StepWarning(result.code, result.text))
    new = dataclasses.replace(prompt_message(user), content=result.text)
    plan = assemble(started.window, new, started.plan.budget, deps.counter)
    return dataclasses.replace(started, plan=plan, translation=result), None


def _ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000
