# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Linformer configuration.

RoBERTa's fields plus those that define the paper's low-rank attention: the longest input the
projections accept (n), the projected length (k), how projections are shared, and what kind of
projection maps length n to k. Every invalid value or combination is rejected at construction with a
one-line ``ValueError`` naming the field and what it allows, so a model can never be built from a
config it cannot run, and a typo in a field name is not silently stored as an unused attribute.
"""

import dataclasses
import difflib
import functools
import types
import typing
from typing import Literal, get_args, get_origin

from huggingface_hub.dataclasses import strict
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import GenerationConfig, PreTrainedConfig
from transformers.activations import ACT2FN

ProjectionSharing = Literal["none", "headwise", "key_value", "layerwise"]
ProjectionType = Literal["linear", "mean_pool", "max_pool", "conv"]
ProjectionInit = Literal["normal", "window_mean"]
ProjectionLengthScaling = Literal["none", "sqrt", "linear", "resample"]
ClassifierPooling = Literal["cls", "mean"]
AttentionType = Literal["projected", "windowed"]
LayerNormPlacement = Literal["post", "pre"]

# Exponent p of the (n / L)^p factor a learned projection applies to an input of L real tokens.
# "resample" has none: it stretches E/F's n columns over the L tokens (see `projection_length_scaling`).
PROJECTION_LENGTH_SCALING = {"none": 0.0, "sqrt": 0.5, "linear": 1.0}

# Every head this package ships, for the `auto_map` written next to saved weights, so that
# `AutoModelFor*.from_pretrained(folder, trust_remote_code=True)` finds each of them.
AUTO_MAP = {
    "AutoConfig": "configuration_linformer.LinformerConfig",
    "AutoModel": "modeling_linformer.LinformerModel",
    "AutoModelForMaskedLM": "modeling_linformer.LinformerForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_linformer.LinformerForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_linformer.LinformerForTokenClassification",
    "AutoModelForQuestionAnswering": "modeling_linformer.LinformerForQuestionAnswering",
    "AutoModelForMultipleChoice": "modeling_linformer.LinformerForMultipleChoice",
}

# The fields `attention_type` and `exact_attention_length` replaced. A config carrying them is refused in one line
# naming the command that rewrites its folder (which also renames the weights saved in that format).
RETIRED_FIELDS = frozenset({"full_attention_short_inputs", "short_input_max_length", "local_attention_window"})
UPGRADE_COMMAND = "python -m linformer_training.upgrade"  # linformer-hf's training package

# Keys that config.json files written by transformers 4.x (and BERT/RoBERTa configs) still carry and
# that transformers 5 stores as plain attributes. They are accepted so old or converted folders load.
LEGACY_CONFIG_KEYS = frozenset({
    "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "cross_attention_hidden_size",
    "tie_encoder_decoder", "finetuning_task", "tokenizer_class", "prefix", "task_specific_params",
    "sep_token_id", "decoder_start_token_id", "gradient_checkpointing", "position_embedding_type",
})
# Keys PreTrainedConfig consumes in `__post_init__`, or that transformers itself sets on a config and
# `to_dict` then writes (quantization, pipelines, loading options), without declaring them as fields.
# Keys starting with "_" are transformers' bookkeeping and are accepted too.
CONSUMED_CONFIG_KEYS = frozenset({
    "model_type", "name_or_path", "torch_dtype", "num_labels", "output_attentions", "attn_implementation",
    "experts_implementation", "per_layer_config", "quantization_config", "custom_pipelines", "fusion_config",
    "distributed_config",
})


@functools.cache
def standard_config_keys() -> frozenset:
    """Every non-field key a PreTrainedConfig legitimately receives from `to_dict`, `from_pretrained` or a user."""
    keys = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    keys |= {name for klass in PreTrainedConfig.__mro__ for name, member in vars(klass).items()
             if isinstance(member, property) and member.fset is not None and not name.startswith("_")}
    # Generation parameters, which old config.json files carry (PreTrainedConfig drops them).
    return frozenset(keys | set(GenerationConfig().to_dict()) | LEGACY_CONFIG_KEYS | CONSUMED_CONFIG_KEYS)


def describe_type(annotation) -> str:
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(value) for value in get_args(annotation))
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(describe_type(arg) for arg in get_args(annotation))
    return "None" if annotation is type(None) else getattr(annotation, "__name__", str(annotation))


def field_error(field, value, allowed):
    """The one-line error of every check: the field, its value and what it allows."""
    return ValueError(f"LinformerConfig: `{field}`={value!r} is invalid; {allowed}.")


def token_ids(value):
    return value if isinstance(value, list) else [value]


def suggestion(value, names):
    close = difflib.get_close_matches(value, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# What the checks say a field allows, where several fields share the rule.
AT_LEAST_ONE = "it must be an integer >= 1"
DROPOUT = "a dropout probability must satisfy 0 <= p < 1"
POSITIVE = "it must be > 0"
OR_NONE = " (or None)"


def one_line_field_errors(cls):
    """Turn `@strict`'s type errors (a non-ValueError spread over two lines) into one-line `ValueError`s.

    Applied on top of `@strict`: the type of every field, `Literal` ones included, is still checked by
    huggingface_hub on every assignment; only the exception is reworded to name the field and what it
    allows, like the range checks in `validate_architecture`.
    """
    strict_setattr = cls.__setattr__

    def __setattr__(self, name, value):
        try:
            strict_setattr(self, name, value)
        except StrictDataclassFieldValidationError:
            allowed = describe_type(self.__dataclass_fields__[name].type)
            raise ValueError(f"{cls.__name__}: `{name}`={value!r} is invalid; allowed: {allowed}.") from None

    cls.__setattr__ = __setattr__
    return cls


@one_line_field_errors
@strict
class LinformerConfig(PreTrainedConfig):
    r"""
    Configuration of a Linformer encoder (RoBERTa architecture, Linformer self-attention).

    Linformer-specific fields:
        max_seq_length (`int`, defaults to 512):
            n, the longest input the sequence projections accept. Shorter inputs need no padding.
        projected_dim (`int` or `list[int]`, defaults to 128):
            k, the length keys and values are projected to; a list gives one k per layer (the paper's
            non-uniform projected dimension). Must satisfy 1 <= k <= n.
        projection_sharing (`str`, defaults to `"layerwise"`):
            `"none"` (an E and an F per head and layer), `"headwise"` (one E and one F per layer),
            `"key_value"` (one matrix per layer for keys and values), `"layerwise"` (one matrix for
            the whole model). Pooling projections have no weights, so sharing does not apply to them.
        projection_type (`str`, defaults to `"linear"`):
            `"linear"` (learned E/F), `"mean_pool"`, `"max_pool"` or `"conv"` (kernel and stride n/k);
            the last three need n divisible by every k.
        projection_init (`str`, defaults to `"normal"`):
            How learned (`"linear"`) E/F start: `"normal"`, random as in the paper (std `projection_init_std`);
            `"window_mean"`, row i averaging positions [i n/k, (i+1) n/k), so every slot starts reading one
            stretch of neighbouring tokens (the identity at k = n, and the start `convert_to_linformer.py`
            gives a pretrained encoder by default).
        projection_init_std (`float`, *optional*):
            Standard deviation of the normal initialisation of learned E/F. Defaults to 1/sqrt(n), so a
            projected key over n positions has the scale of one key (docs/configuration.md,
            "What this implementation does differently").
        projection_length_scaling (`str`, defaults to `"none"`):
            How a learned (`"linear"`) projection treats an input of L < n real tokens, which meets only
            the first L columns of E/F: `"none"` uses them as they are (the paper), so projected keys and
            values shrink by about sqrt(L/n); `"sqrt"` multiplies them by sqrt(n/L), which keeps their
            scale at init; `"linear"` by n/L. `"resample"` reads all n columns instead: column j of the
            L-token projection is the mean of E's columns over [j n/L, (j+1) n/L), times n/L, so every row
            of E still covers its share of the input (a window-mean E keeps its windows, scaled to L) and
            row sums are kept; computed per sequence from its own real length. Inputs of exactly n tokens
            are unaffected by every choice, so this can be changed between pretraining on full blocks and
            finetuning on short texts (see model card). Converted models use `"resample"` (see
            experiments/conversion).
        attention_type (`str`, defaults to `"projected"`):
            The attention algorithm of every layer, each its own class: `"projected"` is the paper's
            (`LinformerSelfAttention`: keys and values projected to k slots); `"windowed"`
            (`LinformerWindowedSelfAttention`) reads a sequence exactly inside consecutive windows of
            `exact_attention_length` real tokens and adds, per head, a gate (`global_gate`, zero at init) times
            the attention to the k slots projected from the whole sequence. A model converted from a 512-position
            encoder with 512-token windows starts as its source reading each window; training opens the gates as
            far as the whole document helps. `"windowed"` needs `exact_attention_length`.
        exact_attention_length (`int`, *optional*):
            A sequence of at most this many real tokens attends to its own keys and values exactly, as standard
            attention does, instead of to their projection; decided per sequence, so a padded batch may mix
            both kinds. Unset (the default): every sequence is projected, as in the paper (a model pretrained as
            a Linformer has only ever seen projected keys). `convert_to_linformer.py` sets it to k unless given
            `--exact_attention_length` (0 leaves it unset), so a converted model is its source on every input of
            at most k tokens; its source's length (512 for BERT/RoBERTa) makes it its source on everything the
            source can read, for about the cost of k = 256 projected keys. Must satisfy max(k) <= it <= n; a list
            gives one length per layer (each k <= it <= n), as `projected_dim` does. With `"windowed"` attention
            it is also the window (one integer).
        long_input_adapter_rank (`int`, defaults to 0):
            Rank r of low-rank adapters (W + B A, as in LoRA) on every linear map of every layer that only
            sequences read through the projections use; sequences read exactly keep the plain weights. The
            long-input path can then be trained without moving the short one. 0: no adapters.

        classifier_pooling (`str`, defaults to `"cls"`):
            What `LinformerForSequenceClassification` classifies: the first token's final state (`"cls"`,
            RoBERTa's head) or the mean of the real tokens' final states (`"mean"`). A head-shared projection
            gives every query the same k keys, so the first token has no privileged view of the sentence.
        layer_norm_placement (`str`, defaults to `"post"`):
            Where each layer normalises: `"post"` (RoBERTa's, and every model trained or converted here before this
            field existed) normalises the sum of each block's input and output; `"pre"` (fairseq's
            `encoder_normalize_before`, the Jargon models') normalises each block's input and adds the block's
            output to the un-normalised stream, and one final LayerNorm closes the encoder. A pretrained model's
            weights only mean something in the placement they were trained in, so this is set by the checkpoint,
            not chosen for finetuning.
        embedding_layer_norm (`bool`, defaults to `True`):
            Whether the embeddings (word + position + token type) pass through a LayerNorm before the first layer,
            as in RoBERTa. The Jargon models never apply theirs (`False`); a pre-LN stack normalises each layer's
            input anyway.
    """

    model_type = "linformer"

    vocab_size: int = 50265
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float | int = 0.1
    attention_probs_dropout_prob: float | int = 0.1
    max_position_embeddings: int | None = None
    type_vocab_size: int = 1
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-5
    pad_token_id: int | None = 1
    bos_token_id: int | None = 0
    eos_token_id: int | list[int] | None = 2
    classifier_dropout: float | int | None = None
    is_decoder: bool = False
    add_cross_attention: bool = False
    use_cache: bool = False
    tie_word_embeddings: bool = True

    max_seq_length: int = 512
    projected_dim: int | list[int] = 128
    projection_sharing: ProjectionSharing = "layerwise"
    projection_type: ProjectionType = "linear"
    projection_init: ProjectionInit = "normal"
    projection_init_std: float | None = None
    projection_length_scaling: ProjectionLengthScaling = "none"
    attention_type: AttentionType = "projected"
    exact_attention_length: int | list[int] | None = None
    long_input_adapter_rank: int = 0
    classifier_pooling: ClassifierPooling = "cls"
    layer_norm_placement: LayerNormPlacement = "post"
    embedding_layer_norm: bool = True
    auto_map: dict | None = None

    def __post_init__(self, **kwargs):
        model_type = kwargs.pop("model_type", self.model_type)
        if model_type != self.model_type:
            raise ValueError(
                f"LinformerConfig: the checkpoint is a `{model_type}` model (model_type={model_type!r}), not a "
                "Linformer; convert a BERT/RoBERTa encoder first: python convert_to_linformer.py "
                "--model_name_or_path <that checkpoint> --output_dir <new folder>."
            )
        retired = sorted(RETIRED_FIELDS & set(kwargs))
        if retired:
            raise ValueError(
                f"LinformerConfig: `{retired[0]}` belongs to the format of linformer-hf's first releases "
                f"(attention_type and exact_attention_length replaced it); rewrite the folder once with: "
                f"{UPGRADE_COMMAND} <folder>"
            )
        unknown = sorted(key for key in set(kwargs) - standard_config_keys() if not key.startswith("_"))
        if unknown:
            known = [f.name for f in dataclasses.fields(self)] + sorted(standard_config_keys())
            hints = []
            for key in unknown:
                close = difflib.get_close_matches(key, known, n=1)
                hints.append(f"`{key}`" + (f" (did you mean `{close[0]}`?)" if close else ""))
            raise ValueError(
                f"LinformerConfig: unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; allowed: "
                "the fields of LinformerConfig and the standard PreTrainedConfig keys."
            )
        if kwargs.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"LinformerConfig: `position_embedding_type`={kwargs['position_embedding_type']!r} is invalid; "
                "Linformer uses RoBERTa's absolute positions, so only 'absolute' is allowed."
            )
        super().__post_init__(**kwargs)
        if self.max_position_embeddings is None and isinstance(self.pad_token_id, int):
            # RoBERTa numbers positions from pad_token_id + 1.
            self.max_position_embeddings = self.max_seq_length + self.pad_token_id + 1
        if self.auto_map is None:
            self.auto_map = dict(AUTO_MAP)
        # `@strict` runs this again after `__init__`, but wraps what it raises in its own two-line error;
        # called here first, a bad value fails with the plain one-line ValueError below.
        self.validate_architecture()

    def validate_architecture(self):
        """Every range and combination check, in one place (also run by `validate()` and `save_pretrained`). The
        first broken one raises, so a later check may rely on the earlier ones (num_attention_heads >= 1 before
        dividing by it, each k in range before comparing it with exact_attention_length)."""
        super().validate_architecture()
        self._check_encoder_sizes()
        self._check_encoder_combinations()
        self._check_projected_dims()
        self._check_long_input_fields()

    def _check_encoder_sizes(self):
        """RoBERTa's fields one by one: never a decoder; sizes, dropout rates and scales in range."""
        for field in ("is_decoder", "add_cross_attention"):
            if getattr(self, field):
                raise field_error(field, getattr(self, field), "Linformer projects keys along the whole sequence, "
                                  "so it cannot be causal or a decoder; it must be False")
        for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                      "type_vocab_size", "max_seq_length"):
            if getattr(self, field) < 1:
                raise field_error(field, getattr(self, field), AT_LEAST_ONE)
        if self.chunk_size_feed_forward < 0:
            raise field_error("chunk_size_feed_forward", self.chunk_size_feed_forward, "it must be an integer >= 0")
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0 <= getattr(self, field) < 1:
                raise field_error(field, getattr(self, field), DROPOUT)
        if self.classifier_dropout is not None and not 0 <= self.classifier_dropout < 1:
            raise field_error("classifier_dropout", self.classifier_dropout, DROPOUT + OR_NONE)
        for field in ("initializer_range", "layer_norm_eps"):
            if not getattr(self, field) > 0:  # not `<= 0`: NaN is refused too
                raise field_error(field, getattr(self, field), POSITIVE)
        if self.projection_init_std is not None and not self.projection_init_std > 0:
            raise field_error("projection_init_std", self.projection_init_std, POSITIVE + OR_NONE)

    def _check_encoder_combinations(self):
        """RoBERTa's fields together: heads divide the width, the activation exists, token ids fit the vocabulary
        and the position table is long enough for n positions numbered after the pad id."""
        if self.hidden_size % self.num_attention_heads:
            raise field_error("hidden_size", self.hidden_size,
                              f"it must be divisible by num_attention_heads={self.num_attention_heads}")
        if self.hidden_act not in ACT2FN:
            raise field_error("hidden_act", self.hidden_act, "it must name an activation of "
                              "transformers.activations.ACT2FN" + suggestion(self.hidden_act, ACT2FN))
        if not isinstance(self.pad_token_id, int):
            raise field_error("pad_token_id", self.pad_token_id,
                              "an integer is required (positions are numbered after it)")
        for field in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, field)
            if not all(token is None or 0 <= token < self.vocab_size for token in token_ids(value)):
                raise field_error(field, value, f"token ids must satisfy 0 <= id < vocab_size={self.vocab_size}")
        positions = self.max_seq_length + self.pad_token_id + 1
        if self.max_position_embeddings is None or self.max_position_embeddings < positions:
            raise field_error("max_position_embeddings", self.max_position_embeddings,
                              f"it must be at least max_seq_length + pad_token_id + 1 = {positions}")

    def _check_projected_dims(self):
        """k: one per layer where a list, within 1..n, one for all layers under layerwise sharing, and dividing n
        where the projection pools windows of n/k positions."""
        n, dims = self.max_seq_length, self.projected_dim
        if isinstance(dims, list) and len(dims) != self.num_hidden_layers:
            raise field_error("projected_dim", dims,
                              f"a list needs one k per layer (num_hidden_layers={self.num_hidden_layers})")
        if not all(1 <= k <= n for k in self.projected_dims):
            raise field_error("projected_dim", dims, f"each k must be an integer with 1 <= k <= max_seq_length={n}")
        if self.projection_sharing == "layerwise" and len(set(self.projected_dims)) > 1:
            raise field_error("projected_dim", dims, "layerwise sharing uses one matrix for all layers, so every "
                              "layer needs the same k (use projection_sharing='key_value', 'headwise' or 'none' for "
                              "per-layer k)")
        if self.projection_type != "linear" and any(n % k for k in self.projected_dims):
            raise field_error("projected_dim", dims, f"projection_type={self.projection_type!r} pools windows of "
                              f"n/k positions, so max_seq_length={n} must be divisible by every k")

    def _check_long_input_fields(self):
        """The adapter rank, the exact length (per layer, between k and n), what windowed attention needs, and the
        two options only learned E/F have."""
        n, dims, exact = self.max_seq_length, self.projected_dims, self.exact_attention_length
        if self.long_input_adapter_rank < 0:
            raise field_error("long_input_adapter_rank", self.long_input_adapter_rank, "it must be an integer >= 0")
        if isinstance(exact, list) and (len(exact) != self.num_hidden_layers or not all(
                k <= length <= n for k, length in zip(dims, exact, strict=True))):
            raise field_error("exact_attention_length", exact, f"a list needs one length per layer (num_hidden_layers="
                              f"{self.num_hidden_layers}), each with k <= it <= max_seq_length={n} (k per layer: "
                              f"{dims})")
        if isinstance(exact, int) and not max(dims) <= exact <= n:
            raise field_error("exact_attention_length", exact,
                              f"it must satisfy max(k)={max(dims)} <= it <= max_seq_length={n}")
        if self.attention_type == "windowed" and not isinstance(exact, int):
            raise field_error("attention_type", self.attention_type, "'windowed' reads windows of "
                              "exact_attention_length tokens, so it needs exact_attention_length set to one integer "
                              "(e.g. 512 for a model converted from a 512-position encoder)")
        learned = self.projection_type == "linear"
        if self.projection_init != "normal" and not learned:
            raise field_error("projection_init", self.projection_init, f"only learned projections (projection_type="
                              f"'linear') have E/F to initialise; projection_type={self.projection_type!r} needs "
                              "'normal' (conv kernels start as mean pooling)")
        if self.projection_length_scaling != "none" and not learned:
            raise field_error("projection_length_scaling", self.projection_length_scaling, "only learned projections "
                              f"(projection_type='linear') sum over positions; projection_type="
                              f"{self.projection_type!r} needs 'none'")

    @property
    def projected_dims(self) -> list[int]:
        """k for each layer."""
        if isinstance(self.projected_dim, list):
            return list(self.projected_dim)
        return [self.projected_dim] * self.num_hidden_layers


__all__ = ["LinformerConfig"]
