"""A Vision Transformer made of aiayn's own encoder (section 3.1): the paper's section 7 plan,
"to extend the Transformer to problems involving input and output modalities other than text".

As in ViT (Dosovitskiy et al., 2021): each P x P patch is flattened and linearly projected to
d_model (the image's "word embedding", 3.4), a learned class token is put in front, positions are
added (learned, Table 3 row E, or fixed 2-D sinusoids after 3.5), the sequence goes through
`aiayn.model.Encoder` unchanged (pre-norm with a final norm, GELU), and a linear head reads the
class token's output. There is no second implementation of attention here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from aiayn.checks import ConfigError, check_choice, check_number
from aiayn.config import Serializable
from aiayn.model.dropout import dropout
from aiayn.model.layers import ACTIVATIONS
from aiayn.model.transformer import Encoder
from aiayn.vision.patches import patchify, sinusoidal_2d


@dataclass
class VisionConfig(Serializable):
    """The image model. Field names differ from VisionTrainConfig's, so `--set` finds the owner.

    It is also what `aiayn.model.Encoder` reads (`aiayn.model.layers.LayerSettings`): the fields,
    and the properties below for the settings the image model keeps at the text model's defaults.
    """

    image_size: int = 28
    channels: int = 1
    patch_size: int = 4  # 28 / 4 = a 7 x 7 grid: 49 patches + the class token
    stem_channels: int = 16  # > 0: ViT's "hybrid" input, a 3x3 convolution before the patches; 0: pixels
    n_classes: int = 10
    d_model: int = 64
    d_ff: int = 128
    n_heads: int = 4
    n_layers: int = 6
    dropout: float = 0.0
    attention_dropout: float = 0.0
    activation: str = "gelu"
    norm_first: bool = True  # ViT is pre-norm; the encoder then ends with a final LayerNorm
    positions: str = "learned"  # learned (ViT) | sinusoidal (2-D, after 3.5)
    # Self-attention within r positions of the raster order (class token first; aiayn.model.window),
    # for small patches: 2 x 2 gives 196 tokens. None: full attention.
    attention_window: int | None = None
    pixel_mean: float = 0.2860  # inputs in [0, 1] are normalised with these (Fashion-MNIST's)
    pixel_std: float = 0.3530

    def __post_init__(self) -> None:
        check_choice("positions", self.positions, ("learned", "sinusoidal"))
        check_choice("activation", self.activation, tuple(ACTIVATIONS))
        for name in ("image_size", "channels", "patch_size", "d_model", "d_ff", "n_heads", "n_layers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.image_size % self.patch_size:
            raise ConfigError(
                f"image_size={self.image_size} is not a multiple of patch_size={self.patch_size}"
            )
        if self.positions == "sinusoidal" and self.d_model % 4:
            raise ConfigError(f"2-D sinusoidal positions need d_model divisible by 4, got {self.d_model}")
        if self.attention_window is not None and self.attention_window < 1:
            raise ConfigError(f"attention_window must be positive or null, got {self.attention_window}")
        if self.stem_channels < 0:
            raise ConfigError(f"stem_channels must be 0 (plain patches) or more, got {self.stem_channels}")
        if self.n_classes < 2:
            raise ConfigError(f"n_classes must be at least 2, got {self.n_classes}")
        check_number("pixel_std", self.pixel_std)
        if not math.isfinite(self.pixel_mean):
            raise ConfigError(f"pixel_mean must be a finite number, got {self.pixel_mean}")

    @property
    def grid(self) -> int:
        return self.image_size // self.patch_size

    @property
    def n_patches(self) -> int:
        return self.grid**2

    # -- the encoder's other settings (LayerSettings): the text model's defaults --------------------
    @property
    def key_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def value_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def activation_dropout(self) -> float:
        return 0.0

    @property
    def layer_norm_eps(self) -> float:
        return 1e-5

    @property
    def use_final_norm(self) -> bool:
        return self.norm_first


class VisionTransformer(nn.Module):
    """images (batch, channels, H, W) in [0, 1] -> class logits (batch, n_classes)."""

    def __init__(self, config: VisionConfig):
        super().__init__()
        self.config = c = config
        # ViT's hybrid (Dosovitskiy et al. 3.1; Xiao et al., 2021): a 3x3 convolution gives each
        # patch vector the local edges around its pixels; the patches are then cut from its maps.
        self.stem = (
            nn.Sequential(nn.Conv2d(c.channels, c.stem_channels, 3, padding=1), nn.GELU())
            if c.stem_channels
            else None
        )
        self.patch_embed = nn.Linear((c.stem_channels or c.channels) * c.patch_size**2, c.d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.d_model))
        if c.positions == "learned":
            self.positions = nn.Parameter(torch.empty(c.n_patches + 1, c.d_model))
            nn.init.trunc_normal_(self.positions, std=0.02)
        else:  # the class token sits at no place in the grid: a zero vector
            table = torch.cat(
                [torch.zeros(1, c.d_model, dtype=torch.float64), sinusoidal_2d(c.grid, c.grid, c.d_model)]
            )
            self.register_buffer("positions", table.float(), persistent=False)
        self.encoder = Encoder(c)
        self.head = nn.Linear(c.d_model, c.n_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """Xavier-uniform projections (Q, K and V each on its own) with zero biases, as the text
        model; a zero head, as ViT."""
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                for chunk in module.weight.data.chunk(3 if name.endswith("qkv_proj") else 1, dim=0):
                    nn.init.xavier_uniform_(chunk)
                nn.init.zeros_(module.bias)
        nn.init.zeros_(self.head.weight)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def embed(self, images: Tensor) -> Tensor:
        """images (batch, channels, H, W) -> [class token; patch embeddings] + positions
        (batch, 1 + n_patches, d_model), with dropout (5.4)."""
        c = self.config
        x = (images - c.pixel_mean) / c.pixel_std
        if self.stem is not None:
            x = self.stem(x)  # (batch, stem_channels, H, W)
        x = self.patch_embed(patchify(x, c.patch_size))  # (batch, n_patches, d_model)
        x = torch.cat([self.cls_token.expand(x.size(0), -1, -1), x], dim=1)  # (batch, 1 + n_patches, d_model)
        return dropout(x + self.positions, c.dropout, self.training)

    def forward(self, images: Tensor, weights: list[Tensor] | None = None) -> Tensor:
        """-> logits (batch, n_classes); fills `weights` with each layer's attention if given."""
        h = self.encoder(self.embed(images), None, weights)  # (batch, 1 + n_patches, d_model)
        return self.head(h[:, 0])

    def attention_maps(self, images: Tensor) -> tuple[Tensor, list[Tensor]]:
        """(logits, [per layer (batch, heads, 1 + n_patches, 1 + n_patches)]); index 0 is the class token."""
        weights: list[Tensor] = []
        logits = self(images, weights)
        return logits, weights
