"""The eight live tasks (docs/BENCHMARK.md: Live APIs): sequential workflows over the live
services, as ordinary `Task`s (type `live_sequential`), so prompt variants, flaws and scoring
apply unchanged; pass `live_registry()` wherever a registry is asked for.

Each gathers material from a few source services, composes it (`text_composer`, the
aggregator) and, in most, saves a social-media draft (`social_draft_poster`, the output).
`inputs` hold the task-bound values the services need (a city, a word, a platform, ...): a call
with another value is refused as INVALID_INPUT, as in the simulator; `format` is the services'
data format, which the composer's optional `format` must match (what logical_inconsistency
breaks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_resilibench.core.tasks import Task
from pytest_resilibench.servers.live.registry import live_registry
from pytest_resilibench.servers.live.services import SERVICE_DATA_FORMAT

__all__ = ["LIVE_TASK_TYPE", "live_task", "live_tasks"]

LIVE_TASK_TYPE = "live_sequential"


def _task(number: int, difficulty: str, description: str, inputs: Mapping[str, Any],
          tools: tuple[str, ...], expected: Mapping[str, Any]) -> Task:
    registry = live_registry()
    step_arguments = {}
    bound = {**inputs, "format": SERVICE_DATA_FORMAT}
    for tool in tools:
        props = registry[tool].parameters.get("properties", {})
        step_arguments[tool] = {k: v for k, v in bound.items() if k in props}
    return Task(
        id=f"live{number:02d}", type=LIVE_TASK_TYPE, difficulty=difficulty,
        description=description, inputs={**inputs, "format": SERVICE_DATA_FORMAT},
        expected_outputs=dict(expected),
        required_tools=tools, constraints=("call the live services one at a time",),
        step_arguments=step_arguments)


_TASKS: tuple[Task, ...] = (
    _task(1, "hard",
          "Gather a random fact, a joke, a programming quote and a stoic quote, compose them "
          "into a short text titled 'Morning digest', and save it as a Mastodon draft.",
          {"title": "Morning digest", "platform": "mastodon"},
          ("random_fact", "random_joke", "programming_quote", "stoic_quote", "text_composer",
           "social_draft_poster"),
          {"post": "a Mastodon draft of the digest"}),
    _task(2, "easy",
          "Check the weather in Oslo, write a short text titled 'Oslo weather' about it and "
          "save it as a Bluesky draft.",
          {"city": "Oslo", "title": "Oslo weather", "platform": "bluesky"},
          ("weather_forecast", "text_composer", "social_draft_poster"),
          {"post": "a Bluesky draft about the weather in Oslo"}),
    _task(3, "easy",
          "Look up the definition of the word 'river' and words that rhyme with it, then "
          "compose a short text titled 'Word of the day'.",
          {"word": "river", "title": "Word of the day"},
          ("word_definition", "rhyme_finder", "text_composer"),
          {"text": "a word-of-the-day text with the definition and rhymes"}),
    _task(4, "medium",
          "Prepare a travel brief for Japan: its country facts, its public holidays in 2026 "
          "and the exchange rates from EUR, composed into a text titled 'Japan brief'.",
          {"code": "JP", "country": "JP", "year": 2026, "base": "EUR", "title": "Japan brief"},
          ("country_info", "public_holidays", "currency_rates", "text_composer"),
          {"text": "a travel brief for Japan"}),
    _task(5, "medium",
          "Collect a cat fact, a dog fact and a piece of advice, compose them into a text "
          "titled 'Pet wisdom' and save it as a LinkedIn draft.",
          {"title": "Pet wisdom", "platform": "linkedin"},
          ("cat_fact", "dog_fact", "random_advice", "text_composer", "social_draft_poster"),
          {"post": "a LinkedIn draft with pet facts and advice"}),
    _task(6, "easy",
          "Get a science trivia question and a fact about the number 42, and compose them "
          "into a text titled 'Quiz night'.",
          {"category": "science", "number": 42, "title": "Quiz night"},
          ("trivia_question", "number_fact", "text_composer"),
          {"text": "a quiz-night text"}),
    _task(7, "medium",
          "Find where the IP address 203.0.113.7 is, the current time in Europe/Berlin and "
          "the weather in Berlin, and compose a text titled 'Visitor report'.",
          {"ip": "203.0.113.7", "timezone": "Europe/Berlin", "city": "Berlin",
           "title": "Visitor report"},
          ("ip_lookup", "current_time", "weather_forecast", "text_composer"),
          {"text": "a report on the visitor's location, time and weather"}),
    _task(8, "hard",
          "Plan a creative post: an activity idea of type 'cooking', the color with hex "
          "2e8b57, 30 words of placeholder text and a fresh identifier, composed into a text "
          "titled 'Weekend plan' and saved as a Bluesky draft.",
          {"type": "cooking", "hex": "2e8b57", "words": 30, "title": "Weekend plan",
           "platform": "bluesky"},
          ("activity_idea", "color_info", "lorem_text", "uuid_generator", "text_composer",
           "social_draft_poster"),
          {"post": "a Bluesky draft of the weekend plan"}),
)

_BY_ID = {t.id: t for t in _TASKS}


def live_tasks() -> tuple[Task, ...]:
    """The eight live tasks, `live01`..`live08`."""
    return _TASKS


def live_task(task_id: str) -> Task:
    task = _BY_ID.get(task_id)
    if task is None:
        raise KeyError(f"no live task {task_id!r}; choose from {', '.join(_BY_ID)}")
    return task
