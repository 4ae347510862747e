# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""sentence-transformers' Transformer module as a Linformer release ships it (remote code, beside
modeling_linformer.py; modules.json names it): the same module, plus one warning per call when inputs are longer
than `max_seq_length`. sentence-transformers cuts such inputs to fit without a word, and a model that reads long
documents is exactly where a user expects the whole text to count."""

import logging

try:
    from sentence_transformers.sentence_transformer.modules import Transformer
except ImportError:  # sentence-transformers before 6 (which calls `tokenize`, not `preprocess`: no warning there)
    from sentence_transformers.models import Transformer

logger = logging.getLogger(__name__)


class LinformerTransformer(Transformer):
    def preprocess(self, inputs, prompt=None, **kwargs):
        self.warn_truncation(inputs, prompt)
        return super().preprocess(inputs, prompt=prompt, **kwargs)

    def warn_truncation(self, inputs, prompt=None):
        """Count the tokens the tokenizer's truncation to `max_seq_length` drops (text inputs; a prompt is read
        as part of each text) and say so once."""
        texts = [(prompt or "") + text for text in inputs if isinstance(text, str)]
        limit = self.max_seq_length
        if not texts or not limit or self.tokenizer is None:
            return
        lengths = [len(ids) for ids in self.tokenizer(texts, truncation=False, verbose=False)["input_ids"]]
        over = [length for length in lengths if length > limit]
        if over:
            logger.warning(
                f"{len(over)} of {len(texts)} input(s) are longer than max_seq_length={limit} tokens and were cut to "
                f"it: {sum(over) - limit * len(over):,} token(s) dropped (longest input {max(over):,} tokens). "
                f"Split longer documents, or embed them in parts.")
