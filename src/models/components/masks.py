"""Self-attention mask variants, registered by name (``model/mask=causal|prefix_lm|…``).

A mask says which key positions each query may attend to; padding is handled apart
(``attention_mask`` in the forward). Raffel et al. 2020 (T5, §3.2.1, Fig. 3) compare the
three: a causal decoder, a prefix LM (bidirectional over the prefix, causal after it) and
an encoder-decoder.
"""

from __future__ import annotations

import logging

from torch import Tensor

from src.errors import ConfigError
from src.registry import Registry

log = logging.getLogger(__name__)

MASKS: Registry[AttentionMask] = Registry(
    "mask", conf="model/mask", package="src.models.components"
)


class AttentionMask:
    """Base class. ``causal`` tells the attention kernel it may use its causal fast path;
    ``needs_prefix_length`` says the forward must be given ``prefix_length`` [B]."""

    causal: bool = False
    needs_prefix_length: bool = False
    window: int | None = None  # a sliding window: keys each query sees (the KV cache keeps these)
    display: str = ""  # the kind of self-attention, as diagrams name it

    def visible(self, q: Tensor, k: Tensor, prefix: Tensor | None = None) -> Tensor | None:
        """The mask's rule, elementwise: whether the query at absolute position ``q`` may see the
        key at position ``k`` (``prefix``: the row's prefix length), for tensors that broadcast;
        None when every key is visible. The one formula both kernels read: ``allowed`` applies
        it to the whole grid (SDPA's boolean mask), ``components/flex.py`` to scalar indices
        (FlexAttention's ``mask_mod``)."""
        return None

    def allowed(
        self, q_pos: Tensor, k_pos: Tensor, prefix_length: Tensor | None = None
    ) -> Tensor | None:
        """Boolean [1 or B, T, S] (True = may attend), or None when every key is visible."""
        if self.needs_prefix_length and prefix_length is None:
            raise ValueError(
                "model/mask=prefix_lm needs prefix_length (a [B] tensor: tokens of bidirectional "
                "prefix) in the forward call; the seq2seq-on-decoder task passes the source length"
            )
        prefix = None if prefix_length is None else prefix_length.view(-1, 1, 1)  # [B, 1, 1]
        return self.visible(q_pos[None, :, None], k_pos[None, None, :], prefix)  # [1|B, T, S]


@MASKS.register("bidirectional")
class Bidirectional(AttentionMask):
    """Every token sees every token (BERT, the 2017 encoder)."""

    display = "bidirectional"


@MASKS.register("causal")
class Causal(AttentionMask):
    """Token i sees tokens j <= i only, so the output at i cannot depend on later tokens."""

    causal = True
    display = "causal"

    def visible(self, q: Tensor, k: Tensor, prefix: Tensor | None = None) -> Tensor:
        return k <= q


@MASKS.register("prefix_lm")
class PrefixLM(AttentionMask):
    """Bidirectional over the first ``prefix_length[b]`` tokens, causal after them."""

    needs_prefix_length = True
    display = "prefix-LM"

    def visible(self, q: Tensor, k: Tensor, prefix: Tensor | None = None) -> Tensor:
        return (k <= q) | (k < prefix)  # causal, or a key inside the row's prefix


@MASKS.register("sliding_window")
class SlidingWindow(AttentionMask):
    """Causal, and each query sees only the last ``window`` keys, itself included: key j is visible
    to query i when i - window < j <= i. Beltagy et al. 2020 (Longformer, §3.1); Jiang et al. 2023
    (Mistral 7B, §2: W = 4096). L layers reach back L·(W - 1) tokens. A ``window`` at least the
    context (``model.max_seq_len``) is the causal mask."""

    causal = True
    display = "sliding window"

    def __init__(self, window: int) -> None:
        self.window = window

    @classmethod
    def check_args(cls, *, window: object = None, max_seq_len: int | None = None, **_: object):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(
                f"model.mask.window={window!r} must be a positive integer (the keys each query "
                "sees, itself included); set e.g. model.mask.window=4096 (Mistral)"
            )
        if max_seq_len is not None and window >= max_seq_len:
            log.info(
                "model.mask.window=%d >= model.max_seq_len=%d: the sliding window equals the "
                "causal mask",
                window,
                max_seq_len,
            )

    def visible(self, q: Tensor, k: Tensor, prefix: Tensor | None = None) -> Tensor:
        diff = q - k  # how far back the key is
        return (diff >= 0) & (diff < self.window)
