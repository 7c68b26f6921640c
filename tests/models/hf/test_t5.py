"""T5 in and out beyond the parametrised parity tests (tests/models/hf/test_parity.py: logits padded
and not, greedy decoding, the KV cache and the to_hf round trip for v1.0 and v1.1): conf/model/t5_small.yaml
is t5-small, the head's tie and scale travel together, and ``src.eval`` / ``src.generate`` run on a
T5 directory with the results transformers gives."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

transformers = pytest.importorskip("transformers")
from src.errors import HFConversionError  # noqa: E402
from src.models import ModelConfig, build_model  # noqa: E402
from src.models.hf import config_from_hf, from_hf, get_adapter  # noqa: E402
from tests.models.hf.test_parity import V, build_reference, randomize  # noqa: E402

CONF = Path(__file__).resolve().parents[3] / "conf"


def t5_small_yaml(*overrides: str) -> dict:
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return OmegaConf.to_container(
            compose(config_name="inspect", overrides=["model=t5_small", *overrides]).model
        )


def test_t5_small_yaml_is_t5_small() -> None:
    """transformers' T5Config defaults are t5-small's config (its docstring); our YAML maps onto them
    and has exactly T5ForConditionalGeneration's parameters."""
    hf = transformers.T5Config(decoder_start_token_id=0, n_positions=512)
    ours = ModelConfig.from_dict(t5_small_yaml()).to_dict()
    got = config_from_hf(hf).to_dict()
    assert {k: v for k, v in got.items() if k != "name"} == {
        k: v for k, v in ours.items() if k != "name"
    }
    with torch.device("meta"):
        n_ours = build_model(ours).num_parameters()
        n_ref = sum(p.numel() for p in transformers.T5ForConditionalGeneration(hf).parameters())
    assert n_ours == n_ref == 60_506_624


def test_config_mapping() -> None:
    c = config_from_hf(build_reference("t5").config)
    assert (
        c.d_head,
        c.attn_scale,
        c.tie_embeddings,
        c.scale_head,
        c.ffn,
        c.bias,
        c.norm_placement,
    ) == (12, 1.0, True, True, {"name": "relu"}, False, "pre")
    assert c.position == {"name": "t5_bias", "num_buckets": 16, "max_distance": 20}
    assert (
        c.n_encoder_layer,
        c.n_decoder_layer,
        c.pad_token_id,
        c.eos_token_id,
        c.decoder_start_token_id,
    ) == (2, 3, 0, 1, 0)
    v11 = config_from_hf(build_reference("t5_v11").config)
    assert (v11.tie_embeddings, v11.scale_head, v11.ffn) == (
        False,
        False,
        {"name": "geglu", "approximate": "tanh"},
    )


def test_a_tied_head_without_the_scale_is_refused(tmp_path: Path) -> None:
    """transformers 5 ties a fresh v1.1-style T5's head to `shared` (no lm_head.weight is saved): a
    tied, unscaled head that neither released line has."""
    cfg = transformers.T5Config(
        vocab_size=V,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
    )
    randomize(transformers.T5ForConditionalGeneration(cfg), 1).save_pretrained(tmp_path)
    with pytest.raises(
        HFConversionError,
        match=r"scale_decoder_outputs=False \(T5 v1.1\) but the checkpoint has no lm_head",
    ):
        from_hf(tmp_path)


def test_export_problems_name_the_t5_keys() -> None:
    base = t5_small_yaml("model.n_layer=1", "model.n_encoder_layer=1", "model.n_decoder_layer=1")
    t5 = get_adapter("t5")
    assert t5.export_problems(ModelConfig.from_dict(base)) == []
    assert t5.export_problems(ModelConfig.from_dict({**base, "scale_head": False})) == [
        "model.scale_head=False with model.tie_embeddings=True (T5 scales the head's input exactly when the head is "
        "tied: v1.0 both true, v1.1 both false)"
    ]
    problems = t5.export_problems(
        ModelConfig.from_dict({**base, "attn_scale": None, "ffn": {"name": "gelu"}})
    )
    assert problems == [
        "model.ffn.approximate='tanh' (needs 'none')",
        "model.attn_scale=None (needs 1.0)",
    ]


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random T5 v1.1 with a word-level tokenizer (<pad> 0, </s> 1, <unk> 2) saved beside it."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("t5")
    words = "the cat sat on a mat dog ran to park it was big small red blue and".split()
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(folder)
    cfg = transformers.T5Config(
        vocab_size=len(vocab),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        decoder_start_token_id=0,
        dropout_rate=0.0,
    )
    model = transformers.T5ForConditionalGeneration(cfg)
    model.lm_head.weight = torch.nn.Parameter(torch.empty(len(vocab), 32))
    randomize(model, 11).save_pretrained(folder)
    return folder


def _cfg(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=["device=cpu", *overrides])


def test_src_eval_on_a_t5_directory(t5_dir: Path, tmp_path: Path) -> None:
    """lambada through ``python -m src.eval pretrained=<t5 dir>``: the target's log-likelihood given the
    source, as transformers computes it."""
    from src.evaluation.evaluate import evaluate

    texts = ["the cat sat on the mat", "a dog ran to the park", "it was big and red"]
    data = tmp_path / "lambada.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    metrics = evaluate(
        _cfg(
            "eval",
            f"pretrained={t5_dir}",
            "benchmarks=[lambada]",
            f"benchmarks.lambada.path={data}",
            "progress=false",
        )
    )
    assert (
        metrics["family"] == "encoder_decoder" and metrics["benchmarks"]["lambada"]["examples"] == 3
    )
    ref = transformers.T5ForConditionalGeneration.from_pretrained(t5_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(t5_dir)
    nll = []
    with torch.no_grad():
        for text in texts:
            context, _, word = text.rpartition(" ")
            src = torch.tensor([tok.encode(context, add_special_tokens=False)])
            tgt = torch.tensor([tok.encode(" " + word, add_special_tokens=False)])
            nll.append(float(ref(input_ids=src, labels=tgt).loss) * tgt.shape[1])
    assert metrics["lambada/ppl"] == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-4)


def test_src_generate_on_a_t5_directory(t5_dir: Path) -> None:
    """``python -m src.generate pretrained=<t5 dir>`` greedy: the tokens transformers' greedy search gives
    for the source followed by eos."""
    from src.evaluation.sampling import sample

    out: list[str] = []
    texts = sample(
        _cfg(
            "generate",
            f"pretrained={t5_dir}",
            "prompt='the cat sat on a'",
            "max_new_tokens=8",
            "greedy=true",
            "stream=false",
            "stop_at_eos=false",
        ),
        write=out.append,
    )
    ref = transformers.T5ForConditionalGeneration.from_pretrained(t5_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(t5_dir)
    src = torch.tensor(
        [tok.encode("the cat sat on a", add_special_tokens=False) + [tok.eos_token_id]]
    )
    ref.generation_config.eos_token_id = None
    expected = ref.generate(input_ids=src, max_new_tokens=8, do_sample=False, num_beams=1)[0, 1:]
    assert texts == [tok.decode(expected.tolist())]
    assert len(expected) == 8 and len(set(expected.tolist())) > 1


@pytest.mark.slow
def test_cli_runs_on_t5(t5_dir: Path, tmp_path: Path, run_entry_point) -> None:
    """The command a user types, in a subprocess."""
    r = run_entry_point(
        "src.generate",
        [
            f"pretrained={t5_dir}",
            "prompt='a dog ran'",
            "max_new_tokens=4",
            "greedy=true",
            "device=cpu",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip(), "nothing generated"
