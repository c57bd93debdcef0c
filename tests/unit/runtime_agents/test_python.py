"""`py:MODULE:FACTORY` agent specs (agents/python.py) and the spec families table."""

import itertools
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_resilibench.runtime.agents import FAMILIES, agent_shape, make_agent, spec_family

AGENTS = '''
from pytest_resilibench.runtime.agents import ModelReply

class Turn:
    name = "turn"
    async def complete(self, request):
        return ModelReply(content="TASK_COMPLETED")
    async def aclose(self):
        return None

class Loop:
    name = "loop"
    async def run(self, episode):
        episode.finish()
    async def aclose(self):
        return None

    @classmethod
    def create(cls):
        return cls()

class Both(Turn, Loop):
    pass

class SyncComplete(Turn):
    def complete(self, request):
        return ModelReply(content="TASK_COMPLETED")

class Nameless(Loop):
    name = None

def make_turn():
    return Turn()

def make_loop():
    return Loop()

def broken():
    raise RuntimeError("no API key in the environment")

def nothing():
    return None

async def make_async():
    return Turn()

def make_both():
    return Both()

def make_sync():
    return SyncComplete()

def make_nameless():
    return Nameless()

def make_string():
    return "an agent"

NOT_CALLABLE = 3
'''
_COUNT = itertools.count()


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The name of an importable module holding the agents above (a fresh name per test, so
    no test sees another's module from `sys.modules`)."""
    name = f"byo_agents_{next(_COUNT)}"
    (tmp_path / f"{name}.py").write_text(AGENTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_factory_may_build_either_shape(module: str) -> None:
    assert agent_shape(make_agent(f"py:{module}:make_turn")) == "turn"
    assert agent_shape(make_agent(f"py:{module}:make_loop")) == "loop"
    assert agent_shape(make_agent(f" py:{module}:Loop.create ")) == "loop"  # dotted, a class
    assert make_agent(f"py:{module}:Turn").name == "turn"  # the class itself is a factory


@pytest.mark.parametrize(("factory", "message"), [
    ("broken", "py:{m}:broken raised RuntimeError: no API key in the environment"),
    ("nothing", "py:{m}:nothing returned None, not an agent"),
    ("make_async", "returned an awaitable: the factory must be a plain function"),
    ("make_both", "Both object has both of `async def complete"),
    ("make_string", "str object has neither of `async def complete"),
    ("make_sync", "SyncComplete object: `complete` must be an `async def` method"),
    ("make_nameless", "Nameless object has no `name` string attribute"),
    ("missing", "module '{m}' has no attribute 'missing'"),
    ("Loop.missing", "module '{m}' has no attribute 'Loop.missing'"),
    ("NOT_CALLABLE", "{m}:NOT_CALLABLE is a int, not a callable that returns an agent"),
])
def test_bad_factories_are_one_clear_value_error(module: str, factory: str, message: str,
                                                 recwarn: pytest.WarningsRecorder) -> None:
    with pytest.raises(ValueError) as caught:
        make_agent(f"py:{module}:{factory}")
    assert message.format(m=module) in str(caught.value)
    error = caught.value  # one message: no chained traceback behind it
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


@pytest.mark.parametrize(("spec", "message"), [
    ("py:", "a Python agent is named py:MODULE:FACTORY"),
    ("py:only_a_module", "a Python agent is named py:MODULE:FACTORY"),
    ("py::make", "a Python agent is named py:MODULE:FACTORY"),
    ("py:no_such_module_anywhere:make", "no module named 'no_such_module_anywhere': install it"),
    ("py:no_such_package.sub:make", "no module named 'no_such_package'"),
])
def test_bad_specs_say_how_to_name_an_agent(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        make_agent(spec)
    assert message in str(caught.value)


def test_a_module_that_fails_to_import_says_why(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "byo_needs_dep.py").write_text("import no_such_dependency_xyz\n")
    (tmp_path / "byo_syntax.py").write_text("def make(:\n")
    (tmp_path / "byo_raises.py").write_text(textwrap.dedent("""
        import os
        KEY = os.environ["BYO_NO_SUCH_VARIABLE"]
    """))
    try:
        for module, said in [
            ("byo_needs_dep", "importing 'byo_needs_dep' failed: ModuleNotFoundError: "
                              "No module named 'no_such_dependency_xyz'"),
            ("byo_syntax", "importing 'byo_syntax' failed: SyntaxError"),
            ("byo_raises", "importing 'byo_raises' failed: KeyError: 'BYO_NO_SUCH_VARIABLE'"),
        ]:
            with pytest.raises(ValueError) as caught:
                make_agent(f"py:{module}:make")
            assert said in str(caught.value)
    finally:
        for module in ("byo_needs_dep", "byo_syntax", "byo_raises"):
            sys.modules.pop(module, None)


def test_py_agents_take_no_options(module: str) -> None:
    with pytest.raises(ValueError, match=r"takes no options \(got temperature\)"):
        make_agent(f"py:{module}:make_turn", temperature=0.2)


@pytest.mark.parametrize(("spec", "family"), [
    ("builtin:follower", "builtin"), ("py:mod:make", "py"), ("openai:o3", "openai"),
    ("o3", "openai"), ("qwen3:8b", "openai"), ("team:planner", "openai"),
])
def test_every_spec_has_one_family(spec: str, family: str) -> None:
    assert spec_family(spec) == family and family in FAMILIES


def test_a_colon_in_a_bare_model_name_stays_part_of_it() -> None:
    agent = make_agent("qwen3:8b", base_url="http://127.0.0.1:9/v1", api_key="unused")
    assert agent.name == "qwen3:8b"
