"""Universal speculative decoding reports a permuted draft distribution to the verifier.

transformers 5.23.0 and 5.24.0, torch 2.13 (CPU). Standalone: torch, transformers, tokenizers.
(5.24 renamed the KV cache `past_key_values` -> `cache`; the toy model below speaks both.)

AssistantToTargetTranslator (assistant_prune_lm_head=True, which generate() always passes)
prunes the assistant's LM head to the overlap tokens in the order of
`assistant_tokenizer.get_vocab()` iteration (assistant_overlap_token_ids), but
get_target_logits scatters the pruned logits onto the target ids in *ascending assistant id*
order (`_assistant_to_target_input_ids[mask]`). When the two orders differ, the draft is drawn
from q but the verifier (_speculative_sampling) is told q o pi: the output law is not the
target's. A fast tokenizer's get_vocab() is a Rust HashMap: its order changes with every
tokenizer instance, so the loss comes and goes between runs; here get_vocab is pinned to one
order to make it deterministic.
"""

import math
import os
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    GenerationConfig,
    GenerationMixin,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils import logging

logging.set_verbosity_error()
# The output's cache field: `cache` from transformers 5.24 on, `past_key_values` before.
CACHE_FIELD = ("cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__
               else "past_key_values")


class PinnedVocabTokenizer(PreTrainedTokenizerFast):
    """A word-level tokenizer whose get_vocab() iterates in a fixed order (`order`)."""

    order: tuple[str, ...] = ()

    def get_vocab(self):
        vocab = super().get_vocab()
        return {w: vocab[w] for w in self.order}


def tokenizer(words, order=None):
    vocab = {w: i for i, w in enumerate(words)}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<s>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    raw.decoder = decoders.WordPiece(prefix="##")
    cls = PreTrainedTokenizerFast
    if order is not None:
        cls = type("Pinned", (PinnedVocabTokenizer,), {"order": tuple(order)})
    return cls(tokenizer_object=raw, bos_token="<s>", unk_token="<s>", pad_token="<s>")


class Bigram(PreTrainedModel, GenerationMixin):
    """logits(next | last token x) = log P[x]: one-hot embedding + LM head."""

    config_class = PretrainedConfig
    base_model_prefix = "bigram"
    _supports_cache_class = True

    def __init__(self, config, table):
        super().__init__(config)
        n = config.vocab_size
        self.embed = torch.nn.Embedding(n, n)
        self.head = torch.nn.Linear(n, n, bias=False)
        self.post_init()
        with torch.no_grad():
            self.embed.weight.copy_(torch.eye(n))
            self.head.weight.copy_(torch.tensor(table).log().clamp(min=-30).T)

    def _init_weights(self, module):
        pass

    def get_input_embeddings(self):
        return self.embed

    def set_input_embeddings(self, value):
        self.embed = value

    def get_output_embeddings(self):
        return self.head

    def set_output_embeddings(self, value):
        self.head = value

    def forward(self, input_ids, cache=None, attention_mask=None, logits_to_keep=0,
                past_key_values=None, **kwargs):
        cache = cache if cache is not None else past_key_values
        if cache is not None:
            z = torch.zeros(input_ids.shape[0], 1, input_ids.shape[1], 1)
            cache.update(z, z, 0)
        logits = self.head(self.embed(input_ids))
        return CausalLMOutputWithPast(logits=logits[:, -logits_to_keep:] if logits_to_keep
                                      else logits, **{CACHE_FIELD: cache})


def model(table, bos):
    n = len(table)
    config = PretrainedConfig(vocab_size=n, bos_token_id=bos, eos_token_id=None, pad_token_id=bos,
                              num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1,
                              hidden_size=1, head_dim=1)
    m = Bigram(config, table).eval()
    m.generation_config = GenerationConfig(bos_token_id=bos, pad_token_id=bos, do_sample=True,
                                           top_k=None, top_p=None, temperature=None,
                                           num_assistant_tokens=1,
                                           assistant_confidence_threshold=0.0)
    return m


# target: words a b c <s>; assistant: a b c z <s> (z: a word the target lacks)
E = 1e-13
P = [[0.7, 0.2, 0.1, E]] * 4  # target's next-token law, whatever the last token
Q = [[0.1, 0.2, 0.7, E, E]] * 5  # assistant's (z and <s> never drawn)
target = model(P, bos=3)
assistant = model(Q, bos=4)
t_tok = tokenizer(["a", "b", "c", "<s>"])
a_tok = tokenizer(["a", "b", "c", "z", "<s>"], order=["<s>", "c", "z", "b", "a"])

if os.environ.get("FIX"):  # the one-line fix: scatter column j onto assistant id order[j]'s target
    from transformers.generation import candidate_generator as cg

    def get_target_logits(self, assistant_logits):
        shape = (*assistant_logits.shape[:-1], self.target_vocab_size)
        out = torch.full(shape, self.FILTER_VALUE, device=self._assistant_model_device)
        if self.assistant_prune_lm_head:
            out[..., self._assistant_to_target_input_ids[self.assistant_overlap_token_ids]] = \
                assistant_logits
            return out
        return original(self, assistant_logits)

    original = cg.AssistantToTargetTranslator.get_target_logits
    cg.AssistantToTargetTranslator.get_target_logits = get_target_logits

prompt = torch.tensor([[3, 0]])  # "<s> a"
N = int(os.environ.get("N", "2000"))
counts = Counter()
for seed in range(N):
    torch.manual_seed(seed)
    with torch.no_grad():
        out = target.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                              max_new_tokens=2, assistant_model=assistant, tokenizer=t_tok,
                              assistant_tokenizer=a_tok)
    counts[int(out[0, 2])] += 1

# The law the first token should have, and the one speculative sampling gives when the draft is
# drawn from q but verified against the reported q' = q o pi (q'(y) for target id y).
from transformers.generation.candidate_generator import AssistantVocabTranslatorCache  # noqa

tr = AssistantVocabTranslatorCache.get_translator(t_tok, a_tok, 4)
order = tr.assistant_overlap_token_ids.tolist()  # pruned column j = assistant id order[j]
a2t = tr._assistant_to_target_input_ids
p = P[0][:3]
q = {int(a2t[a]): Q[0][a] for a in order if int(a2t[a]) < 3}  # drawn (target ids)
cols = sorted(int(a2t[a]) for a in order)  # where get_target_logits puts column j
q_rep = {cols[j]: Q[0][a] for j, a in enumerate(order) if cols[j] < 3}  # reported
if os.environ.get("FIX"):
    q_rep = q
acc = {y: q[y] * min(1.0, p[y] / q_rep[y]) for y in range(3)}
res = [max(0.0, p[y] - q_rep[y]) for y in range(3)]
law = [acc[y] + (1 - sum(acc.values())) * res[y] / sum(res) for y in range(3)]
emp = [counts[y] / N for y in range(3)]
print("pruned head order (assistant ids):", order, "-> target ids", [int(a2t[a]) for a in order])
print("drawn q  :", [round(q[y], 3) for y in range(3)])
print("reported :", [round(q_rep[y], 3) for y in range(3)])
print("target p :", p)
print("predicted:", [round(x, 4) for x in law], " TV to p:",
      round(0.5 * sum(abs(a - b) for a, b in zip(law, p, strict=True)), 4))
print(f"observed : {[round(x, 4) for x in emp]} over {N} draws;  TV to p:",
      round(0.5 * sum(abs(a - b) for a, b in zip(emp, p, strict=True)), 4))
se = max(math.sqrt(p[y] * (1 - p[y]) / N) for y in range(3))
print(f"(one standard error of a frequency: <= {se:.4f})")
