# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""LinformerConfig: every invalid value, range or key is a one-line ValueError naming the field; round trips."""

import importlib

import pytest

from linformer_hf import LinformerConfig


def test_defaults_follow_roberta_position_numbering():
    config = LinformerConfig()
    assert (config.max_seq_length, config.projected_dim) == (512, 128)
    assert config.max_position_embeddings == 512 + config.pad_token_id + 1
    assert config.projected_dims == [128] * config.num_hidden_layers


def test_round_trip_through_dict_keeps_every_field():
    config = LinformerConfig(projected_dim=[64, 128], num_hidden_layers=2, projection_sharing="headwise",
                             projection_type="conv", max_seq_length=256, layer_norm_placement="pre",
                             embedding_layer_norm=False)
    again = LinformerConfig.from_dict(config.to_dict())
    for field in ("projected_dim", "projection_sharing", "projection_type", "max_seq_length", "auto_map",
                  "layer_norm_placement", "embedding_layer_norm"):
        assert getattr(again, field) == getattr(config, field)


def test_auto_map_names_every_head():
    heads = set(LinformerConfig().auto_map)
    assert {"AutoConfig", "AutoModel", "AutoModelForMaskedLM", "AutoModelForSequenceClassification",
            "AutoModelForTokenClassification", "AutoModelForQuestionAnswering",
            "AutoModelForMultipleChoice"} <= heads


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(projected_dim=513), "projected_dim"),
        (dict(projected_dim=0), "projected_dim"),
        (dict(projected_dim=[64, 64]), "projected_dim"),  # list length != num_hidden_layers
        (dict(num_hidden_layers=2, projected_dim=[64, 128]), "projected_dim"),  # layerwise needs one k
        (dict(projection_sharing="shared"), "projection_sharing"),
        (dict(projection_type="fft"), "projection_type"),
        (dict(hidden_size=100), "hidden_size"),
        (dict(projection_type="mean_pool", projected_dim=100), "projected_dim"),  # 512 % 100 != 0
        (dict(is_decoder=True), "is_decoder"),
        (dict(add_cross_attention=True), "add_cross_attention"),
        (dict(max_position_embeddings=512), "max_position_embeddings"),
        (dict(pad_token_id=None), "pad_token_id"),
        (dict(projection_init_std=-1.0), "projection_init_std"),
        (dict(projection_init="identity"), "projection_init"),
        (dict(projection_type="conv", projected_dim=128, projection_init="window_mean"), "projection_init"),
        (dict(max_seq_length=0), "max_seq_length"),
        (dict(projection_length_scaling="log"), "projection_length_scaling"),
        (dict(classifier_pooling="max"), "classifier_pooling"),
        (dict(projection_type="mean_pool", projection_length_scaling="sqrt"), "projection_length_scaling"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(hidden_dropout_prob=-0.1), "hidden_dropout_prob"),
        (dict(attention_probs_dropout_prob=1.0), "attention_probs_dropout_prob"),
        (dict(classifier_dropout=-0.5), "classifier_dropout"),
        (dict(intermediate_size=0), "intermediate_size"),
        (dict(num_hidden_layers=0), "num_hidden_layers"),
        (dict(num_attention_heads=0), "num_attention_heads"),
        (dict(type_vocab_size=0), "type_vocab_size"),
        (dict(initializer_range=0.0), "initializer_range"),
        (dict(layer_norm_eps=-1e-5), "layer_norm_eps"),
        (dict(chunk_size_feed_forward=-1), "chunk_size_feed_forward"),
        (dict(pad_token_id=-1), "pad_token_id"),
        (dict(vocab_size=100, eos_token_id=100), "eos_token_id"),
        (dict(hidden_act="gleu"), "hidden_act"),
        (dict(vocab_size="big"), "vocab_size"),  # wrong types are reworded from @strict's error
        (dict(exact_attention_length="all"), "exact_attention_length"),
        (dict(full_attention_short_inputs="yes"), "full_attention_short_inputs"),  # a field of older configs
        (dict(projected_dims=64), "projected_dims"),  # not a field: unknown keys are rejected
        (dict(position_embedding_type="relative_key"), "position_embedding_type"),  # a legacy BERT key
        (dict(layer_norm_placement="sandwich"), "layer_norm_placement"),
        (dict(embedding_layer_norm="no"), "embedding_layer_norm"),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"`{field}`") as error:
        LinformerConfig(**kwargs)
    assert "\n" not in str(error.value)  # one line


@pytest.mark.parametrize("kwargs, message", [
    (dict(vocab_size=0), r"`vocab_size`=0 is invalid; it must be an integer >= 1\.$"),
    (dict(hidden_dropout_prob=-0.1), r"`hidden_dropout_prob`=-0.1 is invalid; .*0 <= p < 1"),
    (dict(projection_sharing="shared"), r"allowed: one of 'none', 'headwise', 'key_value', 'layerwise'"),
    (dict(layer_norm_placement="sandwich"),
     r"`layer_norm_placement`='sandwich' is invalid; allowed: one of 'post', 'pre'"),
    (dict(embedding_layer_norm="no"), r"`embedding_layer_norm`='no' is invalid; allowed: bool"),
    (dict(projected_dims=64), r"unknown argument `projected_dims` \(did you mean `projected_dim`\?\)"),
    (dict(hiden_size=64, foo=1), r"unknown arguments `foo`, `hiden_size` \(did you mean `hidden_size`\?\)"),
])
def test_errors_state_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LinformerConfig(**kwargs)


def test_assigning_a_value_outside_a_literal_is_a_value_error():
    config = LinformerConfig()
    with pytest.raises(ValueError, match=r"`projection_type`='fft' is invalid; allowed: one of 'linear'"):
        config.projection_type = "fft"


def test_standard_pretrained_config_keys_are_accepted():
    """What to_dict writes, what from_pretrained passes and what transformers 4.x / BERT config.json files carry."""
    config = LinformerConfig(
        architectures=["LinformerForMaskedLM"], torch_dtype="float16", transformers_version="4.40.0",
        id2label={0: "no", 1: "yes"}, label2id={"no": 0, "yes": 1}, problem_type="single_label_classification",
        finetuning_task="sst2", tokenizer_class="RobertaTokenizer", _name_or_path="somewhere", output_attentions=False,
        name_or_path="somewhere", num_labels=2, position_embedding_type="absolute", gradient_checkpointing=False,
        max_length=20, num_beams=1, torchscript=False, _commit_hash="abc", model_type="linformer",
    )
    assert config.finetuning_task == "sst2" and config.num_labels == 2
    assert str(config.dtype) == "torch.float16"
    again = LinformerConfig(**config.to_dict())
    assert again.to_dict() == config.to_dict()


def test_a_checkpoint_of_another_model_type_points_to_conversion():
    with pytest.raises(ValueError, match=r"is a `bert` model .*convert_to_linformer\.py --model_name_or_path"):
        LinformerConfig(model_type="bert", vocab_size=30522, max_position_embeddings=512, pad_token_id=0)


def test_long_input_fields_default_to_the_paper_and_round_trip():
    config = LinformerConfig()
    assert (config.attention_type, config.exact_attention_length) == ("projected", None)
    config = LinformerConfig(attention_type="windowed", exact_attention_length=512, max_seq_length=4096)
    again = LinformerConfig.from_dict(config.to_dict())
    assert (again.attention_type, again.exact_attention_length) == ("windowed", 512)


@pytest.mark.parametrize("field", ["full_attention_short_inputs", "short_input_max_length", "local_attention_window"])
def test_fields_of_the_first_releases_name_the_upgrade_command(field):
    """The three fields attention_type and exact_attention_length replaced are refused in one line naming the
    command that rewrites a folder (tests/test_upgrade.py: what it writes)."""
    with pytest.raises(ValueError, match=rf"`{field}` belongs to the format of linformer-hf's first releases .*"
                                         r"python -m linformer_training\.upgrade <folder>$") as error:
        LinformerConfig(**{field: True})
    assert "\n" not in str(error.value)


def test_save_and_load_round_trip(tmp_path):
    from transformers import AutoConfig

    importlib.import_module("linformer_hf")  # registers the model type with the Auto classes

    config = LinformerConfig(num_hidden_layers=2, projected_dim=[32, 64], projection_sharing="none",
                             exact_attention_length=[32, 64], finetuning_task="qnli", num_labels=3)
    config.save_pretrained(tmp_path)
    def fields(c):
        return {key: value for key, value in c.to_dict().items() if key != "_name_or_path"}

    for loaded in (LinformerConfig.from_pretrained(tmp_path), AutoConfig.from_pretrained(tmp_path)):
        assert fields(loaded) == fields(config)
    assert LinformerConfig.from_pretrained(tmp_path, num_labels=5).num_labels == 5


def test_per_layer_k_is_allowed_without_layerwise_sharing():
    config = LinformerConfig(num_hidden_layers=3, projected_dim=[32, 64, 128], projection_sharing="key_value")
    assert config.projected_dims == [32, 64, 128]
