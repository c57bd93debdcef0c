"""Request profiles: which generation fields each model family takes."""

from __future__ import annotations

import pytest

from pytest_resilibench.runtime.agents.profiles import AUTO, family_of, request_params


@pytest.mark.parametrize("model", ["o1", "o1-mini", "o3", "o3-mini-2025-01-31", "o4-mini",
                                   "gpt-5", "gpt-5-mini", "gpt-5.1", "openai:o3", "openai/o3"])
def test_reasoning_models(model: str) -> None:
    assert family_of(model).reasoning


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest",
                                   "Qwen/Qwen2.5-7B-Instruct", "qwen2.5:7b", "local",
                                   "builtin:adaptive", "omni-llama"])
def test_chat_models(model: str) -> None:
    assert not family_of(model).reasoning


def test_defaults_per_family() -> None:
    assert request_params("gpt-4o") == {"temperature": 0.0}
    assert request_params("o3") == {}  # no temperature at all: o3 takes only its default
    assert request_params("o3", seed=7) == {"seed": 7}
    assert request_params("gpt-4o", temperature=None) == {}  # 'default': the server's own
    assert request_params("gpt-4o", temperature=0.7) == {"temperature": 0.7}
    assert request_params("o3", temperature=1) == {"temperature": 1}  # the only value allowed


def test_model_args_pass_through_and_win() -> None:
    args = {"reasoning_effort": "low", "max_completion_tokens": 4000}
    assert request_params("o3", model_args=args) == args
    assert request_params("gpt-4o", model_args={"temperature": 0.3, "top_p": 0.9}) == {
        "temperature": 0.3, "top_p": 0.9}


def test_what_a_family_refuses_is_an_error_naming_the_option() -> None:
    with pytest.raises(ValueError, match="--resili-temperature: o3 is a reasoning model"):
        request_params("o3", temperature=0.0)
    with pytest.raises(ValueError, match=r"--resili-model-args: o3 .* max_tokens, temperature"):
        request_params("o3", model_args={"temperature": 0.2, "max_tokens": 10})
    with pytest.raises(ValueError, match=r"--resili-model-args: gpt-4o .* reasoning_effort"):
        request_params("gpt-4o", model_args={"reasoning_effort": "low"})
    assert AUTO == "auto"
