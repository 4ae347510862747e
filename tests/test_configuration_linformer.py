import pytest

from linformer_hf import LinformerConfig


def test_defaults_follow_roberta_position_numbering():
    config = LinformerConfig()
    assert (config.max_seq_length, config.projected_dim) == (512, 128)
    assert config.max_position_embeddings == 512 + config.pad_token_id + 1
    assert config.projected_dims == [128] * config.num_hidden_layers


def test_round_trip_through_dict_keeps_every_field():
    config = LinformerConfig(projected_dim=[64, 128], num_hidden_layers=2, projection_sharing="headwise",
                             projection_type="conv", max_seq_length=256)
    again = LinformerConfig.from_dict(config.to_dict())
    for field in ("projected_dim", "projection_sharing", "projection_type", "max_seq_length", "auto_map"):
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
        (dict(max_seq_length=0), "max_seq_length"),
        (dict(projection_length_scaling="log"), "projection_length_scaling"),
        (dict(classifier_pooling="max"), "classifier_pooling"),
        (dict(projection_type="mean_pool", projection_length_scaling="sqrt"), "projection_length_scaling"),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        LinformerConfig(**kwargs)


def test_per_layer_k_is_allowed_without_layerwise_sharing():
    config = LinformerConfig(num_hidden_layers=3, projected_dim=[32, 64, 128], projection_sharing="key_value")
    assert config.projected_dims == [32, 64, 128]
