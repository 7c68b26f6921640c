"""The cross-entropy with the in-place backward (src.models.components.loss) against
``F.cross_entropy``: the same value and, to rounding, the same gradient."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from src.models import build_model
from src.models.components.loss import cross_entropy
from tests.conftest import tiny_model_dict


def _both(
    logits: torch.Tensor, target: torch.Tensor
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    a = logits.detach().clone().requires_grad_()
    b = logits.detach().clone().requires_grad_()
    la = cross_entropy(a, target)
    lb = F.cross_entropy(b.float(), target, ignore_index=-100)
    la.backward()
    lb.backward()
    return (la, a.grad), (lb, b.grad)


def test_matches_f_cross_entropy_with_ignored_rows() -> None:
    logits = torch.randn(37, 101) * 3
    target = torch.randint(0, 101, (37,))
    target[::5] = -100
    (la, ga), (lb, gb) = _both(logits, target)
    assert torch.equal(la, lb)  # same kernels for the value
    torch.testing.assert_close(ga, gb, rtol=1e-6, atol=1e-9)
    assert ga[::5].abs().max() == 0  # ignored rows get no gradient


def test_bf16_logits_give_float32_loss_and_bf16_grad() -> None:
    logits = torch.randn(16, 64).to(torch.bfloat16)
    target = torch.randint(0, 64, (16,))
    (la, ga), (lb, gb) = _both(logits, target)
    assert la.dtype == torch.float32 and ga.dtype == torch.bfloat16
    assert torch.equal(la, lb)
    torch.testing.assert_close(ga, gb)


def test_strided_view_of_padded_logits() -> None:
    padded = torch.randn(12, 72)
    target = torch.randint(0, 64, (12,))
    a = padded.clone().requires_grad_()
    b = padded.clone().requires_grad_()
    cross_entropy(a[:, :64], target).backward()
    F.cross_entropy(b[:, :64], target).backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-6, atol=1e-9)
    assert a.grad[:, 64:].abs().max() == 0


def test_without_grad_is_plain_cross_entropy() -> None:
    logits, target = torch.randn(8, 10), torch.randint(0, 10, (8,))
    with torch.no_grad():
        assert torch.equal(cross_entropy(logits, target), F.cross_entropy(logits, target))


@pytest.mark.parametrize("pad", [1, 64])
def test_model_loss_and_gradients_match_reference(pad: int) -> None:
    torch.manual_seed(0)
    model = build_model(tiny_model_dict(vocab_pad_multiple=pad))
    ids = torch.randint(0, 97, (3, 16))
    out = model(ids, labels=ids)
    out.loss.backward()
    ours = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logits = model(ids).logits  # the textbook shift: position t predicts token t+1
    ref = F.cross_entropy(logits[:, :-1].reshape(-1, 97), ids[:, 1:].reshape(-1))
    ref.backward()
    torch.testing.assert_close(out.loss, ref, rtol=1e-6, atol=0)
    for n, p in model.named_parameters():
        torch.testing.assert_close(ours[n], p.grad, rtol=1e-5, atol=1e-7, msg=n)
