# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Masked-LM pretraining of a Linformer (or a RoBERTa baseline) with RoBERTa's recipe.

    python train_mlm.py                                   # CPU demo: tiny Linformer on Moby Dick, minutes
    python train_mlm.py --config configs/tiny.yaml --max_steps 50 --config_overrides projected_dim=16
    accelerate launch train_mlm.py --config configs/linformer_base_n512_k256_layerwise.yaml
    python train_mlm.py --model_name_or_path converted/ --train_file news/*.jsonl.gz --learning_rate 2e-4

One script for one process or many (`accelerate launch`: multi-GPU, multi-node, DeepSpeed, FSDP,
fp16/bf16). Values come from the defaults below, a YAML recipe (--config) and flags, flags winning.
One update = `total_batch_size` sequences; its loss is the mean over every masked token of the update,
however many processes share it, so a run on one process and on eight follow the same trajectory.
"""

import importlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from accelerate.utils import DistributedType, set_seed
from transformers import AutoConfig, AutoModelForMaskedLM, PreTrainedConfig, PreTrainedTokenizerBase

from linformer_training import checkpoints, loop, models, outputs, processes
from linformer_training.arguments import (
    SCHEDULERS,
    CorpusArguments,
    LinformerRateArguments,
    OptimizerArguments,
    RunArguments,
    UsageError,
    apply_overrides,
    arg,
    parse_args,
    parse_overrides,
)
from linformer_training.corpus import check_sources, load_corpus
from linformer_training.mlm import BlockSeededMLMCollator, MaskedLMObjective, block_loaders, pack_corpus
from linformer_training.tokenization import MIN_VOCAB_SIZE, check_tokenizer, load_tokenizer, train_tokenizer

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

REPO = Path(__file__).resolve().parent
# The demo's model, and a new model's fields where nothing else sets them; --config_overrides and recipes change
# any field of it. A new Linformer pretrains with the convolutional projection (kernel and stride n/k) at k = n/2:
# the quality study found it within 5% of standard attention's perplexity in under twice its updates at n = 128 and
# at n = 512 (the model card's "Training longer"; a test holds this default to the committed records).
# configs/tiny.yaml is this model with the paper's learned E/F at k = 32, the quality study's base.
DEMO_MODELS = {
    "linformer": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
                      max_seq_length=128, projected_dim=64, projection_type="conv", projection_sharing="layerwise"),
    "roberta": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
                    max_position_embeddings=130),
}
# save_state stores the tied input/output embeddings once and warns at every checkpoint; load_state ties
# them again (resuming is bit-exact, see tests/test_train_mlm.py).
logging.getLogger("accelerate.utils.other").addFilter(lambda r: "Removed shared tensor" not in r.getMessage())


@dataclass
class MLMArguments(CorpusArguments, OptimizerArguments, LinformerRateArguments, RunArguments):
    """Masked-LM pretraining (RoBERTa's recipe) of Linformer or RoBERTa. Defaults: the tiny CPU demo."""

    model_type: Literal["linformer", "roberta"] | None = arg(None, "architecture to pretrain from scratch "
                                                                 "(default: linformer; a --model_name_or_path "
                                                                 "checkpoint has its own)")
    model_name_or_path: str | None = arg(None, "continue pretraining this checkpoint (a folder or Hub id) instead "
                                               "of a new --model_type model; an encoder without a masked-LM head "
                                               "gets a new one. Its tokenizer, unless --tokenizer_name")
    trust_remote_code: bool = arg(False, "run the modeling code of --model_name_or_path (Hub remote code)")
    config_overrides: str | None = arg(None, "model config fields on top of the demo model's (or the checkpoint's), "
                                             "e.g. projected_dim=64,max_seq_length=256 (a mapping in recipes)")
    head_learning_rate: float | None = arg(None, "peak learning rate of the masked-LM head (default: "
                                                 "--learning_rate): a new head on a trained encoder must learn "
                                                 "faster than the encoder may move")
    tokenizer_name: str | None = arg(None, "existing tokenizer (default: --model_name_or_path's, else byte-level "
                                           "BPE trained on the corpus)")
    tokenizer_vocab_size: int = arg(4096, "vocabulary of the trained tokenizer")
    tokenizer_train_docs: int | None = arg(None, "train the tokenizer on the first N documents (default: all)")
    mlm_probability: float = arg(0.15, "fraction of tokens masked in training")
    eval_mlm_probability: float | None = arg(None, "fraction of tokens masked in validation (default: "
                                                   "--mlm_probability); fixed, it keeps perplexities comparable "
                                                   "between runs trained at different rates")
    mask_replace_prob: float = arg(0.8, "share of the masked tokens replaced by <mask> in training (BERT: 0.8)")
    random_replace_prob: float = arg(0.1, "share of the masked tokens replaced by a random token in training (BERT: "
                                          "0.1); the rest keep their own token")
    eval_mask_replace_prob: float | None = arg(None, "--mask_replace_prob of validation (default: training's). 1 with "
                                                     "--eval_random_replace_prob 0 scores prediction from context "
                                                     "alone: a kept token is its own answer, so with BERT's 80/10/10 a "
                                                     "model that only copies its input and knows unigram frequencies "
                                                     "scores ~half the unigram perplexity")
    eval_random_replace_prob: float | None = arg(None, "--random_replace_prob of validation (default: training's)")
    # The demo's values of shared flags.
    train_file: list[str] | None = arg([str(REPO / "data/moby_dick/chapters.jsonl")], "local text/json(l)/"
                                       "parquet/csv/tsv files or globs, optionally compressed")
    lr_scheduler_type: Literal[SCHEDULERS] = arg("polynomial", "learning-rate schedule after warmup")
    warmup_steps: int = arg(30, "updates of linear warmup")
    max_steps: int = arg(300, "updates to train for")
    eval_steps: int | None = arg(100, "evaluate every N updates (0: only at the end)")
    checkpointing_steps: int = arg(100, "save a resumable checkpoint every N updates (0: none)")
    output_dir: str = arg("outputs/tiny", "folder for the final model, checkpoints and logs")

    bounds = {"tokenizer_vocab_size": "[8, inf)", "tokenizer_train_docs": "[1, inf)", "mlm_probability": "(0, 1)",
              "eval_mlm_probability": "(0, 1)", "head_learning_rate": "(0, inf)", "mask_replace_prob": "[0, 1]",
              "random_replace_prob": "[0, 1]", "eval_mask_replace_prob": "[0, 1]", "eval_random_replace_prob": "[0, 1]"}

    def __post_init__(self):
        super().__post_init__()
        if not self.model_name_or_path:
            self.model_type = self.model_type or "linformer"
        trains_tokenizer = self.tokenizer_name is None and self.model_name_or_path is None
        if self.streaming and trains_tokenizer and self.tokenizer_train_docs is None:
            raise UsageError("--streaming with a trained tokenizer needs --tokenizer_train_docs (how many documents "
                             "to train it on), or pass --tokenizer_name")
        for prefix in ("", "eval_"):
            mask, random = self.replacement(prefix == "eval_")
            if mask + random > 1:
                raise UsageError(f"--{prefix}mask_replace_prob {mask:g} + --{prefix}random_replace_prob {random:g} "
                                 f"exceed 1: they are shares of the same masked tokens (BERT: 0.8 + 0.1, the rest "
                                 f"kept)")
        if trains_tokenizer and self.tokenizer_vocab_size < MIN_VOCAB_SIZE:
            raise UsageError(f"--tokenizer_vocab_size {self.tokenizer_vocab_size}: a byte-level BPE has at least "
                             f"{MIN_VOCAB_SIZE} tokens (256 bytes and {MIN_VOCAB_SIZE - 256} special tokens); pass "
                             f"{MIN_VOCAB_SIZE} or more")

    def replacement(self, validation=False):
        """(mask_replace_prob, random_replace_prob) of training or validation (validation's default to training's)."""
        if not validation:
            return self.mask_replace_prob, self.random_replace_prob
        return (self.mask_replace_prob if self.eval_mask_replace_prob is None else self.eval_mask_replace_prob,
                self.random_replace_prob if self.eval_random_replace_prob is None else self.eval_random_replace_prob)


def model_config(args, tokenizer=None):
    """The model's config: the checkpoint's or the demo model's, then the overrides; without a tokenizer, its
    planned size."""
    if args.model_name_or_path:
        return apply_overrides(pretrained_config(args), parse_overrides(args.config_overrides))
    chosen = parse_overrides(args.config_overrides)
    overrides = {**DEMO_MODELS[args.model_type], **chosen}
    if tokenizer is None and args.tokenizer_name is None:  # the tokenizer is to be trained
        overrides.setdefault("vocab_size", args.tokenizer_vocab_size)
    try:
        return models.new_config(args.model_type, overrides, tokenizer)
    except UsageError as e:
        if "projection_type" in chosen or "projection_type=" not in str(e):
            raise
        raise UsageError(f"{e} (projection_type={overrides['projection_type']!r} is train_mlm.py's default for a new "
                         f"Linformer: add projection_type=linear for the paper's learned E/F, which take any n and k)"
                         ) from None


def pretrained_config(args):
    """The config of --model_name_or_path, refused in one line when it cannot load, has no weights or is not of
    the --model_type asked for (a recipe's or a flag's architecture is never dropped without a word)."""
    source = args.model_name_or_path
    models.check_local_path(source, "--model_name_or_path")
    if Path(source).is_dir():
        checkpoints.check_model_folder(source, "--model_name_or_path")
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=args.trust_remote_code)
    except (OSError, ValueError) as e:
        raise UsageError(f"--model_name_or_path {source}: cannot load its config ({checkpoints.first_line(e)})"
                         ) from None
    if args.model_type and args.model_type != config.model_type:
        raise UsageError(f"--model_type {args.model_type}: --model_name_or_path {source} is a {config.model_type} "
                         f"model, and continues as one; drop --model_type (or start a new model without the "
                         f"checkpoint)")
    return config


def load_model(args, config, accelerator):
    """A new model of `config`, or --model_name_or_path's weights with a new masked-LM head where it has none
    (named in the log: a head that starts untrained is why --head_learning_rate exists)."""
    if not args.model_name_or_path:
        return AutoModelForMaskedLM.from_config(config)
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(
            args.model_name_or_path, config=config, trust_remote_code=args.trust_remote_code,
            output_loading_info=True)
    except (OSError, ValueError) as e:
        raise UsageError(f"--model_name_or_path {args.model_name_or_path}: cannot load it as a masked-LM model "
                         f"({checkpoints.first_line(e)})") from None
    body = f"{model.base_model_prefix}."
    missing = [name for name in info["missing_keys"] if name.startswith(body)]
    if missing:
        raise UsageError(f"--model_name_or_path {args.model_name_or_path}: the checkpoint lacks {len(missing)} "
                         f"encoder tensor(s) ({', '.join(missing[:3])}, ...); only a masked-LM head may start new")
    if info["missing_keys"]:
        accelerator.print(f"--model_name_or_path {args.model_name_or_path} has no masked-LM head: new, untrained "
                          + ", ".join(sorted(info["missing_keys"])))
    return model


def own_rates(model, args):
    """The rates of `loop.build_optimizer`'s groups: the masked-LM head's (the parameters outside the encoder; the
    decoder tied to the word embeddings is the encoder's), then a Linformer's E/F and gates."""
    body = f"{model.base_model_prefix}."
    head = [(lambda name: not name.startswith(body), args.head_learning_rate)] if args.head_learning_rate else []
    return (*head, *loop.linformer_rates(args))


@dataclass
class MLMSetup(loop.Setup):
    """What this script settles before reading data (`check_inputs`)."""

    block_size: int
    planned_config: PreTrainedConfig  # a checkpoint's, final; a new model's, until the tokenizer fixes its vocabulary


@dataclass
class MLMData:
    """The prepared data (`prepare_data`): the tokenizer, the model's final config, the packed blocks by split."""

    tokenizer: PreTrainedTokenizerBase
    config: PreTrainedConfig
    blocks: dict


def check_inputs(args, accelerator, accumulation):
    """Every error that needs no data: the model config, the block size, files, the output folder."""
    config = model_config(args)
    trains_tokenizer = args.tokenizer_name is None and args.model_name_or_path is None
    if trains_tokenizer and config.vocab_size < args.tokenizer_vocab_size:
        raise UsageError(f"--config_overrides vocab_size={config.vocab_size} is below --tokenizer_vocab_size "
                         f"{args.tokenizer_vocab_size}: the trained tokenizer would not fit the embedding table")
    block_size = models.input_length("--block_size", args.block_size, config,
                                     remedy="raise it with --config_overrides max_seq_length=N, or lower --block_size")
    check_masking(args, block_size, accelerator.num_processes * accumulation)
    check_sources(**args.corpus_sources())
    output_dir, checkpoint = checkpoints.open_run(args, accelerator, accumulation)
    return MLMSetup(accelerator=accelerator, accumulation=accumulation, output_dir=output_dir, checkpoint=checkpoint,
                    block_size=block_size, planned_config=config)


def check_masking(args, block_size, forward_passes):
    """A rate so small that an update masks no token on average would train on nothing and report a validation
    perplexity of 1 (no masked token, no loss)."""
    tokens = args.per_device_train_batch_size * forward_passes * (block_size - 1)  # <s> is never masked
    if args.mlm_probability * tokens < 1:
        raise UsageError(f"--mlm_probability {args.mlm_probability:g} masks {args.mlm_probability * tokens:.2g} of an "
                         f"update's {tokens:,} tokens on average: most updates would have nothing to learn from; "
                         f"pass at least {1 / tokens:.2g} (RoBERTa: 0.15)")


def prepare_data(args, setup):
    """Corpus, tokenizer (the run's own when resuming), the model's config (a checkpoint's as planned: its weights
    are not hashed again; a new model's built for the tokenizer), packed blocks; the main process goes first."""
    accelerator, out = setup.accelerator, setup.output_dir
    with processes.main_process_first(accelerator, "preparing the data"):
        corpus = load_corpus(**args.corpus_options(), seed=args.seed)
        if args.tokenizer_name:
            tokenizer = load_tokenizer(args.tokenizer_name)
        elif setup.checkpoint is not None:
            tokenizer = load_tokenizer(setup.checkpoint / "tokenizer", "--resume_from_checkpoint")
        elif args.model_name_or_path:
            tokenizer = load_tokenizer(args.model_name_or_path, "--model_name_or_path",
                                       trust_remote_code=args.trust_remote_code)
        elif accelerator.is_main_process:
            tokenizer = train_tokenizer(corpus["train"], args.tokenizer_vocab_size, args.tokenizer_train_docs)
            checkpoints.write_folder(tokenizer.save_pretrained, out / "tokenizer", "the trained tokenizer", out,
                                     accelerator.num_processes)
        else:
            tokenizer = load_tokenizer(out / "tokenizer", "--output_dir")
        config = setup.planned_config if args.model_name_or_path else model_config(args, tokenizer)
        check_tokenizer(tokenizer, config)
        blocks = pack_corpus(corpus, tokenizer, setup.block_size, args)
    return MLMData(tokenizer=tokenizer, config=config, blocks=blocks)


def build_run(args, setup, data):
    """The model and its masked blocks, prepared with the optimizer and schedule, as one `loop.Run`."""
    train_loader, eval_loader = block_loaders(args, data.blocks, masking(data.tokenizer, args, validation=False),
                                              masking(data.tokenizer, args, validation=True))
    model = load_model(args, data.config, setup.accelerator)
    prepared = loop.prepare(args, setup, model, train_loader, [eval_loader], own_rates=own_rates(model, args))
    return loop.new_run(args, setup, prepared, objective=objective(setup.accelerator), project="mlm",
                        eval_steps=args.eval_steps, tokenizer=data.tokenizer)


def masking(tokenizer, args, validation):
    """The collator of training or validation: which tokens are masked (seeded per block) and what replaces them."""
    mask, random = args.replacement(validation)
    rate = (args.eval_mlm_probability or args.mlm_probability) if validation else args.mlm_probability
    return BlockSeededMLMCollator(tokenizer, rate, seed=args.seed + int(validation), mask_replace_prob=mask,
                                  random_replace_prob=random)


def objective(accelerator):
    """The masked-LM loss; the vocabulary logits only at the masked positions where the model is not wrapped
    for several processes (the same loss, faster: see MaskedLMObjective)."""
    return MaskedLMObjective(sparse_head=accelerator.distributed_type == DistributedType.NO,
                             autocast=accelerator.autocast)


def model_card(run):
    """The final folder's README.md: what was trained, on what, with which result and recipe."""
    args, state, config = run.args, run.state, run.accelerator.unwrap_model(run.model).config
    start = (f"continued from `{args.model_name_or_path}`" if args.model_name_or_path else "from scratch")
    return outputs.model_card(
        title=args.hub_model_id or Path(args.output_dir).name, pipeline_tag="fill-mask", datasets=args.dataset_name,
        tags=[config.model_type, "masked-lm"], arguments=run.arguments(),
        intro=f"A {config.model_type} masked language model ({config.num_hidden_layers} layers, hidden size "
              f"{config.hidden_size}) pretrained {start} with `train_mlm.py` from linformer-hf (RoBERTa's "
              f"masked-LM recipe).",
        sections={"Results": outputs.metrics_table({"updates": state.step, "tokens": state.tokens_seen,
                                                    **state.last_eval}),
                  "Use": outputs.pipeline_use("fill-mask", args.hub_model_id or args.output_dir,
                                              f"Call me {run.tokenizer.mask_token}.")})


def main(argv=None):
    args = parse_args(MLMArguments, argv, prog="train_mlm.py")
    accelerator, accumulation = loop.start(args)
    setup = check_inputs(args, accelerator, accumulation)
    set_seed(args.seed)
    data = prepare_data(args, setup)
    run = build_run(args, setup, data)
    loop.fit(run, setup.checkpoint, block_size=setup.block_size)
    model_type = run.accelerator.unwrap_model(run.model).config.model_type
    return outputs.finish(run, model_card(run), f"{model_type} MLM, {run.state.step} updates")

if __name__ == "__main__":
    processes.run_script(main, "train_mlm.py")
