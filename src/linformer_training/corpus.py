# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Text corpora through `datasets`: Hub names and local files (globs, compression), mixed or streamed.

One table of file types serves every script; CSV/TSV cells such as "NA" or "None" are text, not
missing values (pandas' default would drop them silently). What a corpus loses on the way is said: the
column read as text when none is called `text`, and how many documents had no text.
"""

import logging
from pathlib import Path

import datasets

from .arguments import UsageError

logger = logging.getLogger(__name__)

FILE_FORMATS = {".txt": ("text", {}), ".text": ("text", {}), ".json": ("json", {}), ".jsonl": ("json", {}),
                ".parquet": ("parquet", {}), ".csv": ("csv", {"keep_default_na": False}),
                ".tsv": ("csv", {"delimiter": "\t", "quoting": 3, "keep_default_na": False})}
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")


def file_format(path):
    """The `datasets` builder and its options for a data file, looking through a compression suffix."""
    name = path.lower()
    for suffix in COMPRESSIONS:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    fmt = FILE_FORMATS.get(Path(name).suffix)
    if fmt is None:
        raise UsageError(f"{path}: unknown data file type; allowed: {', '.join(FILE_FORMATS)} "
                         f"(optionally compressed: {', '.join(COMPRESSIONS)})")
    return fmt


def glob_files(pattern):
    """The paths a shell-style pattern (`~`, `*`, `**` for any depth) matches, as strings spelt as the pattern is
    (relative stays relative); an absolute pattern is matched from its root."""
    expanded = Path(pattern).expanduser()
    if not expanded.parts:
        return []
    if expanded.is_absolute():
        return [str(path) for path in Path(expanded.anchor).glob(str(expanded.relative_to(expanded.anchor)))]
    return [str(path) for path in Path().glob(str(expanded))]


def resolve_files(patterns, flag):
    """Expand globs and check every local file exists and is not empty, before anything is loaded."""
    files = []
    for pattern in patterns:
        if "://" in pattern:  # remote (hf://, s3://, https://): `datasets` checks these itself
            files.append(pattern)
            continue
        matches = sorted(glob_files(pattern))
        if not matches:
            raise UsageError(f"{flag} {pattern}: no such file (or no file matches the pattern)")
        for path in matches:
            if not Path(path).is_file():
                raise UsageError(f"{flag} {path}: not a file")
            if Path(path).stat().st_size == 0:
                raise UsageError(f"{flag} {path}: file is empty")
        files.extend(matches)
    kinds = {}
    for f in files:
        kinds.setdefault(repr(file_format(f)), (file_format(f), Path(f).name))
    if len(kinds) > 1:
        raise UsageError(f"{flag}: files of different types ({', '.join(name for _, name in kinds.values())}); "
                         f"use one type")
    return next(iter(kinds.values()))[0], files


def load_files(data_files, streaming=False):
    """Local files as a DatasetDict with one split per key of `data_files` (split -> paths, one type)."""
    kinds = {repr(file_format(paths[0])): file_format(paths[0]) for paths in data_files.values()}
    if len(kinds) > 1:
        raise UsageError(f"{', '.join('--' + split + '_file' for split in data_files)}: files of different "
                         f"types; use one type")
    builder, options = next(iter(kinds.values()))
    try:
        return datasets.load_dataset(builder, data_files=data_files, streaming=streaming, **options)
    except Exception as e:  # noqa: BLE001  malformed or header-only files: name them, not a traceback
        files = ", ".join(str(p) for paths in data_files.values() for p in paths)
        while type(e).__name__ == "DatasetGenerationError" and (e.__cause__ or e.__context__):
            e = e.__cause__ or e.__context__  # "An error occurred while generating the dataset": the cause is below
        why = ("no rows (only a header?)" if "corresponds to no data" in str(e) else not_utf8(e) if is_not_utf8(e)
               else str(e).splitlines()[0][:200])
        raise UsageError(f"cannot read {files}: {why}") from None


def is_not_utf8(error):
    return isinstance(error, UnicodeDecodeError) or "Invalid UTF8" in str(error)


def not_utf8(error):
    return (f"not UTF-8 text ({str(error).splitlines()[0][:120]}); convert it, e.g. "
            f"`iconv -f latin1 -t utf-8 FILE > FILE.utf8`")


class ExcludedIds:
    """Documents no run may read (held-out evaluation text), dropped by id before anything else sees them.

    Ids are compared as text, so a list file of `123` lines matches an integer `id` column. A split
    without the id column is left as it is unless `required` (an explicitly named list that cannot
    apply is a mistake, not a no-op). `dropped` records, per source and split, how many documents went
    (None when streaming: a lazy filter cannot count without reading the corpus).
    """

    def __init__(self, ids, column="id", required=False, source="ids"):
        self.ids = frozenset(str(i).strip() for i in ids)
        self.column, self.required, self.source = column, required, source
        self.dropped = {}

    @classmethod
    def from_file(cls, path, column="id", required=False):
        try:
            lines = Path(path).read_text().split()
        except OSError as e:
            raise UsageError(f"--exclude_ids_file {path}: cannot read it ({e.strerror or e})") from None
        return cls(lines, column, required, source=str(path))

    @property
    def total(self):
        """Documents dropped in all; None if a streamed split's count is unknown."""
        counts = list(self.dropped.values())
        return None if None in counts else sum(counts)

    def __call__(self, ds, where):
        columns = ds.column_names or list(next(iter(ds)).keys())
        if self.column not in columns:
            if self.required:
                raise UsageError(f"--exclude_ids_file {self.source}: {where} has no `{self.column}` column (it has "
                                 f"{columns}); pass --id_column, or --exclude_ids_file none")
            return ds
        ids, column = self.ids, self.column

        def keep(batch):
            return [str(value).strip() not in ids for value in batch[column]]

        if isinstance(ds, datasets.Dataset):
            kept = ds.filter(keep, batched=True, desc="Dropping excluded ids")
            self.dropped[where] = len(ds) - len(kept)
        else:
            kept = ds.filter(keep, batched=True)
            self.dropped[where] = None
        return kept


def _text_only(ds, text_column, source):
    """Keep one column, renamed `text`, so that corpora of different schemas can be mixed."""
    columns = ds.column_names or list(next(iter(ds)).keys())  # streaming may not know its columns yet
    if text_column is None:
        strings = [c for c in columns if ds.features is not None and getattr(ds.features[c], "dtype", None) == "string"]
        text_column = "text" if "text" in columns else (strings[0] if len(strings) == 1 else None)
        if text_column is None:
            raise UsageError(f"{source}: no `text` column among {columns}; pass --text_column_name")
        if text_column != "text":
            logger.warning("%s: no `text` column; reading its only string column, `%s`, as the text (pass "
                           "--text_column_name to choose)", source, text_column)
    elif text_column not in columns:
        raise UsageError(f"--text_column_name {text_column}: {source} has no such column; it has {columns}")
    feature = ds.features[text_column] if ds.features is not None else None
    if feature is not None and getattr(feature, "dtype", None) not in ("string", "large_string"):
        raise UsageError(f"{source}: column `{text_column}` holds {getattr(feature, 'dtype', 'mixed-type')} values, "
                         f"not text; every document must be a string (or pass --text_column_name)")
    ds = ds.select_columns([text_column])
    return ds.rename_column(text_column, "text") if text_column != "text" else ds


def _drop_empty(ds, source, split):
    """Documents without text (the field missing, null or blank) are dropped, and how many is said."""
    try:
        kept = ds.filter(lambda doc: isinstance(doc["text"], str) and bool(doc["text"].strip()),
                         desc="Dropping blank documents")
    except Exception as e:  # noqa: BLE001  pyarrow reads JSON with invalid UTF-8, and fails only here
        if is_not_utf8(e):
            raise UsageError(f"{source}: the {split} split is {not_utf8(e)}") from None
        raise
    if len(kept) == 0:
        raise UsageError(f"{source}: the {split} split has no text (no documents, or only blank ones)")
    if len(kept) < len(ds):
        logger.warning("%s: %s of the %s split's %s documents have no text (the field missing, null or blank) "
                       "and are skipped", source, f"{len(ds) - len(kept):,}", split, f"{len(ds):,}")
    return kept


def check_sources(dataset_name=None, dataset_config_name=None, train_file=None, validation_file=None,
                  mix_probabilities=None):
    """A corpus's sources, checked before anything is read: ((Hub name, config) pairs, {split: local files}),
    every glob expanded and every file there, not empty and of one type."""
    names = dataset_name or []
    configs = dataset_config_name or [None] * len(names)
    if len(configs) != len(names):
        raise UsageError(f"--dataset_config_name: got {len(configs)} values for {len(names)} --dataset_name; "
                         f"give one per dataset (`none` for a dataset without configs)")
    if not names and not train_file:
        raise UsageError("no corpus: pass --dataset_name or --train_file")
    if validation_file and not train_file:
        raise UsageError("--validation_file needs --train_file")
    corpora = len(names) + bool(train_file)
    if mix_probabilities is not None and len(mix_probabilities) != corpora:
        raise UsageError(f"--mix_probabilities: got {len(mix_probabilities)} values for {corpora} corpora")
    data_files = {}
    if train_file:
        fmt, data_files["train"] = resolve_files(train_file, "--train_file")
        if validation_file:
            vfmt, data_files["validation"] = resolve_files(validation_file, "--validation_file")
            if vfmt != fmt:
                raise UsageError(f"--validation_file is {vfmt} but --train_file is {fmt}; use one type")
    return list(zip(names, configs, strict=True)), data_files


def load_corpus(dataset_name=None, dataset_config_name=None, train_file=None, validation_file=None,
                text_column_name=None, validation_split_percentage=5, streaming=False,
                streaming_validation_docs=1000, mix_probabilities=None, seed=0, exclude=None):
    """Train and validation splits (one `text` column each) from Hub datasets and/or local files.

    Several sources are concatenated, or interleaved with `mix_probabilities` (always interleaved when
    streaming, so that no source waits for another to run out). A corpus without a validation split
    gives up `validation_split_percentage`% of its documents (streaming: the first
    `streaming_validation_docs` documents); at 0% it gives up none, and when no source has a validation split
    the corpus has none (None: the run does not evaluate). `exclude` (an `ExcludedIds`, or any
    `(split, where) -> split`) sees every split first, with all its columns, before the validation documents are
    drawn.
    """
    hub, data_files = check_sources(dataset_name, dataset_config_name, train_file, validation_file, mix_probabilities)
    trains, vals = [], []
    for label, train, val in _sources(hub, data_files, streaming):
        if exclude is not None:
            train = exclude(train, f"{label} train")
            val = None if val is None else exclude(val, f"{label} validation")
        train = _text_split(train, text_column_name, label, "train", streaming)
        if val is None:
            train, val = _hold_out(train, label, validation_split_percentage, streaming, streaming_validation_docs,
                                   seed)
        else:
            val = _text_split(val, text_column_name, label, "validation", streaming)
        trains.append(train)
        vals.append(val)
    if len(trains) == 1:
        train = trains[0]
    elif streaming or mix_probabilities:
        train = datasets.interleave_datasets(trains, probabilities=mix_probabilities, seed=seed,
                                             stopping_strategy="all_exhausted")
    else:
        train = datasets.concatenate_datasets(trains)
    vals = [v for v in vals if v is not None]
    val = None if not vals else vals[0] if len(vals) == 1 else datasets.concatenate_datasets(vals)
    return {"train": train, "validation": val}


def _sources(hub, data_files, streaming):
    """(label, train split, validation split or None) of each Hub dataset, then of the local files."""
    sources = []
    for name, config in hub:
        try:
            splits = datasets.load_dataset(name, config, streaming=streaming)
        except Exception as e:  # noqa: BLE001  offline and not cached, unknown name, no such config, ...
            offline = "offline" in str(e).lower() or "connect" in str(e).lower()
            raise UsageError(f"--dataset_name {name}{f' --dataset_config_name {config}' if config else ''}: cannot "
                             f"load it ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})"
                             + ("; without the Hub only datasets already in the cache load: download it once "
                                "online, or pass local files with --train_file" if offline else "")) from None
        if "train" not in splits:
            raise UsageError(f"--dataset_name {name}: no `train` split (it has {list(splits)})")
        sources.append((name, splits["train"], splits.get("validation")))
    if data_files:
        splits = load_files(data_files, streaming)
        sources.append(("--train_file", splits["train"], splits.get("validation")))
    return sources


def _text_split(split, text_column_name, label, name, streaming):
    """The split as one `text` column; read whole (not streamed), without its documents that have no text."""
    split = _text_only(split, text_column_name, label)
    return split if streaming else _drop_empty(split, label, name)


def _hold_out(train, label, percentage, streaming, streaming_docs, seed):
    """(train, validation) of a source without a validation split: `percentage`% of its documents, drawn with
    `seed`, or, streaming, its first `streaming_docs` documents."""
    if streaming:
        return train.skip(streaming_docs), train.take(streaming_docs)
    if not percentage:
        return train, None
    if len(train) < 2:
        raise UsageError(f"{label}: one document cannot be split into train and validation; pass --validation_file")
    parts = train.train_test_split(test_size=max(1, round(len(train) * percentage / 100)), seed=seed, shuffle=True)
    return parts["train"], parts["test"]
