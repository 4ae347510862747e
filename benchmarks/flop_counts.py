# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Analytic matmul FLOP counts (2*m*n*k each) of one forward pass of each model, and torch's own count as
a check on them."""

from benchmarks.models import BASE


def flops_roberta(n, dims=BASE, batch=1):
    D, L, inner = dims["hidden_size"], dims["num_hidden_layers"], dims["intermediate_size"]
    per_layer = 2 * n * D * D * 4 + 2 * n * n * D * 2 + 2 * n * D * inner * 2  # QKV+out, QK^T+PV, FFN
    return batch * L * per_layer


def flops_linformer(n, k, dims=BASE, batch=1, sharing="layerwise", projection="linear", max_len=None):
    """Matmul FLOPs of our LinformerModel forward on n tokens (no padding mask), projected length k.

    Mirrors modeling_linformer.py: per layer the query and output maps (n x D x D each), the FFN, and
    Q (EK)^T, P (FV) (n x k x D each). Keys/values: a learned E shared by all heads is applied to the
    layer input first (E X: k x n x D, once if E = F) followed by the key/value maps on k rows
    (k x D x D each), plus E 1 (k x n, for the bias), whenever that is cheaper than mapping the n rows
    first (n x D x D each) and projecting after (k x n x D each) - the model picks the cheaper order.
    Window projections (pooling, "conv") read windows of max_len/k positions (max_len: the model's n, default n),
    so n < max_len fills fewer than k slots; pooling does no matmul, a "conv" kernel is counted as its matmul.
    """
    D, L, H = dims["hidden_size"], dims["num_hidden_layers"], dims["num_attention_heads"]
    inner = dims["intermediate_size"]
    slots = k if projection == "linear" else -(-n // ((max_len or n) // k))
    per_layer = 2 * n * D * D * 2 + 2 * n * D * inner * 2 + 2 * n * slots * D * 2
    shared_kv = sharing in ("key_value", "layerwise")
    groups = H if sharing == "none" else 1
    if projection == "linear":
        n_proj = 1 if shared_kv else 2
        first = n_proj * groups * k * n * D + 2 * k * D * D   # the model's cost model (multiply-adds)
        after = 2 * n * D * D + 2 * k * n * D
        if first < after:
            per_layer += 2 * (n_proj * groups * k * n * D + 2 * k * D * D)  # E X, K/V maps on k rows
            once = 2 * n_proj * groups * k * n                                  # E 1 (bias), whole batch
        else:
            per_layer += 2 * (2 * n * D * D + 2 * k * n * D)
            once = 0
    else:
        # windows of n/k positions: pooling is no matmul, a convolution's kernel is one (per group). Mean pooling and
        # the convolution are linear, so the model applies them to the layer input first where that is cheaper
        # (K/V maps on k rows), as for E; max pooling always follows the maps.
        conv = projection == "conv"
        applications = (1 if shared_kv else 2) * (groups if conv else 1)
        first = applications * n * D + 2 * slots * D * D
        after = 2 * n * D * D + 2 * n * D
        if projection != "max_pool" and first < after:
            per_layer += 2 * 2 * slots * D * D + (2 * applications * n * D if conv else 0)
            once = 2 * applications * n if conv else 0  # the kernel over the all-ones mask, for the bias
        else:
            per_layer += 2 * 2 * n * D * D + (2 * 2 * n * D if conv else 0)
            once = 0
    return L * (batch * per_layer + once)


def flops_modernbert(n, dims=BASE, batch=1, attn="sdpa"):
    """Matmul FLOPs of ModernBertModel's forward on n tokens, or None where we cannot count them.

    Per layer: Wqkv (n x D x 3D), Wo (n x D x D), the GLU MLP (Wi: n x D x 2 inner, Wo: n x inner x D) and
    Q K^T, P V. With eager and sdpa attention the local window of 2 layers in 3 is a mask over the full
    n x n scores: nothing outside the window is skipped (sdpa with that mask is even a little slower than
    without), so the executed count is full attention on every layer. Kernels that do skip outside the
    window (flash attention, flex) do a count we do not model: None, reported as n/a."""
    if attn not in ("eager", "sdpa"):
        return None
    D, L, inner = dims["hidden_size"], dims["num_hidden_layers"], dims["intermediate_size"]
    per_layer = 2 * n * D * (3 * D + D) + 2 * n * n * D * 2 + 2 * n * D * (2 * inner + inner)
    return batch * L * per_layer


def forward_flops(model, n, k=None, dims=BASE, batch=1, sharing="layerwise", projection="linear"):
    """The forward matmul FLOPs of a model name as `build` takes it (None: not counted)."""
    kind, _, attn = model.partition("-")
    if kind == "roberta":
        return flops_roberta(n, dims, batch)
    if kind == "modernbert":
        return flops_modernbert(n, dims, batch, attn)
    return flops_linformer(n, k, dims, batch, sharing, projection)


def count_matmul_flops(fn, model=None):
    """FLOPs of the matmuls that fn() executes, counted by torch (a check on the analytic counts).
    Pass the model when parameters are forward arguments (Linformer's shared E): the counter's module
    hooks cannot track tensors that require grad under inference_mode, so grads are off meanwhile."""
    from torch.utils.flop_counter import FlopCounterMode

    params = [p for p in model.parameters() if p.requires_grad] if model is not None else []
    for p in params:
        p.requires_grad_(False)
    try:
        with FlopCounterMode(display=False) as counter:
            fn()
    finally:
        for p in params:
            p.requires_grad_(True)
    return counter.get_total_flops()
