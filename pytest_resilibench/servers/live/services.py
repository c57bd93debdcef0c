"""The 23 live HTTP API services: what each answers and how each misbehaves (docs/BENCHMARK.md:
Live APIs).

In the spirit of the public APIs the paper probed (random facts, jokes, quotes, ...), each service
is a tiny JSON API with its own temperament: a typical latency with jitter, and small chances of
hanging past the client's timeout, answering 429 with Retry-After, failing with a 5xx, or sending
a malformed or truncated body. Everything a service says is a pure function of its draws
(`rng.DrawStream`), so a run is reproducible; no clock is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_resilibench.base.rng import DrawStream
from pytest_resilibench.core.registry import DATA_FORMATS, Role
from pytest_resilibench.core.tool_schema import parameters as _params
from pytest_resilibench.core.tool_schema import text as _str

__all__ = ["SERVICES", "SERVICE_DATA_FORMAT", "Misbehaviour", "ServiceSpec", "service"]

# What every service answers in: a `format` argument naming another is a mismatch (400).
SERVICE_DATA_FORMAT = "json"

Responder = Callable[[Mapping[str, Any], DrawStream], dict[str, Any]]


@dataclass(frozen=True)
class Misbehaviour:
    """A service's temperament: latency (ms, log-normal jitter around the median) and the
    probability of each fault per request. The faults are exclusive; the rest succeed."""

    latency_ms: float = 20.0
    jitter: float = 0.4
    timeout: float = 0.0  # hangs for the server's `hang_s`, past any sensible client timeout
    rate_limit: float = 0.0  # 429 with Retry-After
    server_error: float = 0.0  # 500/502/503
    malformed: float = 0.0  # 200 with a body that is not JSON
    truncated: float = 0.0  # 200 whose body stops short of its Content-Length

    @property
    def failure_rate(self) -> float:
        return self.timeout + self.rate_limit + self.server_error + self.malformed + self.truncated


@dataclass(frozen=True)
class ServiceSpec:
    """One HTTP API: its tool contract (schemas, role) and its behaviour."""

    name: str
    description: str
    keywords: tuple[str, ...]
    method: str  # GET: arguments as query parameters; POST: arguments as a JSON body
    parameters: Mapping[str, Any]
    returns: Mapping[str, Any]
    respond: Responder
    misbehaviour: Misbehaviour
    role: Role = Role.SOURCE


# --- schema helpers -------------------------------------------------------------------------
def _returns(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


_S: dict[str, Any] = {"type": "string"}
_I: dict[str, Any] = {"type": "integer"}
_N: dict[str, Any] = {"type": "number"}
_SL: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


# --- content ----------------------------------------------------------------------------------
_FACTS = (
    "Honey never spoils: edible honey has been found in ancient Egyptian tombs.",
    "Octopuses have three hearts and blue blood.",
    "A day on Venus is longer than its year.",
    "Bananas are berries, but strawberries are not.",
    "The Eiffel Tower grows about 15 cm taller in summer heat.",
    "Sharks existed before trees did.",
)
_JOKES = (
    ("Why do programmers prefer dark mode?", "Because light attracts bugs."),
    ("Why did the scarecrow win an award?", "He was outstanding in his field."),
    ("What do you call a fake noodle?", "An impasta."),
    ("Why can't a bicycle stand on its own?", "It is two tired."),
    ("How does a computer get drunk?", "It takes screenshots."),
)
_PROGRAMMING_QUOTES = (
    ("Programs must be written for people to read, and only incidentally for machines to "
     "execute.", "Harold Abelson"),
    ("Simplicity is prerequisite for reliability.", "Edsger W. Dijkstra"),
    ("Premature optimization is the root of all evil.", "Donald Knuth"),
    ("Talk is cheap. Show me the code.", "Linus Torvalds"),
    ("Make it work, make it right, make it fast.", "Kent Beck"),
)
_STOIC_QUOTES = (
    ("You have power over your mind - not outside events.", "Marcus Aurelius"),
    ("We suffer more often in imagination than in reality.", "Seneca"),
    ("No man is free who is not master of himself.", "Epictetus"),
    ("Waste no more time arguing what a good man should be. Be one.", "Marcus Aurelius"),
    ("Luck is what happens when preparation meets opportunity.", "Seneca"),
)
_TRIVIA = {
    "science": (("What is the chemical symbol for gold?", "Au"),
                ("How many planets are in the Solar System?", "8")),
    "history": (("In which year did the Berlin Wall fall?", "1989"),
                ("Who was the first emperor of Rome?", "Augustus")),
    "geography": (("What is the longest river in Africa?", "Nile"),
                  ("What is the capital of Canada?", "Ottawa")),
}
_DEFINITIONS = {
    "river": ("noun", "a large natural stream of water flowing to the sea or a lake"),
    "resilience": ("noun", "the capacity to recover quickly from difficulties"),
    "serendipity": ("noun", "the occurrence of events by chance in a happy way"),
    "ephemeral": ("adjective", "lasting for a very short time"),
    "compose": ("verb", "to write or create a work of art, especially music or poetry"),
}
_RHYMES = {
    "river": ("giver", "shiver", "sliver", "quiver", "deliver"),
    "code": ("road", "mode", "load", "node", "episode"),
    "light": ("night", "bright", "sight", "flight", "write"),
    "time": ("rhyme", "climb", "prime", "chime", "sublime"),
}
_TIMEZONES = ("UTC", "Europe/Lisbon", "Europe/Berlin", "America/New_York", "Asia/Tokyo",
              "Australia/Sydney")
_CURRENCIES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.3, "CHF": 0.88, "BRL": 5.05}
_CITIES = ("Lisbon", "Berlin", "Tokyo", "Nairobi", "Lima", "Oslo", "Toronto")
_CONDITIONS = ("sunny", "cloudy", "light rain", "windy", "fog", "clear")
_CAT_FACTS = (
    "Cats sleep for about 70% of their lives.",
    "A group of cats is called a clowder.",
    "Cats have five toes on their front paws but only four on the back ones.",
    "A cat's purr vibrates at 25 to 150 hertz.",
)
_DOG_FACTS = (
    "A dog's nose print is unique, much like a human fingerprint.",
    "Dogs can learn more than 1000 words.",
    "Greyhounds can reach speeds of 72 km/h.",
    "Dalmatian puppies are born completely white.",
)
_ADVICE = (
    "Write things down before you forget them.",
    "Take a walk when you are stuck on a problem.",
    "Never trust a system you have not seen fail.",
    "Ask for help earlier than feels comfortable.",
)
_ACTIVITIES = {
    "education": ("Learn the basics of a new programming language", 1),
    "recreational": ("Go for a hike in a nearby park", 2),
    "social": ("Host a board game night", 4),
    "cooking": ("Bake bread from scratch", 1),
    "relaxation": ("Read a chapter of a classic novel", 1),
}
_COLORS = {"ff6347": "tomato", "4682b4": "steel blue", "2e8b57": "sea green",
           "ffd700": "gold", "6a5acd": "slate blue", "000000": "black"}
_COUNTRIES = {
    "PT": ("Portugal", "Lisbon", 10_300_000, "Europe"),
    "DE": ("Germany", "Berlin", 84_400_000, "Europe"),
    "JP": ("Japan", "Tokyo", 124_500_000, "Asia"),
    "KE": ("Kenya", "Nairobi", 55_100_000, "Africa"),
    "PE": ("Peru", "Lima", 34_300_000, "Americas"),
}
_HOLIDAYS = {
    "PT": (("01-01", "New Year's Day"), ("04-25", "Freedom Day"), ("06-10", "Portugal Day")),
    "DE": (("01-01", "New Year's Day"), ("10-03", "German Unity Day"), ("12-25", "Christmas")),
    "JP": (("01-01", "New Year's Day"), ("02-11", "Foundation Day"), ("05-03", "Constitution Day")),
    "KE": (("01-01", "New Year's Day"), ("06-01", "Madaraka Day"), ("12-12", "Jamhuri Day")),
    "PE": (("01-01", "New Year's Day"), ("07-28", "Independence Day"), ("12-08", "Immaculate "
                                                                                  "Conception")),
}
_LOREM = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed",
          "do", "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna")
_ORGS = ("Example Telecom", "Loopback Networks", "Acme Hosting", "Blue Fiber")


# --- responders (pure functions of the arguments and the draws) -------------------------------
def _fact(_: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    return {"fact": d.choice(_FACTS), "source": "facts.example"}


def _joke(_: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    setup, punchline = d.choice(_JOKES)
    return {"setup": setup, "punchline": punchline}


def _quote(table: tuple[tuple[str, str], ...]) -> Responder:
    def respond(_: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
        quote, author = d.choice(table)
        return {"quote": quote, "author": author}
    return respond


def _trivia(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    category = args.get("category") or d.choice(sorted(_TRIVIA))
    question, answer = d.choice(_TRIVIA[category])
    return {"category": category, "question": question, "answer": answer}


def _definition(args: Mapping[str, Any], _: DrawStream) -> dict[str, Any]:
    word = args["word"].lower()
    part, meaning = _DEFINITIONS.get(word, ("noun", f"a word spelled {word!r}"))
    return {"word": word, "part_of_speech": part, "definition": meaning}


def _time(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    # A seeded instant, not the clock: the answer must be reproducible.
    hour, minute = d.randint(0, 23), d.randint(0, 59)
    return {"timezone": args.get("timezone", "UTC"),
            "datetime": f"2026-05-{d.randint(1, 28):02d}T{hour:02d}:{minute:02d}:00",
            "day_of_week": d.randint(0, 6)}


def _rates(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    base = args["base"]
    symbols = args.get("symbols") or sorted(c for c in _CURRENCIES if c != base)
    drift = d.uniform(0.99, 1.01)  # one market move for the whole quote
    rates = {s: round(_CURRENCIES[s] / _CURRENCIES[base] * drift, 4) for s in symbols}
    return {"base": base, "rates": rates}


def _weather(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    return {"city": args["city"], "temperature_c": round(d.uniform(-5.0, 34.0), 1),
            "conditions": d.choice(_CONDITIONS), "humidity": d.randint(20, 95)}


def _choice_fact(table: tuple[str, ...]) -> Responder:
    def respond(_: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
        return {"fact": d.choice(table)}
    return respond


def _number(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    n = args["number"] if "number" in args else d.randint(0, 1000)
    kind = "even" if n % 2 == 0 else "odd"
    return {"number": n, "text": f"{n} is an {kind} number whose digits sum to "
                                  f"{sum(int(c) for c in str(abs(n)))}."}


def _advice(_: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    return {"advice": d.choice(_ADVICE), "id": d.randint(1, 250)}


def _activity(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    kind = args.get("type") or d.choice(sorted(_ACTIVITIES))
    activity, participants = _ACTIVITIES[kind]
    return {"activity": activity, "type": kind, "participants": participants}


def _color(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    hex_ = (args.get("hex") or d.choice(sorted(_COLORS))).lower()
    rgb = [int(hex_[i:i + 2], 16) for i in (0, 2, 4)]
    return {"hex": f"#{hex_}", "name": _COLORS.get(hex_, "unnamed"), "rgb": rgb}


def _country(args: Mapping[str, Any], _: DrawStream) -> dict[str, Any]:
    name, capital, population, region = _COUNTRIES[args["code"]]
    return {"code": args["code"], "name": name, "capital": capital,
            "population": population, "region": region}


def _holidays(args: Mapping[str, Any], _: DrawStream) -> dict[str, Any]:
    year = args.get("year", 2026)
    return {"country": args["country"], "year": year,
            "holidays": [{"date": f"{year}-{day}", "name": name}
                         for day, name in _HOLIDAYS[args["country"]]]}


def _uuid(_: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    h = f"{d.bits64():016x}{d.bits64():016x}"
    return {"uuid": f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"}


def _ip(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    ip = args.get("ip") or f"203.0.113.{d.randint(1, 254)}"
    code = d.choice(sorted(_COUNTRIES))
    return {"ip": ip, "city": _COUNTRIES[code][1], "country": code, "org": d.choice(_ORGS)}


def _lorem(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    words = [d.choice(_LOREM) for _ in range(args.get("words", 20))]
    return {"text": " ".join(words).capitalize() + ".", "words": len(words)}


def _rhymes(args: Mapping[str, Any], _: DrawStream) -> dict[str, Any]:
    word = args["word"].lower()
    return {"word": word, "rhymes": list(_RHYMES.get(word, ()))}


def _compose(args: Mapping[str, Any], _: DrawStream) -> dict[str, Any]:
    parts = [p.strip() for p in args.get("parts", ()) if p.strip()]
    words = " ".join([args["title"] + ":", *parts]).split()
    limit = args.get("max_words", 120)
    text = " ".join(words[:limit]) + (" ..." if len(words) > limit else "")
    return {"title": args["title"], "text": text, "words": min(len(words), limit),
            "parts_used": len(parts)}


def _post(args: Mapping[str, Any], d: DrawStream) -> dict[str, Any]:
    text = args.get("text", "")
    return {"post_id": f"draft_{d.bits64() & 0xFFFFFFFF:08x}", "platform": args["platform"],
            "status": "draft", "characters": len(text)}


# --- the services -----------------------------------------------------------------------------
_M = Misbehaviour
_CODE = _str("ISO 3166 alpha-2 country code", enum=sorted(_COUNTRIES))

SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec(
        "random_fact", "Get a random interesting fact about the world.",
        ("fact", "random", "trivia", "interesting", "world"), "GET", _params(),
        _returns(fact=_S, source=_S), _fact, _M(latency_ms=15, server_error=0.03)),
    ServiceSpec(
        "random_joke", "Get a random joke with its setup and punchline.",
        ("joke", "funny", "humor", "setup", "punchline"), "GET", _params(),
        _returns(setup=_S, punchline=_S), _joke, _M(latency_ms=25, rate_limit=0.10)),
    ServiceSpec(
        "programming_quote", "Get a famous quote about programming and software.",
        ("quote", "programming", "software", "developer", "code"), "GET", _params(),
        _returns(quote=_S, author=_S), _quote(_PROGRAMMING_QUOTES),
        _M(latency_ms=40, jitter=0.6, server_error=0.08, timeout=0.02)),
    ServiceSpec(
        "stoic_quote", "Get a quote from a stoic philosopher such as Seneca or Marcus Aurelius.",
        ("quote", "stoic", "philosophy", "wisdom", "seneca"), "GET", _params(),
        _returns(quote=_S, author=_S), _quote(_STOIC_QUOTES),
        _M(latency_ms=30, malformed=0.06, truncated=0.03)),
    ServiceSpec(
        "trivia_question", "Get a trivia question and its answer, optionally from a category.",
        ("trivia", "question", "quiz", "answer", "category"), "GET",
        _params(category=_str("question category", enum=sorted(_TRIVIA))),
        _returns(category=_S, question=_S, answer=_S), _trivia,
        _M(latency_ms=35, rate_limit=0.05, server_error=0.03)),
    ServiceSpec(
        "word_definition", "Look up the dictionary definition of an English word.",
        ("word", "definition", "dictionary", "meaning", "lookup"), "GET",
        _params(["word"], word=_str("the word to define", pattern="^[A-Za-z-]+$")),
        _returns(word=_S, part_of_speech=_S, definition=_S), _definition,
        _M(latency_ms=25, timeout=0.04)),
    ServiceSpec(
        "current_time", "Get the current date and time in a time zone.",
        ("time", "date", "clock", "timezone", "now"), "GET",
        _params(["timezone"], timezone=_str("IANA time zone", enum=list(_TIMEZONES))),
        _returns(timezone=_S, datetime=_S, day_of_week=_I), _time,
        _M(latency_ms=10, server_error=0.02)),
    ServiceSpec(
        "currency_rates", "Get exchange rates from a base currency to other currencies.",
        ("currency", "exchange", "rates", "money", "forex"), "GET",
        _params(["base"], base=_str("base currency", enum=sorted(_CURRENCIES)),
                symbols={"type": "array", "items": {"type": "string",
                                                    "enum": sorted(_CURRENCIES)},
                         "description": "target currencies (default: all)"}),
        _returns(base=_S, rates={"type": "object"}), _rates,
        _M(latency_ms=45, jitter=0.5, rate_limit=0.06, timeout=0.03)),
    ServiceSpec(
        "weather_forecast", "Get the current weather for a city: temperature and conditions.",
        ("weather", "forecast", "temperature", "city", "conditions"), "GET",
        _params(["city"], city=_str("city name", enum=list(_CITIES))),
        _returns(city=_S, temperature_c=_N, conditions=_S, humidity=_I), _weather,
        _M(latency_ms=50, jitter=0.7, timeout=0.06, server_error=0.04)),
    ServiceSpec(
        "cat_fact", "Get a random fact about cats.", ("cat", "fact", "animal", "pet", "feline"),
        "GET", _params(), _returns(fact=_S), _choice_fact(_CAT_FACTS),
        _M(latency_ms=20, truncated=0.05)),
    ServiceSpec(
        "number_fact", "Get a fact about a number.", ("number", "fact", "math", "digits"),
        "GET", _params(number={"type": "integer", "minimum": 0, "maximum": 10**6,
                        "description": "the number (default: a random one)"}),
        _returns(number=_I, text=_S), _number, _M(latency_ms=15, server_error=0.05)),
    ServiceSpec(
        "random_advice", "Get a random piece of advice.", ("advice", "tip", "suggestion", "life"),
        "GET", _params(), _returns(advice=_S, id=_I), _advice,
        _M(latency_ms=20, rate_limit=0.12)),
    ServiceSpec(
        "activity_idea", "Suggest an activity to do when bored, optionally of a given type.",
        ("activity", "bored", "idea", "hobby", "suggestion"), "GET",
        _params(type=_str("activity type", enum=sorted(_ACTIVITIES))),
        _returns(activity=_S, type=_S, participants=_I), _activity,
        _M(latency_ms=30, malformed=0.05)),
    ServiceSpec(
        "color_info", "Describe a color by hex code: its name and RGB values.",
        ("color", "hex", "rgb", "palette", "name"), "GET",
        _params(hex=_str("hex code without '#'", pattern="^[0-9a-fA-F]{6}$")),
        _returns(hex=_S, name=_S, rgb={"type": "array", "items": _I}), _color,
        _M(latency_ms=10)),
    ServiceSpec(
        "country_info", "Get facts about a country: name, capital, population, region.",
        ("country", "capital", "population", "region", "nation"), "GET",
        _params(["code"], code=_CODE),
        _returns(code=_S, name=_S, capital=_S, population=_I, region=_S), _country,
        _M(latency_ms=35, server_error=0.04, truncated=0.02)),
    ServiceSpec(
        "public_holidays", "List the public holidays of a country in a year.",
        ("holiday", "calendar", "public", "country", "date"), "GET",
        _params(["country"], country=_CODE,
                year={"type": "integer", "minimum": 2000, "maximum": 2100}),
        _returns(country=_S, year=_I, holidays={"type": "array"}), _holidays,
        _M(latency_ms=40, timeout=0.05, rate_limit=0.03)),
    ServiceSpec(
        "uuid_generator", "Generate a random version-4 UUID.",
        ("uuid", "identifier", "generate", "unique", "id"), "GET", _params(),
        _returns(uuid=_S), _uuid, _M(latency_ms=5)),
    ServiceSpec(
        "ip_lookup", "Look up the location and network owner of an IP address.",
        ("ip", "address", "geolocation", "network", "lookup"), "GET",
        _params(ip=_str("IPv4 address (default: the caller's)",
                        pattern=r"^\d{1,3}(\.\d{1,3}){3}$")),
        _returns(ip=_S, city=_S, country=_S, org=_S), _ip,
        _M(latency_ms=60, jitter=0.6, rate_limit=0.08, server_error=0.03)),
    ServiceSpec(
        "lorem_text", "Generate lorem ipsum placeholder text.",
        ("lorem", "ipsum", "placeholder", "text", "filler"), "GET",
        _params(words={"type": "integer", "minimum": 1, "maximum": 200}),
        _returns(text=_S, words=_I), _lorem, _M(latency_ms=10, malformed=0.03)),
    ServiceSpec(
        "dog_fact", "Get a random fact about dogs.", ("dog", "fact", "animal", "pet", "canine"),
        "GET", _params(), _returns(fact=_S), _choice_fact(_DOG_FACTS),
        _M(latency_ms=25, server_error=0.06, timeout=0.02)),
    ServiceSpec(
        "rhyme_finder", "Find words that rhyme with a word.",
        ("rhyme", "word", "poetry", "lyrics", "sound"), "GET",
        _params(["word"], word=_str("the word to rhyme", pattern="^[A-Za-z]+$")),
        _returns(word=_S, rhymes=_SL), _rhymes, _M(latency_ms=30, rate_limit=0.04)),
    ServiceSpec(
        "text_composer", "Compose a titled text from collected parts, within a word limit.",
        ("compose", "combine", "summarize", "text", "write", "draft"), "POST",
        _params(["title"], title=_str("title of the composition"),
                parts={"type": "array", "items": {"type": "string"},
                       "description": "texts gathered by earlier steps"},
                max_words={"type": "integer", "minimum": 10, "maximum": 500},
                format=_str("format of the collected parts (the services answer in json)",
                            enum=list(DATA_FORMATS))),
        _returns(title=_S, text=_S, words=_I, parts_used=_I), _compose,
        _M(latency_ms=70, jitter=0.5, server_error=0.05, timeout=0.03),
        role=Role.AGGREGATOR),
    ServiceSpec(
        "social_draft_poster", "Save a social media post as a draft on a platform.",
        ("post", "social", "media", "draft", "publish", "share"), "POST",
        _params(["platform"], platform=_str("platform", enum=["mastodon", "bluesky", "linkedin"]),
                text={"type": "string", "maxLength": 2000}),
        _returns(post_id=_S, platform=_S, status=_S, characters=_I), _post,
        _M(latency_ms=55, rate_limit=0.07, server_error=0.04),
        role=Role.OUTPUT),
)
assert len(SERVICES) == 23 and len({s.name for s in SERVICES}) == 23

_BY_NAME = {s.name: s for s in SERVICES}


def service(name: str) -> ServiceSpec:
    """The service called `name` (KeyError if there is none)."""
    return _BY_NAME[name]
