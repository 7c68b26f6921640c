"""The chunked head + cross-entropy (src.models.components.chunked_loss) against the plain path
``loss(logits(hidden), labels)``: the same loss and the same gradients, in float64 to 1e-6."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from src.models import build_model
from src.models.components.chunked_loss import chunked_cross_entropy
from src.models.components.loss import cross_entropy
from tests.conftest import tiny_model_dict

B, T = 3, 11  # B·T = 33: no chunk size below divides it except 1, 3, 11


def _model(**overrides: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(tiny_model_dict(**overrides)).double()


def _labels(vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, vocab, (B, T + 1), generator=g)  # a window: every position scored
    labels[0, 3:7] = -100
    labels[2, 1] = -100
    return labels


def _grads(model: torch.nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _plain_and_chunked(model, ids, labels, chunk):
    hidden = model.hidden_states(ids)
    plain = model.loss(model.logits(hidden), labels)
    g_plain = _grads(model, plain)
    chunked = model.chunked_loss(model.hidden_states(ids), labels, chunk)
    g_chunked = _grads(model, chunked)
    return (plain, g_plain), (chunked, g_chunked)


@pytest.mark.parametrize("chunk", [1, 5, 8, 32, 33, 100])
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"final_softcap": 3.0},
        {"tie_embeddings": False, "vocab_pad_multiple": 64, "final_softcap": 2.0},
        {"scale_head": True, "tie_embeddings": False},
        {"parametrization": {"name": "mup", "base_d_model": 16}},
    ],
    ids=["tied", "softcap", "untied-padded-softcap", "scale-head", "mup-output-multiplier"],
)
def test_model_loss_and_every_gradient_equal_the_plain_path(
    chunk: int, overrides: dict[str, Any]
) -> None:
    model = _model(**overrides)
    ids = torch.randint(0, 97, (B, T), generator=torch.Generator().manual_seed(2))
    labels = _labels(97)
    (plain, g_plain), (chunked, g_chunked) = _plain_and_chunked(model, ids, labels, chunk)
    assert chunked.dtype == plain.dtype
    torch.testing.assert_close(chunked, plain, rtol=0, atol=1e-6)
    assert g_plain.keys() == g_chunked.keys()
    assert "head.weight" in g_chunked or "tok_embed.weight" in g_chunked
    for name, g in g_plain.items():
        torch.testing.assert_close(g_chunked[name], g, rtol=0, atol=1e-6, msg=name)


def test_labels_aligned_with_the_positions_leave_the_last_one_unscored() -> None:
    model = _model()
    ids = torch.randint(0, 97, (B, T), generator=torch.Generator().manual_seed(3))
    (plain, g_plain), (chunked, g_chunked) = _plain_and_chunked(model, ids, ids, 7)
    torch.testing.assert_close(chunked, plain, rtol=0, atol=1e-6)
    for name, g in g_plain.items():
        torch.testing.assert_close(g_chunked[name], g, rtol=0, atol=1e-6, msg=name)


@pytest.mark.parametrize("chunk", [4, 13])
def test_gradient_to_hidden_and_head_weight(chunk: int) -> None:
    torch.manual_seed(4)
    head = torch.nn.Linear(8, 29, bias=True).double()
    hidden = torch.randn(30, 8, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 29, (30,))
    target[::4] = -100

    def logits_fn(h: torch.Tensor) -> torch.Tensor:
        return 5.0 * torch.tanh(head(h) / 5.0)

    plain = cross_entropy(logits_fn(hidden), target)
    want = torch.autograd.grad(plain, (hidden, head.weight, head.bias))
    got_loss = chunked_cross_entropy(hidden, target, logits_fn, head.parameters, chunk)
    got = torch.autograd.grad(got_loss, (hidden, head.weight, head.bias))
    torch.testing.assert_close(got_loss, plain, rtol=0, atol=1e-6)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert got[0][::4].abs().max() == 0  # ignored rows send no gradient back


def test_scaled_upstream_gradient_and_no_grad_value() -> None:
    torch.manual_seed(5)
    head = torch.nn.Linear(8, 17).double()
    hidden = torch.randn(12, 8, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 17, (12,))
    loss = chunked_cross_entropy(hidden, target, head, head.parameters, 5)
    (g,) = torch.autograd.grad(3.0 * loss, hidden)
    (want,) = torch.autograd.grad(3.0 * cross_entropy(head(hidden), target), hidden)
    torch.testing.assert_close(g, want, rtol=0, atol=1e-6)
    with torch.no_grad():
        value = chunked_cross_entropy(hidden, target, head, head.parameters, 5)
        torch.testing.assert_close(value, cross_entropy(head(hidden), target), rtol=0, atol=1e-6)


def test_masked_lm_head_transform_gets_its_gradient() -> None:
    model = _model(family="encoder_only", position={"name": "learned"})
    ids = torch.randint(0, 97, (B, T), generator=torch.Generator().manual_seed(6))
    labels = ids.clone()
    labels[:, ::2] = -100
    (plain, g_plain), (chunked, g_chunked) = _plain_and_chunked(model, ids, labels, 6)
    torch.testing.assert_close(chunked, plain, rtol=0, atol=1e-6)
    assert any(n.startswith("transform") for n in g_chunked)
    for name, g in g_plain.items():
        torch.testing.assert_close(g_chunked[name], g, rtol=0, atol=1e-6, msg=name)


# -- the causal-LM task's training loss ------------------------------------------------------
def _task(chunk: Any, **model: Any):
    from src.objectives import OBJECTIVES
    from tests.objectives.test_tasks import TOK, plain_cfg

    torch.manual_seed(0)
    task = {"name": "causal_lm", "prefix_length": 5 if model else None, "loss_chunk_tokens": chunk}
    return OBJECTIVES.get("causal_lm")(plain_cfg(task, **model), TOK.state_dict())


@pytest.mark.parametrize("model", [{}, {"mask": {"name": "prefix_lm"}}], ids=["causal", "prefix"])
def test_task_training_loss_chunked_equals_the_forward_loss(model: dict[str, Any]) -> None:
    from tests.objectives.test_tasks import text_batch

    batch = text_batch(B=3, T=16)  # 48 tokens: chunks of 10 leave 8
    losses, grads = [], []
    for chunk in (None, 10):
        task = _task(chunk, **model).double()
        loss = task.training_loss(task.prepare(batch))
        losses.append(loss)
        grads.append(_grads(task.model, loss))
    torch.testing.assert_close(losses[1], losses[0], rtol=0, atol=1e-6)
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=0, atol=1e-6, msg=name)


def test_one_chunk_is_the_plain_path_bit_for_bit() -> None:
    from tests.objectives.test_tasks import text_batch

    batch = text_batch(B=2, T=16)  # 32 tokens ≤ 1024: the forward's loss itself
    a, b = _task(None), _task(1024)
    assert torch.equal(a.training_loss(a.prepare(batch)), b.training_loss(b.prepare(batch)))


@pytest.mark.parametrize("bad", [0, -3, 2.5, "big", True])
def test_loss_chunk_tokens_refuses_what_is_not_a_positive_count(bad: Any) -> None:
    from src.errors import ConfigError

    with pytest.raises(ConfigError, match="objective.loss_chunk_tokens=.*positive.*or null"):
        _task(bad)


def test_hidden_states_take_the_document_ids_the_forward_takes() -> None:
    model = _model()
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(7))
    docs = torch.tensor([[0] * 5 + [1] * 7, [0] * 12])
    want = model(ids, document_ids=docs).hidden_states
    torch.testing.assert_close(model.hidden_states(ids, document_ids=docs), want)


def test_an_old_causal_lm_checkpoint_gets_the_chunk_size_and_no_other_objective_does() -> None:
    from src.checkpoints.io import with_current_keys

    def old(name: str) -> dict[str, Any]:
        return {"hyper_parameters": {"cfg": {"objective": {"name": name}}}}

    assert with_current_keys(old("causal_lm"))["hyper_parameters"]["cfg"]["objective"] == {
        "name": "causal_lm",
        "loss_chunk_tokens": 1024,  # conf/objective/causal_lm.yaml's: the run resumes as written
    }
    assert with_current_keys(old("masked_lm"))["hyper_parameters"]["cfg"]["objective"] == {
        "name": "masked_lm"
    }


def test_a_second_backward_fails_loudly_instead_of_scaling_twice() -> None:
    head = torch.nn.Linear(8, 17).double()
    hidden = torch.randn(12, 8, dtype=torch.float64, requires_grad=True)
    loss = chunked_cross_entropy(hidden, torch.randint(0, 17, (12,)), head, head.parameters, 5)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="differentiated twice"):
        loss.backward()
