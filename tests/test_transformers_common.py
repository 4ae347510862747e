# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""transformers' own common model and config tests (ModelTesterMixin, ConfigTester), run on Linformer.

They ship only in transformers' source distribution; `bash scripts/setup.sh dev` unpacks the two files
of the installed version into `.venv/transformers-tests/<version>/` (or set TRANSFORMERS_COMMON_TESTS
to a folder holding them). Without them this module is skipped, saying so.

Every test of the mixin runs; none is skipped for Linformer's sake. Where Linformer differs by design,
the tester says so instead, as transformers' own testers do for their models:

* Attention maps are n x k, not n x n: the tester's `key_length` is k, which `test_attention_outputs`
  and the eager/SDPA comparisons read.
* The config rejects keys that are none of its fields: the suite's `set_config_for_less_flaky_test` sets
  seven differently named epsilons on every config before saving and reloading it; here it sets the one
  LinformerConfig has (`layer_norm_eps`).
* Positions follow RoBERTa, numbered by skipping pad ids, which `inputs_embeds` cannot see: real tokens
  never carry the pad id (as from a tokenizer), or ids and embeddings would legitimately disagree.
* A registered model is absent from transformers' Auto*_MAPPING_NAMES tables, from which the mixin reads
  each head's task (labels, multiple-choice inputs): the test lists Linformer there while it runs.

Not run because they do not apply, and skipped by the suite itself: generation and causal/seq2seq loss
tests (encoder only: no decoder, cache or cross-attention; GenerationTesterMixin is not in the sdist),
`test_reverse_loading_mapping` (weights are saved under the modules' own names: no conversion to test),
`test_resize_position_vector_embeddings` (n is fixed: E has n columns; RoBERTa's tester leaves it off
too), RoPE, MoE, composite-model and tensor-parallel tests, and those needing a GPU,
flash attention, kernels or DeepSpeed. NOT_RUN lists the few left out only to keep the runtime short.
`LinformerShortInputsModelTest` repeats the numerics tests with per-head projections and
`exact_attention_length=projected_dim`, where random masks make batches that mix exact and projected rows;
`LinformerPreNormModelTest` repeats the whole mixin on pre-LN layers and embeddings without LayerNorm.
"""

import importlib
import importlib.util
import os
import sys
import types
import unittest
from pathlib import Path
from unittest import mock

import pytest
import transformers

from linformer_hf import (
    LinformerConfig,
    LinformerForMaskedLM,
    LinformerForMultipleChoice,
    LinformerForQuestionAnswering,
    LinformerForSequenceClassification,
    LinformerForTokenClassification,
    LinformerModel,
)

COMMON_TESTS = Path(os.environ.get("TRANSFORMERS_COMMON_TESTS",
                                   Path(sys.prefix) / "transformers-tests" / transformers.__version__))

# Not run, to keep this file near a minute of CPU: each is transformers' own machinery or repeats a
# code path another case covers. Test name (or prefix of a parameterized family) -> why.
NOT_RUN = {
    "test_bc_torch_dtype": "loading in each dtype is transformers' machinery (bf16/fp16 are run in "
                           "test_hf_integration)",
    **{f"test_eager_matches_sdpa_inference_{case}": "same path as the fp32 cases; one left-padded masked case per "
       "half-precision dtype is kept (01, 17)"
       for case in ("00", "02", "03", "04", "05", "06", "07", "16", "18", "19", "20", "21", "22", "23")},
}


def load_common_tests():
    """Import test_modeling_common / test_configuration_common from the unpacked sdist, or say why not."""
    if not (COMMON_TESTS / "test_modeling_common.py").is_file():
        return None, (f"transformers' common tests are not at {COMMON_TESTS}; `bash scripts/setup.sh dev` "
                      "fetches them from the transformers source distribution on PyPI")
    if importlib.util.find_spec("parameterized") is None:
        return None, "transformers' common tests need `parameterized` (installed by `bash scripts/setup.sh dev`)"

    package = "transformers_common_tests"
    if package not in sys.modules:
        root = types.ModuleType(package)
        root.__path__ = [str(COMMON_TESTS)]
        sys.modules[package] = root
        # The sdist carries these two files but not the helper packages they import for mixins that do
        # not apply here (generation, export) or for one constant: stand-ins keep the import working.
        stubs = {
            "exporters": {}, "exporters.test_export": {"ExportTesterMixin": type("ExportTesterMixin", (), {})},
            "generation": {}, "generation.test_utils": {"GenerationTesterMixin": type("GenerationTesterMixin", (), {})},
            "utils": {}, "utils.test_configuration_utils": {"config_common_kwargs": {
                "return_dict": False, "output_hidden_states": True, "output_attentions": True, "dtype": "float16",
                "chunk_size_feed_forward": 5, "architectures": ["BertModel"], "id2label": {0: "label"},
                "label2id": {"label": "0"}, "problem_type": "regression",
            }},
        }
        for name, attributes in stubs.items():
            module = types.ModuleType(f"{package}.{name}")
            module.__path__ = []
            module.__dict__.update(attributes)
            sys.modules[module.__name__] = module
    # test_configuration_common re-imports transformers from the tests folder (an in-repo habit); here
    # the installed transformers is the one meant.
    with mock.patch("transformers.utils.direct_transformers_import", lambda *args, **kwargs: transformers):
        modeling = importlib.import_module(f"{package}.test_modeling_common")
        configuration = importlib.import_module(f"{package}.test_configuration_common")
    return (modeling, configuration), None


common, why_not = load_common_tests()
if common is None and os.environ.get("LINFORMER_REQUIRE_COMMON_TESTS") == "1":  # CI: a skip here would hide them
    pytest.fail(f"LINFORMER_REQUIRE_COMMON_TESTS=1: {why_not}", pytrace=False)
if common is None:
    pytest.skip(why_not, allow_module_level=True)
modeling_common, configuration_common = common
ids_tensor, random_attention_mask = modeling_common.ids_tensor, modeling_common.random_attention_mask


class LinformerModelTester:
    """RobertaModelTester's sizes, with n = 16 > seq_length = 7 > k = 4, so the projection is exercised.

    Attention maps are (seq_length x k): `key_length` tells the mixin. Real tokens never carry the pad
    id, as from a tokenizer: RoBERTa numbers positions by skipping pad ids, which `inputs_embeds` cannot
    see, so a pad id inside the text would make ids and embeddings disagree (RoBERTa's behaviour, not ours).
    """

    def __init__(self, parent, batch_size=13, seq_length=7, vocab_size=99, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=37, type_vocab_size=16, num_labels=3, num_choices=4,
                 max_seq_length=16, projected_dim=4, **config_overrides):
        self.parent = parent
        self.batch_size, self.seq_length = batch_size, seq_length
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.intermediate_size, self.type_vocab_size = intermediate_size, type_vocab_size
        self.num_labels, self.num_choices = num_labels, num_choices
        self.max_seq_length, self.projected_dim = max_seq_length, projected_dim
        self.key_length = projected_dim
        self.is_training = True
        self.config_overrides = config_overrides

    def get_config(self):
        return LinformerConfig(
            vocab_size=self.vocab_size, hidden_size=self.hidden_size, num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads, intermediate_size=self.intermediate_size,
            hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, type_vocab_size=self.type_vocab_size,
            max_seq_length=self.max_seq_length, projected_dim=self.projected_dim, **self.config_overrides,
        )

    def prepare_config_and_inputs_for_common(self):
        config = self.get_config()
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        input_ids[input_ids == config.pad_token_id] = config.pad_token_id + 1
        inputs = {
            "input_ids": input_ids,
            "token_type_ids": ids_tensor([self.batch_size, self.seq_length], self.type_vocab_size),
            "attention_mask": random_attention_mask([self.batch_size, self.seq_length]),
        }
        return config, inputs


# The Auto*_MAPPING_NAMES tables are how the mixin tells a head's task (labels, multiple-choice
# inputs); a model inside transformers is listed there, a registered one is not, so the test lists it.
MAPPING_NAMES = {
    "MODEL_MAPPING_NAMES": "LinformerModel",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES": "LinformerForMaskedLM",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "LinformerForSequenceClassification",
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES": "LinformerForTokenClassification",
    "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES": "LinformerForQuestionAnswering",
    "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES": "LinformerForMultipleChoice",
}


class LinformerModelTest(modeling_common.ModelTesterMixin, unittest.TestCase):
    all_model_classes = (
        LinformerModel,
        LinformerForMaskedLM,
        LinformerForSequenceClassification,
        LinformerForTokenClassification,
        LinformerForQuestionAnswering,
        LinformerForMultipleChoice,
    )
    test_resize_embeddings = True

    @classmethod
    def setUpClass(cls):
        cls._patches = [mock.patch.dict(getattr(modeling_common, table), {"linformer": name})
                        for table, name in MAPPING_NAMES.items()]
        # The suite sets seven differently named epsilons on every config it tests, then saves and reloads
        # it; LinformerConfig rejects keys that are not its fields, so only the one it has is set.
        cls._patches.append(mock.patch.object(modeling_common, "set_config_for_less_flaky_test",
                                              lambda config: setattr(config, "layer_norm_eps", 1.0)))
        for patch in cls._patches:
            patch.start()

    @classmethod
    def tearDownClass(cls):
        for patch in cls._patches:
            patch.stop()

    def setUp(self):
        for name, reason in NOT_RUN.items():
            if self._testMethodName == name or self._testMethodName.startswith(name + "_"):
                self.skipTest(f"not run: {reason}")
        self.model_tester = LinformerModelTester(self)
        self.config_tester = configuration_common.ConfigTester(
            self, config_class=LinformerConfig, hidden_size=36, num_attention_heads=6, max_seq_length=64,
            projected_dim=16,
        )

    def test_config(self):
        self.config_tester.run_common_tests()


class LinformerShortInputsModelTest(LinformerModelTest):
    """The numerics tests again, with per-head projections and `exact_attention_length`: random masks
    leave some of the 7-token rows with at most k = 4 real tokens, so batches mix exact and projected rows."""

    RUN = ("test_eager_matches_sdpa_inference_08_fp32", "test_eager_matches_sdpa_inference_09_fp32",
           "test_eager_matches_sdpa_inference_12_fp32", "test_eager_matches_sdpa_inference_13_fp32",
           "test_eager_matches_sdpa_inference_24_fp32", "test_batching_equivalence", "test_attention_outputs",
           "test_hidden_states_output", "test_training", "test_inputs_embeds_matches_input_ids")

    def setUp(self):
        if not self._testMethodName.startswith(self.RUN) or self._testMethodName.startswith("test_training_"):
            self.skipTest("configuration-independent: run once, by LinformerModelTest")
        super().setUp()
        self.model_tester = LinformerModelTester(self, projection_sharing="none", exact_attention_length=4)


class LinformerPreNormModelTest(LinformerModelTest):
    """The whole mixin again on the arrangement of the Jargon checkpoints: pre-LN layers with a final LayerNorm
    (`layer_norm_placement="pre"`) and embeddings without LayerNorm (`embedding_layer_norm=False`). Only the config
    tests, which do not build a model, are left to LinformerModelTest."""

    def setUp(self):
        if self._testMethodName == "test_config":
            self.skipTest("configuration-independent: run once, by LinformerModelTest")
        super().setUp()
        self.model_tester = LinformerModelTester(self, layer_norm_placement="pre", embedding_layer_norm=False)
