# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Distilling a frozen standard-attention encoder (the teacher) into a Linformer converted from it (the student).

A converted student already equals its teacher on inputs of at most k tokens; what it has to learn is
longer inputs, where keys and values pass through projections nobody trained. Three choices follow:

* Data. By default (`--inputs blocks`) the corpus is packed into blocks as for masked-LM pretraining
  (`mlm.pack`), because real documents rarely reach n (news articles: 2% above 2,048 tokens) and a length
  never trained is a length not learned. Packing puts several documents' ends and starts in one input,
  which is not what global slots see in use: `--inputs documents` reads one document per input (a longer
  one cut into consecutive inputs), the release's recipe (experiments/long_documents/results.md
  compares the two). Each input gives
  one span per epoch, of a length drawn from a generator seeded by (seed, epoch, content), like the
  masks of `mlm`: the same spans in an uninterrupted run and a resumed one. A fraction of spans is short
  (at most k tokens by default): there the student is exact, and those spans keep training from drifting.
* Loss, per sequence: the hidden states of every layer against the teacher's (squared error divided
  by the teacher token's squared norm, averaged over real tokens and layers), 1 - cosine of the
  mean-pooled embeddings, and with `--document_loss_weight` the document objective (each input's
  embedding must pick out its own pieces, embedded by the teacher, among others'): matching states
  alone does not teach an embedding to tell documents apart. The update's loss is averaged over
  *sequences*, not tokens: counted per token, one 4,096-token span would weigh as much as 256 16-token
  ones, undoing the length mix.
* Teacher signal beyond the teacher's position limit (512 for BERT): `extended` runs the teacher with
  its position table repeated to the student's length, exactly as the conversion filled the student's
  (so at k = n the two models agree everywhere), with full attention; `windows` runs it on
  consecutive windows of its own length and concatenates the token states.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import checkpoints
from .arguments import UsageError
from .mlm import content_generator
from .models import OFFSET_POSITIONS, SOURCE_TYPES, check_local_path, input_limit, is_projection

TEACHER_LONG_INPUTS = ("extended", "windows")
# Tokenizers with equal vocabularies may still split text differently (lower-casing, accents, ...).
TOKENIZER_PROBE = "Distillation needs ONE tokenizer: naïve café, 3.14 km, e-mail, Zürich (1998) and 東京."


# ---------------------------------------------------------------------------------------------------
# Teacher and student: checked before any data is read
# ---------------------------------------------------------------------------------------------------


@dataclass
class Pair:
    """What the checks learned about teacher and student, which the rest of the run needs."""

    teacher_config: object
    student_config: object
    tokenizer: object  # the student's (equal to the teacher's, checked), with model_max_length = n
    n: int  # the student's longest input
    k: int  # inputs of up to k tokens are exact: the smallest exact_attention_length, else projected length
    teacher_limit: int  # the teacher's longest input with its own position table


def _load(what, flag, path, loader):
    check_local_path(path, flag)
    try:
        return loader(path)
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise UsageError(f"{flag} {path}: cannot load its {what} ({str(e).splitlines()[0] if str(e) else e})") from None


def _tokenizer_difference(teacher, student):
    """Why two tokenizers would give the two models different ids for the same text, or None."""
    a, b = teacher.get_vocab(), student.get_vocab()
    if a != b:
        differing = sorted(t for t in a.keys() | b.keys() if a.get(t) != b.get(t))
        first = differing[0]
        return (f"their vocabularies differ ({len(a)} vs {len(b)} tokens; e.g. {first!r}: {a.get(first)} vs "
                f"{b.get(first)})")
    for name in ("cls", "sep", "pad", "bos", "eos", "mask", "unk"):
        ta, tb = getattr(teacher, f"{name}_token_id"), getattr(student, f"{name}_token_id")
        if ta != tb:
            return f"their {name} token ids differ ({ta} vs {tb})"
    ids_a = teacher(TOKENIZER_PROBE, add_special_tokens=False, verbose=False)["input_ids"]
    ids_b = student(TOKENIZER_PROBE, add_special_tokens=False, verbose=False)["input_ids"]
    if ids_a != ids_b:
        return f"they split the same text differently ({ids_a[:8]}... vs {ids_b[:8]}...)"
    return None


def check_pair(teacher_path, student_path):
    """Refuse a teacher and student that cannot be distilled into each other, naming the flag and the fix."""
    from transformers import AutoConfig, AutoTokenizer

    student_config = _load("config", "--student_name_or_path", student_path, AutoConfig.from_pretrained)
    if student_config.model_type != "linformer":
        raise UsageError(f"--student_name_or_path {student_path}: a {student_config.model_type} model, not a "
                         f"Linformer; make one from the teacher first: python convert_to_linformer.py "
                         f"--model_name_or_path {teacher_path} --max_seq_length N --projected_dim K --output_dir DIR")
    teacher_config = _load("config", "--teacher_name_or_path", teacher_path, AutoConfig.from_pretrained)
    if teacher_config.model_type not in SOURCE_TYPES:
        raise UsageError(f"--teacher_name_or_path {teacher_path}: a {teacher_config.model_type} model; the teacher "
                         f"must be a standard-attention encoder ({', '.join(SOURCE_TYPES)})")
    for field in ("hidden_size", "num_hidden_layers"):
        ours, theirs = getattr(student_config, field), getattr(teacher_config, field)
        if ours != theirs:
            raise UsageError(f"the teacher's {field} is {theirs} but the student's is {ours}: every layer's states "
                             f"are compared, so they must match (convert the student from this teacher)")
    for flag, path in (("--teacher_name_or_path", teacher_path), ("--student_name_or_path", student_path)):
        if Path(path).is_dir():  # NaN weights would surface only as "eval_loss is nan" at step 0
            checkpoints.check_model_folder(path, flag)
    teacher_tokenizer = _load("tokenizer", "--teacher_name_or_path", teacher_path, AutoTokenizer.from_pretrained)
    tokenizer = _load("tokenizer", "--student_name_or_path", student_path, AutoTokenizer.from_pretrained)
    difference = _tokenizer_difference(teacher_tokenizer, tokenizer)
    if difference:
        raise UsageError(f"--teacher_name_or_path {teacher_path} and --student_name_or_path {student_path} have "
                         f"different tokenizers: {difference}. The student must be converted from the teacher")
    exact = student_config.exact_attention_length or student_config.projected_dims
    exact = min(exact) if isinstance(exact, list) else exact
    return Pair(teacher_config, student_config, tokenizer, input_limit(student_config), exact,
                input_limit(teacher_config))


def extend_teacher_positions(teacher, length):
    """The teacher with its position table repeated to `length` positions, row for row as the conversion
    fills the student's table (`conversion.extend_positions`), so both read the same vector at every
    position; RoBERTa-style tables keep their first pad_token_id + 1 rows in front."""
    from .conversion import extend_positions

    embeddings, config = teacher.embeddings, teacher.config
    offset = config.pad_token_id + 1 if config.model_type in OFFSET_POSITIONS else 0
    table = embeddings.position_embeddings.weight.detach()
    rows = offset + length
    if rows <= table.shape[0]:
        return teacher
    extended = torch.cat([table[:offset], extend_positions(table[offset:], length)])
    embeddings.position_embeddings = nn.Embedding.from_pretrained(
        extended, freeze=True, padding_idx=embeddings.position_embeddings.padding_idx)
    embeddings.position_ids = torch.arange(rows, device=table.device).expand(1, -1)
    embeddings.token_type_ids = torch.zeros(1, rows, dtype=torch.long, device=table.device)
    config.max_position_embeddings = rows
    return teacher


def load_teacher(path, pair, longest, long_inputs, device):
    """The frozen teacher on `device`: eval mode (no dropout), no gradients, positions extended if asked."""
    from transformers import AutoModel

    teacher = _load("weights", "--teacher_name_or_path", path,
                    lambda p: AutoModel.from_pretrained(p, dtype=torch.float32, attn_implementation="sdpa"))
    if long_inputs == "extended" and longest > pair.teacher_limit:
        extend_teacher_positions(teacher, longest)
    return teacher.requires_grad_(False).eval().to(device)


# ---------------------------------------------------------------------------------------------------
# Data: one span of a drawn length per packed block
# ---------------------------------------------------------------------------------------------------


class SpanCollator:
    """Cuts one span out of each packed block, of a length (special tokens included) drawn as follows:
    with probability `short_fraction` uniformly in [min_length, short_max_length], otherwise
    log-uniformly in (short_max_length, max_length], so that 512-1,024 tokens come as often as
    2,048-4,096. A block shorter than the drawn length is used whole. Spans are `<cls> body <sep>`,
    right-padded (a BERT teacher numbers positions by index, the Linformer student counts real tokens:
    with right padding both agree).

    `same_length=True` (training) draws one length per batch, from the batch's content: lengths mix
    across batches and no compute goes to padding, which at n = 4,096 would otherwise dominate. The
    spans then depend on how blocks are batched (per-device batch size, processes), but not on
    interruptions: a resumed run sees the same batches. `same_length=False` (evaluation) draws per
    block, so the evaluation spans are the same whatever the batch size or number of processes. Set
    `epoch` before each epoch (the training loop does): new spans every epoch.
    """

    def __init__(self, tokenizer, min_length, short_max_length, max_length, short_fraction, seed, same_length=False,
                 epoch=0):
        self.cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        self.pad = tokenizer.pad_token_id
        if None in (self.cls, self.sep, self.pad):
            raise UsageError(f"tokenizer {tokenizer.name_or_path}: needs cls/bos, sep/eos and pad tokens")
        self.min_length, self.max_length = min_length, max_length
        self.short_max_length = min(short_max_length, max_length)
        self.short_fraction, self.seed, self.same_length, self.epoch = short_fraction, seed, same_length, epoch

    def set_epoch(self, epoch):
        self.epoch = epoch

    def draw_length(self, generator):
        u, v = torch.rand(2, generator=generator, dtype=torch.float64).tolist()
        low = self.short_max_length
        if u < self.short_fraction or low >= self.max_length:
            return self.min_length + int(v * (low - self.min_length + 1))
        return min(self.max_length, int(low * (self.max_length / low) ** v) + 1)

    def span(self, block, length, generator):
        body = block[1:]  # a packed block starts with <cls>/<s>, which every span gets back below
        size = min(length - 2, len(body))
        start = int(torch.randint(0, len(body) - size + 1, (1,), generator=generator))
        return [self.cls, *body[start:start + size], self.sep]

    def __call__(self, examples):
        blocks = [list(example["input_ids"]) for example in examples]
        if self.same_length:
            generator = content_generator([t for b in blocks for t in b], "spans", self.seed, self.epoch)
            length = self.draw_length(generator)
            spans = [self.span(block, length, generator) for block in blocks]
        else:
            spans = []
            for block in blocks:
                generator = content_generator(block, "spans", self.seed, self.epoch)
                spans.append(self.span(block, self.draw_length(generator), generator))
        longest = max(map(len, spans))
        ids = torch.full((len(spans), longest), self.pad, dtype=torch.long)
        mask = torch.zeros((len(spans), longest), dtype=torch.long)
        for row, span in enumerate(spans):
            ids[row, :len(span)] = torch.tensor(span)
            mask[row, :len(span)] = 1
        return {"input_ids": ids, "attention_mask": mask}


def has_text(tokenizer, more_than=0):
    """A batched filter keeping blocks that hold at least one non-special token, and more than `more_than` tokens
    with the two special tokens a span adds (so `more_than` = the student's exact length keeps long inputs only)."""
    special = set(tokenizer.all_special_ids)
    return lambda batch: [any(t not in special for t in ids) and len(ids) + 1 > more_than for ids in batch["input_ids"]]


# ---------------------------------------------------------------------------------------------------
# The objective
# ---------------------------------------------------------------------------------------------------


def compare(student_states, teacher_states, mask):
    """Per sequence: each layer's summed squared error and the teacher's summed squared norm over real
    tokens, the mean relative error per token (B, layers), and the cosine of mean-pooled last states (B,)."""
    tokens = mask.sum(1).float()
    errors, norms, relative = [], [], []
    for ours, theirs in zip(student_states, teacher_states, strict=True):
        ours, theirs = ours.float(), theirs.float()
        error = (ours - theirs).square().sum(-1)  # (B, T)
        norm = theirs.square().sum(-1)
        errors.append((error * mask).sum(1))
        norms.append((norm * mask).sum(1))
        relative.append((error / (norm + 1e-6) * mask).sum(1) / tokens)
    cosine = F.cosine_similarity(mean_pool(student_states[-1], mask), mean_pool(teacher_states[-1], mask), dim=-1)
    return torch.stack(errors, 1), torch.stack(norms, 1), torch.stack(relative, 1), cosine


def draw_piece(body, min_length, max_length, generator):
    """(start, length) of a piece of `body` tokens, its length uniform in [min_length, max_length] (clamped to
    the body), its place uniform."""
    low = max(1, min(min_length, body))
    length = int(torch.randint(low, max(low, min(max_length, body)) + 1, (1,), generator=generator))
    return int(torch.randint(0, body - length + 1, (1,), generator=generator)), length


def span_starts(ids, mask, spans, min_length, max_length, generator):
    """`spans` (start, length) pairs per row, inside the row's real tokens between its <cls> and <sep>."""
    out = []
    for real in mask.sum(1).tolist():
        pieces = [draw_piece(real - 2, min_length, max_length, generator) for _ in range(spans)]
        out.append([(1 + start, length) for start, length in pieces])
    return out


def mean_pool(states, mask):
    """Mean of the real tokens' states, in float32: (B, T, D), (B, T) -> (B, D)."""
    real = mask[..., None].float()
    return (states.float() * real).sum(1) / real.sum(1)


def info_nce(anchors, candidates, positive, temperature):
    """Per anchor: -log of the softmax weight its positives get among `candidates` (cosine / temperature).
    `positive` (anchors, candidates) is a bool matrix; several positives share the mass (multi-positive)."""
    logits = F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature
    return -(torch.logsumexp(logits.masked_fill(~positive, -torch.inf), 1) - torch.logsumexp(logits, 1))


class DocumentObjective:
    """Rewards reading the whole input: its pooled embedding must pick out its own pieces, embedded by the
    frozen teacher, from the pieces of every other input of the batch and of a fixed bank (and each piece
    its input among the batch's). The teacher reads pieces exactly, so the bank never goes stale, and the
    target is the retrieval a user runs: short queries, whole documents. Queries and bank are the teacher's:
    a student trained on them cannot drift into an embedding space of its own."""

    def __init__(self, teacher, tokenizer, accelerator, spans, min_length, max_length, temperature, seed, bank):
        self.teacher, self.accelerator = teacher, accelerator
        self.cls, self.sep, self.pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.spans, self.min_length, self.max_length = spans, min_length, max_length
        self.temperature, self.seed, self.bank = temperature, seed, bank

    @torch.no_grad()
    def embed(self, pieces):
        """The teacher's mean-pooled embeddings of token lists (specials added)."""
        longest = max(map(len, pieces)) + 2
        ids = torch.full((len(pieces), longest), self.pad, device=self.accelerator.device)
        mask = torch.zeros_like(ids)
        for row, piece in enumerate(pieces):
            ids[row, :len(piece) + 2] = torch.tensor([self.cls, *piece, self.sep])
            mask[row, :len(piece) + 2] = 1
        with self.accelerator.autocast():
            return mean_pool(self.teacher(input_ids=ids, attention_mask=mask).last_hidden_state, mask)

    def pieces(self, ids, mask, generator):
        rows = ids.tolist()
        starts = span_starts(ids, mask, self.spans, self.min_length, self.max_length, generator)
        return [rows[r][start:start + length] for r, row in enumerate(starts) for start, length in row]

    def loss(self, pooled, ids, mask):
        """Per sequence: the sum of the two InfoNCE directions (input -> its pieces; piece -> its input, averaged
        over the input's pieces), so each direction weighs the same whatever the number of pieces."""
        generator = content_generator(ids.cpu(), "spans", self.seed, 0)
        queries = self.embed(self.pieces(ids, mask, generator))
        batch = pooled.shape[0]
        owner = torch.arange(batch, device=pooled.device).repeat_interleave(self.spans)
        candidates = queries if self.bank is None else torch.cat([queries, self.bank.to(queries.device)])
        positive = torch.zeros(batch, candidates.shape[0], dtype=torch.bool, device=pooled.device)
        positive[owner, torch.arange(len(owner), device=pooled.device)] = True
        to_pieces = info_nce(pooled.float(), candidates, positive, self.temperature)
        to_inputs = info_nce(queries, pooled.float(), positive[:, :len(owner)].T, self.temperature)
        return to_pieces + to_inputs.view(batch, self.spans).mean(1)

    def bank_from(self, blocks, generator, span_count):
        """Teacher embeddings of `span_count` pieces per block of `blocks` (lists of ids), normalised."""
        pieces = []
        for block in blocks:
            body = block[1:]  # a packed block starts with <cls>
            for _ in range(span_count):
                start, length = draw_piece(len(body), self.min_length, self.max_length, generator)
                pieces.append(body[start:start + length])
        return torch.cat([F.normalize(self.embed(pieces[i:i + 256]), dim=-1) for i in range(0, len(pieces), 256)])


class DistillationObjective:
    """The loop's objective: the student's hidden states and pooled embedding against the frozen teacher's.

    `count` is the number of sequences (see the module docstring for why not tokens). Buckets of the
    evaluation: up to k tokens (exact at conversion), up to the teacher's own limit, and beyond it.
    """

    def __init__(self, teacher, pair, accelerator, hidden_weight=1.0, cosine_weight=1.0, long_inputs="extended",
                 document=None, document_weight=0.0):
        self.teacher, self.pair, self.accelerator = teacher, pair, accelerator
        self.hidden_weight, self.cosine_weight = hidden_weight, cosine_weight
        self.window = pair.teacher_limit if long_inputs == "windows" else None
        self.document, self.document_weight = document, document_weight

    def count(self, batch):
        return torch.tensor(batch["input_ids"].shape[0])

    @torch.no_grad()
    def teacher_states(self, ids, mask):
        """The teacher's per-layer states (embeddings excluded) for a right-padded batch."""
        with self.accelerator.autocast():
            if self.window is None or ids.shape[1] <= self.window:
                return self.teacher(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[1:]
            batch, length, window = ids.shape[0], ids.shape[1], self.window
            count = -(-length // window)
            ids = F.pad(ids, (0, count * window - length), value=self.pair.tokenizer.pad_token_id).view(-1, window)
            mask = F.pad(mask, (0, count * window - length)).view(-1, window)
            used = mask.any(1)  # windows holding a real token; the rest are padding, never run
            states = self.teacher(input_ids=ids[used], attention_mask=mask[used], output_hidden_states=True)
            out = []
            for layer in states.hidden_states[1:]:
                full = layer.new_zeros(batch * count, window, layer.shape[-1])
                full[used] = layer
                out.append(full.view(batch, count * window, -1)[:, :length])
            return out

    def student_states(self, model, ids, mask):
        """The student's per-layer states, read by forward hooks on its layers, not through `output_hidden_states`:
        transformers looks up what a model can record by the model's class, and FSDP2 gives every module it shards
        a new class, so under FSDP2 `hidden_states` would come back None."""
        states = []
        layers = self.accelerator.unwrap_model(model).encoder.layer
        hooks = [layer.register_forward_hook(lambda _module, _inputs, output: states.append(output))
                 for layer in layers]
        try:
            model(input_ids=ids, attention_mask=mask)
        finally:
            for hook in hooks:
                hook.remove()
        return states

    def loss_sum(self, model, batch):
        ids, mask = batch["input_ids"], batch["attention_mask"]
        states = self.student_states(model, ids, mask)
        _, _, relative, cosine = compare(states, self.teacher_states(ids, mask), mask)
        loss = self.hidden_weight * relative.mean(1) + self.cosine_weight * (1 - cosine)
        if self.document is not None and self.document_weight:
            loss = loss + self.document_weight * self.document.loss(mean_pool(states[-1], mask), ids, mask)
        loss = loss.sum()
        # A batch of inputs all <= k never reaches E/F (they attend exactly). A zero-weighted term keeps the
        # trainable projections in the graph: DDP would otherwise stop on unused parameters, and with
        # --train_only_long_path the loss would have no gradient at all.
        touch = [p.sum() for name, p in model.named_parameters() if is_projection(name) and p.requires_grad]
        return loss + 0.0 * sum(touch) if touch else loss

    def bucket_names(self):
        k, limit = self.pair.k, self.pair.teacher_limit
        names = [(k, f"len_le_{k}")]
        if limit > k:
            names.append((limit, f"len_{k + 1}_{limit}"))
        names.append((math.inf, f"len_gt_{max(k, limit)}"))
        return names

    @torch.no_grad()
    def evaluate(self, model, loader, accelerator):
        """Mean cosine of pooled embeddings (all, and per length bucket), each layer's relative error
        (||student - teacher|| / ||teacher|| over every real token) and the loss, over every process."""
        model.eval()
        rows, documents, pieces = [], [], []
        for batch in loader:
            ids, mask = batch["input_ids"], batch["attention_mask"]
            states = self.student_states(model, ids, mask)
            errors, norms, relative, cosine = compare(states, self.teacher_states(ids, mask), mask)
            loss = self.hidden_weight * relative.mean(1) + self.cosine_weight * (1 - cosine)
            rows.append([t.cpu() for t in accelerator.gather_for_metrics((errors, norms, cosine, loss, mask.sum(1)))])
            if self.document is not None:
                generator = content_generator(ids.cpu(), "spans", self.document.seed, 1)
                one_each = self.document.pieces(ids, mask, generator)[::self.document.spans]
                documents.append(accelerator.gather_for_metrics(mean_pool(states[-1], mask)).cpu())
                pieces.append(accelerator.gather_for_metrics(self.document.embed(one_each)).cpu())
        errors, norms, cosine, loss, lengths = (torch.cat(parts) for parts in zip(*rows, strict=True))
        metrics = {"eval_loss": loss.mean().item(), "eval_cosine": cosine.mean().item()}
        if documents:  # each validation input must rank first for one of its own pieces, among all inputs
            similarity = F.normalize(torch.cat(pieces), dim=-1) @ F.normalize(torch.cat(documents), dim=-1).T
            ranks = (similarity > similarity.diagonal()[:, None]).sum(1) + 1
            metrics["eval_document_recall_at_1"] = (ranks == 1).float().mean().item()
        lower = 0
        for upper, name in self.bucket_names():
            inside = (lengths > lower) & (lengths <= upper)
            if inside.any():
                metrics[f"eval_cosine_{name}"] = cosine[inside].mean().item()
            lower = upper
        for layer, value in enumerate((errors.sum(0) / norms.sum(0)).sqrt().tolist(), start=1):
            metrics[f"eval_layer{layer}_relative_error"] = value
        return metrics


# ---------------------------------------------------------------------------------------------------
# Dropout and the final folder
# ---------------------------------------------------------------------------------------------------


def set_dropout(model, p):
    """Every dropout of `model` at `p`, its config untouched (so a saved model keeps its own rates).

    The teacher runs without dropout, so its states are a deterministic target: a student with
    dropout cannot reach it even on inputs of at most k tokens, where it is exact, and the gradients
    of that noise would move the very weights those inputs depend on."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
    return model


def sentence_transformers_files(student_path, n):
    """The student folder's sentence-transformers files (modules, pooling, ...) for the final folder, with
    `max_seq_length` = n; {} for a folder without them."""
    folder = Path(student_path)
    if not (folder / "modules.json").is_file():
        return {}
    files = {"modules.json": folder / "modules.json"}
    if (folder / "config_sentence_transformers.json").is_file():
        files["config_sentence_transformers.json"] = folder / "config_sentence_transformers.json"
    settings = folder / "sentence_bert_config.json"
    files["sentence_bert_config.json"] = {**(json.loads(settings.read_text()) if settings.is_file() else {}),
                                          "max_seq_length": n}
    for module in json.loads((folder / "modules.json").read_text()):
        if module.get("path") and (folder / module["path"]).is_dir():
            files[module["path"]] = folder / module["path"]
    return files
