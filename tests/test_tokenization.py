# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Tokenizers: trained on the corpus with RoBERTa's special tokens, loaded, and checked against the model."""

import pytest
from conftest import tiny_config

from linformer_training import tokenization
from linformer_training.arguments import UsageError

# --- tokenizer -------------------------------------------------------------------------------------


def test_trained_tokenizer_is_roberta_like(tok, tmp_path):
    from transformers import AutoTokenizer

    ids = [tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.mask_token_id]
    assert ids == [0, 1, 2, 3, 4]
    assert len(tok) <= 400
    ids = tok("the whale <mask> the ship")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2 and ids.count(4) == 1
    assert tok.convert_ids_to_tokens(ids[ids.index(4) + 1]).startswith("Ġ")  # <mask> took its space
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)("the whale <mask> the ship")["input_ids"] == ids


def test_tokenizer_must_fit_the_model(tok):
    tokenization.check_tokenizer(tok, tiny_config(vocab_size=len(tok)))
    with pytest.raises(UsageError, match=r"vocabulary has \d+ tokens but the model's vocab_size is 100"):
        tokenization.check_tokenizer(tok, tiny_config(vocab_size=100))
    with pytest.raises(UsageError, match="pad token id is 1 but the model's pad_token_id is 0"):
        tokenization.check_tokenizer(tok, tiny_config(vocab_size=len(tok), pad_token_id=0))
    with pytest.raises(UsageError, match="--tokenizer_name /no/such/tokenizer"):
        tokenization.load_tokenizer("/no/such/tokenizer")
