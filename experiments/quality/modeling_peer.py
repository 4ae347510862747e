# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The quality study's peer model (issue 47, item 3): the study's Linformer body with each layer's self-attention
replaced by lucidrains' `linformer` 0.2.3 `LinformerSelfAttention` (share_kv: one E for keys and values, and the
values are the keys, as that implementation shares them), an implementation written elsewhere. If our attention
were at fault, every verdict of the study would be ours and not the method's; a peer trained with the same body,
recipe, tokenizer and data tells which.

It travels as the remote code of the model folder `peer.py` writes, so that train_mlm.py trains it unchanged
(`--model_name_or_path FOLDER --trust_remote_code true`). The peer has no padding mask: it is trained and scored
on packed blocks, where only the last, shorter block of each split is padded (and read with its padding, as that
implementation reads it); it is not finetuned on padded sentences.
"""

import torch
from linformer import LinformerSelfAttention as PeerAttention
from torch import nn

from linformer_hf import LinformerConfig, LinformerForMaskedLM
from linformer_hf.modeling_linformer import window_mean_projection


class PeerConfig(LinformerConfig):
    """The Linformer config under a model type of its own, so that the Auto classes load the peer from the
    folder's code rather than the registered Linformer."""

    model_type = "linformer_peer"


class PeerSelfAttention(nn.Module):
    """Where the body's self-attention was: the peer's module, called with the hidden states alone. Its own output
    map (`to_out`) stands for the body's attention output dense, which the model removes."""

    exact_length = None  # no exact short path: every input goes through the peer's projection

    def __init__(self, config):
        super().__init__()
        self.peer = PeerAttention(dim=config.hidden_size, seq_len=config.max_seq_length, k=config.projected_dim,
                                  heads=config.num_attention_heads, share_kv=True,
                                  dropout=config.attention_probs_dropout_prob)

    def forward(self, hidden_states, *unused, **kwargs):
        return self.peer(hidden_states), None  # no mask: the peer reads padding as tokens, as written


class PeerForMaskedLM(LinformerForMaskedLM):
    """LinformerForMaskedLM with the peer's self-attention in every layer. Its maps start as the body's do (normal,
    `initializer_range`; biases zero) and E as the study's `projection_init` says (window means), like the
    Linformer runs it is compared with; the rest is the peer's own."""

    config_class = PeerConfig

    def __init__(self, config):
        super().__init__(config)
        n, k = config.max_seq_length, config.projected_dim
        for layer in self.linformer.encoder.layer:
            layer.attention.self = PeerSelfAttention(config)
            layer.attention.output.dense = nn.Identity()
            with torch.no_grad():
                for linear in (m for m in layer.attention.self.modules() if isinstance(m, nn.Linear)):
                    linear.weight.normal_(0.0, config.initializer_range)
                    if linear.bias is not None:
                        linear.bias.zero_()
                if config.projection_init == "window_mean":
                    layer.attention.self.peer.proj_k.copy_(window_mean_projection(k, n).T)
