"""A new norm placement is one registered ``Residual`` class: a per-sublayer module that may own
parameters, drop the sublayer's norm, adjust its sublayer's initialisation and ask for the
stack's depth — built, counted, initialised and drawn with nothing else edited."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn

from src.inspection.diagram import model_mermaid
from src.inspection.params import parameter_table
from src.models import ModelConfig, build_model
from src.models.components.residual import PLACEMENTS, Residual
from tests.conftest import tiny_model_dict


class Gate(Residual):
    """x + α·f(x) with α a learned scalar starting at 0 and no norm (the shape of ReZero)."""

    final_norm = False
    uses_norm = False
    drawing = ("sublayer", "× α", "add")

    def __init__(self, n_layer: int, stack: str) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(()))
        self.seen = (n_layer, stack)
        self.initialised: list[str] = []

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        assert norm is None
        return x + self.alpha * sublayer(x)

    def init_sublayer(self, sublayer: nn.Module) -> None:
        self.initialised.append(type(sublayer).__name__)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> type[Gate]:
    monkeypatch.setitem(PLACEMENTS._classes, "test_gate", Gate)  # registered for this test only
    return Gate


def test_a_placement_is_one_class(gate: type[Gate]) -> None:
    cfg = tiny_model_dict(
        family="encoder_decoder",
        norm_placement="test_gate",
        n_encoder_layer=2,
        n_decoder_layer=3,
        decoder_start_token_id=1,
    )
    model = build_model(cfg).eval()
    residuals = [m for m in model.modules() if isinstance(m, gate)]
    # one per sublayer: 2 per encoder block, 3 per decoder block
    assert len(residuals) == 2 * 2 + 3 * 3
    assert {r.seen for r in residuals} == {(2, "encoder"), (3, "decoder")}
    # each adjusted its own sublayer after the family's init
    assert all(len(r.initialised) == 1 for r in residuals)
    assert model.encoder.final_norm is None and model.encoder.blocks[0].attn_norm is None
    ids = torch.randint(2, 97, (2, 6))
    # α = 0: every block is the identity, so the output is the embeddings' head
    with torch.no_grad():
        out = model(input_ids=ids, decoder_input_ids=ids).logits
        expected = model.logits(
            model.embed(ids)
            + model.decoder.position.add_to_embeddings(torch.zeros(1), torch.arange(6))
        )
    torch.testing.assert_close(out, expected)
    table = parameter_table(model)
    assert table.total == model.num_parameters()  # the scalars are counted (13 of them)
    text = model_mermaid(ModelConfig.from_dict(cfg))
    assert (
        'dec_step1_3["× α"]' in text
        and "dec_ffn --> dec_step1_3" in text
        and "dec_step1_3 --> dec_add3" in text
    )
    assert (
        "dec_in -.->|residual| dec_add1" in text
        and "dec_final" not in text
        and "dec_norm" not in text
    )
