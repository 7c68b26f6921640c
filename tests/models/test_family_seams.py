"""Consumers ask the model what it can do; they never ask which family it holds.

Outside ``src/models/families`` no code in ``src/`` or ``perf/`` may
* call ``isinstance`` / ``issubclass`` with a family class (or compare ``type(model)`` with one),
* import a concrete family class (only ``TransformerModel``, the interface, and ``FAMILIES``),
* reach into a model's stacks (``model.decoder``, ``model.encoder``): a family method says it.
And the methods the consumers rely on behave per family as documented.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from src.models import FAMILIES, build_model
from src.models.generation import generate
from tests.conftest import tiny_model_dict

REPO = Path(__file__).resolve().parents[2]
FAMILY_CLASSES = {cls.__name__ for cls in (FAMILIES.get(n) for n in FAMILIES.names())}
INSIDE = REPO / "src" / "models"  # the model package itself (families, builder, HF adapters) may


def consumer_files() -> list[Path]:
    files = [*(REPO / "src").rglob("*.py"), *(REPO / "perf").rglob("*.py")]
    return sorted(p for p in files if INSIDE not in p.parents and "__pycache__" not in p.parts)


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(REPO) if REPO in path.parents else path.name}:{getattr(node, 'lineno', 0)}"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
        ):
            if len(node.args) == 2 and names_in(node.args[1]) & FAMILY_CLASSES:
                found.append(f"{where}: {node.func.id} on a family")
        elif isinstance(node, ast.Compare) and any(
            isinstance(o, (ast.Is, ast.Eq, ast.IsNot, ast.NotEq)) for o in node.ops
        ):
            if "type" in names_in(node) and names_in(node) & FAMILY_CLASSES:
                found.append(f"{where}: type() compared with a family")
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported = {a.name for a in node.names}
            if imported & FAMILY_CLASSES or node.module.startswith(
                (
                    "src.models.families.decoder_only",
                    "src.models.families.encoder_only",
                    "src.models.families.encoder_decoder",
                )
            ):
                found.append(f"{where}: imports a concrete family ({node.module})")
        elif isinstance(node, ast.Attribute) and node.attr in ("decoder", "encoder"):
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                found.append(f"{where}: reaches into a model's stack (.{node.attr})")
    return found


def test_no_consumer_asks_which_family_it_holds() -> None:
    assert FAMILY_CLASSES >= {"DecoderOnly", "EncoderOnly", "EncoderDecoder"}
    found = [v for p in consumer_files() for v in violations(p)]
    assert not found, "ask the model (a TransformerModel method) instead:\n" + "\n".join(found)


def test_the_guard_sees_what_it_forbids(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"  # parsed only, never imported
    bad.write_text(
        "from src.models.families.decoder_only import DecoderOnly\n"
        "def f(model):\n    return isinstance(model, DecoderOnly) or model.decoder.mask\n"
    )
    assert len(violations(bad)) == 3


FAMILY_CFGS = {
    "decoder_only": {},
    "prefix_lm": {"mask": {"name": "prefix_lm"}},
    "encoder_only": {"family": "encoder_only", "norm_placement": "post"},
    "encoder_decoder": {
        "family": "encoder_decoder",
        "position": {"name": "sinusoidal"},
        "decoder_start_token_id": 1,
    },
}


@pytest.mark.parametrize("name", sorted(FAMILY_CFGS))
def test_what_each_family_says_about_itself(name: str) -> None:
    model = build_model(tiny_model_dict(**FAMILY_CFGS[name])).eval()
    assert model.needs_prefix_length == (name == "prefix_lm")
    assert model.left_to_right == (name != "encoder_only")
    assert model.prompt_is_source == (name == "encoder_decoder")
    # the learned table's rows
    assert model.max_positions == (None if name == "encoder_decoder" else 32)
    assert set(model.stacks()) == (
        {"encoder", "decoder"}
        if name == "encoder_decoder"
        else {"encoder"}
        if name == "encoder_only"
        else {"decoder"}
    )
    ids = torch.randint(0, 97, (2, 6))
    if not model.left_to_right:
        with pytest.raises(ValueError, match="cannot generate text"):
            generate(model, ids, 3)
        return
    out = generate(model, ids, 3)
    new = model.new_tokens(out, ids)
    assert new.shape == (2, 3)
    assert torch.equal(out[:, -3:], new) and (
        model.prompt_is_source or torch.equal(out[:, :6], ids)
    )


def test_one_label_convention_the_family_aligns() -> None:
    """Decoder-only labels are in input coordinates (transformers), or the whole window of T + 1;
    the others are aligned with the logits already."""
    dec = build_model(tiny_model_dict())
    tokens = torch.randint(0, 97, (2, 9))
    x = tokens[:, :-1]
    assert torch.equal(dec.score_labels(tokens, 8), tokens[:, 1:])  # window: every position scored
    assert dec.score_labels(x, 8)[:, -1].eq(-100).all() and torch.equal(
        dec.score_labels(x, 8)[:, :-1], x[:, 1:]
    )
    with pytest.raises(ValueError, match="fit neither"):
        dec.score_labels(tokens[:, :5], 8)
    encdec = build_model(tiny_model_dict(**FAMILY_CFGS["encoder_decoder"]))
    assert torch.equal(encdec.score_labels(x, 8), x)
    with torch.no_grad():
        out = encdec(input_ids=x, labels=x)
        assert float(out.loss) == pytest.approx(float(encdec.loss(out.logits, x)))
