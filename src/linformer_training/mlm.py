# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Masked-LM data and objective: packing documents into blocks, seeded masking, the loss and its evaluation.

The recipe is RoBERTa's "full sentences": every document ends with </s>, documents are concatenated,
and the stream is cut into blocks of `block_size` tokens that each start with <s>. Masks are drawn
per block from a generator seeded by (seed, epoch, block content), the way fairseq seeds per example:
a block gets the same mask whether it is trained on one process or eight, in an uninterrupted run or
in a resumed one, and a new mask every epoch (RoBERTa's dynamic masking).
"""

import contextlib
import hashlib
import math

import datasets
import torch
import torch.nn.functional as F
from transformers import DataCollatorForLanguageModeling

from .arguments import UsageError
from .loop import data_loader


def pack(split, tokenizer, block_size, num_proc=None, desc="Tokenizing and packing", documents=False):
    """Tokenize documents, end each with </s>, and cut the stream into blocks of `block_size` that each
    start with <s>. Nothing is dropped: the tail of every 1000-document batch is a shorter block.
    Map-style datasets cache the result (keyed by tokenizer and block size) and use `num_proc` workers.

    `documents=True` packs nothing: each document is its own block, `<s>` and its tokens, and one longer than
    `block_size - 2` tokens is cut into consecutive blocks of that many (room for the `</s>` a span adds), so
    nothing is dropped and no block mixes two documents: what a model must learn to read whole."""
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    if bos is None or eos is None:
        raise UsageError(f"tokenizer {tokenizer.name_or_path}: needs bos/eos (or cls/sep) tokens to pack documents")
    if block_size < (3 if documents else 2):
        raise UsageError(f"--block_size {block_size}: must be at least {3 if documents else 2}")
    body = block_size - 1

    def pack_batch(batch):
        texts = [t for t in batch["text"] if t and not t.isspace()]
        if documents:
            size = block_size - 2
            return {"input_ids": [[bos] + ids[i:i + size]
                                  for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
                                  for i in range(0, len(ids), size)]}
        stream = []
        for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]:
            stream.extend(ids)
            stream.append(eos)
        return {"input_ids": [[bos] + stream[i:i + body] for i in range(0, len(stream), body)]}

    if isinstance(split, datasets.Dataset):  # map-style: cached, parallel, with a progress bar
        kwargs = {"num_proc": num_proc if num_proc and num_proc > 1 else None, "desc": desc}
    else:  # streaming: packed lazily, batch by batch, as training reads it
        kwargs = {}
    return split.map(pack_batch, batched=True, batch_size=1000, remove_columns=["text"], **kwargs)


def pack_corpus(corpus, tokenizer, block_size, args, keep=None, documents=False):
    """Both splits of `corpus` packed into blocks (`pack`), only those `keep` (a batched filter) accepts; the
    training blocks shuffled in a buffer when streaming, at most --max_eval_samples validation blocks. A split
    left without a block is refused; a corpus without a validation split (None) has no validation blocks."""
    blocks = {split: pack(docs, tokenizer, block_size, args.preprocessing_num_workers, documents=documents)
              for split, docs in corpus.items() if docs is not None}
    if keep is not None:
        blocks = {split: split_blocks.filter(keep, batched=True) for split, split_blocks in blocks.items()}
    train, validation = blocks["train"], blocks.get("validation")
    if args.streaming:
        train = train.shuffle(seed=args.seed, buffer_size=args.streaming_shuffle_buffer)
    elif len(train) == 0 or (validation is not None and len(validation) == 0):
        raise UsageError("the corpus has no usable text: no training or validation block holds a token after "
                         "tokenization")
    if validation is None:
        return {"train": train, "validation": None}
    if args.max_eval_samples:
        validation = (validation.take(args.max_eval_samples) if args.streaming
                      else validation.select(range(min(args.max_eval_samples, len(validation)))))
    return {"train": train, "validation": validation}


def block_loaders(args, blocks, train_collate, eval_collate):
    """DataLoaders over packed blocks (training shuffled unless streamed, validation in order), each with its own
    generator (`loop.data_loader`), which keeps dropout's RNG out of the order."""
    train = data_loader(blocks["train"], args.seed, batch_size=args.per_device_train_batch_size,
                        shuffle=not args.streaming, collate_fn=train_collate, num_workers=args.dataloader_num_workers)
    validation = None if blocks["validation"] is None else data_loader(
        blocks["validation"], args.seed, batch_size=args.per_device_eval_batch_size, collate_fn=eval_collate,
        num_workers=args.dataloader_num_workers)
    return train, validation


def content_generator(ids, *key):
    """A torch generator seeded from a block's token ids and `key` (seed, epoch, ...): the same draws for the
    same block whichever process, batch or resumed run meets it. Masks and distillation spans use it."""
    digest = hashlib.blake2b(torch.as_tensor(ids).numpy().tobytes(), digest_size=8,
                             key="/".join(map(str, key)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))


class BlockSeededMLMCollator(DataCollatorForLanguageModeling):
    """transformers' MLM collator (15% of tokens; 80% <mask>, 10% random, 10% kept) with masks drawn
    per block from a generator seeded by (seed, epoch, block content); set `epoch` before each epoch."""

    def __init__(self, tokenizer, mlm_probability=0.15, seed=0, epoch=0, **kwargs):
        super().__init__(tokenizer=tokenizer, mlm=True, mlm_probability=mlm_probability, **kwargs)
        self.mask_seed, self.epoch = seed, epoch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        if special_tokens_mask is None:
            rows = inputs.tolist()
            special_tokens_mask = torch.tensor(
                [self.tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True) for row in rows],
                dtype=torch.bool)
        masked, labels = [], []
        for row, special in zip(inputs, special_tokens_mask, strict=True):
            self.generator = content_generator(row, self.mask_seed, self.epoch)
            row_inputs, row_labels = super().torch_mask_tokens(row[None].clone(), special[None])
            masked.append(row_inputs)
            labels.append(row_labels)
        self.generator = None
        return torch.cat(masked), torch.cat(labels)


def mlm_head(model):
    """The masked-LM head of a bare *ForMaskedLM model: its one child beside the encoder (RoBERTa's and
    Linformer's `lm_head`, BERT's `cls`)."""
    heads = [module for name, module in model.named_children() if name != model.base_model_prefix]
    if len(heads) != 1:
        raise TypeError(f"{type(model).__name__}: expected one head module beside {model.base_model_prefix}")
    return heads[0]


class MaskedLMObjective:
    """The loop's objective for masked-LM training: cross-entropy summed over masked tokens.

    With `sparse_head` the vocabulary logits are computed at the masked positions only (fairseq RoBERTa's
    `masked_tokens`, ModernBERT's sparse prediction): the same loss without the n x vocabulary logits of the
    other positions, which cost more than a small encoder (a 2-layer, 128-wide model trains 1.8x faster).
    It calls the encoder and the head directly, so it needs the bare model: a model wrapped for several
    processes (DDP, FSDP, DeepSpeed) must be called whole, and gets every position's logits. `autocast` is the
    mixed-precision context (Accelerate applies it to the model's own forward, which this path bypasses)."""

    def __init__(self, sparse_head=False, autocast=contextlib.nullcontext):
        self.sparse_head, self.autocast = sparse_head, autocast

    def count(self, batch):
        return (batch["labels"] != -100).sum()

    def masked_logits(self, model, batch):
        """The vocabulary logits at the masked positions, and their labels."""
        masked = batch["labels"] != -100
        if not self.sparse_head:
            return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[masked], masked
        with self.autocast():
            hidden = model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            return mlm_head(model)(hidden.last_hidden_state[masked]), masked

    def loss_sum(self, model, batch):
        logits, masked = self.masked_logits(model, batch)
        return F.cross_entropy(logits.float(), batch["labels"][masked], reduction="sum")

    @torch.no_grad()
    def evaluate(self, model, loader, accelerator):
        """Validation loss per masked token and perplexity, over every process's share (gathered per
        block, so the padding repeats of an uneven last batch are dropped)."""
        model.eval()
        total, count = 0.0, 0
        for batch in loader:
            logits, masked = self.masked_logits(model, batch)
            per_token = F.cross_entropy(logits.float(), batch["labels"][masked], reduction="none")
            per_block = torch.zeros(len(masked), device=per_token.device)
            per_block = per_block.index_add_(0, masked.nonzero()[:, 0], per_token)
            sums, counts = accelerator.gather_for_metrics((per_block, masked.sum(1)))
            total, count = total + sums.sum().item(), count + counts.sum().item()
        if count == 0:
            rate = getattr(getattr(loader, "collate_fn", None), "mlm_probability", "?")
            raise UsageError(f"validation: no token was masked at the rate {rate} (--eval_mlm_probability, else "
                             f"--mlm_probability), so its loss would read 0 and its perplexity 1; raise the rate")
        loss = total / count
        return {"eval_loss": loss, "eval_perplexity": math.exp(min(loss, 50))}
