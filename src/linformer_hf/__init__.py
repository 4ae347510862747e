# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Linformer for Hugging Face Transformers.

Importing the package registers `LinformerConfig` and every head with the Auto classes, so
`AutoModelForMaskedLM.from_pretrained(folder)` works without `trust_remote_code` once it is
imported; saved folders also carry the modeling code for users who never installed it.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .configuration_linformer import LinformerConfig
from .modeling_linformer import (
    LinformerForMaskedLM,
    LinformerForMultipleChoice,
    LinformerForQuestionAnswering,
    LinformerForSequenceClassification,
    LinformerForTokenClassification,
    LinformerModel,
    LinformerPreTrainedModel,
)

__version__ = "0.1.0"

AUTO_CLASSES = {
    AutoModel: LinformerModel,
    AutoModelForMaskedLM: LinformerForMaskedLM,
    AutoModelForSequenceClassification: LinformerForSequenceClassification,
    AutoModelForTokenClassification: LinformerForTokenClassification,
    AutoModelForQuestionAnswering: LinformerForQuestionAnswering,
    AutoModelForMultipleChoice: LinformerForMultipleChoice,
}

AutoConfig.register(LinformerConfig.model_type, LinformerConfig, exist_ok=True)
LinformerConfig.register_for_auto_class("AutoConfig")
for auto_class, model_class in AUTO_CLASSES.items():
    auto_class.register(LinformerConfig, model_class, exist_ok=True)
    # Makes save_pretrained copy the modeling files next to the weights (remote code).
    model_class.register_for_auto_class(auto_class.__name__)

# The names the package itself holds, so `from linformer_hf import *` finds each (the attention classes and
# projections are in linformer_hf.modeling_linformer).
__all__ = [
    "LinformerConfig",
    "LinformerForMaskedLM",
    "LinformerForMultipleChoice",
    "LinformerForQuestionAnswering",
    "LinformerForSequenceClassification",
    "LinformerForTokenClassification",
    "LinformerModel",
    "LinformerPreTrainedModel",
]
