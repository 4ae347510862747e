"""Masked-LM data: corpora through `datasets`, a tokenizer (loaded or trained), packing, masking.

The recipe is RoBERTa's "full sentences": every document ends with </s>, documents are concatenated,
and the stream is cut into blocks of `max_seq_length` tokens that each start with <s>. Masks are drawn
per block from a generator seeded by (seed, epoch, block content), the way fairseq seeds per example:
a block gets the same mask whether it is trained on one process or eight, in an uninterrupted run or
in a resumed one, and a new mask every epoch (RoBERTa's dynamic masking).
"""

import glob
import hashlib
import json
import os

import datasets
import torch
from transformers import AutoTokenizer, DataCollatorForLanguageModeling

from .script_utils import UsageError

FORMATS = {".txt": "text", ".text": "text", ".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")
SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's ids 0..4


# ---------------------------------------------------------------------------------------------------
# Corpora
# ---------------------------------------------------------------------------------------------------


def file_format(path):
    """The `datasets` builder for a data file, looking through a compression suffix."""
    name = path.lower()
    for suffix in COMPRESSIONS:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    fmt = FORMATS.get(os.path.splitext(name)[1])
    if fmt is None:
        raise UsageError(f"{path}: unknown data file type; allowed: {', '.join(FORMATS)} "
                         f"(optionally compressed: {', '.join(COMPRESSIONS)})")
    return fmt


def resolve_files(patterns, flag):
    """Expand globs and check every local file exists and is not empty, before anything is loaded."""
    files = []
    for pattern in patterns:
        if "://" in pattern:  # remote (hf://, s3://, https://): `datasets` checks these itself
            files.append(pattern)
            continue
        matches = sorted(glob.glob(os.path.expanduser(pattern), recursive=True))
        if not matches:
            raise UsageError(f"{flag} {pattern}: no such file (or no file matches the pattern)")
        for path in matches:
            if not os.path.isfile(path):
                raise UsageError(f"{flag} {path}: not a file")
            if os.path.getsize(path) == 0:
                raise UsageError(f"{flag} {path}: file is empty")
        files.extend(matches)
    formats = {file_format(f) for f in files}
    if len(formats) > 1:
        raise UsageError(f"{flag}: files of different types ({', '.join(sorted(formats))}); use one type")
    return formats.pop(), files


def _text_only(ds, text_column, source):
    """Keep one column, renamed `text`, so that corpora of different schemas can be mixed."""
    columns = ds.column_names or list(next(iter(ds)).keys())  # streaming may not know its columns yet
    if text_column is None:
        strings = [c for c in columns if ds.features is not None and getattr(ds.features[c], "dtype", None) == "string"]
        text_column = "text" if "text" in columns else (strings[0] if len(strings) == 1 else None)
        if text_column is None:
            raise UsageError(f"{source}: no `text` column among {columns}; pass --text_column_name")
    elif text_column not in columns:
        raise UsageError(f"--text_column_name {text_column}: {source} has no such column; it has {columns}")
    ds = ds.select_columns([text_column])
    return ds.rename_column(text_column, "text") if text_column != "text" else ds


def load_corpus(dataset_name=None, dataset_config_name=None, train_file=None, validation_file=None,
                text_column_name=None, validation_split_percentage=5, streaming=False,
                streaming_validation_docs=1000, mix_probabilities=None, seed=0):
    """Train and validation splits (one `text` column each) from Hub datasets and/or local files.

    Several sources are concatenated, or interleaved with `mix_probabilities` (always interleaved when
    streaming, so that no source waits for another to run out). A corpus without a validation split
    gives up `validation_split_percentage`% of its documents (streaming: the first
    `streaming_validation_docs` documents).
    """
    
    names = dataset_name or []
    configs = dataset_config_name or [None] * len(names)
    if len(configs) != len(names):
        raise UsageError(f"--dataset_config_name: got {len(configs)} values for {len(names)} --dataset_name; "
                         f"give one per dataset (`none` for a dataset without configs)")
    if not names and not train_file:
        raise UsageError("no corpus: pass --dataset_name or --train_file")
    if validation_file and not train_file:
        raise UsageError("--validation_file needs --train_file")

    sources = []  # (label, train split, validation split or None)
    for name, config in zip(names, configs):
        splits = datasets.load_dataset(name, config, streaming=streaming)
        if "train" not in splits:
            raise UsageError(f"--dataset_name {name}: no `train` split (it has {list(splits)})")
        val = splits.get("validation")
        sources.append((name, splits["train"], val))
    if train_file:
        fmt, files = resolve_files(train_file, "--train_file")
        data_files = {"train": files}
        if validation_file:
            vfmt, data_files["validation"] = resolve_files(validation_file, "--validation_file")
            if vfmt != fmt:
                raise UsageError(f"--validation_file is {vfmt} but --train_file is {fmt}; use one type")
        splits = datasets.load_dataset(fmt, data_files=data_files, streaming=streaming)
        sources.append(("--train_file", splits["train"], splits.get("validation")))

    trains, vals = [], []
    for label, train, val in sources:
        train = _text_only(train, text_column_name, label)
        if not streaming and len(train) == 0:
            raise UsageError(f"{label}: the train split has no documents")
        if val is None:
            if streaming:
                val, train = train.take(streaming_validation_docs), train.skip(streaming_validation_docs)
            else:
                if len(train) < 2:
                    raise UsageError(f"{label}: one document cannot be split into train and validation; "
                                     f"pass --validation_file")
                n_val = max(1, round(len(train) * validation_split_percentage / 100))
                parts = train.train_test_split(test_size=n_val, seed=seed, shuffle=True)
                train, val = parts["train"], parts["test"]
        else:
            val = _text_only(val, text_column_name, label)
        trains.append(train)
        vals.append(val)

    if mix_probabilities is not None and len(mix_probabilities) != len(trains):
        raise UsageError(f"--mix_probabilities: got {len(mix_probabilities)} values for {len(trains)} corpora")
    if len(trains) == 1:
        train = trains[0]
    elif streaming or mix_probabilities:
        train = datasets.interleave_datasets(trains, probabilities=mix_probabilities, seed=seed,
                                    stopping_strategy="all_exhausted")
    else:
        train = datasets.concatenate_datasets(trains)
    val = vals[0] if len(vals) == 1 else datasets.concatenate_datasets(vals)
    return {"train": train, "validation": val}


# ---------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------


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
    return RobertaTokenizer(vocab=model["vocab"], merges=[tuple(m) for m in model["merges"]],
                            mask_token=AddedToken("<mask>", lstrip=True, special=True))


def load_tokenizer(name_or_path):
    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as e:
        raise UsageError(f"--tokenizer_name {name_or_path}: cannot load a tokenizer from it ({e})") from None


def check_tokenizer(tokenizer, config):
    """The tokenizer must fit the model: every id inside the embedding, the same special-token ids."""
    problems = []
    if tokenizer.mask_token_id is None:
        problems.append("it has no mask token (masked-LM training needs one)")
    if tokenizer.pad_token_id is None:
        problems.append("it has no pad token")
    if len(tokenizer) > config.vocab_size:
        problems.append(f"its vocabulary has {len(tokenizer)} tokens but the model's vocab_size is "
                        f"{config.vocab_size} (set --model.vocab_size {len(tokenizer)} or more)")
    for name in ("pad", "bos", "eos"):
        tok_id, cfg_id = getattr(tokenizer, f"{name}_token_id"), getattr(config, f"{name}_token_id", None)
        if tok_id is not None and cfg_id is not None and tok_id != cfg_id:
            problems.append(f"its {name} token id is {tok_id} but the model's {name}_token_id is {cfg_id}")
    if problems:
        raise UsageError(f"tokenizer {tokenizer.name_or_path or '(trained)'} does not fit the model config: "
                         + "; ".join(problems))


# ---------------------------------------------------------------------------------------------------
# Packing and masking
# ---------------------------------------------------------------------------------------------------


def pack(split, tokenizer, block_size, num_proc=None, desc="Tokenizing and packing"):
    """Tokenize documents, end each with </s>, and cut the stream into blocks of `block_size` that each
    start with <s>. Nothing is dropped: the tail of every 1000-document batch is a shorter block.
    Map-style datasets cache the result (keyed by tokenizer and block size) and use `num_proc` workers."""
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    if bos is None or eos is None:
        raise UsageError(f"tokenizer {tokenizer.name_or_path}: needs bos/eos (or cls/sep) tokens to pack documents")
    if block_size < 2:
        raise UsageError(f"--max_seq_length {block_size}: must be at least 2")
    body = block_size - 1

    def pack_batch(batch):
        texts = [t for t in batch["text"] if t and not t.isspace()]
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


def _block_seed(seed, epoch, ids):
    digest = hashlib.blake2b(torch.as_tensor(ids).numpy().tobytes(), digest_size=8,
                             key=f"{seed}/{epoch}".encode()).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class BlockSeededMLMCollator(DataCollatorForLanguageModeling):
    """transformers' MLM collator (15% of tokens; 80% <mask>, 10% random, 10% kept) with masks drawn
    per block from a generator seeded by (seed, epoch, block content); set `epoch` before each epoch."""

    def __init__(self, tokenizer, mlm_probability=0.15, seed=0, epoch=0, **kwargs):
        super().__init__(tokenizer=tokenizer, mlm=True, mlm_probability=mlm_probability, **kwargs)
        self.mask_seed, self.epoch = seed, epoch

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        if special_tokens_mask is None:
            rows = inputs.tolist()
            special_tokens_mask = torch.tensor(
                [self.tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True) for row in rows],
                dtype=torch.bool)
        masked, labels = [], []
        for row, special in zip(inputs, special_tokens_mask):
            self.generator = torch.Generator().manual_seed(_block_seed(self.mask_seed, self.epoch, row))
            row_inputs, row_labels = super().torch_mask_tokens(row[None].clone(), special[None])
            masked.append(row_inputs)
            labels.append(row_labels)
        self.generator = None
        return torch.cat(masked), torch.cat(labels)


__all__ = ["load_corpus", "train_tokenizer", "load_tokenizer", "check_tokenizer", "pack",
           "BlockSeededMLMCollator", "resolve_files", "file_format", "SPECIAL_TOKENS"]
