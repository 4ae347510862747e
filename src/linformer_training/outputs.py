# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""What a finished run leaves behind: the final model folder, its card, the run's config, the Hub upload; and a
release folder's parts that are not trained (remote code from src/, manifest), written and refreshed alike."""

import importlib.util
import json
import shlex
import shutil
import tempfile
from pathlib import Path

import yaml

from . import checkpoints, models, processes, upgrade
from .arguments import UsageError


def model_card(title, intro, sections, pipeline_tag=None, tags=(), datasets=None, license="apache-2.0",
               base_model=None, arguments=None):
    """A Hub model card as text: YAML metadata, `# title`, `intro`, then a `## heading` per item of `sections`
    (heading -> markdown); `arguments` (a run's `Run.arguments()`) adds them as YAML. Every script's card and the
    conversion's."""
    from huggingface_hub import ModelCardData

    data = ModelCardData(library_name="transformers", pipeline_tag=pipeline_tag, license=license,
                         tags=["linformer-hf", *tags], datasets=datasets or None, base_model=base_model)
    if arguments is not None:
        sections = {**sections, "Training arguments": code_block(yaml.safe_dump(arguments, sort_keys=False), "yaml")}
    body = "".join(f"\n\n## {heading}\n\n{text.strip()}" for heading, text in sections.items())
    return f"---\n{data.to_yaml()}\n---\n\n# {title}\n\n{intro.strip()}{body}\n"


def read_card(source):
    """(licence, title) from the model card of a folder or Hub repo: its YAML `license` and its first heading (a
    converted model's card names both)."""
    card = models.model_file(source, "README.md")
    if not card:
        return None, None
    text = Path(card).read_text(encoding="utf-8", errors="replace")
    meta, body = {}, text
    if text.startswith("---"):
        _, front, body = (text.split("---", 2) + ["", ""])[:3]
        try:
            meta = yaml.safe_load(front) or {}
        except yaml.YAMLError:
            meta = {}
    licence = meta.get("license") if isinstance(meta, dict) else None
    in_code = False
    for line in body.splitlines():
        in_code ^= line.startswith("```")
        if not in_code and line.startswith("# "):
            return (str(licence) if licence else None), line[2:].strip()
    return (str(licence) if licence else None), None


def code_block(code, language="python"):
    return f"```{language}\n{code.strip()}\n```"


def pipeline_use(task, model, example):
    """A model card's "Use" section: the model in a transformers pipeline."""
    return code_block(f"from transformers import pipeline\npipe = pipeline({task!r}, model={model!r}, "
                      f"trust_remote_code=True)\nprint(pipe({example!r}))")


def metrics_table(metrics):
    """A markdown table of a run's final numbers, for its model card."""
    rows = "\n".join(f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items())
    return f"| metric | value |\n| --- | --- |\n{rows}"


def write_run_config(run, **extra):
    """`train_config.yaml`: the arguments and what was derived from them (processes, accumulation, ...)."""
    with processes.together(run.accelerator, "writing train_config.yaml"):
        if run.accelerator.is_main_process:
            config = {**run.arguments(), "num_processes": run.accelerator.num_processes,
                      "accumulation": run.accumulation, "mixed_precision": run.accelerator.mixed_precision,
                      "num_parameters": sum(p.numel() for p in run.model.parameters()), **extra}
            checkpoints.write_text(run.output_dir / "train_config.yaml", yaml.safe_dump(config, sort_keys=False),
                                   run.output_dir, run.accelerator.num_processes)


def save_pretrained(accelerator, model, folder):
    """`save_pretrained` of a prepared model into `folder`, by the main process, from the full state dict
    (gathered by every process: a collective under FSDP and DeepSpeed). FSDP2 changes the model's class in
    place into `FSDP<Class>` with sharded parameters, which `unwrap_model` cannot undo and `save_pretrained`
    would save as it is (torch's FSDP files as the remote code, tied weights twice): the weights then go
    through a plain instance of the original class."""
    state_dict = accelerator.get_state_dict(model)
    if not accelerator.is_main_process:
        return
    unwrapped = accelerator.unwrap_model(model)
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # torch < 2.6: no FSDP2
        FSDPModule = ()
    if isinstance(unwrapped, FSDPModule):
        original = next(c for c in type(unwrapped).__mro__ if not issubclass(c, FSDPModule))
        plain = original._from_config(unwrapped.config)
        plain.load_state_dict(state_dict)
        plain.save_pretrained(folder, save_function=accelerator.save)
    else:
        unwrapped.save_pretrained(folder, save_function=accelerator.save, state_dict=state_dict)


def load_full_state_dict(model, state_dict):
    """`save_pretrained`'s way back: a full state dict into a prepared model. Under FSDP its parameters are
    shards, which a plain `load_state_dict` cannot copy into; each process keeps its own shard of each tensor.
    Groups that stay gathered after a forward (Accelerate's root and output groups) are resharded first, or
    their parameters would be met as plain tensors."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    set_model_state_dict(model, state_dict, options=StateDictOptions(full_state_dict=True))


def save_final_model(run, card, extra_files=None):
    """`save_pretrained` (+ tokenizer, card, `extra_files` as `write_files` takes them) into a temporary folder,
    then published into the output folder with config.json last; a model with NaN/inf weights is refused."""
    accelerator, model = run.accelerator, run.model
    checkpoints.check_finite(accelerator.unwrap_model(model), "final model")
    tmp = run.output_dir / ".final.tmp"
    # The vote: a save failing on the main process alone ends the others too, instead of leaving them waiting.
    with processes.together(accelerator, "saving the final model"), \
            checkpoints.writing("the final model", tmp, run.output_dir, accelerator.num_processes):
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        accelerator.wait_for_everyone()
        save_pretrained(accelerator, model, tmp)
        if accelerator.is_main_process:
            if run.tokenizer is not None:
                run.tokenizer.save_pretrained(tmp)
            write_files(tmp, {"README.md": card, **(extra_files or {})})
            checkpoints.publish(tmp, run.output_dir)
    if accelerator.is_main_process:
        shutil.rmtree(run.output_dir / "tokenizer", ignore_errors=True)  # the trained tokenizer is now beside the model
    accelerator.wait_for_everyone()


def write_files(folder, files):
    """`files` (relative name -> text, a JSON-able value, or a `Path` to copy, file or folder) into `folder`;
    a name may hold a folder (predictions/MNLI-m.tsv)."""
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path) and content.is_dir():  # copied as it is, empty folders too
            shutil.copytree(content, folder / name)
        elif isinstance(content, Path):
            shutil.copy(content, folder / name)
        else:
            (folder / name).write_text(content if isinstance(content, str) else json.dumps(content, indent=2) + "\n")


def finish(run, card, push_message, extra_files=None):
    """The end of a training script: the final model folder, a last line, the Hub upload if asked."""
    save_final_model(run, card, extra_files={"eval_results.json": run.state.last_eval, **(extra_files or {})})
    run.say(f"Done: {run.state.step} updates, {run.state.last_eval}; saved to {run.output_dir}")
    if run.args.push_to_hub:
        push_folder(run, run.output_dir, push_message)
    end(run.accelerator)
    return run.state.last_eval


def end(accelerator):
    """Trackers closed and the process group destroyed (Accelerate's `end_training`), by every process together:
    a process that tears the group down while a peer is still working can leave that peer hanging at exit."""
    accelerator.wait_for_everyone()
    accelerator.end_training()


# ---------------------------------------------------------------------------------------------------
# Release folders (release/*/, written by experiments/*/release.py)
# ---------------------------------------------------------------------------------------------------

CODE_FILES = ("modeling_linformer.py", "configuration_linformer.py")  # linformer_hf's, the remote code
ST_MODULE = "sentence_transformer_linformer.py"  # this package's; a sentence-transformers folder's first module
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".onnx_data")  # what a refresh never rewrites


def write_remote_code(folder):
    """What a release holds that is not trained, from src/: the remote code a `trust_remote_code=True` load runs
    (linformer_hf's own files, byte for byte, as `save_pretrained` copies them for a model registered with the
    Auto classes), float32 as the dtype a plain load gives, and in a sentence-transformers folder (modules.json)
    this package's Transformer module as its first module. tests/test_release_folders.py holds every release/ folder
    to it."""
    package = Path(importlib.util.find_spec("linformer_hf").origin).parent  # found, not imported (torch: seconds)
    folder = Path(folder)
    for name in CODE_FILES:
        shutil.copyfile(package / name, folder / name)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    modules = folder / "modules.json"
    if modules.is_file():
        shutil.copyfile(Path(__file__).parent / ST_MODULE, folder / ST_MODULE)
        entries = json.loads(modules.read_text())
        entries[0]["type"] = f"{Path(ST_MODULE).stem}.LinformerTransformer"
        modules.write_text(json.dumps(entries, indent=2) + "\n")


def write_release(out, fill):
    """`fill(folder)` into a folder beside `out`, then its manifest, then one rename over `out`: a release appears
    only complete, and a failed build leaves the old one as it was."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        fill(staging)
        staging.chmod(0o755)
        checkpoints.publish(staging, out, whole=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def weight_digests(folder):
    """{relative name: SHA-256} of a folder's weight files (WEIGHT_SUFFIXES)."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): checkpoints.sha256(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)}


def refresh_release(out, write=None, rewritten=()):
    """Rewrite what is not trained in the release `out` from src/ (`write_remote_code`, then `write(folder)`: the
    card) and its manifest; its weights stay byte for byte, except the files named in `rewritten`, which `write`
    makes anew, and those in the first releases' format, which `upgrade.upgrade_folder` renames (every tensor's
    values checked unchanged). Each other weight file's SHA-256 is compared before the new folder replaces `out`
    and again after; returns (before, after), both {name: SHA-256}."""
    out = Path(out)
    if not (out / "config.json").is_file():
        raise UsageError(f"--refresh: {out} is not a release folder (no config.json); build it first")
    before = weight_digests(out)
    renamed = upgrade.outdated_files(out)
    kept = {name: digest for name, digest in before.items() if name not in rewritten and name not in renamed}

    def check(folder, when):
        now = weight_digests(folder)
        changed = sorted(name for name, digest in kept.items() if now.get(name) != digest)
        if changed:
            raise RuntimeError(f"refreshing {out} changed its weights ({', '.join(changed)}) {when}")
        return now

    def fill(staging):
        shutil.copytree(out, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns(checkpoints.MANIFEST))
        if renamed:
            upgrade.upgrade_folder(staging)
        write_remote_code(staging)
        if write is not None:
            write(staging)
        check(staging, "before it was published; the release is as it was")

    write_release(out, fill)
    return before, check(out, "(after it was published)")


# What stays local: the checkpoints (the final model is beside them), the lock and other hidden files, the logs.
NOT_PUSHED = (f"{checkpoints.CHECKPOINTS_DIR}/**", ".*", "logs/**")


def push_folder(run, folder, message):
    """Upload the saved folder (not the checkpoints) to `--hub_model_id`; a failure keeps the local save.
    The address printed is the one the Hub answered, so `HF_ENDPOINT` (a mirror, a private Hub) shows."""
    if not run.accelerator.is_main_process:
        return
    from huggingface_hub import HfApi

    repo_id, private, api = run.args.hub_model_id, run.args.hub_private_repo, HfApi()
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, folder_path=str(folder), commit_message=message,
                                   ignore_patterns=list(NOT_PUSHED))
    except Exception as error:  # offline, no token, no rights, too large: the local save stands
        close_progress_bars()
        later = shlex.join(["hf", "upload", repo_id, str(folder), ".", *(f"--exclude={p}" for p in NOT_PUSHED),
                            *(["--private"] if private else [])])
        raise UsageError(f"--push_to_hub: uploading to {repo_id} on {api.endpoint} failed ({upload_failure(error)}). "
                         f"Nothing is lost: the model is saved in {folder}; upload it later with `{later}`") from None
    run.say(f"Pushed to {commit.repo_url}")


def close_progress_bars():
    """huggingface_hub leaves the progress bar of a file whose upload failed open (its error holds it); closed
    when the process ends, it would print after the one-line error, as the last line, often at 100%."""
    from tqdm import tqdm

    for bar in list(tqdm._instances):
        bar.close()


def upload_failure(error):
    """Why an upload failed, in a few words: the Hub's status and message where it answered (huggingface_hub's
    own text for an HTTP error spans lines, with the request id and the URL; a failed file upload wraps it in an
    error naming the file), else the error's first line."""
    from huggingface_hub.errors import HfHubHTTPError

    http = error
    while http is not None and not isinstance(http, HfHubHTTPError):
        http = http.__cause__
    if http is None or http.response is None:
        return f"{type(error).__name__}: {checkpoints.first_line(error)}"
    reason = (http.server_message or http.response.reason_phrase or "").splitlines()
    status = f"HTTP {http.response.status_code}{': ' + reason[0] if reason else ''}"
    return status if http is error else f"{checkpoints.first_line(error).rstrip('.')}: {status}"
