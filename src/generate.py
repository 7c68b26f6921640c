"""Sample text from a pretrained model or one of our checkpoints, with the KV cache.

    python -m src.generate pretrained=gpt2 prompt="Hello, I'm a language model," max_new_tokens=40
    python -m src.generate ckpt_path=outputs/.../last.ckpt prompt="ROMEO:" temperature=0.8 top_k=200
    python -m src.generate ckpt_path=<encoder-decoder>.ckpt prompt="A man is riding a bike." greedy=true

Decoder-only models continue the prompt; encoder-decoders read it as the source and
write the target. Tokens are streamed to the console as they are produced (the first
sample; the others are printed when done).
"""

from __future__ import annotations

from omegaconf import DictConfig

from src.cli import hydra_entry


@hydra_entry("generate")
def main(cfg: DictConfig) -> None:
    from src.evaluation.sampling import sample  # torch and the model stack load here, not at import

    sample(cfg)


if __name__ == "__main__":
    main()
