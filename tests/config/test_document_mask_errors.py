"""``data.document_mask`` on runs it cannot apply to fails in one line naming the key and the fix
(issue 59); on a synthetic task it is accepted and changes nothing (one example per row)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from src.config.validate import validate_run_config
from src.errors import ConfigError
from tests.config.test_error_catalogue import CPU

ON = "data.document_mask=true"


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["data=tinyshakespeare"], "data=tinyshakespeare is one text with no eos"),
        (
            ["data=multi30k", "model.family=encoder_decoder", "objective=seq2seq"],
            "one source/target pair per row",
        ),
        (
            [
                "data=embedded",
                "objective=masked_lm",
                "model.family=encoder_only",
                "model/mask=bidirectional",
            ],
            "not objective=masked_lm",
        ),
        (["data=embedded", "data.document_mask=1"], "must be true or false"),
        (
            ["data=embedded", "model/position=rope", "model/sinks=token"],
            "cannot restart positions before model/sinks=token",
        ),
    ],
)
def test_document_mask_where_it_cannot_apply(
    overrides: list[str], says: str, compose: Callable[..., Any]
) -> None:
    extra = [] if any(o.startswith("data.document_mask") for o in overrides) else [ON]
    with pytest.raises(ConfigError) as info:
        validate_run_config(compose(*overrides, *extra), hardware=CPU)
    text = str(info.value)
    assert "data.document_mask" in text and says in text
    assert "set data.document_mask=false" in text or "true or false" in text
    assert "\n" not in text


def test_document_mask_on_packed_text_validates(compose: Callable[..., Any]) -> None:
    validate_run_config(compose("data=embedded", ON), hardware=CPU)
    validate_run_config(compose("data=embedded"), hardware=CPU)


def test_document_mask_on_a_synthetic_task_is_a_noop_with_a_note(
    compose: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="src.config.document_mask"):
        validate_run_config(compose("data=copy", ON), hardware=CPU)
    assert "changes nothing" in caplog.text
