"""Masks decide what each output may depend on: causal, bidirectional, prefix LM, padding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from src.models import build_model

MakeConfig = Callable[..., dict[str, Any]]
T = 10


def change_after(ids: torch.Tensor, i: int) -> torch.Tensor:
    """A copy of ids [B, T] with every token after position i replaced."""
    other = ids.clone()
    other[:, i + 1 :] = (ids[:, i + 1 :] + 1) % 97
    return other


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_causal_output_ignores_the_future(make_tiny_config: MakeConfig, position: str) -> None:
    model = build_model(make_tiny_config(position={"name": position})).eval()
    ids = torch.randint(0, 97, (2, T))
    i = 4
    with torch.no_grad():
        a, b = model(ids).logits, model(change_after(ids, i)).logits  # [B, T, V]
        a_e = model(change_after(ids, i), output_attentions=True).logits  # the explicit path too
    torch.testing.assert_close(b[:, : i + 1], a[:, : i + 1])
    torch.testing.assert_close(a_e[:, : i + 1], a[:, : i + 1], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(b[:, i + 1 :], a[:, i + 1 :], atol=1e-4)


def test_bidirectional_output_sees_the_future(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config(mask={"name": "bidirectional"})).eval()
    ids = torch.randint(0, 97, (2, T))
    with torch.no_grad():
        a, b = model(ids).logits, model(change_after(ids, 4)).logits
    assert not torch.allclose(b[:, :5], a[:, :5], atol=1e-4)
    probs = model(ids, output_attentions=True).attentions[0]  # [B, H, T, S]
    assert (probs > 0).all()


def test_causal_attention_matrix(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config()).eval()
    out = model(torch.randint(0, 97, (2, T)), output_attentions=True)
    assert len(out.attentions) == 2  # one per layer
    for probs in out.attentions:
        assert probs.shape == (2, 4, T, T)  # [B, H, T, S]
        torch.testing.assert_close(probs.sum(-1), torch.ones(2, 4, T))
        assert torch.equal(probs.triu(1), torch.zeros_like(probs))


def test_prefix_lm_mask(make_tiny_config: MakeConfig) -> None:
    """Bidirectional over each row's prefix (3 and 5 tokens), causal after it (T5 §3.2.1)."""
    model = build_model(make_tiny_config(mask={"name": "prefix_lm"})).eval()
    ids = torch.randint(0, 97, (2, 8))
    prefix = torch.tensor([3, 5])
    out = model(ids, prefix_length=prefix, output_attentions=True)
    visible = out.attentions[0][:, 0] > 0  # [B, T, S]
    for b, p in enumerate(prefix.tolist()):
        expected = torch.ones(8, 8, dtype=torch.bool).tril()
        expected[:, :p] = True  # everyone sees the whole prefix
        assert torch.equal(visible[b], expected), f"row {b} (prefix {p})"
    # The SDPA path gives the same outputs.
    torch.testing.assert_close(
        model(ids, prefix_length=prefix).logits, out.logits, atol=1e-5, rtol=1e-5
    )
    # A prefix token depends on later prefix tokens, but not on tokens after the prefix.
    with torch.no_grad():
        base = model(ids, prefix_length=prefix).logits
        in_prefix = ids.clone()
        in_prefix[:, 2] = (ids[:, 2] + 1) % 97
        after = change_after(ids, 4)
        assert not torch.allclose(
            model(in_prefix, prefix_length=prefix).logits[:, 0], base[:, 0], atol=1e-4
        )
        torch.testing.assert_close(model(after, prefix_length=prefix).logits[:, :5], base[:, :5])


def test_prefix_lm_without_prefix_length_raises(make_tiny_config: MakeConfig) -> None:
    model = build_model(make_tiny_config(mask={"name": "prefix_lm"}))
    with pytest.raises(ValueError, match="prefix_lm needs prefix_length"):
        model(torch.zeros(1, 4, dtype=torch.long))


@pytest.mark.parametrize("position", ["learned", "rope", "sinusoidal"])
def test_encoder_right_padding_leaves_real_tokens_unchanged(
    make_tiny_config: MakeConfig, position: str
) -> None:
    cfg = make_tiny_config(
        family="encoder_only",
        position={"name": position},
        norm_placement="post",
        embedding_norm=True,
    )
    model = build_model(cfg).eval()
    ids = torch.randint(1, 97, (1, 7))
    # [1, 10]: 3 pads on the right
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 7 + [0] * 3])
    with torch.no_grad():
        ref = model(ids).logits
        for explicit in (False, True):
            out = model(padded, attention_mask=mask, output_attentions=explicit).logits[:, :7]
            torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        # Without the mask, the pads leak into the real tokens.
        assert not torch.allclose(model(padded).logits[:, :7], ref, atol=1e-5)


@pytest.mark.parametrize("position", ["rope", "alibi", "none"])
def test_decoder_left_padding_leaves_real_tokens_unchanged(
    make_tiny_config: MakeConfig, position: str
) -> None:
    """Left padding (for batched generation) shifts absolute positions, so this holds for
    relative schemes only; with a learned table the real tokens sit at other positions."""
    model = build_model(make_tiny_config(position={"name": position})).eval()
    ids = torch.randint(1, 97, (1, 7))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], dim=1)
    mask = torch.tensor([[0] * 3 + [1] * 7])
    with torch.no_grad():
        ref = model(ids).logits
        for explicit in (False, True):
            out = model(padded, attention_mask=mask, output_attentions=explicit).logits
            assert not out.isnan().any()
            torch.testing.assert_close(out[:, 3:], ref, atol=1e-5, rtol=1e-5)


def test_encoder_decoder_source_padding(make_tiny_config: MakeConfig) -> None:
    cfg = make_tiny_config(
        family="encoder_decoder",
        position={"name": "sinusoidal"},
        norm_placement="post",
        decoder_start_token_id=0,
    )
    model = build_model(cfg).eval()
    src, tgt = torch.randint(1, 97, (1, 6)), torch.randint(1, 97, (1, 4))
    padded = torch.cat([src, torch.zeros(1, 2, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 6 + [0] * 2])
    with torch.no_grad():
        ref = model(src, decoder_input_ids=tgt).logits
        out = model(padded, mask, decoder_input_ids=tgt).logits
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
