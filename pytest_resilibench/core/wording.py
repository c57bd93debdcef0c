"""Options a task states in words (docs/BENCHMARK.md: Tasks, "Options in words"; issue 34).

In the default task set a step's options (an aggregate's function, a transformation, an
analysis method, an objective, a chore, a schedule, a forecast horizon) are not shown in the
prompt's Inputs block: the description says them in words ("roll the records up into
averages for each group"), never as the value the tool takes (`mean`). So the value a correct
call carries is found by reading the text, and a plan that carries another one is wrong in a
way no rule over the Inputs and the plan can see: the Inputs never had it. The task keeps the
value itself (`Task.inputs`, the simulator's and the scorer's answer key); `Task.worded`
names the keys its description words.

`read_worded` is the inverse for this table: a built-in agent's reading of the text (the
generator draws every phrase from `PHRASES`, so a phrase found is the value meant; phrases
match whatever their case).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

__all__ = ["PHRASES", "WORDED_PARAMS", "read_worded"]

# Parameter -> value -> the phrases that say it. No phrase is another's value nor shares its
# stem with the value it says (a phrase that contained `mean` would give `mean` away to a
# string match), and no phrase contains another parameter's phrase.
PHRASES: Mapping[str, Mapping[Any, tuple[str, ...]]] = {
    "function": {
        "sum": ("totals", "overall amounts"),
        "mean": ("averages", "typical values"),
        "count": ("tallies", "numbers of records"),
        "min": ("smallest values", "lowest values"),
        "max": ("largest values", "highest values"),
    },
    "operation": {
        "normalize": ("bring every field into one standard form",
                      "make the field values consistent"),
        "pivot": ("turn the rows into columns", "swap the rows and the columns around"),
        "flatten": ("unnest the nested fields", "lift nested fields to the top level"),
        "rename": ("give the fields new names", "relabel the fields"),
        "enrich": ("add reference details to every record",
                   "fill in extra details on each record"),
    },
    "method": {
        "statistical": ("the spread and centre of the numbers",
                        "descriptive figures such as spread and centre"),
        "trend": ("the direction the figures move over time",
                  "how the figures develop over time"),
        "correlation": ("which fields rise and fall together", "how the fields move together"),
        "anomaly": ("outliers that break the pattern", "the odd values that stand out"),
    },
    "objective": {
        "minimize": ("as low as it can go", "down as far as possible"),
        "maximize": ("as high as it can go", "up as far as possible"),
    },
    "action": {
        "format": ("lay the records out neatly", "tidy up the layout of the records"),
        "split": ("break the records into parts", "cut the data into smaller pieces"),
        "merge": ("combine the records into one set", "join the pieces into a single set"),
        "dedupe": ("drop the repeated records", "remove the duplicate rows"),
    },
    "schedule": {
        "once": ("a single time", "one time only"),
        "hourly": ("every sixty minutes", "at the top of every hour"),
        "daily": ("every morning", "each morning before work"),
        "weekly": ("every Monday", "each Monday before noon"),
    },
    "horizon": {
        3: ("three",), 6: ("six",), 7: ("seven",), 12: ("twelve",), 14: ("fourteen",),
        24: ("twenty-four",), 30: ("thirty",), 52: ("fifty-two",), 90: ("ninety",),
    },
}
WORDED_PARAMS = frozenset(PHRASES)


@cache
def _pattern(param: str) -> tuple[re.Pattern[str], tuple[Any, ...]]:
    """One whole-word pattern for every phrase of `param`, longest first, a group each, and
    the value of each group. At the leftmost place any phrase matches, the first alternative
    that matches there wins: the earliest phrase in the text, the longest where several
    start at one place (one search instead of one a phrase)."""
    pairs = [(phrase, value) for value, phrases in PHRASES[param].items() for phrase in phrases]
    pairs.sort(key=lambda pair: -len(pair[0]))
    alternatives = "|".join(f"({re.escape(p)})" for p, _ in pairs)
    return (re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE),
            tuple(v for _, v in pairs))


def read_worded(text: str) -> dict[str, Any]:
    """The options a description states in words: parameter -> value, for every parameter
    one of whose phrases it contains (the earliest in the text where several are)."""
    found: dict[str, Any] = {}
    for param in PHRASES:
        pattern, values = _pattern(param)
        if (m := pattern.search(text)) and m.lastindex is not None:
            found[param] = values[m.lastindex - 1]
    return found
