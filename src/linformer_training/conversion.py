# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Turn a pretrained BERT / RoBERTa / XLM-R encoder into a Linformer with the same weights (a Jargon checkpoint,
already a Linformer, goes to `jargon.py`).

Everything but the attention carries over name for name (our layers are RoBERTa's). Three things
need care, and each is chosen so that with k = n and an identity projection the converted model
reproduces its source exactly:

* Positions. Our embeddings number real tokens from pad_token_id + 1, counting only non-pad tokens
  (RoBERTa's scheme), which makes them padding-invariant. BERT numbers from 0 by index, so its row j
  is copied to our row pad_token_id + 1 + j. Tables longer than the source's are filled by repeating
  its learned rows (the recipe Longformer used to go from 512 to 4096 positions): no random rows.
* The projection E/F. `window_mean` (row i averages a contiguous window of about n/k positions) is the
  identity at k = n; `random` is the paper's N(0, 1/n).
* Short inputs. A sequence of at most k real tokens (or --exact_attention_length) is attended exactly
  (`exact_attention_length`), so the conversion changes nothing for such inputs whatever k is.

The output folder is written to a temporary sibling and renamed into place only once complete.
"""

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    MODEL_FOR_PRETRAINING_MAPPING_NAMES,
    MODEL_MAPPING_NAMES,
)

# Importing linformer_hf registers the Auto classes, so save_pretrained writes the remote code.
from linformer_hf import LinformerConfig, LinformerForMaskedLM, LinformerModel
from linformer_hf.configuration_linformer import (
    AttentionType,
    ProjectionLengthScaling,
    ProjectionSharing,
    ProjectionType,
)
from linformer_hf.modeling_linformer import window_mean_projection

from . import checkpoints, jargon, outputs
from .arguments import Arguments, UsageError, arg
from .models import OFFSET_POSITIONS, SOURCE_TYPES, check_local_path, is_long_path, model_file
from .tokenization import copy_vocabulary_files, load_source_tokenizer

MAX_SEQ_LENGTH = 8192
BASE_ARCHITECTURES = tuple(MODEL_MAPPING_NAMES[t] for t in SOURCE_TYPES)
MLM_ARCHITECTURES = tuple(dict.fromkeys(name for t in SOURCE_TYPES for name in (
    MODEL_FOR_MASKED_LM_MAPPING_NAMES[t], MODEL_FOR_PRETRAINING_MAPPING_NAMES[t])))  # BertForPreTraining too
SUPPORTED = ", ".join(BASE_ARCHITECTURES + MLM_ARCHITECTURES + ("JargonForMaskedLM",))
# Source config fields that mean the same in LinformerConfig and are copied as they are.
CARRIED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "type_vocab_size",
                  "initializer_range", "layer_norm_eps", "pad_token_id", "bos_token_id", "eos_token_id",
                  "classifier_dropout", "tie_word_embeddings")
# BERT's masked-LM head under RoBERTa's names (the converted model uses RoBERTa's head).
BERT_HEAD_NAMES = {
    "cls.predictions.transform.dense.weight": "lm_head.dense.weight",
    "cls.predictions.transform.dense.bias": "lm_head.dense.bias",
    "cls.predictions.transform.LayerNorm.weight": "lm_head.layer_norm.weight",
    "cls.predictions.transform.LayerNorm.bias": "lm_head.layer_norm.bias",
    "cls.predictions.decoder.weight": "lm_head.decoder.weight",
    "cls.predictions.decoder.bias": "lm_head.decoder.bias",
    "cls.predictions.bias": "lm_head.bias",
}


@dataclass
class ConvertArguments(Arguments):
    """Convert a pretrained BERT / RoBERTa / XLM-R encoder into a Linformer, or a Jargon model into a linformer-hf
    folder."""

    model_name_or_path: str = field(metadata={"help": "source checkpoint: a folder or a Hub id (BERT, RoBERTa, XLM-R; "
                                                      "a Jargon model, whose own n, k and sharing are kept)"})
    output_dir: str = field(metadata={"help": "where to write the Linformer (must not exist or be empty)"})
    max_seq_length: int = arg(512, "n: the longest input; beyond the source's positions, its table is repeated")
    projected_dim: int = arg(128, "k: keys and values are projected to this length (at most n)")
    projection_sharing: ProjectionSharing = arg("layerwise", "how E/F are shared")
    projection_init: Literal["window_mean", "random"] = arg(
        "window_mean", "E/F start as window means (the identity at k = n) or N(0, 1/n) as in the paper")
    projection_type: ProjectionType = arg("linear", "learned E/F or a pooling")
    projection_length_scaling: ProjectionLengthScaling | None = arg(
        None, "how E/F meet inputs shorter than n (default: resample for linear projections, which keeps the most of "
              "the source: experiments/conversion/results.md; else none)")
    attention_type: AttentionType = arg(
        "projected", "projected: the paper's attention; windowed: a long input reads each window of "
                     "--exact_attention_length tokens exactly, plus the k slots through a gate that starts closed")
    exact_attention_length: int | None = arg(
        None, "longest input (real tokens) read exactly, as the source reads it (default: k; 0: none, every input "
              "through the projection, as in the paper); the "
              "source's position limit (512 for BERT) keeps the source on everything it can read")
    long_input_adapter_rank: int = arg(0, "rank of low-rank adapters that only projected (long) inputs use; 0: none")
    tokenizer_name: str | None = arg(None, "tokenizer to carry over (default: the source's)")
    overwrite_output_dir: bool = arg(False, "replace a non-empty --output_dir, once the new folder is complete")
    seed: int = arg(0, "seed of the random projection init")

    bounds = {"max_seq_length": f"[1, {MAX_SEQ_LENGTH}]", "projected_dim": "[1, inf)",
              "exact_attention_length": "[0, inf)", "long_input_adapter_rank": "[0, inf)", "seed": "[0, inf)"}

    def __post_init__(self):
        super().__post_init__()
        if self.projection_length_scaling is None:
            self.projection_length_scaling = "resample" if self.projection_type == "linear" else "none"


def extend_positions(learned, length):
    """`length` position rows from the source's learned rows, repeated as often as needed (Longformer)."""
    repeats = -(-length // learned.shape[0])
    return learned.repeat(repeats, 1)[:length]


def _source_config(source):
    """The source's config, refused unless it is an encoder of SOURCE_TYPES with absolute positions."""
    from transformers import AutoConfig

    check_local_path(source, "--model_name_or_path")
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as e:
        raise UsageError(f"--model_name_or_path {source}: cannot load its config ({str(e).splitlines()[0]})") from None
    architecture = (config.architectures or [None])[0]
    if config.model_type not in SOURCE_TYPES or architecture not in (None, *BASE_ARCHITECTURES, *MLM_ARCHITECTURES):
        raise UsageError(f"--model_name_or_path {source}: architecture {architecture or config.model_type} is not "
                         f"supported; supported: {SUPPORTED}")
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        raise UsageError(f"--model_name_or_path {source}: position_embedding_type="
                         f"{config.position_embedding_type!r} is not supported; only 'absolute' positions convert")
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        raise UsageError(f"--model_name_or_path {source}: a decoder (is_decoder / add_cross_attention) cannot become "
                         "a Linformer, whose projections mix every position into every key")
    return config


def _linformer_config(source_config, args):
    """The Linformer's config: the source's shared fields and the conversion's. LinformerConfig checks every
    rule; its error names a field, which is the flag of the same name (or, for a carried field, the source)."""
    values = {name: getattr(source_config, name) for name in CARRIED_FIELDS if hasattr(source_config, name)}
    linformer = {name: getattr(args, name) for name in (
        "max_seq_length", "projected_dim", "projection_sharing", "projection_type", "projection_length_scaling",
        "attention_type", "exact_attention_length", "long_input_adapter_rank")}
    if linformer["exact_attention_length"] is None:  # the default: what projecting cannot make cheaper
        linformer["exact_attention_length"] = args.projected_dim
    linformer["exact_attention_length"] = linformer["exact_attention_length"] or None  # 0: the paper's
    try:
        return LinformerConfig(**values, **linformer)
    except ValueError as e:
        found = re.search(r"`(\w+)`=(.*?) is invalid; (.*?)\.?$", str(e))
        if found and found[1] in linformer:
            raise UsageError(f"--{found[1]} {found[2].strip(chr(39))}: {found[3]}") from None
        raise UsageError(f"--model_name_or_path {args.model_name_or_path}: {e}") from None


def _source_model(source, source_config):
    """The source model in eval mode (with its masked-LM head when it has one) and whether it has a pooler."""
    from transformers import AutoModel, AutoModelForMaskedLM

    masked_lm = (source_config.architectures or [None])[0] in MLM_ARCHITECTURES
    if Path(source).is_dir():  # truncated, NaN or pickled weights: named here, not a raw loader error
        checkpoints.check_model_folder(source, "--model_name_or_path")
    try:
        model, info = (AutoModelForMaskedLM if masked_lm else AutoModel).from_pretrained(
            source, output_loading_info=True, attn_implementation="eager")
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise UsageError(f"--model_name_or_path {source}: cannot load its weights ({checkpoints.first_line(e)})"
                         ) from None
    for name, param in model.named_parameters():  # a Hub source is not checked above
        if not torch.isfinite(param).all():
            raise UsageError(f"--model_name_or_path {source}: weight {name} holds NaN/inf, and so would the "
                             f"converted model; nothing was written")
    missing = sorted(k for k in info["missing_keys"] if not k.startswith("pooler.")) + sorted(info["mismatched_keys"])
    if missing:
        raise UsageError(f"--model_name_or_path {source}: the checkpoint lacks {len(missing)} tensor(s) that "
                         f"{type(model).__name__} needs, e.g. {', '.join(map(str, missing[:3]))}")
    has_pooler = not any(k.startswith("pooler.") for k in info["missing_keys"]) and \
        getattr(model, "pooler", None) is not None
    return model.eval(), has_pooler


def _copy_weights(source, target, roberta_positions, projection_init, seed):
    """Fill `target` (a fresh Linformer) from `source`; every tensor is either copied or derived."""
    config = target.config
    base = source.base_model
    encoder = target if isinstance(target, LinformerModel) else target.linformer
    source_state = base.state_dict()
    with torch.no_grad():
        for name, tensor in encoder.state_dict(keep_vars=True).items():
            if is_long_path(name) or name == "embeddings.position_embeddings.weight":
                continue  # E/F are derived below; adapters (B = 0) and gates (0) start as no change, from init
            if name not in source_state:
                raise RuntimeError(f"conversion: no source tensor for {name}")  # a bug here, not bad input
            tensor.copy_(source_state[name])

        # Positions: real token j of the source (row j, or row pad + 1 + j for RoBERTa) goes to our row pad + 1 + j.
        pad = config.pad_token_id
        table = source_state["embeddings.position_embeddings.weight"]
        learned = table[pad + 1:] if roberta_positions else table
        ours = encoder.embeddings.position_embeddings.weight
        ours.zero_()
        if roberta_positions:
            ours[:pad + 1] = table[:pad + 1]
        ours[pad + 1:pad + 1 + config.max_seq_length] = extend_positions(learned, config.max_seq_length)

        generator = torch.Generator().manual_seed(seed)
        n = config.max_seq_length
        for param in encoder.encoder.projections.parameters():
            if config.projection_type != "linear":
                continue  # conv kernels keep the model's mean-pooling start
            groups, k, _ = param.shape
            if projection_init == "window_mean":
                param.copy_(window_mean_projection(k, n).expand(groups, k, n))
            else:
                param.copy_(torch.randn(param.shape, generator=generator) / n**0.5)

        if isinstance(target, LinformerForMaskedLM):
            head = {BERT_HEAD_NAMES.get(k, k): v for k, v in source.state_dict().items()
                    if k.startswith(("cls.predictions.", "lm_head."))}
            for name, tensor in target.lm_head.state_dict(keep_vars=True).items():
                key = f"lm_head.{name}"
                if key == "lm_head.decoder.weight" and config.tie_word_embeddings:
                    continue  # tied to the word embeddings, copied above
                tensor.copy_(head[key])


def _copy_sentence_transformers_files(source, folder, max_seq_length):
    """Carry a sentence-transformers source's modules (pooling, normalisation, ...) so the result loads there too.

    Returns None for a plain transformers source, else the source's own `max_seq_length` (None if unset)."""
    modules_file = model_file(source, "modules.json")
    if not modules_file:
        return None
    modules = json.loads(Path(modules_file).read_text())
    shutil.copy(modules_file, folder / "modules.json")
    for name in ("config_sentence_transformers.json", "sentence_bert_config.json"):
        path = model_file(source, name)
        if path:
            shutil.copy(path, folder / name)
    settings = folder / "sentence_bert_config.json"
    values = json.loads(settings.read_text()) if settings.exists() else {}
    previous = values.get("max_seq_length")
    values["max_seq_length"] = max_seq_length
    settings.write_text(json.dumps(values, indent=2) + "\n")
    for module in modules:
        path = module.get("path", "")
        if not path:
            continue
        if Path(source).is_dir():
            stored = Path(source)
        else:
            from huggingface_hub import snapshot_download

            stored = Path(snapshot_download(source, allow_patterns=[f"{path}/*"]))
        if (stored / path).is_dir():
            shutil.copytree(stored / path, folder / path)
        else:
            (folder / path).mkdir(parents=True)  # e.g. Normalize, which stores nothing
    return {"max_seq_length": previous}


def _changes(source_config, target, projection_init, positions, sentence_transformers):
    """The card's "What changed": a bullet per way the converted model `target` differs from its source."""
    config, class_name = target.config, type(target).__name__
    n, k = config.max_seq_length, config.projected_dim
    linear = config.projection_type == "linear"
    changes = [
        f"Self-attention is Linformer attention: keys and values are projected along the sequence from n = {n} to "
        f"k = {k} positions (`projection_sharing={config.projection_sharing!r}`, `projection_type="
        f"{config.projection_type!r}`" + (f", E/F initialised as `{projection_init}`, `projection_length_scaling="
                                          f"{config.projection_length_scaling!r}`" if linear else "") + ")."
        + (" An input of L < n tokens reads E/F resampled to its own length, so every row still covers a window of "
           "the input." if config.projection_length_scaling == "resample" else ""),
        f"`exact_attention_length={config.exact_attention_length}`: "
        + (f"a sequence with at most {config.exact_attention_length} real tokens attends to its own keys exactly, so "
           "on such inputs this model reproduces the source (max abs difference of hidden states <= 1e-5)."
           if config.exact_attention_length else "every input goes through the projection.")
        + (f" `attention_type='windowed'`: a longer one reads each window of {config.exact_attention_length} tokens "
           "exactly, plus the k slots through per-head gates that start closed."
           if config.attention_type == "windowed" else ""),
        f"Positions: the source has {positions['source']} learned positions; this model takes inputs of up to {n} "
        f"tokens. " + ("Rows beyond the source's were filled by repeating its learned table (the recipe Longformer "
                       "used to extend RoBERTa from 512 to 4096 positions). " if n > positions["source"] else "")
        + f"Positions are numbered RoBERTa's way (from pad_token_id + 1 = {config.pad_token_id + 1}, counting only "
        "real tokens), so left and right padding give the same states"
        + ("; BERT's row j sits at row j + 1." if not positions["roberta"] else "."),
        f"Tokenizer: the source's, with `model_max_length={n}`.",
    ]
    if sentence_transformers is not None:
        changes.append(f"sentence-transformers modules (pooling, normalisation) are carried over; `max_seq_length` "
                       f"is set to {n} (the source's: {sentence_transformers['max_seq_length']}).")
    if class_name == "LinformerModel" and target.pooler is None:
        changes.append("The source has no pooler weights, so none are stored; `pooler_output` is untrained.")
    if class_name == "LinformerForMaskedLM" and source_config.hidden_act != "gelu":
        changes.append(f"The masked-LM head uses GELU, as RoBERTa's; the source's head used "
                       f"{source_config.hidden_act!r}.")
    return changes


def _model_card(args, source_config, target, positions, sentence_transformers):
    """The converted folder's README.md: what it was built from, what changed, how to load it."""
    source, class_name = args.model_name_or_path, type(target).__name__
    licence, title = outputs.read_card(source)
    changes = _changes(source_config, target, args.projection_init, positions, sentence_transformers)
    use = [outputs.code_block(
        "from transformers import AutoModel, AutoTokenizer\n"
        "# trust_remote_code runs the modeling files stored with the weights; `import linformer_hf` makes it "
        "unnecessary\n"
        'model = AutoModel.from_pretrained("PATH_OR_HUB_ID", trust_remote_code=True)\n'
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_HUB_ID", trust_remote_code=True)')]
    if sentence_transformers is not None:
        use.append(outputs.code_block('from sentence_transformers import SentenceTransformer\n'
                                      'model = SentenceTransformer("PATH_OR_HUB_ID", trust_remote_code=True)'))
    if class_name == "LinformerForMaskedLM":
        use.append(outputs.code_block('from transformers import pipeline\n'
                                      'fill = pipeline("fill-mask", model="PATH_OR_HUB_ID", trust_remote_code=True)'))
    return outputs.model_card(
        title=f"Linformer converted from `{source}`", license=licence or "other",
        base_model=None if Path(source).is_dir() else source,
        tags=["linformer", *(["sentence-transformers"] if sentence_transformers is not None else [])],
        intro=f"`{class_name}` (Linformer, Wang et al. 2020) built from the pretrained {source_config.model_type} "
              f"encoder `{source}`" + (f" (its model card: \"{title}\")" if title else "")
              + " by linformer-hf's `convert_to_linformer.py`, with no training.\n\n"
              f"**Source licence:** {licence or 'not stated in the source model card: check the source before use'}. "
              "These weights are the source's weights plus derived projections, so the source's licence applies.",
        sections={"What changed": "\n".join(f"- {change}" for change in changes) + "\n\n"
                  "Inputs longer than k tokens pass through the untrained projection and differ from what the source "
                  "would give: see `experiments/conversion/results.md` in linformer-hf for what survives without "
                  "training (mean-pooled cosine to the source, per-layer error, linear probes, long-document "
                  "retrieval, speed and memory).",
                  "Use": "\n\n".join(use)})


def convert_to_linformer(model_name_or_path, output_dir, **options):
    """Write a Linformer converted from `model_name_or_path` to `output_dir` and return its path. `options` are
    the other fields of `ConvertArguments` (the flags of convert_to_linformer.py).

    Raises `UsageError` (one line, naming the argument) on bad input, before anything is written.
    """
    args = ConvertArguments(str(model_name_or_path), str(output_dir), **options)
    source, output_dir = args.model_name_or_path, Path(args.output_dir)
    checkpoints.check_new_output_dir(output_dir, args.overwrite_output_dir)
    if jargon.is_jargon(source):
        return jargon.convert_jargon(args)
    source_config = _source_config(source)
    config = _linformer_config(source_config, args)
    tokenizer = load_source_tokenizer(source_config, args.tokenizer_name or source,
                                      "--tokenizer_name" if args.tokenizer_name else "--model_name_or_path")
    source_model, has_pooler = _source_model(source, source_config)
    masked_lm = hasattr(source_model, "cls") or hasattr(source_model, "lm_head")
    roberta_positions = source_config.model_type in OFFSET_POSITIONS
    torch.manual_seed(args.seed)
    target = LinformerForMaskedLM(config) if masked_lm else LinformerModel(config, add_pooling_layer=has_pooler)
    _copy_weights(source_model, target, roberta_positions, args.projection_init, args.seed)
    target = target.to(next(source_model.parameters()).dtype).eval()
    offset = config.pad_token_id + 1 if roberta_positions else 0
    positions = {"source": source_config.max_position_embeddings - offset, "roberta": roberta_positions}

    def write(staging):
        target.save_pretrained(staging)
        tokenizer.model_max_length = args.max_seq_length
        tokenizer.save_pretrained(staging)
        copy_vocabulary_files(args.tokenizer_name or source, staging)
        sentence_transformers = _copy_sentence_transformers_files(source, staging, args.max_seq_length)
        return _model_card(args, source_config, target, positions, sentence_transformers)

    return checkpoints.write_converted_folder(output_dir, args.overwrite_output_dir, write)

