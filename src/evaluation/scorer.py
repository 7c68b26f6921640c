"""The three things every evaluation task asks of a model, batched by length.

* ``loglikelihood``: log p(continuation | context) and whether greedy decoding would have
  produced the continuation (lm-evaluation-harness's ``loglikelihood`` request);
* ``window_nll``: strided sliding-window negative log-likelihood of one long token
  sequence (the transformers perplexity guide);
* ``generate``: batched decoding with the KV cache (translation, the harness's
  ``generate_until``).

Decoder-only models read ``context + continuation`` in one causal forward pass;
encoder-decoders encode the context and score the continuation with the decoder.
Right padding never changes a causal model's scores, so batches need no attention mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from src.data.tokenizers import Tokenizer
from src.evaluation.batching import length_batches, pad_right, progress_bar
from src.evaluation.loading import PairFormat
from src.evaluation.windows import WindowWork, sliding_windows, windows_nll
from src.models.families import TransformerModel
from src.models.families.base import IGNORE_INDEX
from src.models.generation import generate


@dataclass
class LogLikelihood:
    """Score of one continuation."""

    logprob: float  # Σ log p(token) over the continuation's tokens (natural log)
    is_greedy: bool  # every continuation token is the argmax at its position
    n_tokens: int  # continuation tokens scored


class Scorer:
    """A model and its tokenizer, ready to score evaluation requests."""

    def __init__(
        self,
        model: TransformerModel,
        tokenizer: Tokenizer,
        *,
        batch_size: int = 32,
        max_batch_tokens: int = 16384,
        show_progress: bool = True,
        pair_format: PairFormat | None = None,
        mask_token_id: int | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.show_progress = show_progress
        self.is_seq2seq = model.prompt_is_source  # a context is a source read by an encoder
        # no left-to-right likelihood: pseudo-log-likelihood
        self.is_masked_lm = not model.left_to_right
        self.mask_token_id = mask_token_id if mask_token_id is not None else tokenizer.mask_token_id
        self.max_length = model.config.max_seq_len
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.pair_format = (
            pair_format  # how the model reads a translation source, when trained on pairs
        )
        self.tokens_read = 0  # input tokens fed to the model (for throughput reports)

    @property
    def device(self) -> torch.device:
        return self.model.device

    # -- tokenisation -----------------------------------------------------------------
    def prefix_token(self) -> int:
        """The token given as context when a continuation has none (GPT-2's <|endoftext|>)."""
        tok = (
            self.tokenizer.bos_token_id
            if self.tokenizer.bos_token_id is not None
            else self.tokenizer.eos_token_id
        )
        if tok is None:
            raise ValueError(
                f"the '{self.tokenizer.name}' tokenizer has neither bos nor eos; an empty context "
                "cannot be scored"
            )
        return tok

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Tokenise as lm-evaluation-harness: trailing spaces of the context move to the
        continuation, the whole string is encoded once and split at the context's length."""
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        if self.is_seq2seq:
            return self.tokenizer.encode(context), self.tokenizer.encode(continuation)
        whole = self.tokenizer.encode(context + continuation)
        n_ctx = len(self.tokenizer.encode(context))
        return whole[:n_ctx], whole[n_ctx:]

    # -- log-likelihood ----------------------------------------------------------------
    def _require_generative(self, what: str) -> None:
        if self.is_masked_lm:
            raise ValueError(
                f"{what} needs a decoder_only or encoder_decoder model; this is an encoder_only "
                "masked LM, which defines no left-to-right likelihood (it can run the perplexity "
                "task: pseudo-perplexity)"
            )

    @torch.inference_mode()
    def loglikelihood(
        self, requests: Sequence[tuple[list[int], list[int]]], description: str = "scoring"
    ) -> list[LogLikelihood]:
        """(context ids, continuation ids) pairs -> their scores, in the same order."""
        self._require_generative("scoring continuations (lambada, hellaswag, …)")
        for i, (_, cont) in enumerate(requests):
            if not cont:
                raise ValueError(
                    f"request {i} has an empty continuation; there is nothing to score"
                )
        if self.is_seq2seq:
            return self._loglikelihood_seq2seq(requests, description)
        L = self.max_length
        inputs: list[list[int]] = []
        n_scored: list[int] = []
        n_context: list[int] = []
        for ctx, cont in requests:
            ctx = list(ctx) or [self.prefix_token()]
            whole = (ctx + list(cont))[-(L + 1) :]  # keep the end; the context loses its start
            inputs.append(whole[:-1])  # position t predicts whole[t + 1]
            n_scored.append(min(len(cont), len(whole) - 1))
            n_context.append(len(whole) - 1 - n_scored[-1] + 1)
        results: list[LogLikelihood | None] = [None] * len(requests)
        batches = length_batches([len(x) for x in inputs], self.batch_size, self.max_batch_tokens)
        with progress_bar(len(requests), description, self.show_progress) as advance:
            for batch in batches:
                ids, _ = pad_right([inputs[i] for i in batch], self.pad_id)  # [B, T]
                prefix = (
                    # the context is bidirectional
                    torch.tensor([n_context[i] for i in batch], device=self.device)
                    if self.model.needs_prefix_length
                    else None
                )
                # the states before the head, which runs (through model.logits) only at the
                # positions scored: a LAMBADA passage of ~100 tokens needs it at 1-3 of them
                # [B, T, C]
                hidden = self.model.hidden_states(ids.to(self.device), prefix_length=prefix)
                self.tokens_read += sum(len(inputs[i]) for i in batch)
                rows = [
                    hidden[row, len(inputs[i]) - n_scored[i] : len(inputs[i])]
                    for row, i in enumerate(batch)
                ]
                # [Σn, V]: the head only where a token is scored
                logits = self.model.logits(torch.cat(rows))
                targets = torch.tensor(
                    [t for i in batch for t in requests[i][1][-n_scored[i] :]], device=self.device
                )
                for i, score in zip(
                    batch, self._score(logits, targets, [n_scored[i] for i in batch])
                ):
                    results[i] = score
                advance(len(batch))
        return results  # type: ignore[return-value]

    def _loglikelihood_seq2seq(
        self, requests: Sequence[tuple[list[int], list[int]]], description: str
    ) -> list[LogLikelihood]:
        L = self.max_length
        sources = [list(ctx)[-L:] or [self.prefix_token()] for ctx, _ in requests]
        targets = [list(cont)[:L] for _, cont in requests]
        lengths = [len(s) + len(t) for s, t in zip(sources, targets)]
        results: list[LogLikelihood | None] = [None] * len(requests)
        with progress_bar(len(requests), description, self.show_progress) as advance:
            for batch in length_batches(lengths, self.batch_size, self.max_batch_tokens):
                src, src_mask = pad_right([sources[i] for i in batch], self.pad_id)  # [B, S]
                tgt, tgt_mask = pad_right([targets[i] for i in batch], self.pad_id)  # [B, T]
                # the model shifts them right
                labels = tgt.masked_fill(tgt_mask == 0, IGNORE_INDEX).to(self.device)
                out = self.model(
                    input_ids=src.to(self.device),
                    attention_mask=src_mask.to(self.device),
                    labels=labels,
                    decoder_attention_mask=tgt_mask.to(self.device),
                )
                self.tokens_read += sum(lengths[i] for i in batch)
                # [Σn, V]
                logits = torch.cat(
                    [out.logits[row, : len(targets[i])] for row, i in enumerate(batch)]
                )
                flat = torch.tensor([t for i in batch for t in targets[i]], device=self.device)
                for i, score in zip(
                    batch, self._score(logits, flat, [len(targets[i]) for i in batch])
                ):
                    results[i] = score
                advance(len(batch))
        return results  # type: ignore[return-value]

    @staticmethod
    def _score(logits: Tensor, targets: Tensor, lengths: list[int]) -> list[LogLikelihood]:
        """logits [Σn, V] at the positions predicting targets [Σn], in runs of ``lengths``
        (one per request) -> one LogLikelihood per run.

        log p(t) = logit_t − logsumexp(logits), and t is greedy when its logit is the maximum
        (a tie with another token would also count; the harness's argmax would pick the
        first). Three passes over the logits, no [Σn, V] log-softmax written out.
        """
        logits = logits.float()
        top = logits.amax(dim=-1, keepdim=True)  # [Σn, 1]
        lse = (logits - top).exp_().sum(-1).log_() + top.squeeze(-1)  # [Σn]
        target = logits.gather(-1, targets[:, None]).squeeze(-1)  # [Σn]
        lp = target - lse
        hit = target >= top.squeeze(-1)
        out = []
        for lp_i, hit_i in zip(lp.double().split(lengths), hit.split(lengths)):
            out.append(LogLikelihood(float(lp_i.sum()), bool(hit_i.all()), int(lp_i.numel())))
        return out

    # -- sliding-window perplexity ---------------------------------------------------------
    @torch.inference_mode()
    def window_nll(
        self,
        tokens: Sequence[int] | Tensor,
        context_length: int | None = None,
        stride: int | None = None,
        description: str = "perplexity",
    ) -> tuple[float, int]:
        """Strided sliding-window NLL of one token sequence -> (Σ NLL in nats, tokens scored).

        An encoder-only masked LM gets the pseudo-log-likelihood instead (Salazar et al.
        2020): each scored token is masked in its own copy of the window and predicted from
        both sides.
        """
        if self.is_seq2seq:
            raise ValueError(
                "perplexity of a text needs a decoder_only (or, as pseudo-perplexity, "
                "encoder_only) model; an encoder_decoder scores targets given sources: use the "
                "translation, lambada or hellaswag tasks"
            )
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        context_length = context_length or self.max_length
        if context_length > self.max_length:
            raise ValueError(
                f"context_length={context_length} exceeds the model's "
                f"max_seq_len={self.max_length}; lower benchmarks.<name>.context_length"
            )
        stride = stride or context_length
        windows = sliding_windows(len(tokens), context_length, stride)
        if self.is_masked_lm:
            return self._pseudo_nll(tokens, windows, description)
        with progress_bar(len(windows), description, self.show_progress) as advance:
            total, count, read = windows_nll(
                self.model,
                tokens,
                windows,
                batch_size=self.batch_size,
                max_batch_tokens=self.max_batch_tokens,
                pad_id=self.pad_id,
                advance=advance,
            )
        self.tokens_read += read
        return total, count

    def _pseudo_nll(
        self, tokens: Tensor, windows: list[WindowWork], description: str
    ) -> tuple[float, int]:
        if self.mask_token_id is None:
            raise ValueError(
                "pseudo-perplexity of a masked LM needs its [MASK] id; the tokenizer has none and "
                "the checkpoint's objective.mask_token_id is unset"
            )
        total, count = 0.0, 0
        with progress_bar(len(windows), description, self.show_progress) as advance:
            for w in windows:
                ids = tokens[w.begin : w.end].to(self.device)  # [T]
                T = ids.shape[0]
                scored = torch.arange(T - w.n_target, T, device=self.device)
                per_batch = max(1, min(self.batch_size, self.max_batch_tokens // T))
                for chunk in scored.split(per_batch):
                    x = ids.repeat(len(chunk), 1)  # [n, T]: one copy per scored position
                    x[torch.arange(len(chunk)), chunk] = self.mask_token_id
                    hidden = self.model.hidden_states(x)[torch.arange(len(chunk)), chunk]  # [n, C]
                    # [n, V]: the MLM head at the masked tokens only
                    logits = self.model.logits(hidden)
                    total += float(
                        F.cross_entropy(logits.float(), ids[chunk], reduction="sum").double()
                    )
                    self.tokens_read += x.numel()
                count += w.n_target
                advance(1)
        return total, count

    # -- decoding ---------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[list[int]],
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
        description: str = "generating",
    ) -> list[list[int]]:
        """Continue each prompt (greedy unless ``do_sample``); new tokens only, cut before eos
        or the first of ``stop_ids``.

        Encoder-decoder prompts are right-padded sources with an attention mask; decoder-only
        prompts are batched only with prompts of the same length, so no padding enters the
        context and positions stay where the model was trained to see them.
        """
        self._require_generative("generation")
        eos = self.tokenizer.eos_token_id
        stops = set(stop_ids) | ({eos} if eos is not None else set())
        out: list[list[int] | None] = [None] * len(prompts)
        L = self.max_length
        if self.is_seq2seq:
            prompts = [list(p)[-L:] for p in prompts]
            groups = length_batches(
                [len(p) for p in prompts], self.batch_size, self.max_batch_tokens
            )
        else:
            # leave room for one token
            prompts = [list(p)[-(L - 1) :] or [self.prefix_token()] for p in prompts]
            by_len: dict[int, list[int]] = {}
            for i, p in enumerate(prompts):
                by_len.setdefault(len(p), []).append(i)
            groups = [
                idx[k : k + self.batch_size]
                for _, idx in sorted(by_len.items(), reverse=True)
                for k in range(0, len(idx), self.batch_size)
            ]
        sampling = dict(
            do_sample=do_sample,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            eos_token_id=eos,
        )
        with progress_bar(len(prompts), description, self.show_progress) as advance:
            for batch in groups:
                ids, mask = pad_right([prompts[i] for i in batch], self.pad_id)
                # padded sources; the output starts afresh and may use the whole context
                if self.is_seq2seq:
                    kwargs, limit = {"attention_mask": mask.to(self.device)}, L - 1
                else:  # same-length prompts, continued within the context
                    kwargs, limit = {}, L - ids.shape[1]
                ids = ids.to(self.device)
                new = self.model.new_tokens(
                    generate(self.model, ids, min(max_new_tokens, limit), **sampling, **kwargs), ids
                )
                self.tokens_read += int(mask.sum()) + new.numel()
                for row, i in enumerate(batch):
                    toks = new[row].tolist()
                    cut = next((k for k, t in enumerate(toks) if t in stops), len(toks))
                    out[i] = toks[:cut]
                advance(len(batch))
        return out  # type: ignore[return-value]
