# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Load the Jargon models (PantagrueLLM, LREC-COLING 2024) as linformer-hf folders: the only published Linformer
weights, French RoBERTa-Linformers for legal and medical text of up to 4,096 tokens.

Their own code (the Hub's remote code, PantagrueLLM/Jargon on GitHub) needs fairseq 0.12.2, which has no wheel for
current Python, transformers 4.40 and torch 2.3, and reads a pickled `pytorch_model.bin`. What it computes was read
from that code (src/jargon at 8c496f4) and checked against it on tiny random checkpoints (tests/data/jargon); none
of it is copied here, its repository states no licence. What the conversion has to know:

* A layer is pre-LN: x + Attention(LN(x)), then y + FeedForward(LN(y)), and the encoder ends on one more LayerNorm;
  the embeddings never apply their LayerNorm. Our model expresses both as config fields
  (`layer_norm_placement="pre"`, `embedding_layer_norm=False`).
* Keys and values are projected along the sequence before `k_proj` / `v_proj`, an input of L tokens meeting E's
  first L columns unscaled (`projection_length_scaling="none"`, every input projected, none read exactly). Their
  flags name our sharing modes: `shared_layer_kv_compressed=1` is one matrix for the model (layerwise), otherwise
  one per layer for keys and values (`shared_kv_compressed=1`, key_value) or two (headwise); k = max_positions //
  compressed.
* Their key bias is added to each of the k projected slots; ours is projected with the keys, so slot j would get
  it times E's row sum j. Theirs adds the same q.b to every score of a query, which the softmax removes: it is
  dropped. Their value bias likewise reaches every output unweighted (attention weights sum to 1), so it is folded
  into the output projection's bias, W_o b_v + b_o: exact at inference (attention dropout breaks the sum in
  training, where the two differ as any dropout placement does).
* Several tensors are never read (the embedding LayerNorm, each layer's output LayerNorm, the compression bias,
  the span-boundary pretraining head): they are dropped and listed once. Several config fields are never read
  either (`num_heads`, `activation`, `dim_feedforward`, ...; the attention reads `encoder_attention_heads`, the
  feed-forward `hidden_act` and `intermediate_size`, the stack `num_layers`): the card says which.

What changes for a user: padding is invisible (their layers never mask it, so a padded sequence got other outputs
than the same sequence alone); every other input gives their logits (within 1e-5 in float32, tests/test_jargon.py).
"""

import json
import logging
import re
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import PreTrainedConfig
from transformers.activations import ACT2FN

from linformer_hf import LinformerConfig, LinformerForMaskedLM
from linformer_hf.configuration_linformer import standard_config_keys

from . import checkpoints, outputs
from .arguments import UsageError
from .models import check_local_path, model_file
from .tokenization import copy_vocabulary_files, load_source_tokenizer

logger = logging.getLogger(__name__)

SOURCE_CODE = "https://github.com/PantagrueLLM/Jargon"
ARCHITECTURE = "JargonForMaskedLM"
# JargonConfig's defaults (and RobertaConfig's, which it extends) for the fields its code reads, for a config.json
# that leaves one out.
READ_DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "embed_dim": 768, "num_layers": 12, "encoder_attention_heads": 12,
    "intermediate_size": 4096, "hidden_act": "relu", "max_positions": 512, "compressed": 4,
    "shared_layer_kv_compressed": 1, "shared_kv_compressed": 0, "encoder_normalize_before": False,
    "max_position_embeddings": 512, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "type_vocab_size": 2,
    "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.1, "dropout": 0.1, "initializer_range": 0.02,
    "tie_word_embeddings": True, "position_embedding_type": "learned", "is_decoder": False,
    "add_cross_attention": False, "classifier_dropout": None, "untie_weights_roberta": False,
}
# JargonConfig's fields that its code never reads (at inference), each with what is read in its place, if anything.
IGNORED_FIELDS = {
    "num_heads": "encoder_attention_heads", "num_attention_heads": "encoder_attention_heads",
    "num_hidden_layers": "num_layers", "activation": "hidden_act", "intermediate_act_fn": "hidden_act",
    "dim_feedforward": "intermediate_size", "encoder_ffn_embed_dim": "intermediate_size",
    "encoder_embed_dim": "embed_dim", "layernorm_embedding": None, "attention_probs_dropout_prob": "dropout",
    "compress_layer": None, "freeze_compress": None, "q_noise": None, "qn_block_size": None, "quant_noise_pq": None,
    "quant_noise_pq_block_size": None, "quant_noise_scalar": None, "add_bias_kv": None, "add_zero_attn": None,
    "bias": None, "self_attention": None, "encoder_decoder_attention": None,
    "add_pooling_layer": None, "use_cache": None, "output_hidden_states": None, "chunk_size_feed_forward": None,
}
# The flags of convert_to_linformer.py that a Jargon checkpoint decides: its n, k, sharing and projection.
FIXED_FLAGS = ("max_seq_length", "projected_dim", "projection_sharing", "projection_init", "projection_type",
               "projection_length_scaling", "attention_type", "exact_attention_length", "long_input_adapter_rank")
# Tensors of their checkpoint that their forward never reads, by pattern (why, beside each).
NEVER_READ = [
    r"roberta\.embeddings\.LayerNorm\.(weight|bias)",  # their embeddings never apply their LayerNorm
    r"roberta\.embeddings\.(position_ids|token_type_ids)",  # index buffers, which the model rebuilds
    r"roberta\.encoder\.layer\.\d+\.output\.LayerNorm\.(weight|bias)",  # their feed-forward output skips it
    r"roberta\.encoder\.(compress_layer|layer\.\d+\.attention\.compress_[kv])\.bias",  # E is read, not its bias
    r"sbo_head\..*",  # the span-boundary pretraining head
]
# Read by their code, but unable to change what it computes: see _fold_biases.
KEY_BIAS = r"roberta\.encoder\.layer\.\d+\.attention\.k_proj\.bias"


def jargon_config(source):
    """The source's config.json as a dict when it is a Jargon checkpoint (`model_type` "jargon"), else None."""
    check_local_path(source, "--model_name_or_path")
    path = model_file(source, "config.json")
    if not path:
        return None
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) and config.get("model_type") == "jargon" else None


def is_jargon(source):
    return jargon_config(source) is not None


def _refuse(source, why):
    raise UsageError(f"--model_name_or_path {source}: {why}")


def _read_fields(source, raw):
    """The fields their code reads, with JargonConfig's defaults; refuses an unknown field or a variant their code
    does not compute as the released models do (or cannot run at all)."""
    known = set(READ_DEFAULTS) | set(IGNORED_FIELDS) | standard_config_keys() | {"auto_map", "_name_or_path"}
    unknown = sorted(key for key in raw if key not in known)
    if unknown:
        _refuse(source, f"config.json has field{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} that "
                        f"Jargon's JargonConfig does not define ({SOURCE_CODE}); allowed: JargonConfig's fields and "
                        "the standard transformers keys")
    values = {**READ_DEFAULTS, **{key: raw[key] for key in READ_DEFAULTS if key in raw}}
    architectures = raw.get("architectures") or []
    if architectures != [ARCHITECTURE]:
        _refuse(source, f"architecture {', '.join(architectures) or '(none named)'} is not supported; supported: "
                        f"{ARCHITECTURE} (the released Jargon models)")

    def integer(field, low):
        value = values[field]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            _refuse(source, f"config.json's {field}={value!r} is invalid; it must be an integer >= {low}")

    for field in ("vocab_size", "hidden_size", "embed_dim", "num_layers", "encoder_attention_heads",
                  "intermediate_size", "max_positions", "compressed", "max_position_embeddings", "type_vocab_size"):
        integer(field, 1)
    checks = [
        ("embed_dim", values["embed_dim"] == values["hidden_size"],
         f"it must equal hidden_size={values['hidden_size']} (their attention is built at embed_dim, their "
         "LayerNorms at hidden_size)"),
        ("encoder_normalize_before", values["encoder_normalize_before"] is True,
         "allowed: true (the released variant: pre-LN layers and a final LayerNorm; without it their stack has no "
         "final LayerNorm, which no released model uses)"),
        ("layer_norm_eps", values["layer_norm_eps"] == 1e-5,
         "allowed: 1e-05 (their layers' LayerNorms use 1e-5 whatever the config says, linformer-hf one eps for all)"),
        ("position_embedding_type", values["position_embedding_type"] in ("learned", "absolute"),
         "allowed: 'learned' or 'absolute' (their embeddings add a learned position table)"),
        ("shared_layer_kv_compressed", values["shared_layer_kv_compressed"] in (0, 1), "allowed: 0 or 1"),
        ("shared_kv_compressed", values["shared_kv_compressed"] in (0, 1), "allowed: 0 or 1"),
        ("compressed", values["max_positions"] // values["compressed"] >= 1,
         f"it must be at most max_positions={values['max_positions']} (k = max_positions // compressed)"),
        ("max_position_embeddings",
         values["max_position_embeddings"] >= values["max_positions"] + values["pad_token_id"] + 1,
         f"it must be at least max_positions + pad_token_id + 1 = "
         f"{values['max_positions'] + values['pad_token_id'] + 1}, or their position table cannot number "
         "max_positions tokens"),
        ("is_decoder", not values["is_decoder"], "allowed: false (an encoder)"),
        ("add_cross_attention", not values["add_cross_attention"], "allowed: false (an encoder)"),
        ("hidden_act", values["hidden_act"] in ACT2FN, "it must name an activation of transformers' ACT2FN"),
        ("untie_weights_roberta", not values["untie_weights_roberta"],
         "allowed: false (their span-boundary head cannot be built untied)"),
    ]
    for field, holds, allowed in checks:
        if not holds:
            _refuse(source, f"config.json's {field}={values[field]!r} is not supported; {allowed}")
    return values


def _sharing(values):
    if values["shared_layer_kv_compressed"] == 1:
        return "layerwise"
    return "key_value" if values["shared_kv_compressed"] == 1 else "headwise"


def linformer_config(source, values):
    """Our config for their computation (see the module docstring)."""
    n = values["max_positions"]
    fields = dict(
        vocab_size=values["vocab_size"], hidden_size=values["hidden_size"], num_hidden_layers=values["num_layers"],
        num_attention_heads=values["encoder_attention_heads"], intermediate_size=values["intermediate_size"],
        hidden_act=values["hidden_act"], hidden_dropout_prob=values["hidden_dropout_prob"],
        attention_probs_dropout_prob=values["dropout"], max_position_embeddings=values["max_position_embeddings"],
        type_vocab_size=values["type_vocab_size"], initializer_range=values["initializer_range"],
        layer_norm_eps=values["layer_norm_eps"], pad_token_id=values["pad_token_id"],
        bos_token_id=values["bos_token_id"], eos_token_id=values["eos_token_id"],
        classifier_dropout=values["classifier_dropout"], tie_word_embeddings=values["tie_word_embeddings"],
        max_seq_length=n, projected_dim=n // values["compressed"], projection_sharing=_sharing(values),
        projection_type="linear", projection_length_scaling="none", attention_type="projected",
        exact_attention_length=None, layer_norm_placement="pre", embedding_layer_norm=False,
        architectures=["LinformerForMaskedLM"],
    )
    try:
        return LinformerConfig(**fields)
    except ValueError as e:
        _refuse(source, f"its config.json does not describe a model linformer-hf can build ({e})")


def _weights_file(source):
    """The one weight file: model.safetensors, else pytorch_model.bin (read with weights_only)."""
    for name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if model_file(source, name):
            _refuse(source, f"{name}: sharded checkpoints are not supported; the released Jargon models are one "
                            "pytorch_model.bin")
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = model_file(source, name)
        if path:
            return Path(path)
    _refuse(source, "has no weights (model.safetensors or pytorch_model.bin)")


def read_tensors(source):
    """Every tensor of the checkpoint, refused in one line if damaged, pickled beyond tensors, or not finite."""
    path = _weights_file(source)
    check = checkpoints.check_safetensors if path.suffix == ".safetensors" else checkpoints.check_torch_weights
    try:
        check(path)
        tensors = load_file(path) if path.suffix == ".safetensors" else checkpoints.load_plain(path)
    except Exception as e:  # any decoding error means the same: unusable weights
        _refuse(source, f"{path.name}: {checkpoints.first_line(e)}; these weights cannot be used")
    if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        _refuse(source, f"{path.name}: not a state dict of tensors")
    return tensors


def _plan(values, config):
    """{our tensor: (their names, the shape their config gives it)}: every tensor of ours copied from theirs. The
    first of the names present is read; any other present must be equal (copies of a shared or tied tensor)."""
    hidden, inner = values["hidden_size"], values["intermediate_size"]
    k, n = config.projected_dim, config.max_seq_length
    # The span-boundary head's decoder is the word embeddings, and so is the masked-LM decoder when tied: a
    # checkpoint saved with one name per shared tensor may keep any of them.
    word = ("roberta.embeddings.word_embeddings.weight", "sbo_head.decoder.weight",
            *(["lm_head.decoder.weight"] if values["tie_word_embeddings"] else []))
    plan = {
        "linformer.embeddings.word_embeddings.weight": (word, (values["vocab_size"], hidden)),
        "linformer.embeddings.position_embeddings.weight": (("roberta.embeddings.position_embeddings.weight",),
                                                            (values["max_position_embeddings"], hidden)),
        "linformer.embeddings.token_type_embeddings.weight": (("roberta.embeddings.token_type_embeddings.weight",),
                                                              (values["type_vocab_size"], hidden)),
        "linformer.encoder.final_layer_norm.weight": (("roberta.encoder.layer_norm.weight",), (hidden,)),
        "linformer.encoder.final_layer_norm.bias": (("roberta.encoder.layer_norm.bias",), (hidden,)),
        "lm_head.dense.weight": (("lm_head.dense.weight",), (hidden, hidden)),
        "lm_head.dense.bias": (("lm_head.dense.bias",), (hidden,)),
        "lm_head.layer_norm.weight": (("lm_head.layer_norm.weight",), (hidden,)),
        "lm_head.layer_norm.bias": (("lm_head.layer_norm.bias",), (hidden,)),
        "lm_head.decoder.bias": (("lm_head.decoder.bias", "lm_head.bias"), (values["vocab_size"],)),
    }
    if not values["tie_word_embeddings"]:
        plan["lm_head.decoder.weight"] = (("lm_head.decoder.weight",), (values["vocab_size"], hidden))
    maps = {"attention.q_proj": ("attention.self.query", (hidden, hidden)),
            "attention.k_proj": ("attention.self.key", (hidden, hidden)),
            "attention.v_proj": ("attention.self.value", (hidden, hidden)),
            "attention.out_proj": ("attention.output.dense", (hidden, hidden)),
            "intermediate.dense": ("intermediate.dense", (inner, hidden)),
            "output.dense": ("output.dense", (hidden, inner))}
    norms = {"attn_layer_norm": "attention_layer_norm", "final_layer_norm": "feed_forward_layer_norm"}
    for i in range(config.num_hidden_layers):
        theirs, ours = f"roberta.encoder.layer.{i}.", f"linformer.encoder.layer.{i}."
        for their, (our, shape) in maps.items():
            plan[f"{ours}{our}.weight"] = ((f"{theirs}{their}.weight",), shape)
            plan[f"{ours}{our}.bias"] = ((f"{theirs}{their}.bias",), shape[:1])  # key/value biases: see _our_state
        for their, our in norms.items():
            for part in ("weight", "bias"):
                plan[f"{ours}{our}.{part}"] = ((f"{theirs}{their}.{part}",), (hidden,))
    sharing, layers = config.projection_sharing, range(config.num_hidden_layers)
    if sharing == "layerwise":
        copies = ["roberta.encoder.compress_layer.weight"] + [
            f"roberta.encoder.layer.{i}.attention.compress_{kv}.weight" for i in layers for kv in "kv"]
        plan["linformer.encoder.projections.shared"] = (tuple(copies), (k, n))
    else:
        for i in layers:
            plan[f"linformer.encoder.projections.key_{i}"] = (
                (f"roberta.encoder.layer.{i}.attention.compress_k.weight",), (k, n))
            if sharing == "headwise":
                plan[f"linformer.encoder.projections.value_{i}"] = (
                    (f"roberta.encoder.layer.{i}.attention.compress_v.weight",), (k, n))
    return plan


def _short(names):
    """Tensor names with layer numbers folded, for a one-line list."""
    folded = [re.sub(r"layer\.\d+\.", "layer.*.", re.sub(r"^sbo_head\..*", "sbo_head.*", name)) for name in names]
    return ", ".join(dict.fromkeys(folded))


def map_tensors(source, tensors, values, config):
    """Our state dict from their tensors, and the names of theirs that are dropped: those their code never reads,
    then the key biases, which cannot change what it computes.

    Refused in one line: a tensor their config does not account for, one it needs that is missing, one of another
    shape, copies of a shared tensor that differ."""
    plan = _plan(values, config)
    state, used = {}, set()
    missing, wrong = [], []
    for ours, (names, shape) in plan.items():
        present = [name for name in names if name in tensors]
        if not present:
            missing.append(names[0])
            continue
        for name in present:
            if tuple(tensors[name].shape) != shape:
                wrong.append(f"{name} is {tuple(tensors[name].shape)}, its config needs {shape}")
        if wrong:
            continue
        first = tensors[present[0]]
        for name in present[1:]:
            if not torch.equal(tensors[name], first):
                _refuse(source, f"the checkpoint does not match its config.json: {name} differs from {present[0]}, "
                                "which their code ties it to")
        used.update(present)
        state[ours] = first.unsqueeze(0) if ours.startswith("linformer.encoder.projections.") else first
    if wrong:
        _refuse(source, f"the checkpoint does not match its config.json: {wrong[0]}"
                        + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""))
    if missing:
        _refuse(source, f"the checkpoint lacks {len(missing)} tensor(s) its config.json needs, e.g. "
                        f"{', '.join(missing[:3])}")
    rest = [name for name in tensors if name not in used]
    dropped = [name for name in rest if any(re.fullmatch(pattern, name) for pattern in NEVER_READ)]
    unexpected = [name for name in rest if name not in dropped]
    if unexpected:
        _refuse(source, f"the checkpoint has {len(unexpected)} tensor(s) that {ARCHITECTURE} with its config.json "
                        f"does not define, e.g. {', '.join(unexpected[:3])}")
    _fold_biases(state, config)
    return state, dropped + [name for name in tensors if re.fullmatch(KEY_BIAS, name)]


def _fold_biases(state, config):
    """Their key bias cannot change attention weights, and their value bias reaches every output unweighted: the
    key bias goes, the value bias moves into the output projection's bias (module docstring)."""
    for i in range(config.num_hidden_layers):
        layer = f"linformer.encoder.layer.{i}."
        value_bias = state[f"{layer}attention.self.value.bias"]
        weight, bias = state[f"{layer}attention.output.dense.weight"], state[f"{layer}attention.output.dense.bias"]
        folded = bias.double() + weight.double() @ value_bias.double()
        state[f"{layer}attention.output.dense.bias"] = folded.to(bias.dtype)
        state[f"{layer}attention.self.key.bias"] = torch.zeros_like(state[f"{layer}attention.self.key.bias"])
        state[f"{layer}attention.self.value.bias"] = torch.zeros_like(value_bias)


def ignored_fields(raw, values):
    """The config fields their code never reads whose values say otherwise than what it does read (num_heads=16
    beside encoder_attention_heads=12, ...), as "`field`=value (`read`=value is read)"."""
    ignored = [f"`{field}`={raw[field]!r} (`{instead}`={values[instead]!r} is read)"
               for field, instead in IGNORED_FIELDS.items()
               if instead and field in raw and raw[field] != values[instead]]
    if raw.get("layernorm_embedding"):
        ignored.append(f"`layernorm_embedding`={raw['layernorm_embedding']!r} (their embeddings never normalise)")
    return ignored


def _changes(values, config, dropped, ignored):
    """The card's "What changed"."""
    n, k = config.max_seq_length, config.projected_dim
    changes = [
        f"The same computation as the source's own code ({SOURCE_CODE}): pre-LN layers with a final LayerNorm "
        "(`layer_norm_placement='pre'`), embeddings without LayerNorm (`embedding_layer_norm=False`), keys and "
        f"values projected along the sequence from n = {n} to k = {k} slots (`projection_sharing="
        f"{config.projection_sharing!r}`, an input of L tokens reading E's first L columns: "
        "`projection_length_scaling='none'`). float32 logits equal the source's within 1e-5.",
        "**Padding is now invisible.** The source's layers never mask padding, so a sequence padded in a batch got "
        "other outputs than the same sequence alone; here each sequence in a padded batch (left or right) gives "
        "what it gives alone, which is what the source gives it alone.",
        "The source's key bias is dropped (it adds the same amount to every score of a query, which the softmax "
        "removes) and its value bias is folded into the attention output's bias (attention weights sum to 1): "
        "exact at inference.",
        f"Inputs longer than n = {n} tokens are refused (the tokenizer's `model_max_length` is {n}), as the "
        "source's projection cannot read them either.",
    ]
    if dropped:
        changes.append(f"Tensors of the source not carried: {_short(dropped)} (the key biases as above; the others "
                       "its code never reads).")
    if ignored:
        changes.append(f"Config fields the source's code never reads, not carried: {', '.join(ignored)}.")
    return changes


def _model_card(source, values, config, dropped, ignored):
    licence, title = outputs.read_card(source)
    unstated = (f"not stated in the source model card, and the source code repository ({SOURCE_CODE}) states none "
                "either: check with the authors before use")
    use = outputs.code_block(
        "from transformers import pipeline\n"
        'fill = pipeline("fill-mask", model="PATH_OR_HUB_ID", trust_remote_code=True)\n'
        'fill("Il est allé au <mask> hier.")')
    return outputs.model_card(
        title=f"Linformer converted from `{source}`", license=licence or "other",
        base_model=None if Path(source).is_dir() else source, tags=["linformer", "jargon", "fill-mask"],
        pipeline_tag="fill-mask",
        intro=f"`LinformerForMaskedLM` (linformer-hf) holding the Jargon model `{source}` "
              + (f"(its model card: \"{title}\") " if title else "")
              + "(Segonne et al., LREC-COLING 2024: French RoBERTa-Linformers for specialised domains), converted "
              "by linformer-hf's `convert_to_linformer.py` to run on transformers 5 without fairseq.\n\n"
              f"**Source licence:** {licence or unstated}. "
              "These are the source's weights (two biases rearranged, unused tensors left out), so its terms apply.",
        sections={"What changed": "\n".join(f"- {change}" for change in _changes(values, config, dropped, ignored)),
                  "Use": use})


def convert_jargon(args):
    """`convert_to_linformer` for a Jargon checkpoint: the folder at `args.output_dir` (`ConvertArguments`), written
    whole or not at all, as `LinformerForMaskedLM` with the source's tokenizer (`model_max_length` = n) and a card."""
    source, output_dir = args.model_name_or_path, Path(args.output_dir)
    defaults = type(args)(source, str(output_dir))  # the flags as convert_to_linformer.py sets them when not given
    for flag in FIXED_FLAGS:
        if getattr(args, flag) != getattr(defaults, flag):
            raise UsageError(f"--{flag} {getattr(args, flag)}: a Jargon checkpoint fixes n, k, the sharing and the "
                             "projection; leave this flag out to keep its computation")
    raw = jargon_config(source)
    values = _read_fields(source, raw)
    ignored = ignored_fields(raw, values)
    config = linformer_config(source, values)
    flag = "--tokenizer_name" if args.tokenizer_name else "--model_name_or_path"
    # AutoTokenizer reads the folder's config.json to pick a class unless handed one; theirs names remote code.
    tokenizer = load_source_tokenizer(config, args.tokenizer_name or source, flag, config=PreTrainedConfig())
    tensors = read_tensors(source)
    state, dropped = map_tensors(source, tensors, values, config)
    model = LinformerForMaskedLM(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.decoder.weight"}:  # a bug here (the plan and the model disagree)
        raise RuntimeError(f"jargon conversion: the plan and the model disagree on {(missing + unexpected)[:3]}")
    model = model.to(state["linformer.embeddings.word_embeddings.weight"].dtype).eval()
    if dropped:
        logger.warning("%s: dropped %d tensor(s), the key biases (they cannot change attention weights) and those "
                       "Jargon's code never reads: %s", source, len(dropped), _short(dropped))

    def write(staging):
        model.save_pretrained(staging)
        tokenizer.model_max_length = config.max_seq_length
        tokenizer.save_pretrained(staging)
        copy_vocabulary_files(args.tokenizer_name or source, staging)
        return _model_card(source, values, config, dropped, ignored)

    return checkpoints.write_converted_folder(output_dir, args.overwrite_output_dir, write)
