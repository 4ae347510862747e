# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Linformer: RoBERTa with self-attention of linear complexity (Wang et al. 2020, arXiv 2006.04768).

Keys and values are projected along the sequence from length n to k before attention, so each
layer costs O(n k) time and memory instead of O(n^2). Everything but the attention is RoBERTa's,
reused from transformers, so checkpoints line up name for name with `RobertaModel`.

Three choices that differ from other public implementations, and why:

* Padding is invisible. Before projecting, the real tokens of each sequence are moved to the front
  (a stable gather) and pad positions are zeroed, so token j always meets column j of E whatever
  the padding side or amount. Pooling windows that hold no real token are masked out of the
  softmax. A sequence alone and the same sequence padded in a batch give the same hidden states.
* Any length up to n. An input of L <= n real tokens meets E as `projection_length_scaling` says (its
  first L columns, rescaled or not, or all n columns resampled to L), the same alone or padded in a
  batch; nothing has to be padded to n.
* Projections live in one module, `LinformerProjections`, holding each distinct matrix once, and
  layers receive theirs as forward arguments. Shared matrices are therefore one parameter for
  safetensors, DDP, FSDP and the optimizer alike: no aliasing, no tying to restore on load.

Each `projection_type` is one class (`SEQUENCE_PROJECTIONS`): learned E/F, mean or max pooling, or a
convolution. The linear ones, when shared by all heads, are applied to the layer input before the key/value
linear maps (E X W instead of E (X W)): k x n x d + k x d x d instead of n x d x d FLOPs. Each layer picks the
cheaper order from the actual shapes.

Two attention algorithms, each its own class, chosen per layer from `config.attention_type`:
`LinformerSelfAttention` (the paper's; with `config.exact_attention_length`, a sequence of at most that many
real tokens attends exactly instead, which is what a model converted from RoBERTa needs to keep its source's
outputs) and `LinformerWindowedSelfAttention` (exact windows plus gated global slots, for long inputs read by a
converted 512-token encoder). Which sequences of a batch take which path in a layer is one value, `BatchPaths`.
`config.long_input_adapter_rank` builds every linear map of a layer as a `LinformerLongInputLinear`, whose
low-rank update only sequences read through the projections use, so the long path can be trained while the short
one stays its source, bit for bit.

Layers are RoBERTa's post-LN blocks unless `config.layer_norm_placement="pre"` builds `LinformerPreNormLayer`
(LayerNorm before each block, one more closing the encoder) and `config.embedding_layer_norm=False` leaves the
embeddings unnormalised: the arrangement of the only published Linformer weights (the Jargon models, which
`convert_to_linformer.py` converts). Both are chosen when the model is built; the defaults add no weights.
"""

import enum
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.roberta.modeling_roberta import (
    RobertaClassificationHead,
    RobertaEmbeddings,
    RobertaLMHead,
    RobertaPooler,
)
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, logging
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .configuration_linformer import PROJECTION_LENGTH_SCALING, UPGRADE_COMMAND, LinformerConfig

logger = logging.get_logger(__name__)


def resample_columns(weight, lengths, width):
    """E/F (G, k, n) stretched over sequences of `lengths` (B,) real tokens: (B, G, k, width).

    Column j of a sequence of L tokens is the mean of E's columns over [floor(j n / L), ceil((j + 1) n / L))
    times n / L (adaptive average pooling of each row to L columns, sums kept); columns j >= L are zero.
    Window means come from a cumulative sum, so one gather serves every length in the batch.
    """
    n = weight.shape[-1]
    sums = F.pad(weight.to(torch.promote_types(weight.dtype, torch.float32)).cumsum(-1), (1, 0))  # (G, k, n + 1)
    lengths = lengths.reshape(-1, 1).clamp(min=1)
    j = torch.arange(width, device=weight.device)
    start = (j * n).div(lengths, rounding_mode="floor").clamp(max=n)
    end = (-((-(j + 1) * n).div(lengths, rounding_mode="floor"))).clamp(max=n)
    window = sums[..., end.flatten()] - sums[..., start.flatten()]  # (G, k, B * width)
    scale = n / (lengths * (end - start).clamp(min=1)).to(sums.dtype)  # zero-width windows (j >= L) give 0
    window = window.unflatten(-1, end.shape) * scale
    return window.permute(2, 0, 1, 3).to(weight.dtype)


def window_mean_projection(k, n):
    """k x n matrix whose row i averages positions [i n / k, (i + 1) n / k): the identity when k = n. Each slot
    then reads one stretch of neighbouring tokens, where random E/F mix all n positions with random signs."""
    edges = [i * n // k for i in range(k + 1)]
    matrix = torch.zeros(k, n)
    for i in range(k):
        matrix[i, edges[i]:edges[i + 1]] = 1.0 / (edges[i + 1] - edges[i])
    return matrix


class LearnedProjection:
    """`projection_type="linear"`, the paper's: learned E/F of (G, k, n) each, G = heads or 1 (`projection_sharing`).

    A linear map, so where E is shared by all heads it may meet the layer input before the key/value maps
    (`commutes_with_maps`). An input of L real tokens meets E as `projection_length_scaling` says.
    """

    has_weights = True
    commutes_with_maps = True
    fixed_slots = True  # k, whatever the length

    def parameter_shape(self, groups, k, n):
        return (groups, k, n)

    def slots(self, k, stride, length):
        return k

    def cost_per_channel(self, k, length):
        """Multiply-adds of one projection of one channel of a length-L input."""
        return k * length

    def project(self, x, weight, stride, mask, length_scaling="none"):
        """Map `x` (B, G, L, C) along L to (B, G', k, C) with `weight` (G', k, n); G and G' broadcast (1 or heads).

        `mask` is (B|1, 1, L, 1), 1 for real tokens (compacted to the front), or None when all are real. Every
        slot holds a mix of real tokens, so the second value (the slots holding none) is always None.
        """
        length = x.shape[-2]
        if mask is not None:
            x = x * mask
        n = weight.shape[-1]
        if length_scaling == "resample":
            if mask is None:
                real = torch.full((1,), length, device=x.device)
            else:
                real = (mask != 0).sum(-2).reshape(-1)  # counted, not summed: fp16 sums stop at 2048
            if mask is None and length == n:
                return torch.matmul(weight, x), None
            resampled = resample_columns(weight, real, length)  # (B, G, k, L)
            # One bmm over (B * G): the same product as matmul's broadcast, without its batch-size branches,
            # so a traced graph (ONNX) serves batches of one too.
            batch, groups = torch.broadcast_shapes(resampled.shape[:2], x.shape[:2])
            out = torch.bmm(resampled.expand(batch, groups, -1, -1).flatten(0, 1),
                            x.expand(batch, groups, -1, -1).flatten(0, 1))
            return out.unflatten(0, (batch, groups)), None
        out = torch.matmul(weight[..., :length], x)
        power = PROJECTION_LENGTH_SCALING[length_scaling]
        if power:
            real = length if mask is None else mask.sum(-2, keepdim=True).clamp(min=1)
            out = out * (n / real) ** power
        return out, None

    def initialise(self, param, config):
        """`projection_init`: random as in the paper (std `projection_init_std`, or 1/sqrt(n)), or window means."""
        n = config.max_seq_length
        if config.projection_init == "window_mean":
            init.copy_(param, window_mean_projection(param.shape[1], n).expand_as(param))
        else:
            init.normal_(param, mean=0.0, std=config.projection_init_std or 1.0 / math.sqrt(n))


def window_count(length, stride):
    """How many windows of `stride` positions cover `length` (the last one may be partly past the end)."""
    return -(-length // stride)


class WindowProjection:
    """The projections that read consecutive windows of n/k positions (the stride), one slot per window, so a
    sequence of L tokens fills ceil(L / stride) slots; a window past a padded sequence's end holds no token and is
    reported, to be kept out of the softmax. `reduce` says what a window becomes."""

    has_weights = False
    commutes_with_maps = True
    fixed_slots = False  # one per window of the length

    def slots(self, k, stride, length):
        return window_count(length, stride)

    def cost_per_channel(self, k, length):
        return length

    def project(self, x, weight, stride, mask, length_scaling="none"):
        """Map `x` (B, G, L, C) along L to (B, G', slots, C), and which slots hold at least one real token; `mask`
        as in `LearnedProjection.project`. `length_scaling` is always "none" here (the config allows no other)."""
        length = x.shape[-2]
        slots = window_count(length, stride)
        if mask is None:
            mask = x.new_ones(1, 1, length, 1)
        pad = slots * stride - length
        if pad:
            x = F.pad(x, (0, 0, 0, pad))
            mask = F.pad(mask, (0, 0, 0, pad))
        windows = x.unflatten(-2, (slots, stride))
        window_mask = mask.unflatten(-2, (slots, stride))
        count = window_mask.sum(-2)
        return self.reduce(windows, window_mask, count, weight), count > 0


class MeanPooling(WindowProjection):
    """`projection_type="mean_pool"`: each slot is the mean of its window's real tokens."""

    def reduce(self, windows, window_mask, count, weight):
        return (windows * window_mask).sum(-2) / count.clamp(min=1)


class MaxPooling(WindowProjection):
    """`projection_type="max_pool"`: each slot is its window's elementwise maximum over real tokens (0 when it
    holds none). Not linear, so it always follows the key/value maps."""

    commutes_with_maps = False

    def reduce(self, windows, window_mask, count, weight):
        out = windows.masked_fill(window_mask == 0, float("-inf")).amax(-2)
        return out.masked_fill(count == 0, 0.0)


class ConvolutionProjection(WindowProjection):
    """`projection_type="conv"`: one learned kernel of length n/k per group (G, n/k), stride n/k, shared by all
    channels; it starts as mean pooling over its window."""

    has_weights = True

    def parameter_shape(self, groups, k, n):
        return (groups, n // k)

    def reduce(self, windows, window_mask, count, weight):
        return torch.matmul(weight[:, None, None, :], windows * window_mask).squeeze(-2)

    def initialise(self, param, config):
        init.constant_(param, 1.0 / param.shape[-1])


# `projection_type` -> how keys and values are mapped from length L to k: the one place a type is told apart.
SEQUENCE_PROJECTIONS = {"linear": LearnedProjection(), "mean_pool": MeanPooling(), "max_pool": MaxPooling(),
                        "conv": ConvolutionProjection()}


class LinformerProjections(nn.Module):
    """Every distinct sequence projection of the model, each stored exactly once.

    Parameters have the shape `SEQUENCE_PROJECTIONS[projection_type]` gives them, with G = heads for sharing "none"
    and 1 otherwise; "key_value" and "layerwise" keep no separate value projection (F = E). Pooling has none.
    """

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.projection = SEQUENCE_PROJECTIONS[config.projection_type]
        sharing = config.projection_sharing
        n = config.max_seq_length
        groups = config.num_attention_heads if sharing == "none" else 1

        # Registered directly on this module (no ParameterList): HF's init walk would mark a child
        # list's tensors as initialised before `_init_weights` reaches this module, leaving E/F empty.
        self.names = []
        if not self.projection.has_weights:
            return
        for idx, k in enumerate(config.projected_dims):
            key = "shared" if sharing == "layerwise" else f"key_{idx}"
            value = key if sharing in ("key_value", "layerwise") else f"value_{idx}"
            for name in (key, value):
                if name not in self._parameters:
                    self.register_parameter(name, nn.Parameter(torch.empty(self.projection.parameter_shape(
                        groups, k, n))))
            self.names.append((key, value))

    def for_layer(self, idx):
        """(E, F) of layer `idx`; F is E itself when keys and values share it."""
        if not self.names:
            return None, None
        key, value = self.names[idx]
        return getattr(self, key), getattr(self, value)

    def num_matrices(self):
        """How many distinct k x n projection matrices (or conv kernels) the model holds."""
        return sum(p.shape[0] for p in self.parameters())


def pad_slots(key, value, blocked, slots):
    """Keys and values (B, H, s, D) and their blocked slots (B|1, s) padded with empty slots to `slots`."""
    missing = slots - key.shape[-2]
    return F.pad(key, (0, 0, 0, missing)), F.pad(value, (0, 0, 0, missing)), F.pad(blocked, (0, missing), value=True)


def take_rows(x, index):
    """`x[b, index[b]]` for each row b of a (B, L, ...) tensor and a (B, L') index, as one row gather over the
    flattened batch: ONNX gets a Gather of B * L' row numbers instead of an element-wise gather (or scatter) whose
    index is as large as `x`."""
    batch, width = index.shape
    rows = index + torch.arange(batch, device=index.device)[:, None] * x.shape[1]
    return x.flatten(0, 1).index_select(0, rows.flatten()).unflatten(0, (batch, width))


def additive_mask(blocked, query):
    """The attention function's mask for `blocked` keys, (B', s) or (B', heads, s): the dtype's minimum where a key
    is blocked, 0 elsewhere, shaped to broadcast over (B', heads, queries, s)."""
    mask = torch.zeros(blocked.shape, dtype=query.dtype, device=query.device)
    mask = mask.masked_fill(blocked, torch.finfo(query.dtype).min)
    return mask.unflatten(-1, (1, -1)) if blocked.dim() == 3 else mask[:, None, None]


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Unpack[TransformersKwargs],
) -> tuple[torch.Tensor, torch.Tensor]:
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


class AttentionPath(enum.Enum):
    """What the sequences of a batch attend to in one layer (`route_sequences` decides)."""

    EXACT = "exact"  # every sequence its own keys and values: none has more than `exact_attention_length` tokens
    PROJECTED = "projected"  # every sequence the k slots projected from it, through the long-input adapters
    MIXED = "mixed"  # each sequence one or the other, as `BatchPaths.exact` says


@dataclass(frozen=True)
class BatchPaths:
    """The path the sequences of a batch take through one layer: one `path` for all of them, or MIXED with
    `exact`, a (batch,) bool tensor that is True for the sequences read exactly."""

    path: AttentionPath
    exact: torch.Tensor | None = None

    @property
    def projected(self):
        """(batch,) bool, for a MIXED batch: the sequences read through the projections and the adapters."""
        return ~self.exact


ALL_EXACT = BatchPaths(AttentionPath.EXACT)
ALL_PROJECTED = BatchPaths(AttentionPath.PROJECTED)


class LinformerLongInputLinear(nn.Linear):
    """`nn.Linear` plus a low-rank update W + B A (and a bias update) that only long inputs use.

    Built for every linear map of a layer when `long_input_adapter_rank` > 0 (`build_linear`), so the blocks calling
    it (the attention's query/key/value, and the output, intermediate and feed-forward maps) call it through
    `adapted` with the layer's `BatchPaths`: the update applies to the sequences on the projected path. B starts at
    zero, so a new adapter changes nothing. A whole projected batch uses the merged weight (one matmul, no cost per
    token); in a mixed batch the update is added per sequence and the others get the plain map's output untouched,
    so training the long path never moves the short one.
    """

    def __init__(self, in_features, out_features, rank):
        super().__init__(in_features, out_features)
        self.adapter_down = nn.Parameter(torch.empty(rank, in_features))
        self.adapter_up = nn.Parameter(torch.empty(out_features, rank))
        self.adapter_bias = nn.Parameter(torch.empty(out_features))

    def forward(self, x, paths=ALL_PROJECTED):
        if paths.path is AttentionPath.EXACT:
            return super().forward(x)
        if paths.path is AttentionPath.PROJECTED:
            return F.linear(x, *self.long_weights())
        plain = super().forward(x)
        update = F.linear(F.linear(x, self.adapter_down.to(x.dtype)), self.adapter_up.to(x.dtype),
                          self.adapter_bias.to(x.dtype))
        return torch.where(paths.projected.reshape(-1, *[1] * (x.dim() - 1)), plain + update, plain)

    def long_weights(self):
        """(weight, bias) of the adapted map, as long sequences use it."""
        weight = self.weight + (self.adapter_up @ self.adapter_down).to(self.weight.dtype)
        return weight, self.bias + self.adapter_bias.to(self.bias.dtype)


def build_linear(config, in_features, out_features):
    """A layer's linear map: `nn.Linear`, or with `long_input_adapter_rank` a `LinformerLongInputLinear`."""
    if config.long_input_adapter_rank:
        return LinformerLongInputLinear(in_features, out_features, config.long_input_adapter_rank)
    return nn.Linear(in_features, out_features)


def adapted(linear, x, paths):
    """`linear(x)`, with a long-input adapter's update for the sequences `paths` projects where the map has one."""
    return linear(x, paths) if isinstance(linear, LinformerLongInputLinear) else linear(x)


def long_weights(linear):
    """(weight, bias) of a map as the sequences on the projected path use it: adapted, where it has an adapter."""
    return linear.long_weights() if isinstance(linear, LinformerLongInputLinear) else (linear.weight, linear.bias)


@dataclass
class LinformerRoute:
    """How one layer reads the batch, by name: built by `LinformerEncoder.forward` (the padding once per forward,
    then each layer's paths and its E/F) and handed down to the attention.

    Args:
        paths: which sequences attend exactly and which through the projections and adapters (`BatchPaths`).
        key_mask: (batch, length) bool, which compacted key positions hold real tokens; None without padding.
        key_index: (batch, length) positions that move each sequence's real tokens first (`take_rows`), so the j-th
            real token meets column j of E however it is padded; None where nothing has to move.
        proj_key, proj_value: the layer's E and F (`LinformerProjections.for_layer`); None for pooling.

    `paths` has no default: torch.compile in torch 2.11 (2.13 can) does not build an object whose constructor has a
    default that is not a plain constant (None, a number, a string) and breaks the graph there, once per layer.
    """

    paths: BatchPaths
    key_mask: torch.Tensor | None = None
    key_index: torch.Tensor | None = None
    proj_key: torch.Tensor | None = None
    proj_value: torch.Tensor | None = None


class LinformerResidualOutput(nn.Module):
    """RoBERTa's output blocks (after the attention and after the feed-forward expansion): dense map, dropout, and
    LayerNorm of the sum with the block's input. In a pre-LN layer (`post_norm=False`) the LayerNorm is an identity
    without weights: that layer normalises each block's input instead. The dense map reads the long sequences
    through its adapter."""

    def __init__(self, config: LinformerConfig, in_features: int, post_norm: bool = True):
        super().__init__()
        self.dense = build_linear(config, in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if post_norm else nn.Identity()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor, paths=ALL_PROJECTED) -> torch.Tensor:
        return self.LayerNorm(self.dropout(adapted(self.dense, hidden_states, paths)) + input_tensor)


class LinformerIntermediate(nn.Module):
    """RoBERTa's feed-forward expansion (dense map and activation); the dense map reads the long sequences through
    its adapter."""

    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.dense = build_linear(config, config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor, paths=ALL_PROJECTED) -> torch.Tensor:
        return self.intermediate_act_fn(adapted(self.dense, hidden_states, paths))


class LinformerSelfAttention(nn.Module):
    """The paper's attention: keys and values projected along the sequence from its length to k.

    With `exact_attention_length` set, a sequence of at most that many real tokens attends to its own keys
    exactly (standard attention) instead: the layer's `LinformerRoute.paths` says which, per sequence, and a padded
    batch may mix both.
    """

    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = False
        self.projection = SEQUENCE_PROJECTIONS[config.projection_type]
        self.k = config.projected_dims[layer_idx]
        self.stride = config.max_seq_length // self.k
        self.groups = self.num_heads if config.projection_sharing == "none" else 1
        self.length_scaling = config.projection_length_scaling
        # Keys and values meet the same projection (F = E, or pooling): it is applied once. Decided from the
        # config, not by `proj_key is proj_value`: FSDP2 hands a layer a fresh view of each parameter per
        # access in forward and the parameter itself in a checkpointed layer's recomputation, so identity
        # would change between the two and break activation checkpointing.
        self.shared_kv = not self.projection.has_weights or config.projection_sharing in ("key_value", "layerwise")

        self.query = build_linear(config, config.hidden_size, config.hidden_size)
        self.key = build_linear(config, config.hidden_size, config.hidden_size)
        self.value = build_linear(config, config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,
        route: LinformerRoute,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`route`: the padding, which sequences are read exactly and E/F (see `LinformerRoute`)."""
        query = self._heads(adapted(self.query, hidden_states, route.paths))
        # Real tokens first, in order, so the j-th real token meets column j of E however it is padded.
        x = hidden_states if route.key_index is None else take_rows(hidden_states, route.key_index)
        key, value, blocked = self._keys_values(x, route)
        output, weights = self._attend(query, key, value, blocked, kwargs)
        return output.reshape(*hidden_states.shape[:-1], -1), weights

    @property
    def exact_length(self):
        """Sequences of at most this many real tokens attend exactly (None: every sequence is projected). Read from
        the config at each forward, so the exact path can be switched on or off in a built model."""
        length = self.config.exact_attention_length
        return length[self.layer_idx] if isinstance(length, list) else length

    def _keys_values(self, x, route):
        """Keys and values (B, H, slots, D) and the slots no query may read: exact for the sequences on the exact
        path, projected for the others."""
        paths = route.paths
        if paths.path is AttentionPath.EXACT:
            return self._exact(x, route.key_mask)
        key, value, blocked = self._projected(x, route)
        if paths.path is AttentionPath.PROJECTED:
            return key, value, blocked
        # A mixed batch: exact sequences fill at most exact_length slots, projected ones k (pooling may fill
        # fewer), and k <= exact_length. Both kinds are padded with empty slots to exact_length, and one
        # attention call serves both, each sequence masked.
        exact_key, exact_value, exact_blocked = self._exact(x, route.key_mask)
        if blocked is None:
            blocked = route.key_mask.new_zeros(1, key.shape[-2])
        key, value, blocked = pad_slots(key, value, blocked, self.exact_length)
        exact_key, exact_value, exact_blocked = pad_slots(exact_key, exact_value, exact_blocked, self.exact_length)
        pick = paths.exact[:, None, None, None]
        key, value = torch.where(pick, exact_key, key), torch.where(pick, exact_value, value)
        pick = paths.exact[:, None]  # and/or, not torch.where: ONNX Runtime has no Where on booleans
        return key, value, (pick & exact_blocked) | (~pick & blocked)

    def project_inputs_first(self, length):
        """Whether projecting X before the key/value maps costs fewer FLOPs than after them."""
        if not self.projection.commutes_with_maps:
            return False
        if torch.compiler.is_exporting():
            length = self.config.max_seq_length
        d = self.config.hidden_size
        slots = self.projection.slots(self.k, self.stride, length)
        per_column = self.projection.cost_per_channel(self.k, length)
        groups = self.groups if self.projection.has_weights else 1
        first = (1 if self.shared_kv else 2) * groups * per_column * d + 2 * slots * d * d
        after = 2 * length * d * d + 2 * per_column * d
        return first < after

    def _heads(self, x):
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    def _map_projected(self, projected, mask_projected, weight, bias):
        """Apply a key/value linear map to projected inputs (B, G, slots, D); bias scaled by E m."""
        if projected.shape[1] == 1:
            out = self._heads(F.linear(projected[:, 0], weight))
        else:
            out = torch.einsum("bhsc,hdc->bhsd", projected, weight.view(self.num_heads, self.head_dim, -1))
        return out + mask_projected * bias.view(self.num_heads, 1, self.head_dim)

    def _exact(self, x, key_mask):
        """Keys and values of the first min(L, exact_length) compacted positions, unprojected (the plain
        maps: exact sequences never use the adapters), and the empty slots."""
        x = x[:, : self.exact_length]
        key, value = self._heads(F.linear(x, self.key.weight, self.key.bias)), self._heads(
            F.linear(x, self.value.weight, self.value.bias))
        return key, value, None if key_mask is None else ~key_mask[:, : self.exact_length]

    def _projected(self, x, route):
        """Keys and values projected to k slots (windows for pooling), and the slots that hold no token."""
        length = x.shape[1]
        mask = None if route.key_mask is None else route.key_mask[:, None, :, None].to(x.dtype)
        if torch.compiler.is_exporting() and not self.projection.fixed_slots:
            # A traced graph reads windows over all n positions, the empty ones blocked below, so that no shape in
            # it depends on the length it was traced with (a window count of one fails in ONNX Runtime).
            mask = x.new_ones(x.shape[0], 1, length, 1) if mask is None else mask
            x, mask = F.pad(x, (0, 0, 0, self.config.max_seq_length - length)), F.pad(
                mask, (0, 0, 0, self.config.max_seq_length - length))
            length = self.config.max_seq_length

        def project(t, weight):
            return self.projection.project(t, weight, self.stride, mask, self.length_scaling)

        (key_weight, key_bias), (value_weight, value_bias) = long_weights(self.key), long_weights(self.value)
        if self.project_inputs_first(length):
            ones = x.new_ones(1, 1, length, 1) if mask is None else mask
            xk, valid = project(x[:, None], route.proj_key)
            mk, _ = project(ones, route.proj_key)
            if self.shared_kv:
                xv, mv = xk, mk
            else:
                xv, _ = project(x[:, None], route.proj_value)
                mv, _ = project(ones, route.proj_value)
            key = self._map_projected(xk, mk, key_weight, key_bias)
            value = self._map_projected(xv, mv, value_weight, value_bias)
        else:
            key, valid = project(self._heads(F.linear(x, key_weight, key_bias)), route.proj_key)
            value, _ = project(self._heads(F.linear(x, value_weight, value_bias)), route.proj_value)
        # Pooling windows past the end of a padded sequence hold no token: they are kept out of the softmax.
        blocked = None if valid is None or mask is None else ~valid.reshape(valid.shape[0], -1)
        return key, value, blocked

    def _attend(self, query, key, value, blocked, kwargs):
        """One call of the configured attention function; `blocked` (B', s), or (B', heads, s), marks keys no query
        may read."""
        attention_mask = None if blocked is None else additive_mask(blocked, query)
        implementation = self.config._attn_implementation or "sdpa"
        if kwargs.get("output_attentions") and implementation == "sdpa":
            implementation = "eager"  # SDPA never materialises the n x k maps that were asked for
        attention: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        return attention(self, query, key, value, attention_mask,
                         dropout=self.dropout.p if self.training else 0.0, scaling=self.scaling, **kwargs)


class LinformerWindowedSelfAttention(LinformerSelfAttention):
    """Windows + gated global slots (`attention_type="windowed"`): a sequence is read exactly inside consecutive
    windows of `exact_attention_length` real tokens, and a long one adds `global_gate` (one per head) times its
    attention to the k slots projected from the whole sequence.

    The gate starts at zero: a model converted from a 512-token encoder with 512-token windows then reads a long
    input as its source reads each window, and training opens the gate as far as the whole document helps. A
    sequence of at most one window is its source exactly.
    """

    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.window = config.exact_attention_length
        self.global_gate = nn.Parameter(torch.empty(self.num_heads))

    def forward(
        self,
        hidden_states: torch.Tensor,
        route: LinformerRoute,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`route.paths` as in `LinformerSelfAttention`: EXACT when every sequence fits one window, which is then
        standard attention over its own tokens (and has attention maps to return)."""
        paths = route.paths
        if paths.path is AttentionPath.EXACT:
            return super().forward(hidden_states, route, **kwargs)
        if kwargs.get("output_attentions"):
            raise ValueError(
                f"output_attentions=True: with attention_type='windowed' (windows of {self.window} tokens), an input "
                f"longer than {self.window} tokens has no single attention map (its windows and the k slots are "
                f"separate); ask for attentions on inputs of at most {self.window} tokens")
        query = self._heads(adapted(self.query, hidden_states, paths))
        x = hidden_states if route.key_index is None else take_rows(hidden_states, route.key_index)  # real first
        key, value = self._heads(adapted(self.key, x, paths)), self._heads(adapted(self.value, x, paths))  # (B,H,L,D)
        # The k slots come from the projected path's own route (E x first where that is cheaper: one
        # (k, L) x (L, d) product instead of one per head on the already mapped keys and values).
        far_key, far_value, blocked = self._projected(x, route)
        far, _ = self._attend(query, far_key, far_value, blocked, kwargs)  # (B, L, H, D), input order
        near = self._near(query, key, value, route.key_mask, route.key_index, kwargs)
        far = far * self.global_gate.to(far.dtype)[:, None]
        if paths.path is AttentionPath.PROJECTED:
            return (near + far).reshape(*hidden_states.shape[:-1], -1), None
        return torch.where(paths.projected[:, None, None, None], near + far, near).reshape(
            *hidden_states.shape[:-1], -1), None

    def _near(self, query, key, value, key_mask, key_index, kwargs):
        """Exact attention inside consecutive windows of `window` real tokens (B, L, H, D), in input order."""
        batch, _, length, _ = key.shape
        near_query = query if key_index is None else take_rows(query.transpose(1, 2), key_index).transpose(1, 2)
        windows = (length + self.window - 1) // self.window  # no negative floor division: ONNX truncates
        pad = windows * self.window - length
        real = key_mask if key_mask is not None else key.new_ones(batch, length, dtype=torch.bool)
        # Each (head, window) pair is one attention "head" of `window` keys: (B, H * windows, window, D). No batch
        # and window dimensions are merged, so a traced graph (ONNX) serves any length with one window or many.
        blocked = ~F.pad(real, (0, pad)).view(batch, 1, windows, self.window).expand(-1, self.num_heads, -1, -1)

        def split(t):  # (B, H, L, D) -> (B, H * windows, window, D)
            return F.pad(t, (0, 0, 0, pad)).unflatten(2, (windows, self.window)).flatten(1, 2)

        near, _ = self._attend(split(near_query), split(key), split(value), blocked.flatten(1, 2), kwargs)
        near = near.transpose(1, 2).unflatten(1, (self.num_heads, windows)).flatten(2, 3)  # (B, H, padded, D)
        # The first `length` rows, picked by index: a slice would ask a tracer to prove length <= padded.
        near = near.index_select(2, torch.arange(length, device=near.device)).transpose(1, 2)  # (B, L, H, D)
        if key_index is not None:  # back to input order: input position p is compacted row inverse[p]
            positions = torch.arange(length, device=near.device).expand_as(key_index)
            near = take_rows(near, torch.empty_like(key_index).scatter_(1, key_index, positions))
        return near


LINFORMER_ATTENTION_CLASSES = {"projected": LinformerSelfAttention, "windowed": LinformerWindowedSelfAttention}


class LinformerAttention(nn.Module):
    def __init__(self, config: LinformerConfig, layer_idx: int, post_norm: bool = True):
        super().__init__()
        self.self = LINFORMER_ATTENTION_CLASSES[config.attention_type](config, layer_idx)
        self.output = LinformerResidualOutput(config, config.hidden_size, post_norm)

    def forward(
        self,
        hidden_states: torch.Tensor,
        route: LinformerRoute,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        attended, _ = self.self(hidden_states, route, **kwargs)
        return self.output(attended, hidden_states, route.paths)


class LinformerLayer(GradientCheckpointingLayer):
    """RoBERTa's post-LN layer (`layer_norm_placement="post"`): LN(x + Attention(x)), then LN(y + FeedForward(y)).
    Every linear map is built with its long-input adapter where the config asks for one (`build_linear`)."""

    post_norm = True

    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.attention = LinformerAttention(config, layer_idx, self.post_norm)
        self.intermediate = LinformerIntermediate(config)
        self.output = LinformerResidualOutput(config, config.intermediate_size, self.post_norm)

    def forward(
        self,
        hidden_states: torch.Tensor,
        route: LinformerRoute,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        """`route`: how this layer reads the batch (`LinformerRoute`); its `paths` also pick the sequences whose
        maps go through the long-input adapters."""
        attended = self.attend(hidden_states, route, **kwargs)
        chunk = self.config.chunk_size_feed_forward
        if chunk and attended.shape[1] > chunk:
            # Once attention is O(n k), the n x intermediate_size activation is the peak: bound it.
            # (split, not apply_chunking_to_forward, which needs the length to be a multiple of chunk.)
            return torch.cat([self.feed_forward(part, route.paths) for part in attended.split(chunk, dim=1)], 1)
        return self.feed_forward(attended, route.paths)

    def attend(self, hidden_states, route, **kwargs):
        return self.attention(hidden_states, route, **kwargs)

    def feed_forward(self, attended, paths=ALL_PROJECTED):
        return self.output(self.intermediate(attended, paths), attended, paths)


class LinformerPreNormLayer(LinformerLayer):
    """A pre-LN layer (`layer_norm_placement="pre"`): x + Attention(LN(x)), then y + FeedForward(LN(y)).

    fairseq's `encoder_normalize_before` arrangement, which the Jargon models were trained in: the residual stream
    is never normalised inside the stack, so `LinformerEncoder` closes it with `final_layer_norm`. The blocks keep
    RoBERTa's modules and names (adapters included); their post-sum LayerNorms are built as identities (no
    weights), and each block's input LayerNorm is the layer's own.
    """

    post_norm = False

    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.attention_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def attend(self, hidden_states, route, **kwargs):
        attended, _ = self.attention.self(self.attention_layer_norm(hidden_states), route, **kwargs)
        return self.attention.output(attended, hidden_states, route.paths)

    def feed_forward(self, attended, paths=ALL_PROJECTED):
        return self.output(self.intermediate(self.feed_forward_layer_norm(attended), paths), attended, paths)


LINFORMER_LAYER_CLASSES = {"post": LinformerLayer, "pre": LinformerPreNormLayer}


def compact_padding(attention_mask):
    """(key_mask, key_index): which compacted positions hold real tokens, and the (B, L) positions that move each
    sequence's real tokens to the front in order (`take_rows`; None where nothing has to move).

    On CPU one read of the mask skips the work for a batch without padding or right-padded (a read costs
    nothing there); on an accelerator or under torch.compile, where a read would stall the device or break the
    graph, every masked batch takes the stable sort."""
    if attention_mask is None:
        return None, None
    real = attention_mask.bool()
    on_host = real.device.type == "cpu" and not torch.compiler.is_compiling()
    if on_host and bool(real.all()):
        return None, None
    if on_host and bool((real[:, :-1] >= real[:, 1:]).all()):
        return real, None
    # A stable sort of "is padding", written as counts (ONNX has no stable sort): real token j goes to the number
    # of real tokens before it, a pad after all real tokens and the pads before it.
    counts = real.long()
    target = torch.where(real, counts.cumsum(1), counts.sum(1, keepdim=True) + (1 - counts).cumsum(1)) - 1
    source = torch.arange(real.shape[1], device=real.device).expand_as(target)
    key_index = torch.empty_like(target).scatter_(1, target, source)
    return real.gather(1, key_index), key_index


def route_sequences(key_mask, length, limit):
    """The paths of a layer that reads sequences of at most `limit` real tokens exactly (`BatchPaths`): all exact,
    all projected, or chosen per sequence.

    On CPU one read of the real lengths tells whether all or none are short, so a batch of one kind computes only
    that kind; on an accelerator and under torch.compile both kinds are prepared and chosen per sequence, and the
    padded length alone still rules out the long kind."""
    if limit is None:
        return ALL_PROJECTED
    if torch.compiler.is_exporting() and key_mask is not None:
        return BatchPaths(AttentionPath.MIXED, key_mask.sum(1) <= limit)
    if key_mask is None or length <= limit:
        return ALL_EXACT if length <= limit else ALL_PROJECTED
    lengths = key_mask.sum(1)
    if torch.compiler.is_compiling() or lengths.device.type != "cpu":
        return BatchPaths(AttentionPath.MIXED, lengths <= limit)
    shortest, longest = torch.stack(torch.aminmax(lengths)).tolist()
    if longest <= limit:
        return ALL_EXACT
    return BatchPaths(AttentionPath.MIXED, lengths <= limit) if shortest <= limit else ALL_PROJECTED


class LinformerEncoder(nn.Module):
    def __init__(self, config: LinformerConfig):
        super().__init__()
        self.config = config
        self.projections = LinformerProjections(config)
        layer_class = LINFORMER_LAYER_CLASSES[config.layer_norm_placement]
        self.layer = nn.ModuleList([layer_class(config, i) for i in range(config.num_hidden_layers)])
        # Pre-LN layers leave the residual stream un-normalised: one LayerNorm closes the stack (post-LN: nothing).
        self.final_layer_norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                                 if config.layer_norm_placement == "pre" else nn.Identity())

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        key_mask, key_index = compact_padding(attention_mask)
        for idx, layer in enumerate(self.layer):
            paths = route_sequences(key_mask, hidden_states.shape[1], layer.attention.self.exact_length)
            proj_key, proj_value = self.projections.for_layer(idx)
            route = LinformerRoute(key_mask=key_mask, key_index=key_index, paths=paths, proj_key=proj_key,
                                   proj_value=proj_value)
            hidden_states = layer(hidden_states, route, **kwargs)
        return BaseModelOutput(last_hidden_state=self.final_layer_norm(hidden_states))


def out_of_range_ids(config, **ids):
    """What is wrong with ids outside their embedding table (which raise a bare IndexError on CPU), or None.

    Read only for CPU inputs: on an accelerator the read would stall the device every forward (there the lookup
    fails instead; train_mlm.py and finetune_glue.py check once that their tokenizer fits the embedding table),
    and while compiling or tracing it would break the graph."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return None
    limits = {"input_ids": "vocab_size", "token_type_ids": "type_vocab_size", "position_ids": "max_position_embeddings"}
    given = [(name, tensor) for name, tensor in ids.items() if tensor is not None]
    if not given or any(tensor.device.type != "cpu" for _, tensor in given):
        return None
    ranges = torch.stack([torch.stack(torch.aminmax(tensor)) for _, tensor in given]).tolist()
    for (name, _), (low, high) in zip(given, ranges, strict=True):
        limit = getattr(config, limits[name])
        if low < 0 or high >= limit:
            return (f"`{name}` holds values from {low} to {high}, but each must satisfy 0 <= id < "
                    f"{limits[name]}={limit} (was the input made by this model's tokenizer?).")
    return None


def mask_values(attention_mask):
    """What is wrong with an `attention_mask` holding values other than 0 and 1, or None. The model reads any
    non-zero entry as a real token, so a soft mask (0.5) would be taken for a hard one without a word. Read only
    for CPU inputs, as `out_of_range_ids`."""
    if attention_mask is None or torch.compiler.is_compiling() or torch.jit.is_tracing():
        return None
    if attention_mask.device.type != "cpu" or attention_mask.dtype == torch.bool:
        return None
    odd = attention_mask[(attention_mask != 0) & (attention_mask != 1)]
    if odd.numel():
        return (f"`attention_mask` must hold 0 (padding) and 1 (real token) only; it holds {odd[0].item():g}"
                f"{f' and {odd.numel() - 1} more entries outside {{0, 1}}' if odd.numel() > 1 else ''}. Linformer "
                "reads a token as present or absent: there is no partial mask.")
    return None


def empty_rows(attention_mask):
    """A warning for mask rows of zeros only, or None. Such a row is allowed (a batch may be padded with empty
    rows) and gives finite outputs, attention spread evenly over padding, which carry nothing; a caller who did not
    mean it has lost that sequence, so it is said at every call, whatever path (exact or projected) the batch takes.
    Read only for CPU inputs, as `out_of_range_ids`."""
    if attention_mask is None or torch.compiler.is_compiling() or torch.jit.is_tracing():
        return None
    if attention_mask.device.type != "cpu":
        return None
    rows = (attention_mask == 0).all(-1).nonzero().flatten().tolist()
    if rows:
        return (f"`attention_mask` row{'s' * (len(rows) > 1)} {', '.join(map(str, rows[:5]))}"
                f"{' ...' * (len(rows) > 5)} {'are' if len(rows) > 1 else 'is'} all zeros: such a sequence has no "
                f"token to read, and its outputs (finite, from attention spread over padding) carry nothing. Drop "
                f"it from the batch, or mark its real tokens 1.")
    return None


# Weight names of the format of linformer-hf's first releases: long-input adapters stored as one dict per block, the
# masked-LM head's bias as `lm_head.bias`. Loading them is refused in one line naming the command that renames them.
RETIRED_WEIGHT_NAMES = re.compile(r"(^|\.)long_input_adapters?\.|^lm_head\.bias$")


def stored_names(files):
    """The tensor names a list of weight files holds, read from each safetensors file's header (an 8-byte length,
    then JSON) without reading a tensor; other formats are not read."""
    names = []
    for file in files:
        if str(file).endswith(".safetensors"):
            with Path(file).open("rb") as f:
                names += json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return names


class LinformerPreTrainedModel(PreTrainedModel):
    config_class = LinformerConfig
    config: LinformerConfig
    base_model_prefix = "linformer"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = False
    _supports_flex_attn = False
    _supports_attention_backend = False
    _no_split_modules = ["RobertaEmbeddings", "LinformerLayer", "LinformerPreNormLayer"]
    _can_record_outputs = {"hidden_states": LinformerLayer, "attentions": LinformerSelfAttention}  # and subclasses
    # Heads return batch means and take no `num_items_in_batch`: without this, Trainer would multiply
    # the loss by the number of processes under DDP.
    accepts_loss_kwargs = False

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, LinformerProjections):
            for param in module.parameters():
                module.projection.initialise(param, self.config)
        elif isinstance(module, LinformerWindowedSelfAttention):
            init.zeros_(module.global_gate)
        elif isinstance(module, LinformerLongInputLinear):
            init.normal_(module.adapter_down, mean=0.0, std=self.config.initializer_range)
            init.zeros_(module.adapter_up)
            init.zeros_(module.adapter_bias)
        elif isinstance(module, RobertaEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)

    @staticmethod
    def _load_pretrained_model(model, state_dict, checkpoint_files, *args, **kwargs):
        """transformers' loading, after refusing weights stored under the first releases' names: they would load as
        missing and unexpected keys, leaving the adapters or the masked-LM bias at their random start."""
        names = state_dict if state_dict is not None else stored_names(checkpoint_files or [])
        retired = sorted(name for name in names if RETIRED_WEIGHT_NAMES.search(name))
        if retired:
            folder = getattr(args[0] if args else None, "pretrained_model_name_or_path", None) or "<folder>"
            raise ValueError(f"{type(model).__name__}: {folder} stores weights under the names of linformer-hf's "
                             f"first releases (`{retired[0]}`, {len(retired)} in all); rename them once with: "
                             f"{UPGRADE_COMMAND} {folder}")
        return PreTrainedModel._load_pretrained_model(model, state_dict, checkpoint_files, *args, **kwargs)


class LinformerModel(LinformerPreTrainedModel):
    r"""
    The bare Linformer encoder: RoBERTa's embeddings and layers, each attending to keys and values projected along
    the sequence to k slots (or exactly, for sequences within `exact_attention_length`). Accepts inputs of up to
    `max_seq_length` (n) tokens; a padded batch may mix lengths, each sequence read from its own real tokens.

    Returns `last_hidden_state` (batch, sequence, hidden_size) and, with `add_pooling_layer` (the default),
    `pooler_output`: RoBERTa's pooler, tanh(dense) of the first token's final state. The task heads below build
    it without the pooler, except `LinformerForMultipleChoice`, which scores that pooled state.
    """
    def __init__(self, config: LinformerConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = RobertaEmbeddings(config)
        if not config.embedding_layer_norm:  # the Jargon models' embeddings: no LayerNorm, and no weights for one
            self.embeddings.LayerNorm = nn.Identity()
        self.encoder = LinformerEncoder(config)
        self.pooler = RobertaPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def _check_inputs(self, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, kwargs):
        """One-line errors for inputs that would otherwise crash deep inside (or, on GPU, in a device assert) or
        be misread: which tensor, what it holds, what is allowed."""
        def fail(message):
            raise ValueError(f"LinformerModel: {message}")

        if (input_ids is None) == (inputs_embeds is None):
            fail("pass exactly one of `input_ids` or `inputs_embeds`.")
        for name in ("encoder_hidden_states", "past_key_values", "is_causal"):
            if kwargs.get(name) is not None and kwargs.get(name) is not False:
                fail(f"`{name}` is not supported: Linformer projects keys along the whole sequence, so it is an "
                     "encoder only (no causal attention, cache or cross-attention).")
        for name, value in (("input_ids", input_ids), ("attention_mask", attention_mask),
                            ("inputs_embeds", inputs_embeds), ("token_type_ids", token_type_ids),
                            ("position_ids", position_ids)):
            if value is not None and not isinstance(value, torch.Tensor):
                fail(f"`{name}` must be a torch.Tensor, got a {type(value).__name__}; a tokenizer gives tensors with "
                     "tokenizer(texts, return_tensors=\"pt\"), a list becomes one with torch.tensor(ids).")
        source = input_ids if input_ids is not None else inputs_embeds
        expected = ("(batch, sequence)" if input_ids is not None
                    else f"(batch, sequence, hidden_size={self.config.hidden_size})")
        if source.dim() != (2 if input_ids is not None else 3) or (inputs_embeds is not None and
                                                                 source.shape[-1] != self.config.hidden_size):
            fail(f"`{'input_ids' if input_ids is not None else 'inputs_embeds'}` must be {expected}; got shape "
                 f"{tuple(source.shape)}.")
        batch, length = source.shape[:2]
        n = self.config.max_seq_length
        if not 0 < length <= n:
            fail("the input is empty (0 tokens per sequence); every sequence needs at least one token." if not length
                 else f"the input has {length} tokens but `max_seq_length` (n) is {n}; the projections accept at most "
                      f"n positions. Truncate the input (tokenizer(..., truncation=True, max_length={n})) or use a "
                      "model configured with a larger `max_seq_length`.")
        if attention_mask is not None and tuple(attention_mask.shape) != (batch, length):
            fail(f"`attention_mask` must be (batch, sequence) = ({batch}, {length}), one entry per token (1 real, 0 "
                 f"padding); got shape {tuple(attention_mask.shape)}.")
        for name, ids in (("input_ids", input_ids), ("token_type_ids", token_type_ids), ("position_ids", position_ids)):
            if ids is not None and (ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool):
                fail(f"`{name}` must hold integer ids (torch.long or torch.int); got {ids.dtype}. Tokenizers give "
                     "torch.long; a mask or float tensor passed as ids is a mix-up.")
            if name != "input_ids" and ids is not None and ids.shape[-1] != length:
                fail(f"`{name}` has shape {tuple(ids.shape)} but the input has {length} tokens per sequence.")
        problem = out_of_range_ids(self.config, input_ids=input_ids, token_type_ids=token_type_ids,
                                   position_ids=position_ids) or mask_values(attention_mask)
        if problem:
            fail(problem)
        empty = empty_rows(attention_mask)
        if empty:
            logger.warning(f"LinformerModel: {empty}")

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple | BaseModelOutputWithPooling:
        self._check_inputs(input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, kwargs)
        embeddings = self.embeddings(
            input_ids=input_ids, position_ids=position_ids, token_type_ids=token_type_ids, inputs_embeds=inputs_embeds
        )
        sequence = self.encoder(embeddings, attention_mask=attention_mask, **kwargs).last_hidden_state
        pooled = self.pooler(sequence) if self.pooler is not None else None
        return BaseModelOutputWithPooling(last_hidden_state=sequence, pooler_output=pooled)


class LinformerForMaskedLM(LinformerPreTrainedModel):
    r"""
    Linformer with RoBERTa's masked-LM head (dense, GELU, layer norm, decoder tied to the input embeddings): logits
    over the vocabulary for every position, (batch, sequence, vocab_size).

    `labels` (batch, sequence): the token to predict at each masked position and -100 elsewhere; the loss is the
    mean cross-entropy over the positions that have one. The decoder's bias is stored once, as
    `lm_head.decoder.bias`.
    """
    _tied_weights_keys = {"lm_head.decoder.weight": "linformer.embeddings.word_embeddings.weight"}

    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.linformer = LinformerModel(config, add_pooling_layer=False)
        self.lm_head = RobertaLMHead(config)
        # The output bias has one name, the decoder's. RoBERTa's head also calls it `lm_head.bias`, and torch's
        # FSDP2 rejects a parameter that two names put in two groups (Accelerate groups the decoder with the
        # input embeddings, `lm_head.bias` stays in the root).
        del self.lm_head.bias
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple | MaskedLMOutput:
        outputs = self.linformer(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                 position_ids=position_ids, inputs_embeds=inputs_embeds, return_dict=True, **kwargs)
        logits = self.lm_head(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, logits.shape[-1]), labels.to(logits.device).view(-1))
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                              attentions=outputs.attentions)


class LinformerForSequenceClassification(LinformerPreTrainedModel):
    r"""
    Linformer with RoBERTa's classification head (dropout, dense, tanh, dropout, projection to `num_labels`) on one
    vector per sequence: the first token's final state (`classifier_pooling="cls"`) or the mean of the real tokens'
    final states (`"mean"`, padding excluded through `attention_mask`). Logits are (batch, num_labels).

    `labels` decide the loss as in every HF sequence-classification head, unless `config.problem_type` is set:
    (batch,) floats with `num_labels=1` are regression (MSE), (batch,) integer classes single-label
    (cross-entropy), (batch, num_labels) floats multi-label (binary cross-entropy).
    """
    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.linformer = LinformerModel(config, add_pooling_layer=False)
        self.classifier = RobertaClassificationHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple | SequenceClassifierOutput:
        outputs = self.linformer(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                 position_ids=position_ids, inputs_embeds=inputs_embeds, return_dict=True, **kwargs)
        hidden = outputs.last_hidden_state
        if self.config.classifier_pooling == "mean":
            real = hidden.new_ones(hidden.shape[:2]) if attention_mask is None else attention_mask.to(hidden.dtype)
            hidden = ((hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp(min=1))[:, None]
        logits = self.classifier(hidden)  # RoBERTa's head reads position 0: the first token, or the mean
        loss = None
        if labels is not None:
            labels = labels.to(logits.device)
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif labels.dtype in (torch.long, torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"
            if self.config.problem_type == "regression":
                loss = MSELoss()(logits.squeeze(-1), labels.squeeze(-1).to(logits.dtype)) if self.num_labels == 1 \
                    else MSELoss()(logits, labels.to(logits.dtype))
            elif self.config.problem_type == "single_label_classification":
                loss = CrossEntropyLoss()(logits.view(-1, self.num_labels), labels.view(-1))
            else:
                loss = BCEWithLogitsLoss()(logits, labels.to(logits.dtype))
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                        attentions=outputs.attentions)


class LinformerForMultipleChoice(LinformerPreTrainedModel):
    r"""
    Linformer scoring each choice of an example: inputs are (batch, num_choices, sequence) and are read as
    batch x num_choices sequences; each choice's pooled first token (RoBERTa's pooler) goes through dropout and a
    linear map to one score. Logits are (batch, num_choices); `labels` (batch,) hold the index of the right choice
    (cross-entropy over the choices).
    """
    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.linformer = LinformerModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple | MultipleChoiceModelOutput:
        source = input_ids if input_ids is not None else inputs_embeds
        num_choices = source.shape[1]

        def flat(t):
            return None if t is None else t.reshape(-1, *t.shape[2:])

        outputs = self.linformer(flat(input_ids), attention_mask=flat(attention_mask),
                                 token_type_ids=flat(token_type_ids), position_ids=flat(position_ids),
                                 inputs_embeds=flat(inputs_embeds), return_dict=True, **kwargs)
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = CrossEntropyLoss()(logits, labels.to(logits.device)) if labels is not None else None
        return MultipleChoiceModelOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                         attentions=outputs.attentions)


class LinformerForTokenClassification(LinformerPreTrainedModel):
    r"""
    Linformer with a linear classifier on every token's final state (after dropout, `classifier_dropout` or else
    `hidden_dropout_prob`), e.g. for named entities: logits (batch, sequence, num_labels). `labels`
    (batch, sequence) hold one class per token and -100 where no loss is taken (padding, continued word pieces).
    """
    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.linformer = LinformerModel(config, add_pooling_layer=False)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple | TokenClassifierOutput:
        outputs = self.linformer(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                 position_ids=position_ids, inputs_embeds=inputs_embeds, return_dict=True, **kwargs)
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, self.num_labels), labels.to(logits.device).view(-1))
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                     attentions=outputs.attentions)


class LinformerForQuestionAnswering(LinformerPreTrainedModel):
    r"""
    Linformer for extractive question answering: a linear map of every token's final state to a start and an end
    logit (`num_labels` must be 2), each (batch, sequence). `start_positions` and `end_positions` (batch,) are the
    answer span's token positions; positions past the input are ignored, and the loss is the mean of the start
    and end cross-entropies.
    """
    def __init__(self, config: LinformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.linformer = LinformerModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple | QuestionAnsweringModelOutput:
        outputs = self.linformer(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                 position_ids=position_ids, inputs_embeds=inputs_embeds, return_dict=True, **kwargs)
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).split(1, dim=-1)
        start_logits, end_logits = start_logits.squeeze(-1).contiguous(), end_logits.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the input are ignored, as in every HF extractive-QA head.
            ignored = start_logits.shape[1]
            start = start_positions.reshape(-1).clamp(0, ignored).to(start_logits.device)
            end = end_positions.reshape(-1).clamp(0, ignored).to(end_logits.device)
            loss_fct = CrossEntropyLoss(ignore_index=ignored)
            loss = (loss_fct(start_logits, start) + loss_fct(end_logits, end)) / 2
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                            hidden_states=outputs.hidden_states, attentions=outputs.attentions)


__all__ = [
    "LinformerForMaskedLM",
    "LinformerForMultipleChoice",
    "LinformerForQuestionAnswering",
    "LinformerForSequenceClassification",
    "LinformerForTokenClassification",
    "LinformerModel",
    "LinformerPreTrainedModel",
    "LinformerProjections",
    "LinformerSelfAttention",
    "LinformerWindowedSelfAttention",
]
