# Copyright 2026 The linformer-hf authors. Licensed under the Apache License, Version 2.0.
"""Distil a frozen standard-attention encoder (the teacher) into a Linformer converted from it (the student).

    accelerate launch distill.py --config configs/distill/minilm_n4096.yaml --output_dir runs/long-minilm-n4096

after the conversion that makes the student the recipe names (its command heads that file; `make release` runs both).

The student learns to give the teacher's hidden states and pooled embeddings on sequences of mixed
real lengths (short ones, where it is exact from the start, and long ones up to n), with the teacher's
signal beyond its own position limit from an extended position table or from windows
(`linformer_training.distillation` says why each choice). Same training layer as train_mlm.py:
Accelerate (processes, mixed precision, accumulation), `datasets` corpora, checkpoints with exact
resume, metrics.jsonl and trackers, --push_to_hub. Documents whose id is listed in
--exclude_ids_file (by default the held-out news articles of experiments/conversion/) are never read.
"""

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import datasets
import torch
from accelerate.utils import set_seed
from transformers import AutoModel

from linformer_training import checkpoints, distillation, loop, models, outputs, processes
from linformer_training.arguments import (
    CorpusArguments,
    LinformerRateArguments,
    OptimizerArguments,
    RunArguments,
    UsageError,
    arg,
    parse_args,
)
from linformer_training.corpus import ExcludedIds, check_sources, load_corpus
from linformer_training.mlm import block_loaders, pack_corpus

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

REPO = Path(__file__).resolve().parent
HELD_OUT_NEWS = REPO / "experiments" / "conversion" / "heldout_news_ids.txt"


@dataclass
class DistillArguments(CorpusArguments, OptimizerArguments, LinformerRateArguments, RunArguments):
    """Distil a frozen BERT/RoBERTa teacher into a Linformer student converted from it."""

    teacher_name_or_path: str | None = arg(None, "the frozen teacher: a BERT/RoBERTa folder or Hub id (required)")
    student_name_or_path: str | None = arg(None, "the Linformer to train: a folder written by convert_to_linformer.py "
                                                 "from the teacher (required)")
    teacher_long_inputs: Literal[distillation.TEACHER_LONG_INPUTS] = arg(
        "extended", "teacher signal beyond its position limit: `extended` (positions repeated as the conversion "
                    "does, full attention) or `windows` (its own length, states concatenated)")
    exclude_ids_file: str | None = arg(None, "ids of documents never to read, one per line (default: the held-out "
                                             "news list, where the corpus has --id_column; `none`: nothing)")
    id_column: str = arg("id", "column holding the document ids that --exclude_ids_file lists")
    inputs: Literal["blocks", "documents"] = arg(
        "blocks", "what one input is cut from: `blocks` (documents packed back to back into --block_size blocks) or "
                  "`documents` (one document each, a longer one cut into consecutive inputs of --block_size)")
    min_document_length: int = arg(0, "with --inputs documents: documents of at most this many tokens are not "
                                      "read (how many inputs remain is printed); e.g. the student's exact length, so "
                                      "that every input takes the long path")
    min_length: int = arg(16, "shortest training span, in tokens (special tokens included)")
    short_max_length: int | None = arg(None, "longest `short` span (default: the student's k, where it is exact)")
    short_fraction: float = arg(0.25, "fraction of spans drawn short; the rest are log-uniform up to --block_size")
    hidden_loss_weight: float = arg(1.0, "weight of the per-layer hidden-state error (relative to the teacher's norm)")
    cosine_loss_weight: float = arg(1.0, "weight of 1 - cosine of the mean-pooled embeddings")
    train_only_long_path: bool = arg(False, "train only what inputs read through the projections use (E/F, the "
                                            "long-input adapters and gates): every input the student reads exactly "
                                            "stays the teacher's, bit for bit")
    document_loss_weight: float = arg(0.0, "weight of the document objective: each input's embedding must pick out "
                                           "its own pieces (embedded by the teacher) among other inputs' and a bank's "
                                           "(0: off)")
    document_pieces: int = arg(4, "pieces drawn from each training input for the document objective")
    piece_min_length: int = arg(16, "shortest piece, in tokens (specials excluded)")
    piece_max_length: int = arg(128, "longest piece, in tokens (specials excluded)")
    document_temperature: float = arg(0.05, "softmax temperature of the document objective (cosine / temperature)")
    negative_bank_blocks: int = arg(256, "training blocks held back, never trained on, whose pieces (8 each, "
                                         "teacher-embedded once) are extra negatives of the document objective")
    student_dropout: float = arg(0.0, "dropout of the student while distilling (its saved config keeps the converted "
                                      "folder's values)")
    # This script's values of shared flags.
    learning_rate: float = arg(5e-5, "peak learning rate of the student's converted weights")
    per_device_train_batch_size: int = arg(8, "sequences per process per forward pass")
    per_device_eval_batch_size: int = arg(8, "sequences per process per evaluation batch")
    max_steps: int = arg(1000, "updates to train for")
    eval_steps: int | None = arg(250, "evaluate every N updates (0: only at the end)")
    checkpointing_steps: int = arg(250, "save a resumable checkpoint every N updates (0: none)")
    output_dir: str = arg("outputs/distill", "folder for the final student, checkpoints and logs")

    bounds = {"min_document_length": "[0, inf)", "min_length": "[3, inf)", "short_max_length": "[3, inf)",
              "short_fraction": "[0, 1]", "hidden_loss_weight": "[0, inf)", "cosine_loss_weight": "[0, inf)",
              "student_dropout": "[0, 1)",
              "document_loss_weight": "[0, inf)", "document_pieces": "[1, inf)", "piece_min_length": "[1, inf)",
              "piece_max_length": "[1, inf)", "document_temperature": "(0, inf)", "negative_bank_blocks": "[0, inf)"}

    def __post_init__(self):
        super().__post_init__()
        for flag in ("teacher_name_or_path", "student_name_or_path"):
            if not getattr(self, flag):
                raise UsageError(f"--{flag} is required")
        if self.hidden_loss_weight == 0 and self.cosine_loss_weight == 0:
            raise UsageError("--hidden_loss_weight and --cosine_loss_weight are both 0: nothing to learn from")
        if self.document_loss_weight and self.negative_bank_blocks and self.streaming:
            raise UsageError(f"--negative_bank_blocks {self.negative_bank_blocks}: the bank is held back from a "
                             f"counted training set, which --streaming has not; pass --negative_bank_blocks 0")
        if self.min_document_length and self.inputs != "documents":
            raise UsageError(f"--min_document_length {self.min_document_length} applies to --inputs documents "
                             f"only (a packed block mixes documents); pass --inputs documents or 0")
        if self.piece_min_length > self.piece_max_length:
            raise UsageError(f"--piece_min_length {self.piece_min_length} is above --piece_max_length "
                             f"{self.piece_max_length}")


@dataclass
class DistillSetup(loop.Setup):
    """What this script settles before reading data (`check_inputs`)."""

    pair: distillation.Pair
    block_size: int
    short_max_length: int  # --short_max_length, or the student's k


@dataclass
class DistillData:
    """The prepared data (`prepare_data`): blocks by split, how many documents were excluded (None when streaming
    or none were), and the training blocks held back for the document objective's bank (None without one)."""

    blocks: dict
    excluded_documents: int | None
    bank_blocks: datasets.Dataset | None


def check_inputs(args, accelerator, accumulation):
    """Every error that needs no data: teacher and student, lengths, files, the output folder."""
    pair = distillation.check_pair(args.teacher_name_or_path, args.student_name_or_path)
    block_size = models.input_length("--block_size", args.block_size, pair.student_config, "the student's",
                                     "convert the teacher again with a larger --max_seq_length, or lower --block_size")
    short_max = args.short_max_length or pair.k
    if args.short_max_length and args.short_max_length > block_size:
        raise UsageError(f"--short_max_length {args.short_max_length} is above --block_size {block_size}: a short "
                         f"span cannot be longer than the longest; allowed: at most {block_size}")
    if not args.min_length <= min(short_max, block_size):
        raise UsageError(f"--min_length {args.min_length} is above --short_max_length {short_max} or --block_size "
                         f"{block_size}: no span length fits")
    if args.train_only_long_path and pair.student_config.projection_type != "linear" \
            and not pair.student_config.long_input_adapter_rank:
        raise UsageError(f"--train_only_long_path: the student's projection_type is "
                         f"{pair.student_config.projection_type!r} and it has no long-input adapters, so nothing "
                         f"would be trained")
    check_sources(**args.corpus_sources())
    if args.exclude_ids_file not in (None, "none") and not Path(args.exclude_ids_file).is_file():
        raise UsageError(f"--exclude_ids_file {args.exclude_ids_file}: no such file")
    output_dir, checkpoint = checkpoints.open_run(args, accelerator, accumulation)
    return DistillSetup(accelerator=accelerator, accumulation=accumulation, output_dir=output_dir,
                        checkpoint=checkpoint, pair=pair, block_size=block_size, short_max_length=short_max)


def excluded_ids(args):
    """The documents no run may read: the named list (which must then apply), else the held-out news."""
    if args.exclude_ids_file == "none":
        return None
    if args.exclude_ids_file:
        return ExcludedIds.from_file(args.exclude_ids_file, args.id_column, required=True)
    return ExcludedIds.from_file(HELD_OUT_NEWS, args.id_column) if HELD_OUT_NEWS.is_file() else None


def prepare_data(args, setup):
    """Corpus without the excluded documents, cut into blocks holding text (and, with --min_document_length, more
    tokens than that); the main process goes first."""
    accelerator, tokenizer = setup.accelerator, setup.pair.tokenizer
    exclude = excluded_ids(args)
    with processes.main_process_first(accelerator, "preparing the data"):
        corpus = load_corpus(**args.corpus_options(), seed=args.seed, exclude=exclude)
        blocks = pack_corpus(corpus, tokenizer, setup.block_size, args, documents=args.inputs == "documents",
                             keep=distillation.has_text(tokenizer, more_than=args.min_document_length))
    if args.min_document_length and not args.streaming:
        accelerator.print(f"--inputs documents: {len(blocks['train'])} training and "
                          f"{len(blocks['validation'] or [])} validation inputs of more than "
                          f"{args.min_document_length} tokens")
    bank = None
    if args.document_loss_weight and args.negative_bank_blocks:
        # The bank's blocks are held back from training: a bank piece is never a piece of a trained input.
        train = blocks["train"]
        if len(train) <= args.negative_bank_blocks:
            raise UsageError(f"--negative_bank_blocks {args.negative_bank_blocks}: the training set has only "
                             f"{len(train)} blocks; lower it (0: no bank)")
        bank = train.select(range(len(train) - args.negative_bank_blocks, len(train)))
        blocks["train"] = train.select(range(len(train) - args.negative_bank_blocks))
    if exclude is None or not exclude.dropped:
        return DistillData(blocks=blocks, excluded_documents=None, bank_blocks=bank)
    dropped = exclude.total  # None when streaming: a lazy filter has not counted yet
    accelerator.print(f"Excluded {'the (streamed, uncounted)' if dropped is None else dropped} documents listed in "
                      f"{exclude.source}")
    return DistillData(blocks=blocks, excluded_documents=dropped, bank_blocks=bank)


def build_run(args, setup, data):
    """Student and frozen teacher, their spans, prepared with the optimizer and schedule, as one `loop.Run` (the
    teacher is not prepared: it is never trained, so it needs no DDP wrapper, optimizer state or checkpoint)."""
    pair, accelerator = setup.pair, setup.accelerator
    spans = dict(tokenizer=pair.tokenizer, min_length=args.min_length, short_max_length=setup.short_max_length,
                 max_length=setup.block_size, short_fraction=args.short_fraction)
    train_loader, eval_loader = block_loaders(args, data.blocks,
                                              distillation.SpanCollator(**spans, seed=args.seed, same_length=True),
                                              distillation.SpanCollator(**spans, seed=args.seed + 1))
    student = AutoModel.from_pretrained(args.student_name_or_path, dtype=torch.float32)
    distillation.set_dropout(student, args.student_dropout)
    for name, param in student.named_parameters():  # the pooler is not distilled: embeddings are mean-pooled
        if name.startswith("pooler.") or (args.train_only_long_path and not models.is_long_path(name)):
            param.requires_grad_(False)
    teacher = distillation.load_teacher(args.teacher_name_or_path, pair, setup.block_size, args.teacher_long_inputs,
                                        accelerator.device)
    objective = distillation.DistillationObjective(
        teacher, pair, accelerator, hidden_weight=args.hidden_loss_weight, cosine_weight=args.cosine_loss_weight,
        long_inputs=args.teacher_long_inputs, document=document_objective(args, setup, teacher, data.bank_blocks),
        document_weight=args.document_loss_weight)
    prepared = loop.prepare(args, setup, student, train_loader, [eval_loader], own_rates=loop.linformer_rates(args))
    return loop.new_run(args, setup, prepared, objective=objective, project="distill", eval_steps=args.eval_steps,
                        tokenizer=pair.tokenizer)


def document_objective(args, setup, teacher, bank_blocks):
    """With --document_loss_weight: the document objective, its bank embedded from the held-back blocks."""
    if not args.document_loss_weight:
        return None
    document = distillation.DocumentObjective(
        teacher, setup.pair.tokenizer, setup.accelerator, spans=args.document_pieces,
        min_length=args.piece_min_length, max_length=args.piece_max_length, temperature=args.document_temperature,
        seed=args.seed, bank=None)
    if bank_blocks is not None and len(bank_blocks):
        generator = torch.Generator().manual_seed(args.seed)
        document.bank = document.bank_from([list(b) for b in bank_blocks["input_ids"]], generator, 8)
        setup.accelerator.print(f"Document objective: {len(document.bank)} bank pieces from {len(bank_blocks)} "
                                f"held-back training blocks")
    return document


def model_card(run, pair, sentence_transformers):
    """The final folder's README.md: teacher, student, how it was distilled, with which result."""
    args, state, config, teacher = run.args, run.state, pair.student_config, run.args.teacher_name_or_path
    load = (f"from transformers import AutoModel\nmodel = AutoModel.from_pretrained("
            f"{args.hub_model_id or args.output_dir!r}, trust_remote_code=True)")
    return outputs.model_card(
        title=args.hub_model_id or Path(args.output_dir).name,
        pipeline_tag="sentence-similarity" if sentence_transformers else "feature-extraction",
        datasets=args.dataset_name, base_model=None if Path(teacher).exists() else teacher,
        arguments=run.arguments(),
        tags=["linformer", "distillation"] + (["sentence-transformers"] if sentence_transformers else []),
        intro=f"A Linformer (n = {pair.n}, k = {config.projected_dim}, `projection_sharing="
              f"{config.projection_sharing!r}`) converted from `{teacher}` and distilled from it with `distill.py` "
              f"from linformer-hf: {state.step} updates matching the teacher's hidden states and mean-pooled "
              f"embeddings on spans of {args.min_length} to {args.block_size or pair.n} tokens; teacher signal beyond "
              f"{pair.teacher_limit} tokens: `{args.teacher_long_inputs}`.",
        sections={"Results (validation spans, student against teacher)":
                  outputs.metrics_table({"updates": state.step, **state.last_eval}),
                  "Use": outputs.code_block(load)})


def main(argv=None):
    args = parse_args(DistillArguments, argv, prog="distill.py")
    accelerator, accumulation = loop.start(args)
    setup = check_inputs(args, accelerator, accumulation)
    set_seed(args.seed)
    data = prepare_data(args, setup)
    run = build_run(args, setup, data)
    loop.fit(run, setup.checkpoint, block_size=setup.block_size, short_max_length=setup.short_max_length,
             excluded_documents=data.excluded_documents)
    sentence_transformers = distillation.sentence_transformers_files(args.student_name_or_path, setup.pair.n)
    return outputs.finish(run, model_card(run, setup.pair, bool(sentence_transformers)),
                          f"Linformer distilled from {args.teacher_name_or_path}, {run.state.step} updates",
                          extra_files=sentence_transformers)

if __name__ == "__main__":
    processes.run_script(main, "distill.py")
