# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The models the benchmarks compare, built from random weights at identical size: Linformer (ours), RoBERTa
and ModernBERT (transformers'); the token ids they are fed; one inference step and one masked-LM update."""

import contextlib

import torch

BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
# --tiny's vocabulary is small too: RoBERTa's 50,265-row head in bf16 (emulated on AVX2 CPUs) took two thirds of a
# tiny training run (the GPU check's dry-run training table: 96 s -> 31 s), and a smoke test measures nothing that
# needs it
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1024)
VOCAB = 50265  # dims may name another vocab_size (the quality study's body: 8192)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_roberta(n, dims=BASE, attn="sdpa", dtype=torch.float32, device="cpu", head=None, seed=0, chunk_ff=0):
    """RoBERTa of the given size that accepts n tokens (positions start after pad_token_id=1); `chunk_ff`:
    chunk_size_feed_forward (0: the feed-forward blocks run on the whole sequence at once)."""
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaModel

    if attn not in ("eager", "sdpa"):
        raise ValueError(f"attention must be eager or sdpa, got {attn!r}")
    config = RobertaConfig(**{"vocab_size": VOCAB, "max_position_embeddings": n + 2, "hidden_dropout_prob": 0.0,
                              "attention_probs_dropout_prob": 0.0, "chunk_size_feed_forward": chunk_ff, **dims})
    return _instantiate(RobertaForMaskedLM if head == "mlm" else RobertaModel, config, attn, dtype, device, seed)


def _instantiate(model_class, config, attn, dtype, device, seed):
    """Same seed, attention backend and dtype for every model; no pooler on the bare encoders that have one
    (ModernBertModel has none). attn=None: the implementation transformers picks by default."""
    import inspect

    torch.manual_seed(seed)
    pooler = "add_pooling_layer" in inspect.signature(model_class.__init__).parameters
    extra = {"add_pooling_layer": False} if pooler else {}
    # weights drawn on the device that runs them: a GPU initialises a base-size model in well under a second,
    # one CPU thread takes seconds (ModernBERT's truncated normals about 30 s), time a short GPU loan lacks
    with torch.device(device):
        model = model_class._from_config(config, attn_implementation=attn, dtype=dtype, **extra)
    return model.to(device).eval()


def build_modernbert(n, dims=BASE, attn=None, dtype=torch.float32, device="cpu", head=None, seed=0):
    """ModernBERT with the depth, width, heads and intermediate_size of the others, accepting n tokens.

    Everything else is ModernBertConfig's default, because that is the architecture users pick: RoPE, local
    attention (window local_attention=128) on two layers of three and global attention on every third
    (global_attn_every_n_layers=3), and a GLU MLP whose input map is hidden x 2*intermediate_size (gate and
    value halves of intermediate_size each), so its MLP does 1.5x RoBERTa's MLP FLOPs at equal
    intermediate_size. The special ids are RoBERTa's, so they fit the shared VOCAB (ModernBERT's own
    pad id 50283 would not). attn=None: transformers' default kernel, recorded by the caller."""
    from transformers import ModernBertConfig, ModernBertForMaskedLM, ModernBertModel

    config = ModernBertConfig(**{"vocab_size": VOCAB, "max_position_embeddings": n, "pad_token_id": 1,
                                 "bos_token_id": 0, "cls_token_id": 0, "eos_token_id": 2, "sep_token_id": 2,
                                 "embedding_dropout": 0.0, "attention_dropout": 0.0, "mlp_dropout": 0.0, **dims})
    return _instantiate(ModernBertForMaskedLM if head == "mlm" else ModernBertModel, config, attn, dtype, device, seed)


def modernbert_default_attention():
    """The attention implementation transformers gives ModernBERT when none is asked for (in transformers 5:
    sdpa on CPU and CUDA alike, flash only on request). Resolved once, then asked for by name, so that
    the results say which kernel ran."""
    tiny = dict(TINY, num_hidden_layers=1)
    return build_modernbert(16, tiny).config._attn_implementation


def baseline_models(text):
    """--baselines 'eager,sdpa,modernbert' -> [(label, model name)]: eager and sdpa are RoBERTa's attention
    kernels, modernbert is ModernBERT with transformers' default attention (e.g. ("modernbert", "modernbert-sdpa"))."""
    out = []
    for b in (b.strip() for b in text.split(",")):
        if b in ("eager", "sdpa"):
            out.append((b, f"roberta-{b}"))
        elif b == "modernbert":
            out.append((b, f"modernbert-{modernbert_default_attention()}"))
        elif b:
            raise ValueError(f"--baselines: each must be eager or sdpa (RoBERTa's attention) or modernbert, "
                             f"got {text!r}")
    if not out:
        raise ValueError("--baselines: give at least one of eager, sdpa, modernbert")
    return out


def build_linformer(n, k, dims=BASE, attn="sdpa", dtype=torch.float32, device="cpu", head=None,
                    sharing="layerwise", projection="linear", seed=0, chunk_ff=0):
    """Our Linformer of the given size, n = max_seq_length, k = projected_dim."""
    from linformer_hf import LinformerConfig, LinformerForMaskedLM, LinformerModel

    config = LinformerConfig(**{"vocab_size": VOCAB, "max_seq_length": n, "projected_dim": k,
                                "projection_sharing": sharing, "projection_type": projection,
                                "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                                "chunk_size_feed_forward": chunk_ff, **dims})
    return _instantiate(LinformerForMaskedLM if head == "mlm" else LinformerModel, config, attn, dtype, device, seed)


def random_ids(batch, n, device="cpu", seed=0, dims=BASE):
    """Token ids that avoid the special ids 0-3 (so no padding), the same for every model of these dims."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, dims.get("vocab_size", VOCAB), (batch, n), generator=g).to(device)


def build(spec, device="cpu"):
    """Model of a spec dict: model in {roberta-eager, roberta-sdpa, linformer-eager, linformer-sdpa,
    modernbert-<attn>, modernbert (transformers' default attention)}, n, k (Linformer), dims, dtype,
    head (None or "mlm"), sharing and projection (Linformer's projection_type), chunk_ff (RoBERTa and Linformer),
    checkpointing (activation checkpointing on every layer: each layer's activations are recomputed in the
    backward)."""
    model = _build(spec, device)
    if spec.get("checkpointing"):
        # transformers 5.x: activation_checkpointing_enable, formerly (still, deprecated) gradient_checkpointing_enable
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
    return model


def _build(spec, device):
    kind, _, attn = spec["model"].partition("-")
    dims, dtype = spec.get("dims", BASE), DTYPES[spec.get("dtype", "float32")]
    chunk_ff = spec.get("chunk_ff", 0)
    if kind == "modernbert":
        if chunk_ff:  # its MLP ignores chunk_size_feed_forward: refuse rather than measure something else
            raise ValueError("chunk_ff: ModernBERT has no chunked feed-forward")
        return build_modernbert(spec["n"], dims, attn or None, dtype, device, head=spec.get("head"))
    if kind == "roberta":
        return build_roberta(spec["n"], dims, attn, dtype, device, head=spec.get("head"), chunk_ff=chunk_ff)
    if kind == "linformer":
        return build_linformer(spec["n"], spec["k"], dims, attn, dtype, device, head=spec.get("head"),
                               sharing=spec.get("sharing", "layerwise"), projection=spec.get("projection", "linear"),
                               chunk_ff=chunk_ff)
    raise ValueError(f"unknown model {spec['model']!r}: roberta-eager, roberta-sdpa, linformer-eager, linformer-sdpa, "
                     "modernbert[-<attn>]")


def inference_step(model, ids):
    """One forward pass under inference_mode."""
    def step():
        with torch.inference_mode():
            return model(input_ids=ids)
    return step


def masked_lm_loss(model, ids, labels, sparse=False):
    """loss() of a model with an MLM head: its own forward with labels (vocabulary logits at every position,
    as train_mlm.py computes them), or with `sparse` the logits only at the labelled positions (fairseq
    RoBERTa's `masked_tokens`, ModernBERT's `sparse_prediction`): the same loss, without the n x vocabulary
    logits (13 GB in fp32 at n = 65536, more than the encoder's activations), on every model alike."""
    if not sparse:
        return lambda: model(input_ids=ids, labels=labels).loss
    index = (labels.view(-1) != -100).nonzero().squeeze(1)  # once, here: the step reads nothing back
    targets = labels.view(-1)[index]
    # RoBERTa and Linformer: lm_head (transform + decoder); ModernBERT: head (transform), then decoder
    head = model.lm_head if hasattr(model, "lm_head") else (lambda h: model.decoder(model.head(h)))

    def loss():
        hidden = model.base_model(input_ids=ids).last_hidden_state.flatten(0, 1).index_select(0, index)
        return torch.nn.functional.cross_entropy(head(hidden), targets)
    return loss


def training_step(model, ids, lr=1e-4, mask_prob=0.15, seed=0, amp=None, max_grad_norm=1.0, sparse_head=False):
    """One masked-LM update as train_mlm.py takes it: forward, backward, gradient clipping at its default
    --max_grad_norm 1.0, AdamW; the model needs an MLM head (`sparse_head`: see masked_lm_loss).

    amp ("bfloat16" / "float16", model in float32): the forward runs under autocast with fp32 master
    weights, which is what train_mlm.py's --mixed_precision does through Accelerate; float16 adds
    Accelerate's GradScaler (bfloat16 needs none)."""
    model.train()
    g = torch.Generator().manual_seed(seed)
    labels = torch.where(torch.rand(ids.shape, generator=g).to(ids.device) < mask_prob, ids, -100)
    compute_loss = masked_lm_loss(model, ids, labels, sparse_head)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    if amp is not None and next(model.parameters()).dtype != torch.float32:
        raise ValueError("amp: autocast needs the fp32 master weights; build the model in float32")
    device_type = ids.device.type
    autocast = (lambda: torch.autocast(device_type, dtype=DTYPES[amp])) if amp else contextlib.nullcontext
    scaler = torch.amp.GradScaler(device_type) if amp == "float16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = compute_loss()
        if scaler is None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            scaler.step(opt)
            scaler.update()
        return loss
    return step
