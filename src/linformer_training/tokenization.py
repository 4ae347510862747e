# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Tokenizers: for pretraining an existing one, or a byte-level BPE trained on the corpus (RoBERTa's ids); for a
conversion the source's, with its vocabulary files."""

import json
import logging
import shutil
from pathlib import Path

from transformers import AutoTokenizer

from .arguments import UsageError
from .models import check_local_path, model_file

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's ids 0..4
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)  # a byte-level BPE starts from every byte
# A source's own vocabulary files, which some tools read rather than tokenizer.json.
VOCABULARY_FILES = ("vocab.txt", "vocab.json", "merges.txt", "sentencepiece.bpe.model", "spiece.model",
                    "special_tokens_map.json", "added_tokens.json")
# A folder holds a tokenizer when it has one of these (from_pretrained builds an empty one from a folder without).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model",
                   "spiece.model", "tokenizer.model")


def train_tokenizer(train_split, vocab_size, max_docs=None, min_frequency=2):
    """A byte-level BPE tokenizer trained on the corpus, wrapped as RoBERTa's tokenizer (same special
    tokens and ids, `<s> ... </s>` template, `<mask>` absorbing the space before it)."""
    from tokenizers import AddedToken, ByteLevelBPETokenizer
    from transformers import RobertaTokenizer

    docs = train_split.take(max_docs) if max_docs else train_split

    def texts():
        for batch in docs.iter(batch_size=1000):
            yield batch["text"]

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts(), vocab_size=vocab_size, min_frequency=min_frequency,
                            special_tokens=SPECIAL_TOKENS, show_progress=False)
    model = json.loads(bpe._tokenizer.to_str())["model"]
    if len(model["vocab"]) < vocab_size:
        logger.warning("the trained tokenizer has %d tokens, fewer than the %d asked for: the corpus holds no more "
                       "pairs seen at least %d times", len(model["vocab"]), vocab_size, min_frequency)
    return RobertaTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]],
                            mask_token=AddedToken("<mask>", lstrip=True, special=True))


def load_tokenizer(source, flag="--tokenizer_name", **kwargs):
    """A tokenizer from a folder or Hub id; refused in one line naming `flag` when it cannot load, or when a
    folder has no tokenizer files (from_pretrained would build an empty one, special tokens only, from it)."""
    check_local_path(source, flag)
    if Path(source).is_dir() and not any((Path(source) / name).is_file() for name in TOKENIZER_FILES):
        raise UsageError(f"{flag} {source}: has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...)" + (
            "" if flag == "--tokenizer_name" else "; save the tokenizer it was trained with beside it, or pass "
                                                  "--tokenizer_name"))
    try:
        return AutoTokenizer.from_pretrained(source, **kwargs)
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise UsageError(f"{flag} {source}: cannot load a tokenizer ({str(e).splitlines()[0] if str(e) else e})"
                         ) from None


def check_tokenizer(tokenizer, config):
    """The tokenizer must fit the model: every id inside the embedding, the same special-token ids."""
    problems = []
    if tokenizer.mask_token_id is None:
        problems.append("it has no mask token (masked-LM training needs one)")
    if tokenizer.pad_token_id is None:
        problems.append("it has no pad token")
    if len(tokenizer) > config.vocab_size:
        problems.append(f"its vocabulary has {len(tokenizer)} tokens but the model's vocab_size is "
                        f"{config.vocab_size} (set --config_overrides vocab_size={len(tokenizer)} or more)")
    for name in ("pad", "bos", "eos"):
        tok_id, cfg_id = getattr(tokenizer, f"{name}_token_id"), getattr(config, f"{name}_token_id", None)
        if tok_id is not None and cfg_id is not None and tok_id != cfg_id:
            problems.append(f"its {name} token id is {tok_id} but the model's {name}_token_id is {cfg_id}")
    if problems:
        raise UsageError(f"tokenizer {tokenizer.name_or_path or '(trained)'} does not fit the model config: "
                         + "; ".join(problems))


def load_source_tokenizer(source_config, source, flag, **kwargs):
    """A conversion source's tokenizer, refused unless it fits the source's embedding table."""
    tokenizer = load_tokenizer(source, flag, **kwargs)
    vocab_size, pad = source_config.vocab_size, source_config.pad_token_id
    # Checkpoints may pad their table to a round number of rows, never by a tenth.
    if not 0.9 * vocab_size <= len(tokenizer) <= vocab_size or tokenizer.pad_token_id != pad:
        raise UsageError(f"{flag} {source}: the tokenizer does not match the model's embedding table "
                         f"({len(tokenizer)} tokens, pad id {tokenizer.pad_token_id}; the model has "
                         f"{vocab_size} rows, pad id {pad})")
    return tokenizer


def copy_vocabulary_files(source, folder):
    """The source's own vocabulary files (VOCABULARY_FILES) into `folder`, where save_pretrained wrote none."""
    for name in VOCABULARY_FILES:
        if not (folder / name).exists():
            path = model_file(source, name)
            if path:
                shutil.copy(path, folder / name)
