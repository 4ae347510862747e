# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The training loop every script runs: `train(run)`, with all of its state in `run.state`.

A script settles its `Setup` before reading any data (processes, output folder, the checkpoint to resume),
hands its model and data loaders to `prepare` (optimizer, schedule, Accelerate) and makes the `Run` of them
with `new_run` (adding an objective that says how to count and score a batch); `fit` then trains it. The
loop is the same for masked-LM pretraining, finetuning and distillation, so each rule is written once:

* One update = `accumulation` batches on every process. Its loss is the sum over the whole update,
  divided by the objective's count (masked tokens, examples, ...) summed over every batch and process,
  so one process and eight follow the same trajectory. The scheduler steps once per update.
* A non-finite loss or gradient norm stops training before the update is applied, naming the step
  and the last good checkpoint; a model with NaN/inf weights is never saved.
* Under fp16 a gradient scaler multiplies the loss, and an update whose gradients overflow is skipped (the
  scaler lowers the scale; the schedule does not advance): normal while the scale settles. Only a scale
  that keeps falling below `MIN_LOSS_SCALE` means divergence, and stops the run as a NaN loss does.
* An epoch's last partial update is skipped (its batches come back in the next epoch's shuffle), so
  a run resumed from a checkpoint sees the same batches as an uninterrupted one.
"""

import contextlib
import math
import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, DistributedType, GradientAccumulationPlugin, ProjectConfiguration
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import get_scheduler

from . import checkpoints, models, outputs
from .arguments import UsageError
from .checkpoints import NonFiniteError
from .tracking import MetricsLog, resolve_trackers

# fairseq's --min-loss-scale: a run whose gradients still overflow at this loss scale overflows at any.
MIN_LOSS_SCALE = 1e-4


class Objective(Protocol):
    def count(self, batch) -> torch.Tensor:
        """What the update's loss is averaged over (masked tokens, examples, ...), for this batch."""

    def loss_sum(self, model, batch) -> torch.Tensor:
        """The batch's summed loss."""

    def evaluate(self, model, loader, accelerator) -> dict:
        """Validation metrics over every process's share."""


@dataclass
class TrainState:
    """Everything that changes as training runs, and everything a checkpoint needs to continue it."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0
    tokens_seen: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    evals_since_best: int = 0
    last_eval: dict = field(default_factory=dict)
    skipped_updates: int = 0  # fp16 overflows: counted as steps (their batches were used), never applied
    # Logging window, reset at each log line (its loss sum and update count are checkpointed too).
    window_loss: float = 0.0
    window_updates: int = 0
    window_tokens: int = 0
    window_start: float = field(default_factory=time.perf_counter)


@dataclass
class Setup:
    """What a script settles before it reads any data, by name. Each script extends it with its own values (a block
    size, a model's config, ...), so that every step after it takes one object instead of a row of positions."""

    accelerator: Accelerator
    accumulation: int  # forward passes per update (`accumulation_steps`)
    output_dir: Path  # ready to write (`checkpoints.open_run`)
    checkpoint: Path | None  # the checkpoint to resume, verified; None for a new run


@dataclass
class Prepared:
    """A run's model, optimizer, schedule and data loaders as Accelerate prepared them (`prepare`), and its length."""

    model: torch.nn.Module
    optimizer: Any  # the AdamW of `build_optimizer`, wrapped by Accelerate
    scheduler: Any
    train_loader: Any
    eval_loaders: list  # in the order given (an absent split stays None); the first one selects the model
    max_steps: int
    updates_per_epoch: int | None  # counted where the run is measured in epochs


@dataclass
class Run:
    """One training run: what `train` needs, and nothing it has to look up elsewhere (made by `new_run`)."""

    args: Any  # OptimizerArguments + RunArguments
    accelerator: Accelerator
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    train_loader: Any
    eval_loader: Any
    objective: Objective
    log: Any  # tracking.MetricsLog
    output_dir: Path
    max_steps: int
    accumulation: int
    # Evaluate every N updates (0: only at the end; None: never): --eval_steps as the script settles it (finetuning's
    # default is once per epoch) and `fit` keeps it (None without validation data); `args` stay as parsed.
    eval_steps: int | None
    state: TrainState = field(default_factory=TrainState)
    tokenizer: Any = None  # saved into every checkpoint
    metric_for_best_model: str | None = None  # a key of the evaluation metrics, greater is better
    early_stopping_patience: int | None = None
    on_best: Callable[["Run"], None] | None = None  # e.g. save the best model so far

    def say(self, message):
        if self.accelerator.is_main_process:
            tqdm.write(message)

    def arguments(self):
        """The run's arguments as it runs them (written to train_config.yaml and the model card)."""
        return settled_arguments(self.args, self.eval_steps)


def settled_arguments(args, eval_steps):
    """`args` with `eval_steps` as the script settled it (finetuning's default is once per epoch)."""
    return {**args.to_dict(), "eval_steps": eval_steps}


# ---------------------------------------------------------------------------------------------------
# Set-up pieces every script needs
# ---------------------------------------------------------------------------------------------------


def accumulation_steps(args, num_processes):
    """Forward passes per update, from --gradient_accumulation_steps or --total_batch_size."""
    per_update = args.per_device_train_batch_size * num_processes
    if not args.total_batch_size:
        return args.gradient_accumulation_steps or 1
    if args.total_batch_size % per_update:
        raise UsageError(f"--total_batch_size {args.total_batch_size} is not a multiple of "
                         f"--per_device_train_batch_size x processes = {per_update}")
    steps = args.total_batch_size // per_update
    if args.gradient_accumulation_steps not in (None, steps):
        raise UsageError(f"--gradient_accumulation_steps {args.gradient_accumulation_steps} contradicts "
                         f"--total_batch_size {args.total_batch_size} (which needs {steps})")
    return steps


def make_accelerator(args, log_with=None):
    """An Accelerator for our loop: we drive accumulation and the scheduler ourselves (one step per update),
    and a precision the device cannot run is an error, not a silent fp32 run."""
    accelerator = Accelerator(
        mixed_precision=args.mixed_precision, log_with=log_with,
        gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1, sync_with_dataloader=False),
        step_scheduler_with_optimizer=False,
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
        project_config=ProjectConfiguration(project_dir=args.output_dir,
                                            logging_dir=str(Path(args.output_dir) / "logs")))
    check_launch(accelerator)
    precision = accelerator.mixed_precision
    if precision == "fp16" and accelerator.device.type == "cpu":
        raise UsageError("--mixed_precision fp16: needs a GPU; on CPU use bf16 or no")
    if precision == "bf16" and accelerator.device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UsageError("--mixed_precision bf16: this GPU does not support bfloat16; use fp16 or no")
    return accelerator


def check_launch(accelerator):
    """What was launched is what runs. Accelerate turns FSDP on only for GPUs (and other accelerators): on
    CPU processes `--use_fsdp` would silently give data parallelism, or, without `--cpu`, separate
    single-process runs writing the same folder."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    asked = launcher_processes()
    if asked > launched:
        raise UsageError(f"accelerate launch was asked for {asked} processes but started {launched}: its "
                         f"single-process launcher (--cpu, or no --multi_gpu) ignores --num_processes. On a machine "
                         f"without GPUs start {asked} with: ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu "
                         f"--num_processes {asked} SCRIPT ...")
    if launched > accelerator.num_processes:
        raise UsageError(f"launched as {launched} processes, but Accelerate set up {accelerator.num_processes} "
                         f"({accelerator.distributed_type.value}) on {accelerator.device.type}: each would train alone "
                         f"into the same --output_dir. On a machine without GPUs launch with --multi_gpu and "
                         f"ACCELERATE_USE_CPU=1 (gloo data parallelism)")
    if (os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
            and accelerator.distributed_type != DistributedType.FSDP):
        raise UsageError(f"FSDP was requested (--use_fsdp or distributed_type: FSDP), but Accelerate runs this as "
                         f"{accelerator.distributed_type.value} on {accelerator.device.type}: it enables FSDP on GPUs "
                         f"(and other accelerators) only. On CPU use data parallelism (--multi_gpu with "
                         f"ACCELERATE_USE_CPU=1)")


def launcher_processes():
    """--num_processes of the `accelerate launch` that started this process (1 if it was not one): Accelerate's
    single-process launcher runs one process whatever that flag says and tells the script nothing of it, so the
    launcher's own command line (Linux's /proc) is the only place the request survives."""
    try:
        argv = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return 1
    if not any(a == "launch" or a.endswith("accelerate.commands.launch") for a in argv[:4]):
        return 1
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith(("--num_processes=", "--num-processes=")) else \
            argv[i + 1] if a in ("--num_processes", "--num-processes") and i + 1 < len(argv) else None
        if value is not None:
            return int(value) if value.isdigit() else 1
    return 1


def start(args):
    """The Accelerator (with the trackers of --report_to) and the accumulation steps per update."""
    accelerator = make_accelerator(args, log_with=resolve_trackers(args.report_to))
    accumulation = accumulation_steps(args, accelerator.num_processes)
    checkpoints.lock_output_dir(args.output_dir, accelerator)
    return accelerator, accumulation


def check_one_update(args, dataset, num_processes, accumulation):
    """A training set smaller than one update would not fail: the DataLoader hands out what there is, and
    the run would report sequences per update it never sees. (A streamed set is checked as it is read.)"""
    if not hasattr(dataset, "__len__"):
        return
    per_update = args.per_device_train_batch_size * num_processes * accumulation
    if per_update > len(dataset):
        raise UsageError(f"--per_device_train_batch_size {args.per_device_train_batch_size} x {num_processes} "
                         f"process(es) x {accumulation} accumulation step(s) = {per_update} sequences per update, "
                         f"but the training set has only {len(dataset):,}; lower --per_device_train_batch_size "
                         f"(or --gradient_accumulation_steps / --total_batch_size)")


def data_loader(dataset, seed, **kwargs):
    """A DataLoader that owns its random generator, seeded from the run's seed. A loader without one draws a base
    seed from the global RNG, which dropout also draws from, each time an iterator starts; a resumed run restores
    that RNG and then starts an iterator mid-epoch where the uninterrupted run did not, so from there on its dropout
    masks, and its weights, would differ. A shuffled loader's order comes from the same generator (Accelerate's
    seedable sampler reseeds it from the seed and the epoch)."""
    return DataLoader(dataset, generator=torch.Generator().manual_seed(seed), **kwargs)


def build_optimizer(model, args, own_rates=()):
    """AdamW over the trainable parameters; matrices decay, biases and norm weights (1-D) do not.
    `own_rates`: (is_chosen(name), learning rate) pairs; the parameters each one chooses (first match) form a group
    of their own at that rate (distillation's E/F, which start from a window mean while the rest starts trained,
    and its global-slot gates, which start at zero and must open within a few hundred updates)."""
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]

    def group_of(name):
        return next((i for i, (chosen, _) in enumerate(own_rates) if chosen(name)), None)

    body = [p for name, p in named if group_of(name) is None]
    groups = [{"params": [p for p in body if p.ndim > 1], "weight_decay": args.weight_decay},
              {"params": [p for p in body if p.ndim <= 1], "weight_decay": 0.0}]
    for i, (_, rate) in enumerate(own_rates):
        groups.append({"params": [p for name, p in named if group_of(name) == i], "weight_decay": args.weight_decay,
                       "lr": rate})
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=args.learning_rate,
                             betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon)


def linformer_rates(args):
    """`own_rates` for `build_optimizer` from LinformerRateArguments: E/F, then the global-slot gates, each only
    where its rate is given (otherwise they stay in the body's groups, as checkpoints written without it hold them)."""
    return tuple((chosen, rate) for chosen, rate in ((models.is_projection, args.projection_learning_rate),
                                                     (models.is_gate, args.gate_learning_rate)) if rate)


def build_scheduler(optimizer, args, max_steps):
    return get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=args.num_warmup_steps(max_steps),
                         num_training_steps=max_steps)


def prepare(args, setup, model, train_loader, eval_loaders=(), *, own_rates=(), epochs=None):
    """AdamW over `model` (`build_optimizer`, with `own_rates`), its schedule over the run's updates and the data,
    prepared by Accelerate for this run's processes. A run of --max_steps updates is prepared in one call (DeepSpeed
    takes the schedule over only so); a run measured in `epochs` lasts that many passes over the training loader as
    prepared (its length depends on the processes), so its schedule is made and prepared after."""
    accelerator = setup.accelerator
    optimizer = build_optimizer(model, args, own_rates)
    if epochs is None:
        max_steps, updates_per_epoch = args.max_steps, None
        model, optimizer, train_loader, *eval_loaders, scheduler = accelerator.prepare(
            model, optimizer, train_loader, *eval_loaders, build_scheduler(optimizer, args, max_steps))
    else:
        model, optimizer, train_loader, *eval_loaders = accelerator.prepare(model, optimizer, train_loader,
                                                                            *eval_loaders)
        updates_per_epoch = len(train_loader) // setup.accumulation
        max_steps = args.max_steps or epochs * updates_per_epoch
        scheduler = accelerator.prepare(build_scheduler(optimizer, args, max_steps))
    return Prepared(model=model, optimizer=optimizer, scheduler=scheduler, train_loader=train_loader,
                    eval_loaders=eval_loaders, max_steps=max_steps, updates_per_epoch=updates_per_epoch)


def new_run(args, setup, prepared, *, objective, project, eval_steps, **options):
    """The `Run` of what `prepare` prepared, with its `objective` and its log (metrics.jsonl and the trackers, under
    `project`); `eval_steps` as the script settles it; `options` are the Run's own (tokenizer, model selection)."""
    return Run(args=args, accelerator=setup.accelerator, model=prepared.model, optimizer=prepared.optimizer,
               scheduler=prepared.scheduler, train_loader=prepared.train_loader,
               eval_loader=prepared.eval_loaders[0] if prepared.eval_loaders else None, objective=objective,
               log=MetricsLog(setup.accelerator, setup.output_dir / "metrics.jsonl", project,
                              settled_arguments(args, eval_steps)),
               output_dir=setup.output_dir, max_steps=prepared.max_steps, accumulation=setup.accumulation,
               eval_steps=eval_steps, **options)


def peak_memory_gb():
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # CPU: peak resident set (KiB -> GiB)


def last_good_checkpoint(run):
    return checkpoints.last_good_checkpoint(run.output_dir, run.accelerator.num_processes) or "none"


# ---------------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------------


def updates(run):
    """Groups of `accumulation` batches, epoch after epoch, starting where `run.state` says."""
    state = run.state
    while True:
        run.train_loader.set_epoch(state.epoch)
        if hasattr(run.train_loader.collate_fn, "set_epoch"):
            run.train_loader.collate_fn.set_epoch(state.epoch)
        started_at = state.batches_in_epoch
        batches = (run.accelerator.skip_first_batches(run.train_loader, started_at) if started_at
                   else run.train_loader)
        stream = iter(batches)
        while len(group := list(islice(stream, run.accumulation))) == run.accumulation:
            yield group
        if started_at == 0 and state.batches_in_epoch == 0:
            total = run.args.per_device_train_batch_size * run.accelerator.num_processes * run.accumulation
            raise UsageError(f"the training set is smaller than one update ({total} sequences); lower "
                             f"--per_device_train_batch_size, --gradient_accumulation_steps or --total_batch_size")
        state.epoch, state.batches_in_epoch = state.epoch + 1, 0


def train_update(run, group):
    """Forward and backward over one update's batches, then one optimizer step; returns (loss, tokens), the
    loss None when the gradient scaler skipped the update."""
    accelerator, model = run.accelerator, run.model
    count = accelerator.reduce(sum(run.objective.count(b) for b in group).to(accelerator.device), "sum").clamp(min=1)
    scale = accelerator.num_processes / count  # DDP averages gradients over processes: scale back
    local = torch.zeros(2, device=accelerator.device)  # summed loss, tokens
    for i, batch in enumerate(group):
        # Gradients are all-reduced once, on the update's last batch.
        with contextlib.nullcontext() if i == len(group) - 1 else accelerator.no_sync(model):
            loss_sum = run.objective.loss_sum(model, batch)
            accelerator.backward(loss_sum * scale)
        tokens = batch["attention_mask"].sum() if "attention_mask" in batch else batch["input_ids"].numel()
        local += torch.stack([loss_sum.detach().float(), torch.as_tensor(tokens, device=local.device).float()])
    loss_sum, tokens = accelerator.reduce(local, "sum").tolist()
    loss = loss_sum / count.item()
    if not math.isfinite(loss) and accelerator.scaler is None:  # with a scaler: an overflow, skipped below
        raise NonFiniteError(f"step {run.state.step + 1}: the training loss is {loss}; stopped before applying "
                             f"the update (last good checkpoint: {last_good_checkpoint(run)}). Lower "
                             f"--learning_rate or check the data")
    if run.args.max_grad_norm > 0:
        norm = accelerator.clip_grad_norm_(model.parameters(), run.args.max_grad_norm)
        if not torch.isfinite(torch.as_tensor(norm)) and accelerator.scaler is None:
            raise NonFiniteError(f"step {run.state.step + 1}: the gradient norm is {float(norm)}; stopped before "
                                 f"applying the update (last good checkpoint: {last_good_checkpoint(run)})")
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    if accelerator.optimizer_step_was_skipped:
        skip_overflow(run, loss)
        return None, int(tokens)
    # Accelerate's scheduler wrapper skips with a skipped optimizer step only when it steps with the optimizer,
    # which `make_accelerator` turns off (it would step once per process): the check above is the one.
    run.scheduler.step()
    return loss, int(tokens)


def skip_overflow(run, loss):
    """fp16: the scaler found inf/NaN gradients, left the weights and the optimizer untouched and lowered the
    loss scale. A run still overflowing below `MIN_LOSS_SCALE` has diverged: the NaN error, as without a scaler."""
    state, scale = run.state, run.accelerator.scaler.get_scale()
    state.skipped_updates += 1
    if scale < MIN_LOSS_SCALE:
        raise NonFiniteError(f"step {state.step + 1}: the gradients overflow fp16 at every loss scale down to "
                             f"{scale:g} (training loss {loss}); stopped before applying the update (last good "
                             f"checkpoint: {last_good_checkpoint(run)}). Lower --learning_rate, or use bf16")
    run.say(f"step {state.step + 1}: fp16 gradients overflowed (training loss {loss:.4g}); update skipped, "
            f"loss scale lowered to {scale:g}")


def evaluate(run):
    """Validation metrics, logged; tracks the best value of `metric_for_best_model` and calls `on_best`."""
    metrics = run.objective.evaluate(run.model, run.eval_loader, run.accelerator)
    run.model.train()
    state = run.state
    for key, value in metrics.items():  # a diverged model; a NaN correlation of constant predictions is not one
        if ("loss" in key or "perplexity" in key) and isinstance(value, float) and not math.isfinite(value):
            weight = next((name for name, p in run.accelerator.unwrap_model(run.model).named_parameters()
                           if not torch.isfinite(p).all()), None)
            raise NonFiniteError(f"step {state.step}: validation {key} is {value}"
                                 + (f": weight {weight} holds NaN/inf" if weight else "")
                                 + f" (last good checkpoint: {last_good_checkpoint(run)})")
    run.log.log(metrics, state.step)
    state.last_eval = metrics
    if run.metric_for_best_model:
        value = metrics[run.metric_for_best_model]
        if state.best_metric is None or value > state.best_metric:
            state.best_metric, state.best_step, state.evals_since_best = value, state.step, 0
            if run.on_best is not None:
                run.on_best(run)
        else:
            state.evals_since_best += 1
    run.say(f"step {state.step}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in metrics.items()))
    return metrics


def log_window(run):
    state = run.state
    elapsed = time.perf_counter() - state.window_start
    metrics = {"train_loss": state.window_loss / state.window_updates if state.window_updates else math.nan,
               "learning_rate": run.scheduler.get_last_lr()[0], "tokens_per_second": state.window_tokens / elapsed,
               "tokens_seen": state.tokens_seen, "epoch": state.epoch, "peak_memory_gb": peak_memory_gb()}
    if run.accelerator.scaler is not None:
        metrics.update(loss_scale=run.accelerator.scaler.get_scale(), skipped_updates=state.skipped_updates)
    run.log.log(metrics, state.step)
    state.window_loss, state.window_updates, state.window_tokens, state.window_start = 0.0, 0, 0, time.perf_counter()
    return metrics


def train(run):
    """Train until `run.max_steps` updates (or early stopping); evaluates every `eval_steps` and at the end."""
    args, state = run.args, run.state
    per_update = args.per_device_train_batch_size * run.accelerator.num_processes * run.accumulation
    run.say(f"{sum(p.numel() for p in run.model.parameters()):,} parameters, {run.accelerator.num_processes} "
            f"process(es), {per_update} sequences per update ({run.accumulation} accumulation steps), "
            f"{run.max_steps} updates")
    run.model.train()
    progress = tqdm(total=run.max_steps, initial=state.step, desc="train",
                    disable=not run.accelerator.is_main_process)
    batches = updates(run)
    while state.step < run.max_steps:
        loss, tokens = train_update(run, next(batches))
        state.step, state.batches_in_epoch = state.step + 1, state.batches_in_epoch + run.accumulation
        state.tokens_seen += tokens
        if loss is not None:  # a skipped fp16 update: no loss of an applied update to average
            state.window_loss, state.window_updates = state.window_loss + loss, state.window_updates + 1
        state.window_tokens += tokens
        progress.update(1)
        if state.step % args.logging_steps == 0 or state.step == run.max_steps:
            metrics = log_window(run)
            progress.set_postfix(loss=f"{metrics['train_loss']:.3f}", tok_s=f"{metrics['tokens_per_second']:,.0f}")
        at_end = state.step == run.max_steps
        if run.eval_steps is not None and (at_end or (run.eval_steps and state.step % run.eval_steps == 0)):
            evaluate(run)
        if args.checkpointing_steps and state.step % args.checkpointing_steps == 0:
            checkpoints.save_run_checkpoint(run)
        if run.early_stopping_patience and state.evals_since_best >= run.early_stopping_patience:
            run.say(f"early stopping: {state.evals_since_best} evaluations without improvement")
            break
    progress.close()
    check_replicas(run)
    return state


def fit(run, checkpoint=None, evaluate_start=True, **run_facts):
    """A run from start (or `checkpoint`) to its last update: resume, trim the log to the resumed step,
    write train_config.yaml (with `run_facts`), evaluate the starting point (unless not `evaluate_start`:
    a finetuning run's new head is no candidate for its best model), train."""
    check_one_update(run.args, run.train_loader.dataset, run.accelerator.num_processes, run.accumulation)
    if run.eval_loader is None and run.eval_steps is not None:
        run.say("No validation split (--validation_split_percentage 0, no --validation_file): nothing is evaluated")
        run.eval_steps = None
    if checkpoint is not None:
        checkpoints.resume_run(run, checkpoint)
    # A finished run resumed (to publish again, or with damaged weights restored from a checkpoint whose manifest
    # someone recomputed): its figures must be measured on the weights it is about to publish, not carried over.
    finished = checkpoint is not None and run.state.step >= run.max_steps and run.eval_steps is not None
    run.log.keep_until(run.state.step, keep_evaluation=not finished)
    outputs.write_run_config(run, **run_facts)
    if evaluate_start and run.state.step == 0 and run.eval_steps is not None:
        evaluate(run)  # the curve's first point: the model before any update
    if finished:
        run.say(f"Nothing left to train (step {run.state.step} of {run.max_steps}): evaluating the weights to be "
                f"published again")
        evaluate(run)
    return train(run)


def check_replicas(run):
    """Data-parallel training keeps a full copy of the weights per process, and they must stay bitwise
    equal; compare per-tensor checksums (sharded setups, FSDP/ZeRO, hold no full copy)."""
    accelerator = run.accelerator
    sharded = {DistributedType.DEEPSPEED, DistributedType.FSDP, DistributedType.MEGATRON_LM, DistributedType.XLA}
    if accelerator.num_processes == 1 or accelerator.distributed_type in sharded:
        return
    sums = torch.stack([torch.stack([p.detach().double().sum(), p.detach().double().square().sum()])
                        for p in run.model.parameters()]).flatten()
    every = accelerator.gather(sums[None].to(accelerator.device))
    if not torch.equal(every, every[:1].expand_as(every)):
        raise RuntimeError("data-parallel replicas diverged: the processes hold different weights")
    run.say(f"Weights identical on all {accelerator.num_processes} processes")
