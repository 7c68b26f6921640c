"""DeepNorm (``model.norm_placement=deepnorm``): post-norm with an up-weighted residual and a
down-scaled initialisation, from Wang et al. 2022 (DeepNet, arXiv:2203.00555).

::

    x = norm(α · x + f(x))          ... no final norm (post-norm)

and at initialisation (the paper's Figure 2 pseudocode) ``xavier_normal_(w, gain=β)`` for the FFN
matrices and the attention's value and output projections, ``gain=1`` for its query and key
projections. α and β depend on the depths, N encoder and M decoder layers (Figure 2 / Table 1)::

                      encoder α           encoder β             decoder α     decoder β
    encoder-only      (2N)^(1/4)          (8N)^(-1/4)           –             –
    decoder-only      –                   –                     (2M)^(1/4)    (8M)^(-1/4)
    encoder-decoder   0.81 (N⁴M)^(1/16)   0.87 (N⁴M)^(-1/16)    (3M)^(1/4)    (12M)^(-1/4)

Bounding the model update by the depth lets post-norm (better final quality than pre-norm, Liu
et al. 2020) train at 1,000 layers without warmup trouble.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from src.errors import ConfigError
from src.models.components.attention import MultiHeadAttention
from src.models.components.residual import PLACEMENTS, Residual


def deepnorm_constants(encoder_layers: int, decoder_layers: int, stack: str) -> tuple[float, float]:
    """(α, β) of ``stack`` ("encoder" / "decoder") for a family of ``encoder_layers`` N and
    ``decoder_layers`` M blocks (0 for a stack it lacks), from DeepNet's Table 1."""
    N, M = encoder_layers, decoder_layers
    if stack == "encoder" and M == 0:  # encoder-only
        return (2 * N) ** 0.25, (8 * N) ** -0.25
    if stack == "decoder" and N == 0:  # decoder-only
        return (2 * M) ** 0.25, (8 * M) ** -0.25
    if stack == "encoder":  # encoder-decoder
        return 0.81 * (N**4 * M) ** (1 / 16), 0.87 * (N**4 * M) ** (-1 / 16)
    return (3 * M) ** 0.25, (12 * M) ** -0.25


@PLACEMENTS.register("deepnorm")
class DeepNorm(Residual):
    title = "DeepNorm"
    final_norm = False
    drawing = ("sublayer", "add", "norm")
    residual = "residual × α"

    def __init__(self, encoder_layers: int, decoder_layers: int, stack: str) -> None:
        super().__init__()
        self.alpha, self.beta = deepnorm_constants(encoder_layers, decoder_layers, stack)

    @classmethod
    def check_args(
        cls,
        *,
        encoder_layers: int | None = None,
        decoder_layers: int | None = None,
        stack: str | None = None,
        **_: object,
    ) -> None:
        """α and β need the depth of every stack the family has (N for an encoder, M for a
        decoder)."""
        depths = {"encoder": encoder_layers, "decoder": decoder_layers}
        if stack not in depths:
            raise ConfigError(
                "model.norm_placement=deepnorm needs its stack ('encoder' or 'decoder'), got "
                f"{stack!r}"
            )
        # its own stack, and the other one if present
        needed = [s for s, n in depths.items() if s == stack or n]
        for s in needed:
            n = depths[s]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                key = (
                    "model.n_layer (or model.n_encoder_layer)"
                    if s == "encoder"
                    else "model.n_layer (or model.n_decoder_layer)"
                )
                raise ConfigError(
                    f"model.norm_placement=deepnorm needs the number of {s} layers (DeepNet's α "
                    f"and β are functions of the depths), got {n!r}: set {key} to a positive "
                    "integer"
                )

    def forward(
        self, x: Tensor, norm: nn.Module | None, sublayer: Callable[[Tensor], Tensor]
    ) -> Tensor:
        return norm(self.alpha * x + sublayer(x))  # type: ignore[misc]

    def init_sublayer(self, sublayer: nn.Module) -> None:
        """Figure 2: Xavier-normal with gain β for the FFN and the attention's v and out, gain 1 for
        q and k."""
        if isinstance(sublayer, MultiHeadAttention):
            weights = [
                (w, 1.0 if name in ("q", "k") else self.beta)
                for name, w in sublayer.projection_weights().items()
            ]
        else:  # an FFN: every matrix
            weights = [
                (m.weight, self.beta) for m in sublayer.modules() if isinstance(m, nn.Linear)
            ]
        for weight, gain in weights:
            nn.init.xavier_normal_(weight, gain=gain)  # in place, also on a view of the fused qkv
