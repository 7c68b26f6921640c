"""Document masking of packed sequences (``data.document_mask``, issue 59): each document of a
packed window gets the logits it gets alone; without document ids nothing changes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.documents import document_ids, document_positions, same_document
from tests.conftest import tiny_model_dict

EOS = 0
LENGTHS = [7, 1, 12, 5]  # documents of one packed row, each ended by eos


def test_eos_ends_its_document_and_positions_restart() -> None:
    ids = torch.tensor([[5, 6, EOS, 7, EOS, EOS, 8, 9]])
    docs = document_ids(ids, EOS)
    assert docs.tolist() == [[0, 0, 0, 1, 1, 2, 3, 3]]
    assert document_positions(docs).tolist() == [[0, 1, 2, 0, 1, 0, 0, 1]]
    allowed = same_document(docs)
    assert allowed.shape == (1, 1, 8, 8)
    assert allowed[0, 0, 3].nonzero().flatten().tolist() == [3, 4]


def packed_documents() -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Two rows: four documents packed in row 0, and row 1 the same documents in another order
    (so a document sits at different window offsets)."""
    gen = torch.Generator().manual_seed(0)
    docs = [torch.randint(1, 97, (n,), generator=gen) for n in LENGTHS]
    docs = [torch.cat([d[:-1], torch.tensor([EOS])]) for d in docs]  # each ends with its eos
    rows = torch.stack([torch.cat(docs), torch.cat(docs[::-1])])  # [2, T]
    return rows, docs


CASES: dict[str, dict[str, Any]] = {
    "learned": {"position": {"name": "learned"}},
    "rope": {"position": {"name": "rope"}},
    "alibi": {"position": {"name": "alibi"}},
    "learned_window": {
        "position": {"name": "learned"},
        "mask": {"name": "sliding_window", "window": 4},
    },
    "rope_window": {"position": {"name": "rope"}, "mask": {"name": "sliding_window", "window": 4}},
    "rope_learned_sink": {"position": {"name": "rope"}, "sinks": {"name": "learned"}},
    "alibi_sink_tokens": {"position": {"name": "alibi"}, "sinks": {"name": "token", "count": 2}},
    "learned_sink_tokens": {
        "position": {"name": "learned"},
        "sinks": {"name": "token", "count": 2},
    },
    "rope_differential": {"position": {"name": "rope"}, "attention": {"name": "differential"}},
    "alibi_window": {
        "position": {"name": "alibi"},
        "mask": {"name": "sliding_window", "window": 4},
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_packed_document_gets_its_logits_alone(case: str) -> None:
    torch.manual_seed(0)
    model = build_model(tiny_model_dict(n_layer=2, **CASES[case])).eval()
    rows, docs = packed_documents()
    with torch.no_grad():
        packed = model(rows, document_ids=document_ids(rows, EOS)).logits  # [2, T, V]
        alone = [model(d[None]).logits[0] for d in docs]  # [n, V] each
        plain = model(rows).logits
    starts = [0, *torch.tensor(LENGTHS).cumsum(0).tolist()]
    reversed_starts = [0, *torch.tensor(LENGTHS[::-1]).cumsum(0).tolist()]
    for k, logits in enumerate(alone):
        a, b = starts[k], starts[k + 1]
        torch.testing.assert_close(packed[0, a:b], logits, atol=1e-5, rtol=1e-5)
        j = len(docs) - 1 - k
        a, b = reversed_starts[j], reversed_starts[j + 1]
        torch.testing.assert_close(packed[1, a:b], logits, atol=1e-5, rtol=1e-5)
    # without the mask, later documents read earlier ones
    assert (plain[0, starts[1] :] - packed[0, starts[1] :]).abs().max() > 1e-3


def test_one_document_per_row_equals_no_document_ids() -> None:
    torch.manual_seed(0)
    model = build_model(tiny_model_dict(position={"name": "learned"})).eval()
    ids = torch.randint(1, 97, (2, 16))  # no eos: one document per row
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, document_ids=document_ids(ids, EOS)).logits,
            model(ids).logits,
            atol=1e-6,
            rtol=1e-6,
        )


def test_causal_lm_task_marks_documents_only_when_asked() -> None:
    """The causal-LM task computes document ids from the window's inputs and the tokenizer's
    eos once per batch, and passes none by default (today's inputs)."""
    from src.data.tokenizers import GPT2Tokenizer
    from src.objectives import OBJECTIVES
    from tests.objectives.test_tasks import plain_cfg

    tok = GPT2Tokenizer()
    eos = tok.eos_token_id
    tokens = torch.tensor([[5, 6, eos, 7, 8, eos, 9, 10, 11]])  # [1, T+1]
    for on in (False, True):
        cfg = plain_cfg({"name": "causal_lm", "prefix_length": None})
        cfg["model"]["vocab_size"] = tok.vocab_size
        cfg["data"] = {"name": "embedded", "document_mask": on}
        task = OBJECTIVES.get("causal_lm")(cfg, tok.state_dict())
        inputs = task.prepare({"tokens": tokens}).inputs
        if on:
            assert inputs["document_ids"].tolist() == [[0, 0, 0, 1, 1, 1, 2, 2]]
            task.model(**inputs)  # the forward takes them
        else:
            assert "document_ids" not in inputs
