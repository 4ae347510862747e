"""Linformer configuration.

RoBERTa's fields plus the four that define the paper's low-rank attention: the longest input the
projections accept (n), the projected length (k), how projections are shared, and what kind of
projection maps length n to k. Every invalid combination is rejected here, at construction, with a
``ValueError`` naming the field, so a model can never be built from a config it cannot run.
"""

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

PROJECTION_SHARING = ("none", "headwise", "key_value", "layerwise")
PROJECTION_TYPES = ("linear", "mean_pool", "max_pool", "conv")
# Exponent p of the (n / L)^p factor a learned projection applies to an input of L real tokens.
PROJECTION_LENGTH_SCALING = {"none": 0.0, "sqrt": 0.5, "linear": 1.0}
CLASSIFIER_POOLING = ("cls", "mean")

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
        projection_init_std (`float`, *optional*):
            Standard deviation of the normal initialisation of learned E/F. Defaults to 1/sqrt(n), so a
            projected key over n positions has the scale of one key (see README, "Initialisation").
        projection_length_scaling (`str`, defaults to `"none"`):
            How a learned (`"linear"`) projection treats an input of L < n real tokens, which meets only
            the first L columns of E/F: `"none"` uses them as they are (the paper), so projected keys and
            values shrink by about sqrt(L/n); `"sqrt"` multiplies them by sqrt(n/L), which keeps their
            scale at init; `"linear"` by n/L. Inputs of exactly n tokens are unaffected, so this can be
            changed between pretraining on full blocks and finetuning on short texts (see model card).
        classifier_pooling (`str`, defaults to `"cls"`):
            What `LinformerForSequenceClassification` classifies: the first token's final state (`"cls"`,
            RoBERTa's head) or the mean of the real tokens' final states (`"mean"`). A head-shared projection
            gives every query the same k keys, so the first token has no privileged view of the sentence.
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
    projection_sharing: str = "layerwise"
    projection_type: str = "linear"
    projection_init_std: float | None = None
    projection_length_scaling: str = "none"
    classifier_pooling: str = "cls"
    auto_map: dict | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.max_position_embeddings is None and isinstance(self.pad_token_id, int):
            # RoBERTa numbers positions from pad_token_id + 1.
            self.max_position_embeddings = self.max_seq_length + self.pad_token_id + 1
        if self.auto_map is None:
            self.auto_map = dict(AUTO_MAP)
        self._check()

    def _check(self):
        def fail(field, value, allowed):
            raise ValueError(f"LinformerConfig: `{field}`={value!r} is invalid; {allowed}.")

        if self.is_decoder or self.add_cross_attention:
            fail(
                "is_decoder" if self.is_decoder else "add_cross_attention",
                True,
                "Linformer projects keys along the whole sequence, so it cannot be causal or a decoder; "
                "it must be False",
            )
        for field in ("hidden_size", "num_attention_heads", "num_hidden_layers", "max_seq_length"):
            if getattr(self, field) < 1:
                fail(field, getattr(self, field), "it must be a positive integer")
        if self.hidden_size % self.num_attention_heads:
            fail("hidden_size", self.hidden_size,
                 f"it must be divisible by num_attention_heads={self.num_attention_heads}")
        if not isinstance(self.pad_token_id, int):
            fail("pad_token_id", self.pad_token_id, "an integer is required (positions are numbered after it)")
        needed = self.max_seq_length + self.pad_token_id + 1
        if self.max_position_embeddings < needed:
            fail("max_position_embeddings", self.max_position_embeddings,
                 f"it must be at least max_seq_length + pad_token_id + 1 = {needed}")
        if self.projection_sharing not in PROJECTION_SHARING:
            fail("projection_sharing", self.projection_sharing, f"allowed: {', '.join(PROJECTION_SHARING)}")
        if self.projection_type not in PROJECTION_TYPES:
            fail("projection_type", self.projection_type, f"allowed: {', '.join(PROJECTION_TYPES)}")

        ks = self.projected_dims
        if isinstance(self.projected_dim, list) and len(self.projected_dim) != self.num_hidden_layers:
            fail("projected_dim", self.projected_dim,
                 f"a list needs one k per layer (num_hidden_layers={self.num_hidden_layers})")
        for k in ks:
            if not isinstance(k, int) or not 1 <= k <= self.max_seq_length:
                fail("projected_dim", self.projected_dim,
                     f"each k must be an integer with 1 <= k <= max_seq_length={self.max_seq_length}")
        if self.projection_sharing == "layerwise" and len(set(ks)) > 1:
            fail("projected_dim", self.projected_dim,
                 "layerwise sharing uses one matrix for all layers, so every layer needs the same k "
                 "(use projection_sharing='key_value', 'headwise' or 'none' for per-layer k)")
        if self.projection_type != "linear":
            for k in ks:
                if self.max_seq_length % k:
                    fail("projected_dim", self.projected_dim,
                         f"projection_type={self.projection_type!r} pools windows of n/k positions, so "
                         f"max_seq_length={self.max_seq_length} must be divisible by every k")
        if self.projection_length_scaling not in PROJECTION_LENGTH_SCALING:
            fail("projection_length_scaling", self.projection_length_scaling,
                 f"allowed: {', '.join(PROJECTION_LENGTH_SCALING)}")
        if self.projection_length_scaling != "none" and self.projection_type != "linear":
            fail("projection_length_scaling", self.projection_length_scaling,
                 f"only learned projections (projection_type='linear') sum over positions; "
                 f"projection_type={self.projection_type!r} needs 'none'")
        if self.classifier_pooling not in CLASSIFIER_POOLING:
            fail("classifier_pooling", self.classifier_pooling, f"allowed: {', '.join(CLASSIFIER_POOLING)}")
        if self.projection_init_std is not None and self.projection_init_std <= 0:
            fail("projection_init_std", self.projection_init_std, "it must be positive (or None)")

    @property
    def projected_dims(self) -> list[int]:
        """k for each layer."""
        if isinstance(self.projected_dim, list):
            return list(self.projected_dim)
        return [self.projected_dim] * self.num_hidden_layers


__all__ = ["LinformerConfig"]
