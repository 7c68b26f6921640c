"""Fixtures for the evaluation tests: a tiny random transformers GPT-2 saved to disk (the
vocabulary is GPT-2's, so our offline tokenizer fits it), the same model in transformers
for reference figures, and the shared benchmark files when they are present."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_file():
    """``shared_file("lambada/lambada_test.jsonl")``: a file of ../shared/data, or skip the test when absent."""

    def get(relative: str) -> Path:
        path = SHARED_DATA / relative
        if not path.exists():
            pytest.skip(f"shared benchmark data not present: {path}")
        return path

    return get


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """These tiny models run fastest on one thread (and the CI machine is shared)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random GPT-2 (vocab 50,257, n_embd 32, 2 layers, 2 heads, 64 positions) saved with save_pretrained."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    # a wider init than GPT-2's 0.02 makes the predictions peaked, so greedy checks are not all False
    config = GPT2Config(
        vocab_size=50257, n_embd=32, n_layer=2, n_head=2, n_positions=64, initializer_range=0.1
    )
    folder = tmp_path_factory.mktemp("tiny_gpt2")
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def hf_model(tiny_gpt2_dir: Path):
    """The same model in transformers (the reference)."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(tiny_gpt2_dir).eval()


@pytest.fixture(scope="session")
def hf_reference():
    """Reference log-likelihoods computed directly with a transformers model, one sequence at a time."""
    from torch.nn import functional as F

    class Reference:
        @staticmethod
        @torch.inference_mode()
        def loglikelihood(
            model, context: list[int], continuation: list[int], max_len: int = 64
        ) -> tuple[float, bool]:
            """Σ log p(continuation | context), keeping the last max_len + 1 tokens; and whether it is greedy."""
            whole = (context + continuation)[-(max_len + 1) :]
            n = len(continuation)
            logits = model(torch.tensor([whole[:-1]]), logits_to_keep=n).logits[0, -n:]  # [n, V]
            logp = logits.log_softmax(-1)
            target = torch.tensor(continuation)
            return float(logp.gather(-1, target[:, None]).sum()), bool(
                (logp.argmax(-1) == target).all()
            )

        @staticmethod
        @torch.inference_mode()
        def window_nll(model, ids: list[int], max_length: int, stride: int) -> tuple[float, int]:
            """The transformers perplexity guide's loop, with the NLL summed exactly over the scored labels."""
            ids_t = torch.tensor([ids])
            nll_sum, n_tokens, prev_end = 0.0, 0, 0
            for begin in range(0, len(ids), stride):
                end = min(begin + max_length, len(ids))
                trg_len = end - prev_end
                input_ids = ids_t[:, begin:end]
                target_ids = input_ids.clone()
                target_ids[:, :-trg_len] = -100
                logits = model(input_ids).logits  # [1, T, V]
                labels = target_ids[:, 1:]  # the model's internal shift
                nll_sum += float(
                    F.cross_entropy(logits[0, :-1], labels[0], ignore_index=-100, reduction="sum")
                )
                n_tokens += int((labels != -100).sum())
                prev_end = end
                if end == len(ids):
                    break
            return nll_sum, n_tokens

    return Reference()


@pytest.fixture(scope="session")
def loaded(tiny_gpt2_dir: Path):
    from src.evaluation import load_model

    return load_model(str(tiny_gpt2_dir), device="cpu")


@pytest.fixture
def scorer(loaded):
    from src.evaluation import Scorer

    return Scorer(
        loaded.model, loaded.tokenizer, batch_size=8, max_batch_tokens=1024, show_progress=False
    )


SENTENCES = [
    "The cat sat on the mat and looked at the garden.",
    "In 1998, the company moved its headquarters to a small town near the coast.",
    "She opened the letter slowly, afraid of what it might say about her brother.",
    "Rain fell all night, and by morning the river had risen above the old bridge.",
    "He said the train would arrive at noon, but nobody believed him.",
    "A quiet street, a closed shop, and a dog asleep in the sun.",
]


@pytest.fixture
def lambada_jsonl(tmp_path: Path) -> Path:
    """60 LAMBADA-style records (passage whose last word is the target)."""
    path = tmp_path / "lambada.jsonl"
    with path.open("w") as f:
        for i in range(60):
            text = (
                " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(1 + i % 4))
                + f" word{i % 7}"
            )
            f.write(json.dumps({"text": text}) + "\n")
    return path


@pytest.fixture
def hellaswag_jsonl(tmp_path: Path) -> Path:
    """60 records in the original HellaSwag jsonl layout."""
    path = tmp_path / "hellaswag_val.jsonl"
    with path.open("w") as f:
        for i in range(60):
            s = SENTENCES[i % len(SENTENCES)]
            endings = [
                SENTENCES[(i + k) % len(SENTENCES)].lower()[: 20 + 7 * k] for k in range(1, 5)
            ]
            f.write(
                json.dumps(
                    {
                        "ind": i,
                        "activity_label": f"Activity {i % 5}",
                        "ctx_a": s,
                        "ctx_b": "then the man",
                        "ctx": s + " then the man",
                        "endings": endings,
                        "label": str(i % 4),
                    }
                )
                + "\n"
            )
    return path


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "text.txt"
    path.write_text("\n".join(SENTENCES * 6) + "\n")
    return path
