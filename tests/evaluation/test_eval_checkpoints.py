"""``src.eval ckpt_path=...`` and ``src.generate`` on checkpoints of every family, each
trained for two steps by ``src.training.runner.train`` at test size."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from torch.nn import functional as F

from src.evaluation import Scorer, load_model
from src.evaluation.evaluate import evaluate
from src.evaluation.sampling import sample

CONF = Path(__file__).resolve().parents[2] / "conf"
EN = [
    "A man rides a bike.",
    "Two dogs play in the snow.",
    "A woman reads a book.",
    "Children run in a park.",
]
DE = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch.",
    "Kinder laufen in einem Park.",
]
TINY = [
    "model.n_layer=1",
    "model.d_model=32",
    "model.n_head=2",
    "model.d_ff=64",
    "model.max_seq_len=64",
    "model.dropout=0.0",
]
RUNS = {  # family / training task -> overrides
    "decoder": ["model=tiny", "data=text", "objective=causal_lm"],
    "encoder_decoder": [
        "model=transformer_base",
        "model.n_encoder_layer=1",
        "model.n_decoder_layer=1",
        "data=multi30k",
        "objective=seq2seq",
    ],
    "decoder_translation": [
        "model=tiny",
        "model/mask=prefix_lm",
        "data=multi30k",
        "objective=decoder_translation",
    ],
    "encoder": ["model=bert_base", "data=text", "objective=masked_lm"],
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Multi30k-shaped folder of 16 pairs per split, and a small text file."""
    root = tmp_path_factory.mktemp("ckpt_data")
    (root / "m30k").mkdir()
    for split in ("train", "val", "test_2016_flickr"):
        for lang, lines in (("en", EN), ("de", DE)):
            with gzip.open(root / "m30k" / f"{split}.{lang}.gz", "wt") as f:
                f.write("\n".join(lines * 4) + "\n")
    (root / "text.txt").write_text("The cat sat on the mat. The dog lay in the sun.\n" * 40)
    return root


@pytest.fixture(scope="module")
def checkpoints(data_dir: Path) -> dict[str, Path]:
    from src.training.runner import train

    torch.set_num_threads(1)
    common = [
        "trainer=cpu",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        "trainer.limit_val_batches=1",
        "trainer.enable_progress_bar=false",
        "trainer.enable_model_summary=false",
        "logger=none",
        "~callbacks.throughput",
        "~callbacks.progress_bar",
        "~callbacks.lr_monitor",
        "batch_size=2",
        "block_size=32",
        "test=false",
        f"data.cache_dir={data_dir / 'cache'}",
        f"paths.root_dir={CONF.parent}",
    ]
    sources = {
        "text": [f"data.paths=[{data_dir / 'text.txt'}]"],
        "multi30k": [f"data.path={data_dir / 'm30k'}"],
    }
    out = {}
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for name, overrides in RUNS.items():
            data = "multi30k" if "data=multi30k" in overrides else "text"
            run_dir = data_dir / "runs" / name
            train(
                compose(
                    "train",
                    overrides=[
                        *overrides,
                        *sources[data],
                        *TINY,
                        *common,
                        f"paths.output_dir={run_dir}",
                    ],
                )
            )
            out[name] = run_dir / "checkpoints" / "last.ckpt"
    return out


def run_eval(ckpt: Path, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return evaluate(
            compose(
                "eval", overrides=[f"ckpt_path={ckpt}", "progress=false", "device=cpu", *overrides]
            )
        )


def run_generate(ckpt: Path, *overrides: str) -> tuple[list[str], str]:
    printed: list[str] = []
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "generate",
            overrides=[f"ckpt_path={ckpt}", "device=cpu", "max_new_tokens=6", *overrides],
        )
    return sample(cfg, write=printed.append), "".join(printed)


def test_decoder_checkpoint_evaluates(
    checkpoints, data_dir, lambada_jsonl, hellaswag_jsonl
) -> None:
    m = run_eval(
        checkpoints["decoder"],
        "benchmarks=[perplexity,lambada,hellaswag]",
        f"benchmarks.perplexity.path={data_dir / 'text.txt'}",
        f"benchmarks.lambada.path={lambada_jsonl}",
        f"benchmarks.hellaswag.path={hellaswag_jsonl}",
        "limit=5",
    )
    assert (
        m["family"] == "decoder_only"
        and math.isfinite(m["perplexity/ppl"])
        and 0 <= m["hellaswag/acc"] <= 1
    )
    # the checkpoint's own loss on a window equals the scorer's perplexity on that window
    loaded = load_model(ckpt_path=str(checkpoints["decoder"]), device="cpu")
    ids = loaded.tokenizer.encode((data_dir / "text.txt").read_text())[:64]
    nll, n = Scorer(loaded.model, loaded.tokenizer, show_progress=False).window_nll(ids, 64, 64)
    x = torch.tensor([ids])
    with torch.inference_mode():
        assert nll / n == pytest.approx(float(loaded.model(x, labels=x).loss), rel=1e-5)


def test_encoder_decoder_checkpoint_translates_and_scores(
    checkpoints, data_dir, lambada_jsonl
) -> None:
    m = run_eval(
        checkpoints["encoder_decoder"],
        "benchmarks=[translation,lambada]",
        f"benchmarks.translation.path={data_dir / 'm30k'}",
        "benchmarks.translation.max_new_tokens=8",
        f"benchmarks.lambada.path={lambada_jsonl}",
        "limit=6",
    )
    assert m["family"] == "encoder_decoder" and m["benchmarks"]["translation"]["examples"] == 6
    assert (
        0 <= m["translation/bleu"] <= 100
        and 0 <= m["translation/chrf"] <= 100
        and math.isfinite(m["lambada/ppl"])
    )


def test_decoder_translation_checkpoint_translates(checkpoints, data_dir) -> None:
    loaded = load_model(ckpt_path=str(checkpoints["decoder_translation"]), device="cpu")
    eos = loaded.tokenizer.eos_token_id
    assert loaded.pair_format is not None and loaded.pair_format.source_suffix == [
        eos,
        eos,
    ]  # src eos <sep=eos>
    m = run_eval(
        checkpoints["decoder_translation"],
        "benchmarks=[translation]",
        f"benchmarks.translation.path={data_dir / 'm30k'}",
        "benchmarks.translation.max_new_tokens=8",
        "limit=4",
    )
    assert 0 <= m["translation/chrf"] <= 100


def test_encoder_checkpoint_gets_pseudo_perplexity(checkpoints) -> None:
    loaded = load_model(ckpt_path=str(checkpoints["encoder"]), device="cpu")
    scorer = Scorer(
        loaded.model, loaded.tokenizer, show_progress=False, mask_token_id=loaded.mask_token_id
    )
    ids = loaded.tokenizer.encode("The cat sat on the mat. The dog lay in the sun.")
    nll, n = scorer.window_nll(ids, 64, 64)
    ref = 0.0
    with torch.inference_mode():  # reference: the model's full forward, one masked copy per token
        for t in range(1, len(ids)):
            x = torch.tensor([ids])
            x[0, t] = loaded.mask_token_id
            ref += float(
                F.cross_entropy(loaded.model(x).logits[0, t][None], torch.tensor([ids[t]]))
            )
    assert n == len(ids) - 1 and nll == pytest.approx(ref, rel=1e-4)
    with pytest.raises(ValueError, match="encoder_only masked LM"):
        scorer.loglikelihood([([1], [2])])


def test_generate_from_decoder_and_encoder_decoder_checkpoints(checkpoints) -> None:
    texts, printed = run_generate(
        checkpoints["decoder"], "prompt='The cat'", "num_samples=2", "seed=3"
    )
    # streamed after the prompt
    assert len(texts) == 2 and printed.startswith("The cat") and texts[0] in printed
    again, _ = run_generate(checkpoints["decoder"], "prompt='The cat'", "num_samples=2", "seed=3")
    assert again == texts  # the seed fixes the samples
    texts, printed = run_generate(
        checkpoints["encoder_decoder"], "prompt='A man rides a bike.'", "greedy=true"
    )
    assert len(texts) == 1 and texts[0] in printed
    texts, _ = run_generate(
        checkpoints["decoder_translation"], "prompt='A man rides a bike.'", "greedy=true"
    )
    assert len(texts) == 1
