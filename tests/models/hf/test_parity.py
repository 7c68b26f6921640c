"""Parity with transformers' own models (litgpt-style): tiny random reference models are saved
with ``save_pretrained``, loaded with ``from_hf`` and must give the same logits (fp32, 1e-4),
the same greedy tokens, and survive ``to_hf`` back into transformers."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402

from src.errors import HFConversionError  # noqa: E402
from src.models import build_model  # noqa: E402
from src.models.components.kv_cache import KVCache  # noqa: E402
from src.models.generation import generate  # noqa: E402
from src.models.hf import config_from_hf, from_hf, to_hf  # noqa: E402

ATOL = 1e-4
V = 100  # vocab; ids 2..97 are ordinary tokens, 99 is Marian's pad / decoder start


def randomize(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Replace transformers' N(0, 0.02) / ones / zeros init by values that make every mapping
    matter (a dropped bias or a swapped LayerNorm would show) and outputs input-dependent."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if not p.requires_grad:  # Marian's fixed sinusoid tables
                continue
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * p.shape[-1] ** -0.5)
            else:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval()


def build_reference(kind: str) -> torch.nn.Module:
    t = transformers
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = t.GPT2Config(
            vocab_size=V,
            n_positions=32,
            n_embd=32,
            n_layer=2,
            n_head=4,
            bos_token_id=0,
            eos_token_id=1,
        )
        return randomize(t.GPT2LMHeadModel(cfg), 1)
    # GQA: 4 query heads share 2 K/V heads; untied head; non-default theta and eps
    if kind == "llama":
        cfg = t.LlamaConfig(
            vocab_size=V,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            rope_theta=5000.0,
            rms_norm_eps=1e-5,
            bos_token_id=0,
            eos_token_id=1,
            tie_word_embeddings=False,
        )
        return randomize(t.LlamaForCausalLM(cfg), 2)
    if kind == "bert":
        cfg = t.BertConfig(
            vocab_size=V,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            pad_token_id=0,
        )
        return randomize(t.BertForMaskedLM(cfg), 3)
    if kind == "qwen3":  # Llama + QK-norm per head; head_dim 16 × 4 heads != hidden 32; GQA
        cfg = t.Qwen3Config(
            vocab_size=V,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=64,
            rope_theta=5000.0,
            rms_norm_eps=1e-5,
            bos_token_id=0,
            eos_token_id=1,
            tie_word_embeddings=False,
        )
        return randomize(t.Qwen3ForCausalLM(cfg), 5)
    # v1.0: ReLU, tied head fed hidden × d_model^-0.5; v1.1: gated GELU, own lm_head.
    if kind.startswith("t5"):
        # d_kv 12 × 4 heads != d_model 32; 3 decoder layers vs 2; 16 buckets up to distance 20 (T up to 32 uses them all)
        v10 = kind == "t5"
        cfg = t.T5Config(
            vocab_size=V,
            d_model=32,
            d_kv=12,
            d_ff=64,
            num_layers=2,
            num_decoder_layers=3,
            num_heads=4,
            relative_attention_num_buckets=16,
            relative_attention_max_distance=20,
            dropout_rate=0.0,
            feed_forward_proj="relu" if v10 else "gated-gelu",
            tie_word_embeddings=v10,
            decoder_start_token_id=0,
        )  # as the released configs: decoding starts from <pad>
        # transformers 5 ties T5's head always; v1.1 checkpoints untie it
        model = t.T5ForConditionalGeneration(cfg)
        if not v10:
            model.lm_head.weight = torch.nn.Parameter(torch.empty(V, 32))
        return randomize(model, 6)
    # Marian: shared embeddings, scaled by √C, SiLU ("swish"), post-norm, fixed [sin | cos] positions.
    # The "marian_untied" variant has a separate head: a tied random Marian repeats one token, which
    # would make the greedy-decoding comparison weak.
    cfg = t.MarianConfig(
        vocab_size=V,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=99,
        decoder_start_token_id=99,
        eos_token_id=0,
        scale_embedding=True,
        activation_function="swish",
        tie_word_embeddings=kind == "marian",
    )
    model = t.MarianMTModel(cfg)
    # transformers 5 unties encoder/decoder embeddings from `shared` along with the head
    if kind == "marian_untied":
        model.model.encoder.embed_tokens = model.model.decoder.embed_tokens = model.model.shared
    return randomize(model, 4)


KINDS = ("gpt2", "llama", "bert", "marian", "marian_untied", "qwen3", "t5", "t5_v11")
SEQ2SEQ = ("marian", "marian_untied", "t5", "t5_v11")


@pytest.fixture(scope="module")
def pairs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[torch.nn.Module, torch.nn.Module, Path]]:
    """kind -> (transformers model, our model loaded by from_hf, checkpoint dir)."""
    out = {}
    for kind in KINDS:
        ref = build_reference(kind)
        folder = tmp_path_factory.mktemp(kind)
        ref.save_pretrained(folder)
        out[kind] = (ref, from_hf(folder), folder)
    return out


def ids(b: int, t: int, seed: int) -> torch.Tensor:
    return torch.randint(2, 98, (b, t), generator=torch.Generator().manual_seed(seed))


def logits(
    model: torch.nn.Module,
    kind: str,
    src: torch.Tensor,
    mask: torch.Tensor | None = None,
    dec: torch.Tensor | None = None,
    dec_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The same call for both libraries (our forward takes transformers-style kwargs)."""
    with torch.no_grad():
        if kind in SEQ2SEQ:
            return model(
                input_ids=src,
                attention_mask=mask,
                decoder_input_ids=dec,
                decoder_attention_mask=dec_mask,
            ).logits
        return model(input_ids=src, attention_mask=mask).logits


def test_config_mapping(pairs) -> None:
    c = pairs["llama"][1].config
    assert (c.n_head, c.n_kv_head, c.position, c.norm, c.ffn["name"], c.bias, c.tie_embeddings) == (
        4,
        2,
        {"name": "rope", "theta": 5000.0},
        {"name": "rmsnorm", "eps": 1e-5},
        "swiglu",
        False,
        False,
    )
    c = pairs["marian"][1].config
    assert (
        c.scale_embeddings
        and c.position == {"name": "sinusoidal", "layout": "concat"}
        and c.ffn == {"name": "silu"}
    )
    assert (c.pad_token_id, c.decoder_start_token_id, c.eos_token_id, c.norm_placement) == (
        99,
        99,
        0,
        "post",
    )
    c = pairs["gpt2"][1].config
    assert c.ffn == {"name": "gelu", "approximate": "tanh"} and c.tie_embeddings and c.d_ff == 128
    # a config.json dict gives the same as the config object
    assert config_from_hf(
        json.loads((pairs["bert"][2] / "config.json").read_text())
    ) == config_from_hf(pairs["bert"][0].config)


@pytest.mark.parametrize("kind", KINDS)
def test_logits_match_transformers(pairs, kind: str) -> None:
    ref, ours, _ = pairs[kind]
    src = ids(2, 12, seed=10)
    dec = ids(2, 7, seed=11) if kind in SEQ2SEQ else None
    expected = logits(ref, kind, src, dec=dec)
    got = logits(ours, kind, src, dec=dec)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen3"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_decoder_logits(pairs, kind: str, side: str) -> None:
    """With padding only real tokens are compared (padded queries are undefined in both).
    Neither library is given position_ids, so both number positions 0..T-1 including padding."""
    ref, ours, _ = pairs[kind]
    src, mask = ids(3, 10, seed=12), torch.ones(3, 10, dtype=torch.long)
    pad = slice(6, None) if side == "right" else slice(0, 4)
    mask[1, pad] = 0
    mask[2, 7:] = 0 if side == "right" else 1
    expected, got = logits(ref, kind, src, mask), logits(ours, kind, src, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)
    # causal right padding cannot change real tokens; left padding must be masked out
    if side == "left":
        unmasked = logits(ours, kind, src)
        assert not torch.allclose(got[1][real[1]], unmasked[1][real[1]], atol=1e-3), (
            "the padding mask had no effect"
        )


def test_padded_bert_logits(pairs) -> None:
    ref, ours, _ = pairs["bert"]
    src, mask = ids(2, 12, seed=13), torch.ones(2, 12, dtype=torch.long)
    mask[0, 8:] = 0
    real = mask.bool()
    torch.testing.assert_close(
        logits(ours, "bert", src, mask)[real],
        logits(ref, "bert", src, mask)[real],
        atol=ATOL,
        rtol=0,
    )


@pytest.mark.parametrize("kind", ["marian", "marian_untied", "t5", "t5_v11"])
def test_padded_seq2seq_logits(pairs, kind: str) -> None:
    """Source padding (encoder self-attention and cross-attention) and target padding; T5's relative
    bias over 31 × 23 positions reaches its log-spaced buckets and the max_distance bucket."""
    ref, ours, _ = pairs[kind]
    S, T = (31, 23) if kind.startswith("t5") else (11, 6)
    pad = ref.config.pad_token_id
    src, mask = ids(2, S, seed=14), torch.ones(2, S, dtype=torch.long)
    mask[1, 7:] = 0
    src[1, 7:] = pad
    dec, dec_mask = ids(2, T, seed=15), torch.ones(2, T, dtype=torch.long)
    dec[:, 0] = ours.config.decoder_start_token_id
    dec_mask[0, 4:] = 0
    expected = logits(ref, kind, src, mask, dec, dec_mask)
    got = logits(ours, kind, src, mask, dec, dec_mask)
    real = dec_mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)


def greedy_reference(
    ref: torch.nn.Module, src: torch.Tensor, mask: torch.Tensor, n: int, use_cache: bool = True
) -> torch.Tensor:
    """transformers' greedy search with nothing but argmax: no eos stop, no forced eos."""
    ref.generation_config.eos_token_id = None
    ref.generation_config.forced_eos_token_id = None
    pad = ref.config.pad_token_id if ref.config.pad_token_id is not None else 0
    with torch.no_grad():
        return ref.generate(
            input_ids=src,
            attention_mask=mask,
            max_new_tokens=n,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad,
            use_cache=use_cache,
        )


def test_greedy_generation_gpt2(pairs) -> None:
    ref, ours, _ = pairs["gpt2"]
    prompt = ids(3, 5, seed=16)
    expected = greedy_reference(ref, prompt, torch.ones_like(prompt), 12)
    got = generate(ours, prompt, 12)
    assert got.tolist() == expected.tolist()
    assert len(set(got[:, 5:].flatten().tolist())) > 3, (
        "degenerate reference: too few distinct tokens"
    )


@pytest.mark.parametrize("kind", ["marian_untied", "t5_v11"])
def test_greedy_generation_seq2seq(pairs, kind: str) -> None:
    ref, ours, _ = pairs[kind]
    src, mask = ids(3, 9, seed=17), torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    src[1, 6:] = ref.config.pad_token_id
    # transformers 5.24's T5 cache has num_layers entries, too few for 3 decoder layers: its uncached search
    expected = greedy_reference(ref, src, mask, 12, use_cache=not kind.startswith("t5"))
    got = generate(ours, src, 12, attention_mask=mask)
    assert got.tolist() == expected.tolist()
    assert len(set(got[:, 1:].flatten().tolist())) > 3, (
        "degenerate reference: too few distinct tokens"
    )
    assert got.tolist() == generate(ours, src, 12, attention_mask=mask, use_cache=False).tolist()


@pytest.mark.parametrize("kind", ["gpt2", "llama", "marian", "qwen3", "t5"])
def test_cached_steps_equal_full_forward(pairs, kind: str) -> None:
    """Prefill 4 tokens, then one token per step through the KV cache: the step logits equal
    one full forward without cache (positions continue from the cache offset)."""
    _, ours, _ = pairs[kind]
    seq = ids(2, 10, seed=18)
    with torch.no_grad():
        if kind in SEQ2SEQ:
            src, mask = ids(2, 8, seed=19), torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
            full = ours(src, mask, decoder_input_ids=seq).logits
            memory = ours.encode(src, mask)
            cache = KVCache(ours.config.decoder_layers, max_length=10)

            def step(x: torch.Tensor) -> torch.Tensor:
                return ours(
                    encoder_hidden_states=memory,
                    attention_mask=mask,
                    decoder_input_ids=x,
                    cache=cache,
                ).logits
        else:
            full = ours(seq).logits
            cache = KVCache(ours.config.n_layer, max_length=10)

            def step(x: torch.Tensor) -> torch.Tensor:
                return ours(x, cache=cache).logits

        parts = [step(seq[:, :4])] + [step(seq[:, t : t + 1]) for t in range(4, 10)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)


AUTO = {
    "gpt2": "AutoModelForCausalLM",
    "llama": "AutoModelForCausalLM",
    "bert": "AutoModelForMaskedLM",
    "marian": "AutoModelForSeq2SeqLM",
    "marian_untied": "AutoModelForSeq2SeqLM",
    "qwen3": "AutoModelForCausalLM",
    "t5": "AutoModelForSeq2SeqLM",
    "t5_v11": "AutoModelForSeq2SeqLM",
}


def load_exported(kind: str, folder: Path) -> torch.nn.Module:
    auto = {
        "AutoModelForCausalLM": transformers.AutoModelForCausalLM,
        "AutoModelForMaskedLM": transformers.AutoModelForMaskedLM,
        "AutoModelForSeq2SeqLM": transformers.AutoModelForSeq2SeqLM,
    }[AUTO[kind]]
    model, info = auto.from_pretrained(folder, output_loading_info=True)
    assert (
        not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    ), info
    return model.eval()


@pytest.mark.parametrize("kind", KINDS)
def test_to_hf_round_trip(pairs, kind: str, tmp_path: Path) -> None:
    ref, ours, _ = pairs[kind]
    out = to_hf(ours, tmp_path / "export")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    back = load_exported(kind, out)
    assert type(back) is type(ref)
    src, dec = ids(2, 9, seed=20), (ids(2, 5, seed=21) if kind in SEQ2SEQ else None)
    torch.testing.assert_close(
        logits(back, kind, src, dec=dec), logits(ours, kind, src, dec=dec), atol=ATOL, rtol=0
    )
    assert config_from_hf(back.config).to_dict() == {
        **ours.config.to_dict(),
        "name": f"hf-{back.config.model_type}",
    }


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_to_hf_from_our_own_config(kind: str, tmp_path: Path) -> None:
    """A model built from our config (not from a checkpoint), with padded vocabulary rows."""
    common = dict(
        family="decoder_only",
        vocab_size=V,
        d_model=32,
        n_layer=2,
        n_head=4,
        max_seq_len=32,
        vocab_pad_multiple=64,
        bos_token_id=0,
        eos_token_id=1,
    )
    if kind == "gpt2":
        cfg = dict(common, d_ff=128, position={"name": "learned"}, ffn={"name": "gelu"})
    else:
        cfg = dict(
            common,
            d_ff=64,
            n_kv_head=1,
            bias=False,
            tie_embeddings=False,
            position={"name": "rope", "theta": 1e4},
            norm={"name": "rmsnorm", "eps": 1e-6},
            ffn={"name": "swiglu"},
        )
    torch.manual_seed(5)
    ours = build_model(cfg).eval()
    back = load_exported(kind, to_hf(ours, tmp_path))
    assert back.config.model_type == kind and back.config.vocab_size == V
    src = ids(2, 9, seed=22)
    torch.testing.assert_close(logits(back, kind, src), logits(ours, kind, src), atol=ATOL, rtol=0)


def test_legacy_gpt2_bin_checkpoint(pairs, tmp_path: Path) -> None:
    """The original ``gpt2`` repo layout: pytorch_model.bin, base-model keys without the
    ``transformer.`` prefix, no lm_head, and the old ``attn.bias`` / ``attn.masked_bias`` buffers."""
    ref, _, folder = pairs["gpt2"]
    sd = {
        k.removeprefix("transformer."): v
        for k, v in ref.state_dict().items()
        if not k.startswith("lm_head.")
    }
    for i in range(ref.config.n_layer):
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32)
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(sd, tmp_path / "pytorch_model.bin")
    shutil.copy(folder / "config.json", tmp_path / "config.json")
    src = ids(2, 8, seed=23)
    torch.testing.assert_close(
        logits(from_hf(tmp_path), "gpt2", src), logits(ref, "gpt2", src), atol=ATOL, rtol=0
    )


def test_sharded_checkpoint(pairs, tmp_path: Path) -> None:
    ref = pairs["llama"][0]
    ref.save_pretrained(tmp_path, max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").exists() and not (
        tmp_path / "model.safetensors"
    ).exists()
    src = ids(2, 8, seed=25)
    torch.testing.assert_close(
        logits(from_hf(tmp_path), "llama", src), logits(ref, "llama", src), atol=ATOL, rtol=0
    )


def test_bf16_dtype(pairs) -> None:
    ref, _, folder = pairs["llama"]
    model = from_hf(folder, dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16} and not model.training
    src = ids(1, 8, seed=24)
    got, expected = logits(model, "llama", src), logits(ref, "llama", src)
    assert got.dtype == torch.bfloat16
    assert (
        got.float() - expected
    ).abs().max() < 0.1 * expected.abs().max()  # bf16 keeps ~3 significant digits


def compose_model_yaml(name: str) -> dict:
    """conf/model/<name>.yaml with its defaults list (position/norm/ffn/mask groups) applied."""
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[3] / "conf" / "model"
    raw = OmegaConf.load(conf / f"{name}.yaml")
    groups = {
        g: OmegaConf.load(conf / g / f"{v}.yaml") for d in raw.pop("defaults") for g, v in d.items()
    }
    return OmegaConf.to_container(OmegaConf.merge(groups, raw))  # type: ignore[return-value]


# Verbatim config.json of the Hub's openai-community/gpt2 and google-bert/bert-base-uncased.
HUB_GPT2 = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "vocab_size": 50257,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
}
HUB_BERT = {
    "architectures": ["BertForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.6.0.dev0",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}


@pytest.mark.parametrize("hub, yaml", [(HUB_GPT2, "gpt2_small"), (HUB_BERT, "bert_base")])
def test_hub_configs_match_our_yaml(hub: dict, yaml: str) -> None:
    """The real checkpoints map onto our named configs (only the label and the dropout differ)."""
    ours = compose_model_yaml(yaml)
    got = config_from_hf(hub).to_dict()
    for key in ("name", "dropout"):
        got.pop(key), ours.pop(key)
    assert got == ours


# -- failures name the model_type and the key -------------------------------------------------
def rewrite_checkpoint(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    tensors = load_file(dst / "model.safetensors")
    edit(tensors)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.mark.parametrize(
    "config, match",
    [
        (
            {"model_type": "mt5"},
            "'mt5' is not supported; supported: bert, gemma2, gpt2, llama, mamba2, marian, mistral, qwen3, t5",
        ),
        (
            {"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": True},
            "gpt2.*scale_attn_by_inverse_layer_idx",
        ),
        ({"model_type": "gpt2", "reorder_and_upcast_attn": True}, "gpt2.*reorder_and_upcast_attn"),
        (
            {
                "model_type": "llama",
                "rope_scaling": {
                    "rope_type": "longrope",
                    "factor": 2.0,
                    "short_factor": [1.0] * 32,
                    "long_factor": [2.0] * 32,
                    "original_max_position_embeddings": 1024,
                },
            },
            "llama.*rope_type='longrope'.*supported rope types: default, linear, dynamic, yarn, llama3",
        ),
        ({"model_type": "qwen3", "use_sliding_window": True}, "qwen3.*use_sliding_window"),
        ({"model_type": "qwen3", "attention_bias": True}, "qwen3.*attention_bias"),
        (
            {"model_type": "t5", "feed_forward_proj": "gated-relu"},
            "t5.*feed_forward_proj='gated-relu'",
        ),
        ({"model_type": "bert", "hidden_act": "gelu_new"}, "bert.*hidden_act='gelu_new'"),
        ({"model_type": "marian", "share_encoder_decoder_embeddings": False}, "marian.*unshared"),
        ({"model_type": "marian", "decoder_vocab_size": 1234}, "marian.*unshared"),
        ({"model_type": "gpt2", "auto_map": {"AutoModel": "x.Y"}}, "remote"),
    ],
)
def test_unsupported_configs_fail_loudly(config: dict, match: str) -> None:
    with pytest.raises(HFConversionError, match=match):
        config_from_hf(config)


def test_nonzero_final_logits_bias_fails(pairs, tmp_path: Path) -> None:
    folder = rewrite_checkpoint(
        pairs["marian"][2],
        tmp_path / "m",
        lambda t: t.__setitem__("final_logits_bias", torch.ones(1, V)),
    )
    with pytest.raises(HFConversionError, match="final_logits_bias"):
        from_hf(folder)


def test_unconsumed_tensor_fails(pairs, tmp_path: Path) -> None:
    folder = rewrite_checkpoint(
        pairs["gpt2"][2],
        tmp_path / "g",
        lambda t: t.__setitem__("transformer.h.0.adapter.weight", torch.ones(2)),
    )
    with pytest.raises(
        HFConversionError,
        match=r"no conversion rule consumes: \['transformer.h.0.adapter.weight'\]",
    ):
        from_hf(folder)


def test_missing_tensor_fails(pairs, tmp_path: Path) -> None:
    folder = rewrite_checkpoint(
        pairs["llama"][2], tmp_path / "l", lambda t: t.pop("model.layers.1.self_attn.k_proj.weight")
    )
    with pytest.raises(
        HFConversionError, match="no tensor 'model.layers.1.self_attn.k_proj.weight'"
    ):
        from_hf(folder)


def test_untied_copy_fails(pairs, tmp_path: Path) -> None:
    """config says tied, but the checkpoint's head differs from the embeddings."""
    folder = rewrite_checkpoint(
        pairs["bert"][2],
        tmp_path / "b",
        lambda t: t.__setitem__("cls.predictions.decoder.weight", torch.zeros(V, 32)),
    )
    with pytest.raises(HFConversionError, match="tied copy"):
        from_hf(folder)


def test_export_of_unrepresentable_model_fails(tmp_path: Path) -> None:
    model = build_model(
        dict(
            vocab_size=V,
            d_model=32,
            n_layer=1,
            n_head=4,
            d_ff=64,
            max_seq_len=16,
            position={"name": "alibi"},
        )
    )
    with pytest.raises(
        HFConversionError, match=r"gpt2: model/position=alibi \(needs learned\).*llama:"
    ):
        to_hf(model, tmp_path)


def test_not_a_checkpoint_fails(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(HFConversionError, match="no model.safetensors"):
        from_hf(tmp_path)
    with pytest.raises(HFConversionError, match="not a local directory"):
        from_hf(str(tmp_path / "does-not-exist"))
