# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The paper's attention, exactly: padding invariance, sharing, RoBERTa equivalence, heads and losses."""

import copy
import itertools

import pytest
import torch
from conftest import tiny_config
from torch.nn import functional as F
from transformers import RobertaConfig, RobertaModel

from linformer_hf import (
    LinformerForMaskedLM,
    LinformerForMultipleChoice,
    LinformerForQuestionAnswering,
    LinformerForSequenceClassification,
    LinformerForTokenClassification,
    LinformerModel,
)
from linformer_hf.modeling_linformer import (
    ALL_PROJECTED,
    SEQUENCE_PROJECTIONS,
    LinformerRoute,
    LinformerSelfAttention,
    long_weights,
    resample_columns,
    window_mean_projection,
)

project_learned = SEQUENCE_PROJECTIONS["linear"].project

SHARING = ["none", "headwise", "key_value", "layerwise"]
TYPES = ["linear", "mean_pool", "max_pool", "conv"]


def model_for(sharing, kind, impl="sdpa", dtype=torch.float32, **overrides):
    torch.manual_seed(0)
    config = tiny_config(projection_sharing=sharing, projection_type=kind, **overrides)
    model = LinformerModel._from_config(config, attn_implementation=impl).to(dtype).eval()
    with torch.no_grad():  # non-trivial projections, so that every column of E matters
        for p in model.encoder.projections.parameters():
            p.normal_(0.0, 0.3)
    return model


@pytest.mark.parametrize("sharing, kind", list(itertools.product(SHARING, TYPES)))
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_padding_does_not_change_real_tokens(sharing, kind, impl):
    model = model_for(sharing, kind, impl)
    n = model.config.max_seq_length
    generator = torch.Generator().manual_seed(1)
    worst = 0.0
    for length in (1, 5, 8, 13, n):
        ids = torch.randint(5, 300, (1, length), generator=generator)
        alone = model(ids).last_hidden_state[0]
        for pad, side in itertools.product((0, 3, 19), ("right", "left")):
            total = length + pad
            if total > n:
                continue
            batch = torch.full((3, total), model.config.pad_token_id)
            mask = torch.zeros(3, total, dtype=torch.long)
            real = slice(0, length) if side == "right" else slice(pad, total)
            batch[0, real], mask[0, real] = ids[0], 1
            batch[1], mask[1] = torch.randint(5, 300, (total,), generator=generator), 1  # a full neighbour
            batch[2, : total // 2], mask[2, : total // 2] = 7, 1  # a shorter neighbour
            out = model(batch, attention_mask=mask).last_hidden_state[0, real]
            worst = max(worst, (out - alone).abs().max().item())
    assert worst <= 1e-5


@pytest.mark.parametrize("sharing", ["none", "layerwise"])
@pytest.mark.parametrize("scaling", ["sqrt", "linear", "resample"])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_length_scaling_is_padding_invariant(scaling, sharing, impl):
    """Each sequence of a mixed batch, padded left or right, gets what it gets alone."""
    model = model_for(sharing, "linear", impl, projection_length_scaling=scaling)
    pad = model.config.pad_token_id
    generator = torch.Generator().manual_seed(2)
    lengths = (9, 16, 3)
    seqs = [torch.randint(5, 300, (length,), generator=generator) for length in lengths]
    alone = [model(ids[None]).last_hidden_state[0] for ids in seqs]
    for side in ("right", "left"):
        batch = torch.full((3, 16), pad)
        mask = torch.zeros(3, 16, dtype=torch.long)
        for row, ids in enumerate(seqs):
            real = slice(0, len(ids)) if side == "right" else slice(16 - len(ids), 16)
            batch[row, real], mask[row, real] = ids, 1
        out = model(batch, attention_mask=mask).last_hidden_state
        for row, ids in enumerate(seqs):
            real = slice(0, len(ids)) if side == "right" else slice(16 - len(ids), 16)
            torch.testing.assert_close(out[row, real], alone[row], rtol=0, atol=1e-5)


@pytest.mark.parametrize("n, length", [(32, 20), (32, 32), (32, 1), (4096, 1000), (4096, 4095)])
def test_resample_is_adaptive_average_pooling_of_e_scaled_by_n_over_l(n, length):
    """Against float64 `adaptive_avg_pool1d` of each row of E to the real length L, times n / L, per
    sequence of a batch with different real lengths; 4096 - 1 also checks the count of a long fp16 mask (a running
    fp16 count stops at 2048 and halves the scale). fp16 is read by relative norm per sequence: summed over
    thousands of tokens, an entry near zero has no relative precision left, but a wrong count or scale moves the
    whole sequence (worst over 200 draws: 7.8e-4 of the norm)."""
    generator = torch.Generator().manual_seed(n + length)
    k, padded = 8, length + 3
    weight = torch.randn(1, k, n, dtype=torch.float64, generator=generator)
    x = torch.randn(2, 1, padded, 5, dtype=torch.float64, generator=generator)
    mask = torch.zeros(2, 1, padded, 1, dtype=torch.float64)
    mask[0, :, :length], mask[1, :, : max(1, length // 2)] = 1, 1
    out, _ = project_learned(x, weight, n // k, mask, "resample")
    for row, real in ((0, length), (1, max(1, length // 2))):
        pooled = F.adaptive_avg_pool1d(weight, real) * (n / real)
        torch.testing.assert_close(out[row, 0], pooled[0] @ x[row, 0, :real], rtol=0, atol=1e-10)
    half, _ = project_learned(x.half(), weight.half(), n // k, mask.half(), "resample")
    for row in (0, 1):
        assert (half[row].double() - out[row]).norm() <= 1e-2 * out[row].norm()


def test_resample_keeps_window_mean_windows_at_any_length():
    """With a window-mean E (row i averages positions [i n/k, (i+1) n/k)), an input of L tokens, n/k | L,
    reads row i as the mean of its own window of L/k tokens: the conversion's windows, scaled to L."""
    from linformer_training.conversion import window_mean_projection

    n, k, length = 64, 8, 24
    weight = window_mean_projection(k, n).double()[None]
    x = torch.randn(1, 1, length, 3, dtype=torch.float64)
    out, _ = project_learned(x, weight, n // k, None, "resample")
    expected = x[0, 0].unflatten(0, (k, length // k)).mean(1)
    torch.testing.assert_close(out[0, 0], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scaling, power", [("none", 0.0), ("sqrt", 0.5), ("linear", 1.0)])
def test_length_scaling_multiplies_the_projection_by_n_over_l(scaling, power):
    """Against a float64 hand computation: (n / L)^p * E[:, :L] X for the real tokens only."""
    n, k, length, real = 32, 8, 20, 11
    weight = torch.randn(1, k, n, dtype=torch.float64)
    x = torch.randn(2, 1, length, 5, dtype=torch.float64)
    mask = torch.zeros(2, 1, length, 1, dtype=torch.float64)
    mask[0, :, :real], mask[1] = 1, 1
    out, _ = project_learned(x, weight, n // k, mask, scaling)
    expected_0 = (n / real) ** power * weight[0, :, :real] @ x[0, 0, :real]
    expected_1 = (n / length) ** power * weight[0, :, :length] @ x[1, 0]
    torch.testing.assert_close(out[0, 0], expected_0, rtol=0, atol=1e-12)
    torch.testing.assert_close(out[1, 0], expected_1, rtol=0, atol=1e-12)


@pytest.mark.parametrize("scaling", ["sqrt", "resample"])
def test_length_scaling_leaves_full_length_inputs_unchanged(scaling):
    """So a model pretrained on full n-token blocks can switch scaling for finetuning on short texts."""
    plain = model_for("layerwise", "linear")
    scaled = model_for("layerwise", "linear", projection_length_scaling=scaling)
    scaled.load_state_dict(plain.state_dict())
    n = plain.config.max_seq_length
    full, short = torch.randint(5, 300, (2, n)), torch.randint(5, 300, (2, n // 4))
    torch.testing.assert_close(scaled(full).last_hidden_state, plain(full).last_hidden_state, rtol=0, atol=0)
    mask = torch.ones_like(full)  # the masked path (cumulative sums) agrees with E itself up to rounding
    torch.testing.assert_close(scaled(full, attention_mask=mask).last_hidden_state, plain(full).last_hidden_state,
                               rtol=0, atol=1e-5)
    assert (scaled(short).last_hidden_state - plain(short).last_hidden_state).abs().max() > 1e-3


def test_padding_leaks_without_the_mask():
    """Guards the test above: the same comparison does see a difference when padding is not masked."""
    model = model_for("layerwise", "linear")
    ids = torch.randint(5, 300, (1, 6))
    padded = torch.cat([ids, torch.full((1, 10), model.config.pad_token_id)], dim=1)
    alone = model(ids).last_hidden_state[0]
    unmasked = model(padded).last_hidden_state[0, :6]
    assert (unmasked - alone).abs().max() > 1e-3


@pytest.mark.parametrize("sharing, kind", [(s, t) for s in SHARING for t in TYPES if t != "max_pool"])
def test_both_projection_orders_agree(sharing, kind, monkeypatch):
    """E (X W + b) == (E X) W + (E m) b, padding included, in float64."""
    model = model_for(sharing, kind, dtype=torch.float64)
    ids = torch.randint(5, 300, (2, 20))
    mask = torch.ones(2, 20, dtype=torch.long)
    mask[1, 11:] = 0
    outputs = []
    for first in (True, False):
        monkeypatch.setattr(LinformerSelfAttention, "project_inputs_first", lambda self, n, f=first: f)
        outputs.append(model(ids, attention_mask=mask).last_hidden_state)
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=1e-10)


def test_cheaper_projection_order_is_chosen_for_the_paper_setting():
    """n=512, k=128, d=768, 12 heads: per-head E must follow W; a head-shared E must precede it."""
    from linformer_hf import LinformerConfig

    def first(sharing, kind="linear"):
        config = LinformerConfig(num_hidden_layers=1, projection_sharing=sharing, projection_type=kind)
        return LinformerSelfAttention(config, 0).project_inputs_first(512)

    assert not first("none")
    assert first("headwise") and first("key_value") and first("layerwise")
    assert not first("layerwise", "max_pool")  # not linear: cannot be moved before W


def test_sharing_counts_for_twelve_layers_and_heads():
    counts = {}
    for sharing in SHARING:
        config = tiny_config(num_hidden_layers=12, num_attention_heads=12, hidden_size=24, projection_sharing=sharing)
        model = LinformerModel(config)
        projections = model.encoder.projections
        counts[sharing] = projections.num_matrices()
        matrices = {id(m) for i in range(12) for m in projections.for_layer(i)}
        assert len(matrices) == {"none": 24, "headwise": 24, "key_value": 12, "layerwise": 1}[sharing]
    assert counts == {"none": 288, "headwise": 24, "key_value": 12, "layerwise": 1}


def test_per_layer_k():
    model = LinformerModel(tiny_config(num_hidden_layers=3, projected_dim=[4, 8, 16], projection_sharing="headwise"))
    shapes = [model.encoder.projections.for_layer(i)[0].shape for i in range(3)]
    assert shapes == [(1, 4, 32), (1, 8, 32), (1, 16, 32)]
    out = model(torch.randint(5, 300, (2, 20)), output_attentions=True)
    assert [a.shape[-1] for a in out.attentions] == [4, 8, 16]


@pytest.mark.parametrize("kind, slots", [("linear", 8), ("mean_pool", 3), ("conv", 3)])
def test_attention_maps_are_n_by_k(kind, slots):
    """k slots for learned E; windows of n/k = 4 positions for pooling (10 tokens -> 3 windows)."""
    model = model_for("headwise", kind)
    out = model(torch.randint(5, 300, (2, 10)), output_attentions=True)
    assert all(a.shape == (2, 4, 10, slots) for a in out.attentions)
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(2, 4, 10))


def test_sdpa_and_eager_agree():
    ids = torch.randint(5, 300, (3, 17))
    mask = torch.ones_like(ids)
    mask[0, 9:] = 0
    for kind in TYPES:
        sdpa = model_for("none", kind, "sdpa")(ids, attention_mask=mask).last_hidden_state
        eager = model_for("none", kind, "eager")(ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(sdpa, eager, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sharing", SHARING)
def test_identity_projections_reproduce_roberta(sharing):
    """k = n with E = F = I is standard attention: same weights, same outputs as HF RobertaModel."""
    n = 24
    torch.manual_seed(0)
    roberta_config = RobertaConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=n + 2, type_vocab_size=1,
                                   layer_norm_eps=1e-5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    roberta = RobertaModel(roberta_config).eval()
    model = LinformerModel(tiny_config(max_seq_length=n, projected_dim=n, projection_sharing=sharing)).eval()
    missing, unexpected = model.load_state_dict(roberta.state_dict(), strict=False)
    assert not unexpected and all(key.startswith("encoder.projections.") or ".adapter_" in key
                                  or key.endswith(".global_gate") for key in missing)
    with torch.no_grad():
        for p in model.encoder.projections.parameters():
            p.copy_(torch.eye(n).expand_as(p))
    ids = torch.randint(5, 300, (3, n))
    expected = roberta(ids).last_hidden_state
    assert (model(ids).last_hidden_state - expected).abs().max() <= 1e-5


# ---- layer_norm_placement and embedding_layer_norm: the arrangement of pre-LN checkpoints (the Jargon models) ----


def pre_norm_reference(model, ids):
    """A pre-LN Transformer encoder written out in plain torch from `model`'s weights: embeddings summed without a
    LayerNorm, then per layer x + MHA(LN(x)) and y + FFN(LN(y)), then one final LayerNorm; standard attention."""
    config = model.config
    heads, eps = config.num_attention_heads, config.layer_norm_eps
    real = (ids != config.pad_token_id).long()
    positions = real.cumsum(1) * real + config.pad_token_id
    embeddings = model.embeddings
    x = (embeddings.word_embeddings.weight[ids] + embeddings.position_embeddings.weight[positions]
         + embeddings.token_type_embeddings.weight[0])

    def norm(t, module):
        return F.layer_norm(t, t.shape[-1:], module.weight, module.bias, eps)

    for layer in model.encoder.layer:
        attention = layer.attention.self
        h = norm(x, layer.attention_layer_norm)
        q, k, v = (F.linear(h, m.weight, m.bias).unflatten(-1, (heads, -1)).transpose(1, 2)
                   for m in (attention.query, attention.key, attention.value))
        attended = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1) @ v
        x = x + layer.attention.output.dense(attended.transpose(1, 2).flatten(2))
        h = norm(x, layer.feed_forward_layer_norm)
        x = x + layer.output.dense(layer.intermediate.intermediate_act_fn(layer.intermediate.dense(h)))
    return norm(x, model.encoder.final_layer_norm)


@pytest.mark.parametrize("sharing", SHARING)
@torch.no_grad()
def test_pre_norm_layers_without_embedding_layer_norm_are_their_definition(sharing):
    """`layer_norm_placement="pre"` with `embedding_layer_norm=False`, at k = n with E = F = I (standard attention),
    is the pre-LN encoder written out by hand (float64, every weight random, LayerNorms included)."""
    n = 24
    torch.manual_seed(0)
    config = tiny_config(max_seq_length=n, projected_dim=n, projection_sharing=sharing, layer_norm_placement="pre",
                         embedding_layer_norm=False, hidden_act="gelu")
    model = LinformerModel(config).double().eval()
    for name, param in model.named_parameters():
        param.normal_(1.0 if name.endswith("norm.weight") else 0.0, 0.2)
    for param in model.encoder.projections.parameters():
        param.copy_(torch.eye(n).expand_as(param))
    ids = torch.randint(5, 300, (3, n))
    assert (model(ids).last_hidden_state - pre_norm_reference(model, ids)).abs().max() <= 1e-10


def test_the_default_arrangement_is_post_norm_and_adds_nothing():
    """Defaults keep every existing folder's model: post-LN layers, embeddings with their LayerNorm, no new weights
    (the computation itself is pinned by tests/test_release.py's stored embeddings of the release)."""
    from linformer_hf.modeling_linformer import LinformerLayer, LinformerPreNormLayer

    model = LinformerModel(tiny_config())
    assert all(type(layer) is LinformerLayer for layer in model.encoder.layer)
    assert isinstance(model.embeddings.LayerNorm, torch.nn.LayerNorm)
    assert not any("attention_layer_norm" in k or "feed_forward_layer_norm" in k or "final_layer_norm" in k
                   for k in model.state_dict())
    pre = LinformerModel(tiny_config(layer_norm_placement="pre", embedding_layer_norm=False))
    assert all(type(layer) is LinformerPreNormLayer for layer in pre.encoder.layer)
    added = set(pre.state_dict()) - set(model.state_dict())
    removed = set(model.state_dict()) - set(pre.state_dict())
    assert added == {"encoder.final_layer_norm.weight", "encoder.final_layer_norm.bias"} | {
        f"encoder.layer.{i}.{norm}.{part}" for i in range(2) for norm in ("attention_layer_norm",
                                                                          "feed_forward_layer_norm")
        for part in ("weight", "bias")}
    assert removed == {"embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"} | {
        f"encoder.layer.{i}.{block}.LayerNorm.{part}" for i in range(2) for block in ("attention.output", "output")
        for part in ("weight", "bias")}


@pytest.mark.parametrize("sharing", ["none", "layerwise"])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@torch.no_grad()
def test_pre_norm_model_is_padding_invariant(sharing, impl):
    """Each sequence of a padded batch, either side, gets what it gets alone; the last hidden state returned is the
    final LayerNorm's output, as `last_hidden_state`."""
    model = model_for(sharing, "linear", impl, layer_norm_placement="pre", embedding_layer_norm=False)
    generator = torch.Generator().manual_seed(2)
    sequences = [torch.randint(5, 300, (length,), generator=generator) for length in (1, 7, 20)]
    alone = [model(seq[None]).last_hidden_state[0] for seq in sequences]
    for side in ("right", "left"):
        ids, mask, spans = padded_batch(sequences, 32, side)
        out = model(ids, attention_mask=mask, output_hidden_states=True)
        for row, span in enumerate(spans):
            assert (out.last_hidden_state[row, span] - alone[row]).abs().max() <= 1e-5, (side, row)
        assert len(out.hidden_states) == 3 and torch.equal(out.hidden_states[-1], out.last_hidden_state)


def test_initialisation_is_the_documented_one():
    from transformers import AutoModel

    config = tiny_config(max_seq_length=256, projected_dim=64, initializer_range=0.02)
    projections = AutoModel.from_config(config).encoder.projections
    assert abs(projections.shared.std().item() - 256**-0.5) < 0.05 * 256**-0.5
    config = tiny_config(max_seq_length=256, projected_dim=64, projection_init_std=0.2)
    assert abs(AutoModel.from_config(config).encoder.projections.shared.std().item() - 0.2) < 0.01
    conv = AutoModel.from_config(tiny_config(projection_type="conv", projection_sharing="headwise"))
    torch.testing.assert_close(conv.encoder.projections.key_0, torch.full((1, 4), 0.25))
    for sharing in SHARING:  # every tensor is initialised, in every sharing mode
        projections = AutoModel.from_config(tiny_config(projection_sharing=sharing)).encoder.projections
        for name, param in projections.named_parameters():
            assert abs(param.std().item() - 32**-0.5) < 0.3 * 32**-0.5, name
    for sharing in SHARING:  # window_mean: every E/F starts as the same stretch means, in every sharing mode
        config = tiny_config(projection_sharing=sharing, projection_init="window_mean")
        for name, param in AutoModel.from_config(config).encoder.projections.named_parameters():
            groups, k, n = param.shape
            assert torch.equal(param, window_mean_projection(k, n).expand(groups, k, n)), name


def test_window_mean_projection():
    assert torch.equal(window_mean_projection(6, 6), torch.eye(6))
    e = window_mean_projection(3, 8)  # windows [0, 2), [2, 5), [5, 8)
    assert torch.allclose(e.sum(1), torch.ones(3))
    assert (e > 0).int().tolist() == [[1, 1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]]
    assert torch.allclose(e[1, 2:5], torch.full((3,), 1 / 3))


def test_chunked_feed_forward_matches_and_allows_any_length():
    model = model_for("headwise", "linear")
    ids = torch.randint(5, 300, (2, 23))  # not a multiple of the chunk
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    expected = model(ids, attention_mask=mask).last_hidden_state
    model.config.chunk_size_feed_forward = 5
    calls = []
    model.encoder.layer[0].intermediate.register_forward_hook(lambda *args: calls.append(args[2].shape[1]))
    torch.testing.assert_close(model(ids, attention_mask=mask).last_hidden_state, expected)
    assert calls == [5, 5, 5, 5, 3]


def test_too_long_input_is_an_error_naming_max_seq_length():
    model = LinformerModel(tiny_config())
    with pytest.raises(ValueError, match="max_seq_length"):
        model(torch.randint(5, 300, (1, 33)))


@pytest.mark.parametrize("kwargs, message", [
    (dict(attention_mask=torch.ones(1, 1, 4, 4)), "attention_mask"),
    (dict(encoder_hidden_states=torch.zeros(1, 4, 32)), "encoder_hidden_states"),
    (dict(is_causal=True), "is_causal"),
])
def test_unsupported_inputs_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LinformerModel(tiny_config())(torch.randint(5, 300, (1, 4)), **kwargs)


def test_exactly_one_of_ids_or_embeddings():
    model = LinformerModel(tiny_config())
    with pytest.raises(ValueError, match="exactly one"):
        model()
    embeds = model.embeddings.word_embeddings(torch.randint(5, 300, (2, 6)))
    assert model(inputs_embeds=embeds).last_hidden_state.shape == (2, 6, 32)


# ---- heads: shapes and the loss each computes, against the textbook formula --------------------------

def test_masked_lm_loss_ignores_minus_100_and_ties_the_decoder():
    model = LinformerForMaskedLM(tiny_config())
    assert model.lm_head.decoder.weight is model.linformer.embeddings.word_embeddings.weight
    ids = torch.randint(5, 300, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    out = model(ids, labels=labels)
    assert out.logits.shape == (2, 12, 300)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[:, 3], ids[:, 3]))


@pytest.mark.parametrize("problem", ["regression", "single_label_classification", "multi_label_classification"])
def test_sequence_classification_losses(problem):
    num_labels = 1 if problem == "regression" else 3
    model = LinformerForSequenceClassification(tiny_config(num_labels=num_labels)).eval()
    ids = torch.randint(5, 300, (4, 9))
    labels = {
        "regression": torch.randn(4),
        "single_label_classification": torch.tensor([0, 2, 1, 2]),
        "multi_label_classification": torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0]]),
    }[problem]
    out = model(ids, labels=labels)
    assert model.config.problem_type == problem
    assert out.logits.shape == (4, num_labels)
    expected = {
        "regression": lambda: F.mse_loss(out.logits.squeeze(-1), labels),
        "single_label_classification": lambda: F.cross_entropy(out.logits, labels),
        "multi_label_classification": lambda: F.binary_cross_entropy_with_logits(out.logits, labels),
    }[problem]()
    torch.testing.assert_close(out.loss, expected)


def test_mean_pooling_classifies_the_mean_of_the_real_tokens():
    torch.manual_seed(0)
    model = LinformerForSequenceClassification(tiny_config(classifier_pooling="mean", num_labels=3)).eval()
    ids = torch.randint(5, 300, (1, 9))
    padded = torch.cat([ids, torch.full((1, 5), 1)], dim=1)
    mask = (torch.arange(14) < 9).long()[None]
    hidden = model.linformer(ids).last_hidden_state
    expected = model.classifier(hidden.mean(1, keepdim=True))
    torch.testing.assert_close(model(ids).logits, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(model(padded, attention_mask=mask).logits, expected, rtol=0, atol=1e-5)
    assert (model.classifier(hidden) - expected).abs().max() > 1e-4  # the first token's state differs


def test_token_classification_loss():
    model = LinformerForTokenClassification(tiny_config(num_labels=5)).eval()
    ids, labels = torch.randint(5, 300, (2, 7)), torch.randint(0, 5, (2, 7))
    labels[0, -2:] = -100
    out = model(ids, labels=labels)
    assert out.logits.shape == (2, 7, 5)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits.reshape(-1, 5), labels.reshape(-1)))


def test_question_answering_loss():
    model = LinformerForQuestionAnswering(tiny_config()).eval()
    ids = torch.randint(5, 300, (2, 11))
    start, end = torch.tensor([1, 4]), torch.tensor([3, 9])
    out = model(ids, start_positions=start, end_positions=end)
    assert out.start_logits.shape == out.end_logits.shape == (2, 11)
    expected = (F.cross_entropy(out.start_logits, start) + F.cross_entropy(out.end_logits, end)) / 2
    torch.testing.assert_close(out.loss, expected)


def test_multiple_choice_loss():
    model = LinformerForMultipleChoice(tiny_config()).eval()
    ids, labels = torch.randint(5, 300, (2, 3, 10)), torch.tensor([2, 0])
    out = model(ids, attention_mask=torch.ones_like(ids), labels=labels)
    assert out.logits.shape == (2, 3)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))


def test_hidden_states_and_tuple_outputs():
    model = LinformerForMaskedLM(tiny_config()).eval()
    ids = torch.randint(5, 300, (2, 6))
    out = model(ids, output_hidden_states=True)
    assert len(out.hidden_states) == 3 and out.hidden_states[-1].shape == (2, 6, 32)
    as_tuple = model(ids, return_dict=False)
    torch.testing.assert_close(as_tuple[0], out.logits)


# ---- exact_attention_length: exact attention for sequences of at most that many real tokens -------------

SHORT_INPUT_MODES = [(s, "linear") for s in SHARING] + [(s, "conv") for s in SHARING] + [
    ("layerwise", "mean_pool"), ("layerwise", "max_pool")]  # pooling has no weights to share


def roberta_and_linformer(sharing, kind, impl, n=32, k=8, **overrides):
    """A random RoBERTa and a Linformer holding the same weights plus random (non-identity) projections."""
    torch.manual_seed(0)
    roberta_config = RobertaConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=n + 2, type_vocab_size=1,
                                   layer_norm_eps=1e-5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    roberta = RobertaModel._from_config(roberta_config, attn_implementation=impl).eval()
    overrides.setdefault("exact_attention_length", k)
    config = tiny_config(max_seq_length=n, projected_dim=k, projection_sharing=sharing, projection_type=kind,
                         **overrides)
    model = LinformerModel._from_config(config, attn_implementation=impl).eval()
    missing, unexpected = model.load_state_dict(roberta.state_dict(), strict=False)
    assert not unexpected and all(key.startswith("encoder.projections.") or ".adapter_" in key
                                  or key.endswith(".global_gate") for key in missing)
    with torch.no_grad():
        for p in model.encoder.projections.parameters():
            p.normal_(0.0, 0.3)
    return roberta, model


def padded_batch(sequences, total, side, pad_id=1):
    ids = torch.full((len(sequences), total), pad_id)
    mask = torch.zeros(len(sequences), total, dtype=torch.long)
    spans = []
    for row, seq in enumerate(sequences):
        span = slice(0, len(seq)) if side == "right" else slice(total - len(seq), total)
        ids[row, span], mask[row, span] = seq, 1
        spans.append(span)
    return ids, mask, spans


@pytest.mark.parametrize("sharing, kind", SHORT_INPUT_MODES)
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@torch.no_grad()
def test_short_inputs_reproduce_roberta_and_long_ones_keep_the_projection(sharing, kind, impl):
    """k=8 < n=32: inputs of <= 8 tokens equal RoBERTa alone and in mixed padded batches, either padding side;
    longer rows of the same batches are exactly what the projection gives without the option."""
    roberta, model = roberta_and_linformer(sharing, kind, impl)
    # Guards that the comparison can fail; not for weightless pooling, whose windowed keys give nearly
    # uniform attention, like RoBERTa's at this random init.
    guard = kind in ("linear", "conv")
    generator = torch.Generator().manual_seed(1)
    sequences = [torch.randint(5, 300, (length,), generator=generator) for length in (1, 5, 8, 9, 20, 32)]
    worst_short = 0.0
    for seq in sequences[:3]:
        expected = roberta(seq[None]).last_hidden_state
        worst_short = max(worst_short, (model(seq[None]).last_hidden_state - expected).abs().max().item())
    for total, side in itertools.product((20, 32), ("right", "left")):
        rows = [seq for seq in sequences if len(seq) <= total]
        ids, mask, spans = padded_batch(rows, total, side)
        out = model(ids, attention_mask=mask).last_hidden_state
        model.config.exact_attention_length = None
        projected = model(ids, attention_mask=mask).last_hidden_state
        model.config.exact_attention_length = 8
        for row, (seq, span) in enumerate(zip(rows, spans, strict=True)):
            if len(seq) <= 8:
                expected = roberta(seq[None]).last_hidden_state[0]
                worst_short = max(worst_short, (out[row, span] - expected).abs().max().item())
                if guard and len(seq) > 1:  # the option is what made it exact (one token attends to itself)
                    assert (projected[row, span] - expected).abs().max() > 1e-3
            else:
                torch.testing.assert_close(out[row, span], projected[row, span], rtol=0, atol=1e-6)
                if guard:
                    assert (out[row, span] - roberta(seq[None]).last_hidden_state[0]).abs().max() > 1e-3
    assert worst_short <= 1e-5


@torch.no_grad()
def test_short_inputs_use_each_layers_own_k():
    """Per-layer k = [4, 16]: a 10-token input is projected in layer 0 and exact in layer 1, padded or not."""
    model = model_for("headwise", "linear", projected_dim=[4, 16], exact_attention_length=[4, 16])
    ids = torch.randint(5, 300, (1, 10))
    out = model(ids, output_attentions=True)
    assert [a.shape[-1] for a in out.attentions] == [4, 10]
    batch, mask, spans = padded_batch([ids[0], torch.randint(5, 300, (24,))], 24, "left")
    padded = model(batch, attention_mask=mask, output_attentions=True)
    torch.testing.assert_close(padded.last_hidden_state[0, spans[0]], out.last_hidden_state[0], rtol=0, atol=1e-5)
    # Mixed batch in layer 1: 16 key slots; the short row puts no weight on the 6 it does not fill.
    assert padded.attentions[1].shape == (2, 4, 24, 16)
    assert padded.attentions[1][0, :, :, 10:].abs().max() == 0
    torch.testing.assert_close(padded.attentions[1].sum(-1), torch.ones(2, 4, 24))


# ---- exact_attention_length > k and long-input adapters: the source on what it can read, trainable beyond ----


def with_random_adapters(model, std=0.2):
    """Non-zero adapter updates (a new adapter starts as no change), so that a test can see them act."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".adapter_" in name:
                p.normal_(0.0, std)
    return model


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("side", ["right", "left"])
@torch.no_grad()
def test_inputs_up_to_exact_attention_length_are_roberta_and_only_longer_ones_use_the_adapters(impl, side):
    """k = 8, exact up to 16 tokens, n = 32, rank-4 adapters with random updates: rows of <= 16 real tokens are
    RoBERTa (alone and beside longer rows, padded either side), longer rows take the adapted projected path,
    which in a mixed batch is what the same row gives alone (the update merged into the weights)."""
    roberta, model = roberta_and_linformer("layerwise", "linear", impl, exact_attention_length=16,
                                           long_input_adapter_rank=4)
    with_random_adapters(model)
    generator = torch.Generator().manual_seed(2)
    sequences = [torch.randint(5, 300, (length,), generator=generator) for length in (3, 9, 16, 17, 32)]
    ids, mask, spans = padded_batch(sequences, 32, side)
    out = model(ids, attention_mask=mask).last_hidden_state
    plain = LinformerModel._from_config(model.config.__class__(**{**model.config.to_dict(),
                                                                  "long_input_adapter_rank": 0}),
                                        attn_implementation=impl).eval()
    plain.load_state_dict(model.state_dict(), strict=False)
    for row, (seq, span) in enumerate(zip(sequences, spans, strict=True)):
        alone = model(seq[None]).last_hidden_state[0]
        torch.testing.assert_close(out[row, span], alone, rtol=0, atol=1e-5)
        if len(seq) <= 16:
            torch.testing.assert_close(alone, roberta(seq[None]).last_hidden_state[0], rtol=0, atol=1e-5)
        else:  # the adapters act, and only here
            assert (alone - plain(seq[None]).last_hidden_state[0]).abs().max() > 1e-2


@torch.no_grad()
def test_new_adapters_change_nothing_and_eager_equals_sdpa():
    config = tiny_config(max_seq_length=32, projected_dim=8, exact_attention_length=16, long_input_adapter_rank=4)
    torch.manual_seed(0)
    model = LinformerModel._from_config(config, attn_implementation="sdpa").eval()
    plain = LinformerModel._from_config(tiny_config(**{**config.to_dict(), "long_input_adapter_rank": 0}),
                                        attn_implementation="sdpa").eval()
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    assert not missing and all(".adapter_" in key for key in unexpected)
    ids = torch.randint(5, 300, (2, 30))
    mask = torch.ones_like(ids)
    mask[0, 12:] = 0
    torch.testing.assert_close(model(ids, attention_mask=mask).last_hidden_state,
                               plain(ids, attention_mask=mask).last_hidden_state, rtol=0, atol=0)
    with_random_adapters(model)
    eager = implemented_as(model, "eager")
    torch.testing.assert_close(eager(ids, attention_mask=mask).last_hidden_state,
                               model(ids, attention_mask=mask).last_hidden_state, rtol=0, atol=1e-5)


def implemented_as(model, implementation):
    """The same weights under another attention implementation, on a config of its own: `_from_config` sets the
    implementation on the config it is given, which `model` and its layers share, so a twin built from
    `model.config` would switch `model` too and compare the implementation with itself."""
    twin = LinformerModel._from_config(copy.deepcopy(model.config), attn_implementation=implementation).eval()
    twin.load_state_dict(model.state_dict())
    assert (twin.config._attn_implementation, model.config._attn_implementation) == (
        implementation, "eager" if implementation == "sdpa" else "sdpa")
    return twin


@pytest.mark.parametrize("overrides, message", [
    (dict(exact_attention_length=4), "`exact_attention_length`=4.*max\\(k\\)=8 <= it <= max_seq_length=32"),
    (dict(exact_attention_length=64), "`exact_attention_length`=64.*max_seq_length=32"),
    (dict(exact_attention_length=[8, 40]), "a list needs one length per layer"),
    (dict(exact_attention_length=[16]), "a list needs one length per layer"),
    (dict(attention_type="windowed"), "`attention_type`='windowed'.*needs exact_attention_length"),
    (dict(attention_type="windowed", exact_attention_length=[16, 16]), "set to one integer"),
    (dict(attention_type="sliding"), "`attention_type`='sliding'.*'projected', 'windowed'"),
    (dict(long_input_adapter_rank=-1), "long_input_adapter_rank"),
])
def test_bad_short_path_settings_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(max_seq_length=32, projected_dim=8, **overrides)


# ---- attention_type="windowed": each window exactly, the whole sequence through gated slots ----------------


def windowed_pair(impl, n=32, k=8, window=16, sharing="layerwise", **overrides):
    """RoBERTa and a Linformer with its weights, exact up to `window` tokens, whose longer inputs read windows of
    `window` tokens; position rows repeat every `window` (as conversion repeats the source's table), so a
    window's tokens sit where they would in an input of their own."""
    roberta, model = roberta_and_linformer(sharing, "linear", impl, n=n, k=k, exact_attention_length=window,
                                           attention_type="windowed", **overrides)
    with torch.no_grad():
        table = model.embeddings.position_embeddings.weight
        first = model.config.pad_token_id + 1
        table[first + window:first + n] = table[first:first + window].repeat(n // window, 1)[: n - window]
    return roberta, model


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("side", ["right", "left"])
@torch.no_grad()
def test_closed_gates_read_a_long_input_as_the_source_reads_each_window(impl, side):
    """Gates at zero (a converted model): a 17-32-token row is, window by window, RoBERTa on that window alone,
    padded either side beside shorter rows; a row of <= 16 tokens is RoBERTa on the whole row."""
    roberta, model = windowed_pair(impl, long_input_adapter_rank=4)
    assert all(layer.attention.self.global_gate.abs().max() == 0 for layer in model.encoder.layer)
    generator = torch.Generator().manual_seed(3)
    sequences = [torch.randint(5, 300, (length,), generator=generator) for length in (5, 16, 17, 27, 32)]
    ids, mask, spans = padded_batch(sequences, 32, side)
    out = model(ids, attention_mask=mask).last_hidden_state
    for row, (seq, span) in enumerate(zip(sequences, spans, strict=True)):
        expected = torch.cat([roberta(part[None]).last_hidden_state[0] for part in seq.split(16)])
        torch.testing.assert_close(out[row, span], expected, rtol=0, atol=1e-5)
        torch.testing.assert_close(model(seq[None]).last_hidden_state[0], expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@torch.no_grad()
def test_open_gates_add_the_whole_sequence_to_long_rows_only(impl):
    """Random gates and adapters: rows of <= 16 tokens stay RoBERTa in a mixed batch; a longer row changes, and
    its first window now depends on tokens in its second (what windows alone cannot do); a row reads the same
    alone as in the batch; eager equals SDPA."""
    roberta, model = windowed_pair(impl, long_input_adapter_rank=4)
    with_random_adapters(model)
    for layer in model.encoder.layer:
        layer.attention.self.global_gate.normal_(0.0, 1.0)
    generator = torch.Generator().manual_seed(4)
    sequences = [torch.randint(5, 300, (length,), generator=generator) for length in (9, 16, 30)]
    ids, mask, spans = padded_batch(sequences, 30, "left")
    out = model(ids, attention_mask=mask).last_hidden_state
    for row, (seq, span) in enumerate(zip(sequences, spans, strict=True)):
        torch.testing.assert_close(out[row, span], model(seq[None]).last_hidden_state[0], rtol=0, atol=1e-5)
        if len(seq) <= 16:
            torch.testing.assert_close(out[row, span], roberta(seq[None]).last_hidden_state[0], rtol=0, atol=1e-5)
    twin = implemented_as(model, "eager" if impl == "sdpa" else "sdpa")  # with the gates open
    torch.testing.assert_close(twin(ids, attention_mask=mask).last_hidden_state, out, rtol=0, atol=1e-5)
    long = sequences[2].clone()
    changed = long.clone()
    changed[20] = 7 if long[20] != 7 else 8
    first_window = model(long[None]).last_hidden_state[0, :16]
    assert (model(changed[None]).last_hidden_state[0, :16] - first_window).abs().max() > 1e-4
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.global_gate.zero_()
    closed = model(long[None]).last_hidden_state[0, :16]
    torch.testing.assert_close(model(changed[None]).last_hidden_state[0, :16], closed, rtol=0, atol=1e-6)


@pytest.mark.parametrize("sharing", ["layerwise", "none"])
@pytest.mark.parametrize("length", [32, 27])
@torch.no_grad()
def test_windowed_attention_equals_its_definition_in_float64(sharing, length):
    """One attention layer with open gates, random adapters and E/F, against the formula written out: softmax
    attention inside each window of 16, plus gate times softmax(Q (E K)^T) (E V) with K, V the adapted maps of the
    whole row (E stretched to the row's length by `resample_columns`). Whatever route the layer takes to the k
    slots (E x before the maps, or E on the mapped keys), it must equal this."""
    _, model = windowed_pair("sdpa", sharing=sharing, long_input_adapter_rank=4,
                             projection_length_scaling="resample")
    with_random_adapters(model).double()
    attention = model.encoder.layer[0].attention.self
    attention.global_gate.normal_(0.0, 1.0)
    proj_key, proj_value = model.encoder.projections.for_layer(0)
    x = torch.randn(1, length, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    out, _ = attention(x, LinformerRoute(ALL_PROJECTED, proj_key=proj_key, proj_value=proj_value))

    def mapped(name):
        weight, bias = long_weights(getattr(attention, name))
        return attention._heads(F.linear(x, weight, bias))[0]  # (H, L, D)

    def attend(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) * attention.scaling, -1) @ v

    query = attention._heads(F.linear(x, *attention.query.long_weights()))[0]
    key, value = mapped("key"), mapped("value")
    lengths = torch.tensor([length])
    e_key, e_value = (resample_columns(p, lengths, length)[0] for p in (proj_key, proj_value))  # (G, k, L)
    far = attend(query, e_key @ key, e_value @ value)
    near = torch.cat([attend(query[:, w], key[:, w], value[:, w])
                      for w in torch.arange(length).split(16)], dim=1)
    expected = (near + attention.global_gate[:, None, None] * far).transpose(0, 1).reshape(length, -1)
    torch.testing.assert_close(out[0], expected, rtol=0, atol=1e-12)


def test_windowed_model_refuses_bad_settings_and_attention_maps_of_long_inputs():
    _, model = windowed_pair("sdpa")
    assert model(torch.randint(5, 300, (1, 16)), output_attentions=True).attentions[0].shape == (1, 4, 16, 16)
    with pytest.raises(ValueError,
                       match="output_attentions=True: with attention_type='windowed' \\(windows of 16 tokens\\)"):
        model(torch.randint(5, 300, (1, 17)), output_attentions=True)


def test_short_inputs_option_is_free_when_no_sequence_is_short(monkeypatch):
    """Batches with every row longer than k never compute the unprojected keys."""
    model = model_for("layerwise", "linear", exact_attention_length=8)
    calls = []
    original = LinformerSelfAttention._exact
    monkeypatch.setattr(LinformerSelfAttention, "_exact", lambda self, *a: calls.append(1) or original(self, *a))
    ids = torch.randint(5, 300, (2, 20))
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    model(ids, attention_mask=mask)
    model(ids)
    assert calls == []
    mask[1, 8:] = 0  # now one row has 8 = k real tokens
    model(ids, attention_mask=mask)
    assert len(calls) == model.config.num_hidden_layers


@pytest.mark.parametrize("seed", range(3))
def test_padding_compaction_is_a_stable_sort_of_padding(seed):
    """compact_padding moves each row's real tokens to the front in their order (what a stable argsort of
    "is padding" gives), with counts instead of a sort; on CPU a mask without padding or right-padded moves
    nothing."""
    from linformer_hf.modeling_linformer import compact_padding

    generator = torch.Generator().manual_seed(seed)
    mask = (torch.rand(6, 37, generator=generator) < 0.6).long()
    mask[0] = 0  # a row of padding only
    key_mask, key_index = compact_padding(mask)
    expected = torch.argsort((mask == 0).to(torch.uint8), dim=1, stable=True)
    assert torch.equal(key_index, expected)
    assert torch.equal(key_mask, mask.bool().gather(1, expected))
    right = torch.ones(2, 9, dtype=torch.long)
    right[1, 5:] = 0
    assert compact_padding(torch.ones(2, 9)) == (None, None)
    assert compact_padding(right)[1] is None and torch.equal(compact_padding(right)[0], right.bool())


def test_take_rows_is_a_per_row_gather():
    """take_rows (one Gather over the flattened batch) picks what an element-wise gather along the length picks,
    for an index shorter than the rows too."""
    from linformer_hf.modeling_linformer import take_rows

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 11, 2, 5, generator=generator)
    index = torch.randint(0, 11, (3, 7), generator=generator)
    expected = x.gather(1, index[:, :, None, None].expand(-1, -1, 2, 5))
    assert torch.equal(take_rows(x, index), expected)


# ---- input checks -------------------------------------------------------------------------------------

@pytest.mark.parametrize("make_inputs, message", [
    (lambda: dict(input_ids=torch.tensor([[5, 300, 7]])), r"`input_ids` holds values from 5 to 300.*vocab_size=300"),
    (lambda: dict(input_ids=torch.tensor([[5, -1, 7]])), r"`input_ids` holds values from -1 to 7"),
    (lambda: dict(input_ids=torch.zeros(2, 0, dtype=torch.long)), "empty"),
    (lambda: dict(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(2, 7)),
     r"`attention_mask` must be \(batch, sequence\) = \(2, 5\).*got shape \(2, 7\)"),
    (lambda: dict(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(2, 3)),
     r"`attention_mask` must be \(batch, sequence\) = \(2, 5\).*got shape \(2, 3\)"),
    (lambda: dict(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(3, 5)),
     r"`attention_mask` must be \(batch, sequence\) = \(2, 5\).*got shape \(3, 5\)"),
    (lambda: dict(input_ids=torch.ones(2, 5, dtype=torch.long), token_type_ids=torch.ones(2, 5, dtype=torch.long)),
     r"`token_type_ids` holds values from 1 to 1.*type_vocab_size=1"),
    (lambda: dict(input_ids=torch.ones(2, 5, dtype=torch.long), token_type_ids=torch.zeros(2, 4, dtype=torch.long)),
     r"`token_type_ids` has shape \(2, 4\)"),
    (lambda: dict(input_ids=torch.ones(5, dtype=torch.long)), r"`input_ids` must be \(batch, sequence\)"),
    (lambda: dict(input_ids=[[5, 6, 7]]), r"`input_ids` must be a torch.Tensor, got a list.*torch.tensor\(ids\)"),
    (lambda: dict(input_ids=torch.ones(2, 3, dtype=torch.long), attention_mask=[[1, 1, 1], [1, 1, 0]]),
     r"`attention_mask` must be a torch.Tensor, got a list"),
    (lambda: dict(input_ids=torch.ones(2, 3, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 0.5], [1, 1, 0]])),
     r"`attention_mask` must hold 0 \(padding\) and 1 \(real token\) only; it holds 0.5"),
    (lambda: dict(input_ids=torch.ones(2, 3, dtype=torch.long), attention_mask=torch.tensor([[1, 2, 1], [1, 2, 0]])),
     r"it holds 2 and 1 more entries outside \{0, 1\}"),
    (lambda: dict(input_ids=torch.ones(2, 3)), r"`input_ids` must hold integer ids.*got torch.float32"),
    (lambda: dict(input_ids=torch.ones(2, 3, dtype=torch.bool)), r"`input_ids` must hold integer ids.*got torch.bool"),
    (lambda: dict(input_ids=torch.ones(2, 3, dtype=torch.long), token_type_ids=torch.zeros(2, 3)),
     r"`token_type_ids` must hold integer ids.*got torch.float32"),
])
def test_bad_inputs_are_one_line_errors_naming_the_argument(make_inputs, message):
    model = LinformerForMaskedLM(tiny_config())
    with pytest.raises(ValueError, match=message) as error:
        model(**make_inputs())
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("dtype", [torch.long, torch.float32, torch.bool])
def test_a_mask_of_zeros_and_ones_is_accepted_in_every_dtype(dtype):
    """The 0/1 check refuses soft masks only: the same hard mask as long, float or bool gives the same logits."""
    model = LinformerForMaskedLM(tiny_config()).eval()
    ids, mask = torch.ones(2, 5, dtype=torch.long) * 7, torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        assert torch.equal(model(ids, attention_mask=mask.to(dtype)).logits, model(ids, attention_mask=mask).logits)


def test_an_all_padding_row_is_allowed_and_said_on_every_path_at_every_call(caplog):
    """A mask row of zeros only is allowed (finite outputs: the half-precision tests above cover them) and
    warned about, naming the row, since its outputs carry nothing: on the exact path (at most k tokens) and the
    projected one alike, and again at the next call with the same row (a once-per-process warning went silent on
    the second path a user tried)."""
    from transformers.utils import logging as hf_logging

    model = LinformerForMaskedLM(tiny_config()).eval()
    hf_logging.enable_propagation()
    try:
        for length in (4, 24, 24):  # exact (k = 8), projected, projected again
            ids, mask = torch.ones(3, length, dtype=torch.long) * 7, torch.ones(3, length, dtype=torch.long)
            mask[0, 2:], mask[1] = 0, 0
            caplog.clear()
            with caplog.at_level("WARNING"):
                logits = model(ids, attention_mask=mask).logits
            assert torch.isfinite(logits).all()
            assert "`attention_mask` row 1 is all zeros" in caplog.text and "carry nothing" in caplog.text, length
    finally:
        hf_logging.disable_propagation()


def test_forward_kwargs_are_typed_for_transformers():
    """`**kwargs: Unpack[TransformersKwargs]` is how transformers (and its common tests) see that a forward
    accepts `output_attentions` and the other standard keyword arguments."""
    import inspect
    from typing import get_args

    from transformers.utils import TransformersKwargs

    from linformer_hf.modeling_linformer import LinformerEncoder, LinformerLayer

    classes = [LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification,
               LinformerForTokenClassification, LinformerForQuestionAnswering, LinformerForMultipleChoice,
               LinformerEncoder, LinformerLayer, LinformerSelfAttention]
    for cls in classes:
        annotation = inspect.signature(cls.forward).parameters["kwargs"].annotation
        assert get_args(annotation) == (TransformersKwargs,), cls.__name__
        assert "output_attentions" in get_args(annotation)[0].__annotations__


# ---- half precision, torch.compile, FSDP-style parameter views -------------------------------------------

# Each extra setting has its own masking path: exact attention for short rows, per-sequence resampled E.
PRECISION_SETTINGS = [{}, {"exact_attention_length": 8}, {"projection_length_scaling": "resample"}]


def awkward_batch():
    """Right and left padding, a row of 7 <= k real tokens, a row of padding only (attention_mask all zero)
    and a row of 3 tokens, whose pooling windows past the third position hold no real token."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 300, (5, 32), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    mask[2, :25] = 0
    mask[3] = 0
    mask[4, 3:] = 0
    return ids.masked_fill(mask == 0, 1), mask


def settings(kind):
    return [extra for extra in PRECISION_SETTINGS if kind == "linear" or "projection_length_scaling" not in extra]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_stays_finite_on_padding_and_empty_windows(dtype):
    """A model cast to bf16/fp16: outputs, loss and every gradient finite on the awkward batch, for every
    projection type, sharing mode, attention implementation and masking path. Masks are filled with the
    dtype's own finite minimum, never -inf, so a row with every key masked gets uniform weights, not NaN."""
    ids, mask = awkward_batch()
    labels = ids.masked_fill(mask == 0, -100)
    labels[3, 0] = ids[3, 0]  # a loss term from the all-padding row too
    for sharing, kind, impl in itertools.product(SHARING, TYPES, ["sdpa", "eager"]):
        for extra in settings(kind):
            torch.manual_seed(0)
            config = tiny_config(projection_sharing=sharing, projection_type=kind, **extra)
            model = LinformerForMaskedLM._from_config(config, attn_implementation=impl).to(dtype).train()
            out = model(ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            case = f"{sharing} {kind} {impl} {extra}"
            assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss), case
            for name, p in model.named_parameters():
                assert p.grad is None or torch.isfinite(p.grad).all(), f"{case}: {name}"


@pytest.mark.parametrize("sharing, kind", list(itertools.product(SHARING, TYPES)))
@torch.no_grad()
def test_bfloat16_matches_float32(sharing, kind):
    """The same weights in bf16 and fp32 agree on every real token within 2% of the output's norm
    (||bf16 - fp32|| / ||fp32||, Frobenius, over the real tokens of the batch). bf16 keeps 8 significant
    bits, a relative rounding error of 2^-9 = 0.2% per operation; through embeddings, two layers and their
    layer norms that adds up to about 0.5% here (the worst case measured), so 2% holds with margin and
    still fails on any masking or scaling error, which moves outputs by O(1). The all-padding row, which
    has no real token to compare, must be finite."""
    ids, mask = awkward_batch()
    real = mask.bool()
    for impl in ("sdpa", "eager"):
        for extra in settings(kind):
            reference = model_for(sharing, kind, impl, **extra)
            expected = reference(ids, attention_mask=mask).last_hidden_state
            got = reference.to(torch.bfloat16)(ids, attention_mask=mask).last_hidden_state.float()
            assert torch.isfinite(got).all(), f"{impl} {extra}"
            error = (got - expected)[real].norm() / expected[real].norm()
            assert error <= 0.02, f"{impl} {extra}: relative error {error:.4f}"


@pytest.mark.parametrize("sharing", ["key_value", "layerwise"])
def test_a_shared_projection_is_applied_once_however_it_is_passed(sharing, monkeypatch):
    """E = F is projected once whether a layer receives the parameter itself or, as under FSDP2, a different
    view of it per access (and the parameter itself when a checkpointed layer recomputes): the work done
    must not depend on tensor identity, or activation checkpointing sees two different computations."""
    from linformer_hf import modeling_linformer

    model = model_for(sharing, "linear")
    ids = torch.randint(5, 300, (2, 20))
    calls = []
    original = modeling_linformer.LearnedProjection.project
    monkeypatch.setattr(modeling_linformer.LearnedProjection, "project",
                        lambda *a, **k: calls.append(1) or original(*a, **k))
    expected = model(ids).last_hidden_state
    same_object = len(calls)
    calls.clear()
    for_layer = model.encoder.projections.for_layer
    monkeypatch.setattr(model.encoder.projections, "for_layer", lambda idx: tuple(p.view_as(p) for p in for_layer(idx)))
    torch.testing.assert_close(model(ids).last_hidden_state, expected, rtol=0, atol=0)
    assert len(calls) == same_object


COMPILE_MODES = [("linear", False, "none"), ("linear", True, "none"), ("linear", True, "resample"),
                 ("mean_pool", False, "none"), ("max_pool", True, "none"), ("conv", True, "none")]


def compile_case(**overrides):
    """An SDPA model and a batch of 3 x 20 tokens: one row right-padded to 5 tokens (short), one full, one
    left-padded to 8 (short or projected, depending on k)."""
    torch.manual_seed(0)
    config = tiny_config(projection_sharing="layerwise", **overrides)
    model = LinformerModel._from_config(config, attn_implementation="sdpa").eval()
    ids = torch.randint(5, 300, (3, 20))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    mask[2, :12] = 0
    torch._dynamo.reset()
    return model, ids, mask


@pytest.mark.parametrize("kind, short, scaling", COMPILE_MODES)
def test_forward_with_a_mask_traces_as_one_graph(kind, short, scaling):
    """Dynamo traces LinformerModel's forward with a padding mask (SDPA) as one graph, no break: the input
    range checks and the short-input `.tolist()` sync are skipped under compilation, where short rows are
    chosen per sequence with `torch.where` instead."""
    model, ids, mask = compile_case(projection_type=kind, exact_attention_length=8 if short else None,
                                    projection_length_scaling=scaling)
    explained = torch._dynamo.explain(model)(ids, attention_mask=mask)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


@pytest.mark.slow
@torch.no_grad()
def test_compiled_model_matches_eager():
    """torch.compile(fullgraph=True) with the default backend (Inductor) gives eager's outputs within 1e-5
    in fp32, on a batch mixing short (<= k, exact attention) and projected rows, padded left and right;
    and again on a second mask of the same shape, without recompiling. Slow: Inductor builds C++ kernels
    (12-35 s on a busy 2-core machine, depending on its cache)."""
    model, ids, mask = compile_case(exact_attention_length=8, projection_length_scaling="resample",
                                    long_input_adapter_rank=4)
    with_random_adapters(model)
    compiled = torch.compile(model, fullgraph=True)
    for recompile, batch_mask in ((True, mask), (False, mask.flip(0))):
        expected = model(ids, attention_mask=batch_mask).last_hidden_state
        with torch._dynamo.config.patch(error_on_recompile=not recompile):
            got = compiled(ids, attention_mask=batch_mask).last_hidden_state
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


# ---- no host reads in the forward: on an accelerator a read stalls the device every step -------------------


@pytest.mark.parametrize("overrides", [{}, dict(exact_attention_length=16,
                                                long_input_adapter_rank=4, projection_length_scaling="resample"),
                                       dict(exact_attention_length=16, attention_type="windowed",
                                            long_input_adapter_rank=4)])
def test_forward_and_loss_read_nothing_back_from_the_device(overrides):
    """On the meta device every value read (`.item()`, `.tolist()`, `bool(tensor)`, `nonzero`) raises, so a full
    forward, loss and backward there prove the model reads nothing back when its inputs are not on the CPU."""
    config = tiny_config(max_seq_length=32, projected_dim=8, **overrides)
    with torch.device("meta"):
        model = LinformerForMaskedLM(config)
    ids = torch.randint(5, 300, (3, 24), device="meta")
    mask = torch.ones(3, 24, dtype=torch.long, device="meta")
    out = model(input_ids=ids, attention_mask=mask, labels=ids)
    out.loss.backward()
    assert out.logits.shape == (3, 24, 300) and out.loss.device.type == "meta"
    with pytest.raises(Exception, match="meta"):
        mask.sum().item()  # the premise: a read on meta fails


RELEASES = ["minilm-l6-linformer-n4096", "minilm-l6-linformer-mlm-n4096"]


def tiny_release(name):
    """A released configuration at a tiny size: its attention type, exact and windowed lengths and adapter as
    released, every length divided by 32 (n = 128), the width and depth shrunk."""
    import json
    from pathlib import Path

    from linformer_hf import LinformerConfig

    path = Path(__file__).resolve().parent.parent / "release" / name / "config.json"
    fields = {k: v for k, v in json.loads(path.read_text()).items()
              if k not in ("auto_map", "architectures", "transformers_version", "dtype")}
    for key in ("max_seq_length", "projected_dim", "exact_attention_length"):
        if fields.get(key):
            fields[key] //= 32
    fields.update(hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2, vocab_size=100,
                  max_position_embeddings=fields["max_seq_length"] + 1,
                  long_input_adapter_rank=min(fields.get("long_input_adapter_rank", 0), 4))
    config = LinformerConfig(**fields)
    return (LinformerForMaskedLM if "mlm" in name else LinformerModel)(config).eval()


def test_objects_built_in_forward_have_only_constant_defaults():
    """torch.compile in torch 2.11 (the GPU check's) breaks the graph where forward builds an object whose
    constructor has a default that is not a plain constant: the H200 run found one break per layer from
    `LinformerRoute`'s default `paths`, which torch 2.13 (this machine's, where the test above passes) traces. So
    every dataclass of the modeling file keeps None, numbers, strings and booleans as its only defaults."""
    import dataclasses
    import inspect

    from linformer_hf import modeling_linformer

    classes = [c for _, c in inspect.getmembers(modeling_linformer, inspect.isclass)
               if dataclasses.is_dataclass(c) and c.__module__ == modeling_linformer.__name__]
    assert {c.__name__ for c in classes} >= {"LinformerRoute", "BatchPaths"}
    for cls in classes:
        for default in cls.__init__.__defaults__ or ():
            assert default is None or isinstance(default, (bool, int, float, str)), (cls.__name__, default)


@pytest.mark.parametrize("name", RELEASES)
def test_released_configurations_compile_whole(name):
    """torch.compile(fullgraph=True) takes each released configuration whole (no graph break, no host read of a
    tensor) and compiles it once per shape: calls of one shape with other tokens and with padding reuse the graph
    (no recompile), and give the eager model's outputs exactly (dynamo alone, backend "eager": the graph, not
    inductor's kernels). Short inputs (the exact path) and inputs past the exact length both."""
    from torch._dynamo.utils import counters

    model = tiny_release(name)
    for n in (12, model.config.max_seq_length):
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(model, backend="eager", fullgraph=True, dynamic=False)
        for call in range(3):
            ids = torch.randint(3, 100, (2, n), generator=torch.Generator().manual_seed(call))
            mask = torch.ones_like(ids)
            if call == 2:  # the third call pads its second input
                mask[1, n // 2:] = 0
            with torch.no_grad():
                out = compiled(input_ids=ids, attention_mask=mask)[0]
                want = model(input_ids=ids, attention_mask=mask)[0]
            assert torch.equal(out, want), (name, n, call)
        assert counters["stats"]["unique_graphs"] == 1, (name, n, dict(counters["stats"]))
