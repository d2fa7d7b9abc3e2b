#!/usr/bin/env python3
"""GGUF models for tests/parity/generate_gguf_model_parity_test.cpp, written by gguf-py's GGUFWriter (not
by Ferry), and what transformers makes of them (from_pretrained(..., gguf_file=...), float32):

  OUTDIR/<name>/model.gguf         the model: random weights of a tiny transformers model, written
                                   as llama.cpp's converter writes them (q/k rows permuted for the
                                   "llama" architecture), each matrix in one of several ggml types
                                   quantised by gguf.quants
  OUTDIR/<name>/reference.safetensors  input_ids [2, 11] and transformers' logits for them;
                                   prompt_ids [1, 6] and transformers' greedy continuation (12 tokens)
  OUTDIR/<name>/tokens.json        {"texts": [...], "ids": [[...], ...], "source_ids": [...]}:
                                   transformers' GGUF tokenizer (add_special_tokens=False) on parity
                                   strings, and the tokenizer the GGUF vocabulary was made from
                                   as llama.cpp runs it: `tokenizers` on the trained tokenizer.json
                                   and sentencepiece on data/tokenizer.model's pieces, both without
                                   their normalizer (Qwen2's NFC; nmt_nfkc), which a GGUF does not carry

  llama_spm    llama, SentencePiece vocabulary of data/tokenizer.model, GQA 4/2, hidden 256 (so the
               types below fit their blocks), untied; F16 embeddings, Q8_0 / Q4_0 / Q4_1 / Q5_0 /
               Q5_1 / BF16 / F32 matrices
  qwen2_bpe    qwen2 (q/k/v biases), byte-level BPE with Qwen2's pre-tokenizer ("qwen2"), tied
  qwen3_bpe    qwen3 (q/k norms, head_dim 128 != hidden / heads: transformers reads no key_length and
               takes Qwen3Config's default 128), Llama 3 BPE ("llama-bpe"), untied
  smollm_bpe   llama with a SmolLM2-style BPE ("smollm": single digits), tied, Q8_0 embeddings
  llama3_rope  llama with Llama 3.x rope scaling (a rope_freqs.weight tensor, as the converter writes
               it), F32, head_dim 64; reference: the Hugging Face model itself (transformers' GGUF
               loader ignores rope_freqs), no tokens.json
"""
import json
import math
import os
import pathlib
import random
import sys

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM,  # noqa: E402
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tokenizer_bpe_ref as bpe  # noqa: E402

Q = gguf.GGMLQuantizationType
SPM = HERE.parents[1] / "data" / "tokenizer.model"
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

GGUF_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
              "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
              "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.<module...>.<weight|bias>
    layer, module, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    return f"blk.{layer}.{GGUF_NAMES[module]}.{kind}"


def permute(w, n_head):  # convert_hf_to_gguf.py LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add_tensor(writer, name, array, qtype):
    array = np.ascontiguousarray(array.astype(np.float32))
    if qtype == Q.F32:
        writer.add_tensor(name, array)
    elif qtype == Q.F16:
        writer.add_tensor(name, array.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)


def write_model(path, arch, model, config, types, vocab):
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny " + arch)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if head_dim != config.hidden_size // config.num_attention_heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    vocab(writer)
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    for i, (hf, value) in enumerate(sorted(state.items())):
        if hf == "lm_head.weight" and config.tie_word_embeddings:
            continue
        if arch == "llama" and ".q_proj." in hf:
            value = permute(value, config.num_attention_heads)
        if arch == "llama" and ".k_proj." in hf:
            value = permute(value, config.num_key_value_heads)
        qtype = Q.F32 if value.ndim == 1 else types(hf, i)
        add_tensor(writer, gguf_name(hf), value, qtype)
    rope = config.rope_parameters
    if rope.get("rope_type") == "llama3":  # convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors
        freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        old = rope["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / rope["low_freq_factor"], old / rope["high_freq_factor"]
        factors = []
        for freq in freqs.tolist():
            wavelen = 2 * math.pi / freq
            if wavelen < high_wavelen:
                factors.append(1)
            elif wavelen > low_wavelen:
                factors.append(rope["factor"])
            else:
                smooth = (old / wavelen - rope["low_freq_factor"]) / (rope["high_freq_factor"] - rope["low_freq_factor"])
                factors.append(1 / ((1 - smooth) / rope["factor"] + smooth))
        writer.add_tensor("rope_freqs.weight", np.array(factors, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def spm_vocab(writer):
    sp = spm.SentencePieceProcessor(model_file=str(SPM))
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else
                     5 if sp.is_unused(i) else 1)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(sp.unk_id())
    writer.add_bos_token_id(sp.bos_id())
    writer.add_eos_token_id(sp.eos_id())
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)
    return len(tokens)


def spm_as_llama_cpp():
    """data/tokenizer.model as llama.cpp runs its GGUF vocabulary: the same pieces, scores and types,
    but no normalization (a GGUF does not carry it) and no folding of repeated spaces."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    proto.ParseFromString(SPM.read_bytes())
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.precompiled_charsmap = b""
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.add_dummy_prefix = True
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def bpe_vocab(data, pre, eos, pad):
    vocab = dict(data["model"]["vocab"])
    added = {t["id"]: t for t in data["added_tokens"]}
    size = max(max(vocab.values()), max(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [5] * size
    for token, i in vocab.items():
        tokens[i], types[i] = token, 1
    for i, t in added.items():
        tokens[i], types[i] = t["content"], 3 if t["special"] else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]

    def add(writer):
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(pre)
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_eos_token_id(tokens.index(eos))
        writer.add_pad_token_id(tokens.index(pad))
        writer.add_add_bos_token(False)
        writer.add_chat_template(CHAT_TEMPLATE)
    return add, size


def save_logits_and_greedy(out, model):
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(11)
    input_ids = torch.randint(3, vocab, (2, 11), generator=gen)
    prompt_ids = torch.randint(3, vocab, (1, 6), generator=gen)
    with torch.no_grad():
        logits = model(input_ids).logits
        greedy = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), max_new_tokens=12,
                                do_sample=False, eos_token_id=None, pad_token_id=0)
    save_file({"input_ids": input_ids, "logits": logits.contiguous(), "prompt_ids": prompt_ids,
               "greedy": greedy[:, prompt_ids.shape[1]:].contiguous()}, out / "reference.safetensors")


def reference(out, name, source):
    model = AutoModelForCausalLM.from_pretrained(out, gguf_file=name, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(out, gguf_file=name)
    save_logits_and_greedy(out, model)
    rng = random.Random(5)
    texts = bpe.HANDWRITTEN + bpe.random_strings(rng, 150) + [
        "<|im_start|>user\nhi<|im_end|>", "12345 + 678 = 7023", " 1 22 333", "a  b   c\n\n d"]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    source_ids = [source(t) for t in texts]
    (out / "tokens.json").write_text(json.dumps({"texts": texts, "ids": ids, "source_ids": source_ids},
                                                ensure_ascii=False))


def build(root, name, arch, make_model, types, vocab, source):
    out = root / name
    out.mkdir(parents=True, exist_ok=True)
    model, config = make_model()
    scale = 8.0  # clear margins for greedy decoding
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "norm" not in key:
                p.mul_(scale)
    write_model(out / "model.gguf", arch, model, config, types, vocab)
    reference(out, "model.gguf", source)


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    rng = random.Random(7)
    sentences = bpe.split_corpus(bpe.corpus_text(rng, 40_000), rng)
    cycle = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.BF16, Q.F16, Q.F32]

    spm_size = spm.SentencePieceProcessor(model_file=str(SPM)).get_piece_size()

    def llama_spm():
        torch.manual_seed(1)
        config = LlamaConfig(vocab_size=spm_size, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                             rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                             tie_word_embeddings=False)
        return LlamaForCausalLM(config), config
    build(root, "llama_spm", "llama", llama_spm,
          lambda hf, i: Q.F16 if "embed" in hf else cycle[i % len(cycle)], spm_vocab, spm_as_llama_cpp().encode)

    for name, arch, builder, pre in (("qwen2_bpe", "qwen2", bpe.build_qwen2, "qwen2"),
                                     ("qwen3_bpe", "qwen3", bpe.build_llama3, "llama-bpe"),
                                     ("smollm_bpe", "llama", bpe.build_smollm2, "smollm")):
        out = root / name
        out.mkdir(parents=True, exist_ok=True)
        tok = builder(sentences)
        tok.save(str(out / "tokenizer_source.json"))
        data = json.loads((out / "tokenizer_source.json").read_text())
        (out / "tokenizer_source.json").unlink()
        tok.normalizer = None  # as llama.cpp runs it: a GGUF does not carry the normalizer (Qwen2's NFC)
        source = (lambda tok: lambda text: tok.encode(text, add_special_tokens=False).ids)(tok)
        specials = [t["content"] for t in data["added_tokens"] if t["special"]]
        eos = "<|im_end|>" if "<|im_end|>" in specials else specials[-1]
        vocab, size = bpe_vocab(data, pre, eos, specials[0])

        def make(arch=arch, size=size):
            torch.manual_seed(2)
            common = dict(vocab_size=size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                          rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None)
            if arch == "qwen2":
                config = Qwen2Config(**common, tie_word_embeddings=True,
                                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
                return Qwen2ForCausalLM(config), config
            if arch == "qwen3":
                config = Qwen3Config(**common, head_dim=128, tie_word_embeddings=False,
                                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
                return Qwen3ForCausalLM(config), config
            config = LlamaConfig(**common, tie_word_embeddings=True,
                                 rope_parameters={"rope_type": "default", "rope_theta": 100000.0})
            return LlamaForCausalLM(config), config
        build(root, name, arch, make, lambda hf, i: Q.Q8_0 if "embed" in hf else cycle[i % len(cycle)], vocab,
              source)

    # Llama 3.x rope scaling travels as a rope_freqs tensor of per-frequency factors; transformers'
    # GGUF loader ignores it, so the reference is the Hugging Face model itself (all F32: the same
    # weights exactly).
    out = root / "llama3_rope"
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(3)
    config = LlamaConfig(vocab_size=spm_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16384, rms_norm_eps=1e-5,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192},
                         tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for key, p in model.named_parameters():
            if "norm" not in key:
                p.mul_(8.0)
    write_model(out / "model.gguf", "llama", model, config, lambda hf, i: Q.F32, spm_vocab)
    save_logits_and_greedy(out, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
