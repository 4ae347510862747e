"""Masked-LM pretraining of a Linformer (or a RoBERTa baseline) with RoBERTa's recipe.

    python train_mlm.py                                   # CPU demo: tiny Linformer on Moby Dick, minutes
    python train_mlm.py --config configs/tiny.yaml --max_steps 50
    accelerate launch train_mlm.py --config configs/linformer_base_n512_k256_layerwise.yaml

The same script runs on one process or many (`accelerate launch`: multi-GPU, multi-node, DeepSpeed,
FSDP, fp16/bf16 come from Accelerate's own config). Values come from the dataclass below, then a YAML
recipe (--config), then flags (--max_steps 100, --model.projected_dim 256); unknown keys are errors.

One update = `total_batch_size` sequences = per-device batch x processes x accumulation steps; its loss
is the mean over every masked token of that update, on however many processes it is split, so a run
on one process and on eight follow the same trajectory.
"""

import dataclasses
import itertools
import json
import logging
import math
import os
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
import yaml
from accelerate import Accelerator
from accelerate.utils import (DataLoaderConfiguration, DistributedType, GradientAccumulationPlugin,
                               ProjectConfiguration, set_seed)
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import CONFIG_MAPPING, AutoModelForMaskedLM, get_scheduler

import linformer_hf  # noqa: F401  (registers Linformer with the Auto classes)
from linformer_hf import mlm_data
from linformer_hf import script_utils as su
from linformer_hf.script_utils import UsageError

REPO = Path(__file__).resolve().parent
# save_state stores the tied input/output embeddings once and warns so at every checkpoint;
# load_state ties them again (resuming is bit-exact, see tests/test_train_mlm.py).
logging.getLogger("accelerate.utils.other").addFilter(lambda record: "Removed shared tensor" not in record.getMessage())


@dataclass
class Args:
    """Masked-LM pretraining (RoBERTa recipe) of Linformer or RoBERTa. Defaults: the tiny CPU demo."""

    # model: `model` holds config fields of the model_type (LinformerConfig / RobertaConfig)
    model_type: Literal["linformer", "roberta"] = "linformer"
    model: dict = field(default_factory=lambda: dict(
        hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=512,
        max_seq_length=128, projected_dim=32, projection_sharing="layerwise"),
        metadata={"help": "model config fields, e.g. --model.projected_dim 256"})
    # corpus
    dataset_name: list[str] | None = field(default=None, metadata={"help": "Hub dataset(s), mixed"})
    dataset_config_name: list[str | None] | None = field(
        default=None, metadata={"help": "one per --dataset_name (none: no config)"})
    train_file: list[str] | None = field(default_factory=lambda: [str(REPO / "data/moby_dick/chapters.jsonl")],
                                         metadata={"help": "local text/json(l)/parquet/csv files or globs"})
    validation_file: list[str] | None = None
    text_column_name: str | None = None
    validation_split_percentage: float = 5.0
    streaming: bool = False
    streaming_validation_docs: int = 1000
    streaming_shuffle_buffer: int = 10000
    mix_probabilities: list[float] | None = None
    max_seq_length: int | None = field(default=None, metadata={"help": "block length in tokens (none: the model's n)"})
    preprocessing_num_workers: int | None = None
    dataloader_num_workers: int = 0
    max_eval_samples: int | None = None
    # tokenizer: an existing one, or byte-level BPE trained on the corpus
    tokenizer_name: str | None = None
    tokenizer_vocab_size: int = 4096
    tokenizer_train_docs: int | None = None
    mlm_probability: float = 0.15
    # optimisation (RoBERTa: AdamW betas 0.9/0.98, eps 1e-6, weight decay 0.01, warmup + linear decay)
    per_device_train_batch_size: int = 16
    per_device_eval_batch_size: int = 64
    total_batch_size: int | None = field(default=None, metadata={"help": "sequences per update"})
    gradient_accumulation_steps: int | None = None
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    max_grad_norm: float = 1.0
    lr_scheduler_type: Literal["linear", "polynomial", "cosine", "constant_with_warmup"] = "polynomial"
    warmup_steps: int = 30
    max_steps: int = 300
    mixed_precision: Literal["no", "fp16", "bf16"] | None = field(
        default=None, metadata={"help": "default: Accelerate's config / `accelerate launch --mixed_precision`"})
    seed: int = 42
    # evaluation, logging, checkpoints
    eval_steps: int = 100
    logging_steps: int = 10
    checkpointing_steps: int = 100
    keep_last_checkpoints: int = 2
    resume_from_checkpoint: str | None = field(default=None, metadata={"help": "`latest` or a checkpoint folder"})
    output_dir: str = "outputs/tiny"
    overwrite_output_dir: bool = False
    report_to: str = "tensorboard"
    # Hub
    push_to_hub: bool = False
    hub_model_id: str | None = None
    hub_private_repo: bool = False
    push_checkpoints_to_hub: bool = False


def build_model_config(args, tokenizer=None):
    """The model config from `args.model`; fields it leaves unset follow the tokenizer."""
    if args.model_type not in CONFIG_MAPPING:
        raise UsageError(f"--model_type {args.model_type}: not registered (is linformer_hf installed?)")
    config_class = CONFIG_MAPPING[args.model_type]
    allowed = {f.name for f in dataclasses.fields(config_class)}
    for key in args.model:
        if key not in allowed:
            raise UsageError(f"--model.{key}: " + su.did_you_mean(f"{config_class.__name__} field", key, allowed))
    kwargs = dict(args.model)
    if tokenizer is not None:
        kwargs.setdefault("vocab_size", len(tokenizer))
        for name in ("pad", "bos", "eos"):
            if getattr(tokenizer, f"{name}_token_id") is not None:
                kwargs.setdefault(f"{name}_token_id", getattr(tokenizer, f"{name}_token_id"))
    try:
        return config_class(**kwargs)
    except (ValueError, TypeError) as e:
        raise UsageError(f"--model: {e}") from None


def longest_input(config):
    """n: the longest sequence the model accepts (RoBERTa numbers positions after the pad id)."""
    if hasattr(config, "max_seq_length"):
        return config.max_seq_length
    return config.max_position_embeddings - config.pad_token_id - 1


def check_args(args, num_processes):
    """Every input error we can detect without reading the corpus, before anything is loaded."""
    out = su.ensure_writable_dir(args.output_dir)
    config = build_model_config(args)
    n = longest_input(config)
    block = args.max_seq_length or n
    if block > n:
        raise UsageError(f"--max_seq_length {block} exceeds the model's longest input n={n} "
                         f"(raise --model.max_seq_length, or lower --max_seq_length)")
    per_update = args.per_device_train_batch_size * num_processes
    accumulation = args.gradient_accumulation_steps or 1
    if args.total_batch_size:
        if args.total_batch_size % per_update:
            raise UsageError(f"--total_batch_size {args.total_batch_size} is not a multiple of "
                             f"per_device_train_batch_size x processes = {per_update}")
        accumulation = args.total_batch_size // per_update
        if args.gradient_accumulation_steps not in (None, accumulation):
            raise UsageError(f"--gradient_accumulation_steps {args.gradient_accumulation_steps} contradicts "
                             f"--total_batch_size {args.total_batch_size} (which needs {accumulation})")
    for name in ("max_steps", "per_device_train_batch_size", "per_device_eval_batch_size", "logging_steps"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} {getattr(args, name)}: must be at least 1")
    if args.warmup_steps >= args.max_steps and args.lr_scheduler_type != "constant_with_warmup":
        raise UsageError(f"--warmup_steps {args.warmup_steps} leaves no updates for the {args.lr_scheduler_type} "
                         f"decay: it must be below --max_steps {args.max_steps}")
    if args.push_to_hub and not args.hub_model_id:
        raise UsageError("--push_to_hub needs --hub_model_id ORG/NAME")
    if args.streaming and args.tokenizer_name is None and args.tokenizer_train_docs is None:
        raise UsageError("--streaming with a trained tokenizer needs --tokenizer_train_docs (how many documents "
                         "to train it on), or pass --tokenizer_name")
    if args.train_file:
        mlm_data.resolve_files(args.train_file, "--train_file")
    if args.validation_file:
        mlm_data.resolve_files(args.validation_file, "--validation_file")
    checkpoint = None
    if args.resume_from_checkpoint:
        checkpoint = su.find_checkpoint(args.resume_from_checkpoint, out / "checkpoints")
    elif su.list_checkpoints(out / "checkpoints") and not args.overwrite_output_dir:
        raise UsageError(f"--output_dir {out} holds checkpoints of an earlier run: pass "
                         f"--resume_from_checkpoint latest to continue it, or --overwrite_output_dir to start over")
    return out, block, accumulation, checkpoint


def mlm_loss_sum(model, batch):
    """Summed cross-entropy over the masked tokens (normalised by the caller over the whole update)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    masked = batch["labels"] != -100
    return F.cross_entropy(logits[masked].float(), batch["labels"][masked], reduction="sum")


@torch.no_grad()
def evaluate(model, dataloader, accelerator):
    """Validation loss per masked token and perplexity, over every process's share (gathered)."""
    model.eval()
    total, count = 0.0, 0
    for batch in dataloader:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        masked = batch["labels"] != -100
        per_token = F.cross_entropy(logits[masked].float(), batch["labels"][masked], reduction="none")
        per_block = torch.zeros(len(masked), device=per_token.device).index_add_(0, masked.nonzero()[:, 0], per_token)
        sums, counts = accelerator.gather_for_metrics((per_block, masked.sum(1)))  # per block: drops padding repeats
        total, count = total + sums.sum().item(), count + counts.sum().item()
    model.train()
    loss = total / max(count, 1)
    return {"eval_loss": loss, "eval_perplexity": math.exp(min(loss, 50))}


def check_replicas(model, accelerator):
    """Data-parallel training keeps one full copy of the weights per process, and they must stay bitwise
    equal; compare per-tensor checksums across processes (sharded setups, FSDP/ZeRO, hold no full copy)."""
    sharded = {DistributedType.DEEPSPEED, DistributedType.FSDP, DistributedType.MEGATRON_LM, DistributedType.XLA}
    if accelerator.num_processes == 1 or accelerator.distributed_type in sharded:
        return
    sums = torch.stack([torch.stack([p.detach().double().sum(), p.detach().double().square().sum()])
                        for p in model.parameters()]).flatten()
    every = accelerator.gather(sums[None].to(accelerator.device))
    if not torch.equal(every, every[:1].expand_as(every)):
        raise RuntimeError("data-parallel replicas diverged: the processes hold different weights")
    accelerator.print(f"Weights identical on all {accelerator.num_processes} processes")


def peak_memory_gb():
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # CPU: peak resident set (KiB -> GiB)


def write_model_card(path, args, config, metrics, tokens_seen):
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(library_name="transformers", pipeline_tag="fill-mask", license="apache-2.0",
                         tags=[args.model_type, "masked-lm", "linformer-hf"],
                         datasets=args.dataset_name or None)
    recipe = yaml.safe_dump(su.config_to_dict(args), sort_keys=False)
    lines = [f"# {args.hub_model_id or Path(args.output_dir).name}", "",
             f"A {args.model_type} masked language model ({config.num_hidden_layers} layers, hidden size "
             f"{config.hidden_size}) pretrained from scratch with `train_mlm.py` from linformer-hf "
             f"(RoBERTa's masked-LM recipe), {metrics['step']} updates, {tokens_seen:,} tokens.", "",
             "## Results", "", "| metric | value |", "| --- | --- |"]
    lines += [f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()]
    lines += ["", "## Use", "", "```python", "import linformer_hf  # or trust_remote_code=True",
              "from transformers import pipeline", f"fill = pipeline('fill-mask', model='{args.hub_model_id or path}')",
              "fill('Call me <mask>.')", "```", "", "## Training config", "", "```yaml", recipe.rstrip(), "```", ""]
    ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)).save(Path(path) / "README.md")


def push_to_hub(args, folder, message, blocking=True):
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(args.hub_model_id, private=args.hub_private_repo, exist_ok=True)
    return api.upload_folder(repo_id=args.hub_model_id, folder_path=folder, commit_message=message,
                             ignore_patterns=["checkpoints/**", ".*"], run_as_future=not blocking)


def main(argv=None):
    args = su.parse_config(Args, argv, prog="train_mlm.py")
    trackers = su.resolve_trackers(args.report_to)
    accelerator = Accelerator(
        mixed_precision=args.mixed_precision, log_with=trackers,
        gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1, sync_with_dataloader=False),
        step_scheduler_with_optimizer=False,  # one scheduler step per update, whatever the process count
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
        project_config=ProjectConfiguration(project_dir=args.output_dir,
                                            logging_dir=os.path.join(args.output_dir, "logs")))
    out, block_size, accumulation, checkpoint = check_args(args, accelerator.num_processes)
    accelerator.gradient_accumulation_steps = accumulation
    set_seed(args.seed)

    def say(message):  # main process only, and clear of the progress bar
        if accelerator.is_main_process:
            tqdm.write(message)

    if args.overwrite_output_dir and not args.resume_from_checkpoint and accelerator.is_main_process:
        for stale in [out / "checkpoints", out / "metrics.jsonl"]:
            if stale.exists():
                say(f"--overwrite_output_dir: removing {stale}")
                shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    if args.resume_from_checkpoint and checkpoint is None:
        say(f"--resume_from_checkpoint latest: no checkpoint in {out / 'checkpoints'} yet, starting from scratch")

    # Corpus, tokenizer, packed blocks: the main process goes first, the others then read its caches.
    def prepare_data():
        corpus = mlm_data.load_corpus(
            args.dataset_name, args.dataset_config_name, args.train_file, args.validation_file,
            args.text_column_name, args.validation_split_percentage, args.streaming,
            args.streaming_validation_docs, args.mix_probabilities, args.seed)
        if args.tokenizer_name:
            tokenizer = mlm_data.load_tokenizer(args.tokenizer_name)
        elif checkpoint is not None and (checkpoint / "tokenizer").is_dir():
            tokenizer = mlm_data.load_tokenizer(checkpoint / "tokenizer")  # the one the run started with
        elif accelerator.is_main_process:
            say(f"Training a byte-level BPE tokenizer (vocabulary {args.tokenizer_vocab_size}) on the corpus")
            tokenizer = mlm_data.train_tokenizer(corpus["train"], args.tokenizer_vocab_size, args.tokenizer_train_docs)
            tokenizer.save_pretrained(out / "tokenizer")
        else:
            tokenizer = mlm_data.load_tokenizer(out / "tokenizer")
        config = build_model_config(args, tokenizer)
        mlm_data.check_tokenizer(tokenizer, config)
        train = mlm_data.pack(corpus["train"], tokenizer, block_size, args.preprocessing_num_workers)
        val = mlm_data.pack(corpus["validation"], tokenizer, block_size, args.preprocessing_num_workers)
        return tokenizer, config, train, val

    tokenizer, config, train_blocks, eval_blocks = su.main_process_first(accelerator, prepare_data)
    if not args.streaming:
        if len(train_blocks) == 0 or len(eval_blocks) == 0:
            raise UsageError("the corpus has no text: no training or validation blocks after tokenization")
        if args.max_eval_samples:
            eval_blocks = eval_blocks.select(range(min(args.max_eval_samples, len(eval_blocks))))
        say(f"Corpus: {len(train_blocks):,} training and {len(eval_blocks):,} validation blocks of up to "
            f"{block_size} tokens")
    else:
        train_blocks = train_blocks.shuffle(seed=args.seed, buffer_size=args.streaming_shuffle_buffer)
        if args.max_eval_samples:
            eval_blocks = eval_blocks.take(args.max_eval_samples)

    collator = mlm_data.BlockSeededMLMCollator(tokenizer, args.mlm_probability, seed=args.seed)
    eval_collator = mlm_data.BlockSeededMLMCollator(tokenizer, args.mlm_probability, seed=args.seed + 1)
    loader_rng = torch.Generator().manual_seed(args.seed)  # keeps the global RNG (dropout) out of data loading
    train_dl = DataLoader(train_blocks, batch_size=args.per_device_train_batch_size, shuffle=not args.streaming,
                          collate_fn=collator, num_workers=args.dataloader_num_workers, generator=loader_rng)
    eval_dl = DataLoader(eval_blocks, batch_size=args.per_device_eval_batch_size, collate_fn=eval_collator,
                         num_workers=args.dataloader_num_workers)

    model = AutoModelForMaskedLM.from_config(config)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
    groups = [{"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
               "weight_decay": args.weight_decay},
              {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                                  eps=args.adam_epsilon)
    scheduler = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=args.warmup_steps,
                              num_training_steps=args.max_steps)
    model, optimizer, train_dl, eval_dl, scheduler = accelerator.prepare(model, optimizer, train_dl, eval_dl, scheduler)

    # Resume: weights, optimizer, scheduler and every process's RNG, then the data position.
    step, epoch, batches_done, tokens_seen = 0, 0, 0, 0
    if checkpoint is not None:
        saved = su.load_checkpoint(accelerator, checkpoint)
        layout = {"num_processes": accelerator.num_processes, "per_device_train_batch_size":
                  args.per_device_train_batch_size, "gradient_accumulation_steps": accumulation}
        if any(saved[key] != value for key, value in layout.items()):
            raise UsageError(f"--resume_from_checkpoint {checkpoint}: it was written with "
                             f"{ {key: saved[key] for key in layout} }, this run has {layout}; resume with the same "
                             f"layout so that the data position and every process's RNG state carry over")
        step, epoch, batches_done = saved["step"], saved["epoch"], saved["batches_in_epoch"]
        tokens_seen = saved["tokens_seen"]
        say(f"Resumed from {checkpoint}: step {step}, epoch {epoch}, batch {batches_done} of that epoch")
    jsonl = out / "metrics.jsonl"
    if accelerator.is_main_process and jsonl.exists():  # keep the log of the steps this run does not redo
        kept = [r for r in su.read_jsonl(jsonl) if r["step"] <= step] if checkpoint is not None else []
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in kept))

    run_config = {**su.config_to_dict(args), "num_processes": accelerator.num_processes,
                  "gradient_accumulation_steps": accumulation, "block_size": block_size,
                  "num_parameters": sum(p.numel() for p in model.parameters())}
    if accelerator.is_main_process:
        (out / "train_config.yaml").write_text(yaml.safe_dump(run_config, sort_keys=False))
    su.init_trackers(accelerator, "mlm", run_config)
    total = args.per_device_train_batch_size * accelerator.num_processes * accumulation
    say(f"{args.model_type}: {run_config['num_parameters']:,} parameters, {accelerator.num_processes} "
        f"process(es), {total} sequences per update ({accumulation} accumulation steps), {args.max_steps} updates")

    def save_tokenizer(folder):
        tokenizer.save_pretrained(Path(folder) / "tokenizer")

    uploads = []  # background pushes of checkpoints, checked at the end

    def checkpoint_now():
        state = {"epoch": epoch, "batches_in_epoch": batches_done, "tokens_seen": tokens_seen,
                 "num_processes": accelerator.num_processes, "gradient_accumulation_steps": accumulation,
                 "per_device_train_batch_size": args.per_device_train_batch_size}
        su.save_checkpoint(accelerator, out / "checkpoints", step, state, keep_last=args.keep_last_checkpoints,
                           save_extra=save_tokenizer)
        if args.push_checkpoints_to_hub and accelerator.is_main_process:
            try:  # the weights as of this checkpoint, uploaded in the background
                accelerator.unwrap_model(model).save_pretrained(out)
                tokenizer.save_pretrained(out)
                uploads.append((step, push_to_hub(args, out, f"step {step}", blocking=False)))
            except Exception as e:  # noqa: BLE001  a failed upload must not stop training
                say(f"warning: pushing step {step} to {args.hub_model_id} failed: {e}")

    if step == 0 and args.eval_steps:
        metrics = evaluate(model, eval_dl, accelerator)
        su.log_metrics(accelerator, metrics, step, jsonl)
        say(f"step 0 (untrained): validation loss {metrics['eval_loss']:.3f}, "
            f"perplexity {metrics['eval_perplexity']:.1f}")

    model.train()
    progress = tqdm(total=args.max_steps, initial=step, desc="train", disable=not accelerator.is_main_process)
    window_loss, window_steps, window_tokens, window_start = 0.0, 0, 0, time.perf_counter()
    pending_tokens = 0  # this process's tokens not yet summed over processes into tokens_seen

    def count_pending():
        nonlocal pending_tokens, tokens_seen
        tokens = int(accelerator.reduce(torch.tensor(pending_tokens, device=accelerator.device), "sum").item())
        pending_tokens, tokens_seen = 0, tokens_seen + tokens
        return tokens

    while step < args.max_steps:
        collator.epoch = epoch
        train_dl.set_epoch(epoch)
        batches = accelerator.skip_first_batches(train_dl, batches_done) if batches_done else train_dl
        stream, started_at = iter(batches), batches_done
        while step < args.max_steps:
            group = list(itertools.islice(stream, accumulation))
            if len(group) < accumulation:  # end of the epoch; a partial update waits for the next shuffle
                break
            # Normalise by the masked tokens of the whole update, on all processes: DDP averages gradients
            # over processes and backward() divides by the accumulation steps, so scale back by both.
            masked = accelerator.reduce(sum((b["labels"] != -100).sum() for b in group), "sum").clamp(min=1)
            scale = accelerator.num_processes * accumulation / masked
            update_loss = 0.0
            for batch in group:
                with accelerator.accumulate(model):
                    loss_sum = mlm_loss_sum(model, batch)
                    accelerator.backward(loss_sum * scale)
                    if accelerator.sync_gradients and args.max_grad_norm > 0:
                        accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
                update_loss += loss_sum.detach()
                pending_tokens += batch["attention_mask"].sum().item()
            scheduler.step()
            step, batches_done = step + 1, batches_done + accumulation
            window_loss += accelerator.reduce(update_loss, "sum").item() / masked.item()
            window_steps += 1
            progress.update(1)

            if step % args.logging_steps == 0 or step == args.max_steps:
                window_tokens += count_pending()
                elapsed = time.perf_counter() - window_start
                metrics = {"train_loss": window_loss / window_steps, "learning_rate": scheduler.get_last_lr()[0],
                           "tokens_per_second": window_tokens / elapsed, "tokens_seen": tokens_seen, "epoch": epoch,
                           "peak_memory_gb": peak_memory_gb()}
                su.log_metrics(accelerator, metrics, step, jsonl)
                progress.set_postfix(loss=f"{metrics['train_loss']:.3f}", tok_s=f"{metrics['tokens_per_second']:,.0f}")
                window_loss, window_steps, window_tokens, window_start = 0.0, 0, 0, time.perf_counter()
            if args.eval_steps and step % args.eval_steps == 0 and step < args.max_steps:
                metrics = evaluate(model, eval_dl, accelerator)
                su.log_metrics(accelerator, metrics, step, jsonl)
                say(f"step {step}: validation loss {metrics['eval_loss']:.3f}, "
                    f"perplexity {metrics['eval_perplexity']:.1f}")
            if args.checkpointing_steps and step % args.checkpointing_steps == 0:
                window_tokens += count_pending()
                checkpoint_now()
        if step < args.max_steps:
            if started_at == 0 and batches_done == 0:
                raise UsageError(f"the training set is smaller than one update ({total} sequences); "
                                 f"lower --total_batch_size or --per_device_train_batch_size")
            epoch, batches_done = epoch + 1, 0
    progress.close()
    check_replicas(model, accelerator)

    # Final model: safetensors + config (+ remote code) + tokenizer + model card.
    final = evaluate(model, eval_dl, accelerator)
    su.log_metrics(accelerator, final, step, jsonl)
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    unwrapped.save_pretrained(out, is_main_process=accelerator.is_main_process, save_function=accelerator.save,
                              state_dict=accelerator.get_state_dict(model))
    if accelerator.is_main_process:
        tokenizer.save_pretrained(out)
        write_model_card(out, args, config, {"step": step, **final}, tokens_seen)
    accelerator.end_training()
    say(f"Done: {step} updates, validation loss {final['eval_loss']:.3f}, perplexity {final['eval_perplexity']:.2f}; "
        f"model saved to {out}")
    for at_step, upload in uploads:
        if upload.exception() is not None:
            say(f"warning: the background push of step {at_step} to {args.hub_model_id} failed: {upload.exception()}")
    if args.push_to_hub and accelerator.is_main_process:
        try:
            push_to_hub(args, out, f"{args.model_type} MLM, {step} updates")
            say(f"Pushed to https://huggingface.co/{args.hub_model_id}")
        except Exception as e:  # noqa: BLE001  offline, no token, no rights: the local save above stands
            raise su.push_failed(args.hub_model_id, out, e) from None
    return final


if __name__ == "__main__":
    try:
        main()
    except UsageError as e:
        sys.exit(f"train_mlm.py: error: {e}")
