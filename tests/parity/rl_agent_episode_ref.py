#!/usr/bin/env python3
"""Reference for tests/parity/rl_agent_episode_parity_test.cpp: one fixed tool-using episode through
TRL 1.16's own multi-turn code, with the calculator of scripts/envs/calculator.py as the tool.

Usage: rl_agent_episode_ref.py OUTDIR. Writes OUTDIR/model/ (a tiny random Llama folder: a byte-level
BPE like Qwen2's, 700 tokens, Qwen2.5's real chat template with its tool branches: the same text as
TRL's chat_templates/qwen2_5.jinja, so TRL's add_response_schema parses it) and OUTDIR/episode.json.

The episode: the prompt [{"role": "user", "content": QUESTION}] with tools = calculator.TOOLS,
rendered by transformers' apply_chat_template(add_generation_prompt=True); turn 1 is the hermes tool
call TURN1 (encoded, then <|im_end|>; parsed by TRL's parse_response into the assistant message
with tool_calls), turn 2 the answer TURN2 (encoded, then <|im_end|>). TRL's
GRPOTrainer._tool_call_loop (CALLED on a stub `self`) runs the tool through an environment_factory
style object (CalcEnv.calculator, which calls calculator.evaluate), builds the tool suffix with
TRL's own _get_tool_suffix_ids, and asks _generate_single_turn (stubbed: it returns TURN2's ids) for
the turn after it (the ids it was asked to continue are kept: turn2_context_ids). Its tool_mask marks
the policy's tokens (1) and the tool result's (0). The C++ test stubs Ferry's generation with the same
two turns (turn 1 for the prompt, turn 2 for what follows the tool's answer) and runs its episode
runner.

Then TRL's GRPOTrainer._compute_loss (CALLED on a stub, as rl_grpo_loss_ref.py does) on that
episode, with the tiny model's own log-probs: new = old + 0.05 * arange-based offsets (so ratios
differ from 1 and some clip), advantage 0.7, loss_type dapo and grpo, token level, beta 0.
episode.json: prompt_ids, completion_ids (turn 1, tool suffix, turn 2), tool_mask, turn1_ids,
suffix_ids, turn2_ids, tool_messages, turn2_context_ids, and for each loss type the loss and d loss / d new_logps
(per completion position); old_logps and new_logps themselves.
"""
import collections
import importlib.util
import json
import os
import pathlib
import random
import sys
import types
import warnings

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOTrainer  # noqa: E402
from trl.chat_template_utils import add_response_schema, parse_response  # noqa: E402

transformers.logging.set_verbosity_error()
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from tokenizer_bpe_ref import corpus_text, split_corpus  # noqa: E402
from rl_grpo_loss_ref import _Accelerator  # noqa: E402  (the same stub accelerator)
from tokenizer_chat_templates_ref import build_bpe  # noqa: E402

spec = importlib.util.spec_from_file_location("calculator", ROOT / "scripts/envs/calculator.py")
calculator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calculator)

QWEN25 = (ROOT / "configs/templates/jinja/qwen2.5/Qwen2.5-7B-Instruct.jinja").read_text()
QUESTION = "What is 2 + 2 * 3?"
TURN1 = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2 + 2 * 3"}}\n</tool_call>'
TURN2 = "2 + 2 * 3 = 8"


class CalcEnv:
    """What TRL's environment_factory returns: tool methods, and reset."""

    def reset(self, **kwargs):
        return None

    def calculator(self, expression: str) -> str:
        """Evaluates an arithmetic expression.

        Args:
            expression: e.g. 12 * (3 + 4)
        """
        return str(calculator.evaluate(expression))


def write_model(folder):
    rng = random.Random(37)
    sentences = split_corpus(corpus_text(rng, 40_000), rng) + [QUESTION, TURN1, TURN2, QWEN25] * 5
    fast = PreTrainedTokenizerFast(tokenizer_object=build_bpe("qwen2", sentences, vocab_size=700),
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = QWEN25
    fast.save_pretrained(str(folder))
    tok = add_response_schema(AutoTokenizer.from_pretrained(str(folder)))  # TRL's parser for Qwen2.5's template
    torch.manual_seed(3)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=None,
                         eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(str(folder), safe_serialization=True)
    return tok, model


def tool_loop(tok, prompt_ids, turn1_ids, turn2_ids):
    env = CalcEnv()
    # What TRL's _generate makes of turn 1 (its parse_response, with the Qwen response template).
    completion_message = parse_response(tok, list(turn1_ids), prefix=list(prompt_ids), tools=[env.calculator])
    assert completion_message.get("tool_calls"), completion_message
    asked = []  # the ids TRL's loop asks the generator to continue

    def generate_single_turn(ids, images, multimodal_fields, num_generations, has_tool_images=False):
        assert len(ids) == 1 and num_generations == 1
        asked.append(list(ids[0]))
        return [list(turn2_ids)], [[0.0] * len(turn2_ids)]

    stub = types.SimpleNamespace(
        max_tool_calling_iterations=4, _sync_tool_dicts=[{"calculator": env.calculator}], _async_tool_dicts=[{}],
        use_vllm=False, model=types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=1024)),
        _is_vlm=False, max_completion_length=256, processing_class=tok, chat_template=None, chat_template_kwargs={},
        _tokenizer=tok, environment_factories=None, tools=[env.calculator], _generate_single_turn=generate_single_turn)
    stub._get_tool_suffix_ids = lambda messages: GRPOTrainer._get_tool_suffix_ids(stub, messages)
    prompts = [[{"role": "user", "content": QUESTION}]]
    completion_ids = [list(turn1_ids)]
    completions = [[completion_message]]
    logprobs = [[0.0] * len(turn1_ids)]
    tool_mask, completions, completion_ids, logprobs, calls, failures, _ = GRPOTrainer._tool_call_loop(
        stub, prompts, [list(prompt_ids)], completion_ids, completions, logprobs, None, None)
    assert calls == 1 and failures == 0 and len(asked) == 1, (calls, failures, len(asked))
    tool_messages = [m for m in completions[0] if m["role"] == "tool"]
    return tool_mask[0], completion_ids[0], tool_messages, asked[0]


def trl_loss(loss_type, prompt_ids, completion_ids, tool_mask, old, new):
    T = len(completion_ids)
    leaf = new.clone().unsqueeze(0).requires_grad_(True)

    def get_logps(model, input_ids, attention_mask, logits_to_keep, compute_entropy=False, compute_aux_loss=False,
                  **kwargs):
        assert logits_to_keep == T
        return leaf, torch.zeros(1, T), None

    args = types.SimpleNamespace(delta=None, use_bias_correction_kl=True, steps_per_generation=1, epsilon=0.2,
                                 epsilon_high=None)
    stub = types.SimpleNamespace(
        args=args, _get_per_token_logps_and_entropies=get_logps, aux_loss_enabled=False, top_entropy_quantile=1.0,
        off_policy_mask_threshold=None, importance_sampling_level="token", beta=0.0, loss_type=loss_type,
        epsilon_low=0.2, epsilon_high=0.2, use_vllm=False, vllm_importance_sampling_correction=False,
        _entropy_bonus_enabled=False, entropy_coef=0.0, current_gradient_accumulation_steps=1,
        max_completion_length=256, accelerator=_Accelerator(), model=types.SimpleNamespace(training=True),
        _metrics={"train": collections.defaultdict(list), "eval": collections.defaultdict(list)},
        num_generations=1, mask_truncated_completions=False, _last_loaded_step=0, state=types.SimpleNamespace(global_step=0))
    inputs = {
        "prompt_ids": torch.tensor([prompt_ids]), "prompt_mask": torch.ones(1, len(prompt_ids), dtype=torch.long),
        "completion_ids": torch.tensor([completion_ids]), "completion_mask": torch.ones(1, T, dtype=torch.long),
        "tool_mask": torch.tensor([tool_mask]), "advantages": torch.tensor([0.7]),
        "old_per_token_logps": old.unsqueeze(0), "num_items_in_batch": torch.tensor(float(sum(tool_mask))),
    }
    loss = GRPOTrainer._compute_loss(stub, None, inputs)
    loss.backward()
    return loss.item(), leaf.grad[0].tolist()


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    torch.set_num_threads(1)
    tok, model = write_model(out / "model")
    end = tok.convert_tokens_to_ids("<|im_end|>")
    prompt_ids = tok.apply_chat_template([{"role": "user", "content": QUESTION}], tools=calculator.TOOLS,
                                         add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    turn1_ids = tok.encode(TURN1, add_special_tokens=False) + [end]
    turn2_ids = tok.encode(TURN2, add_special_tokens=False) + [end]
    tool_mask, completion_ids, tool_messages, turn2_context_ids = tool_loop(tok, prompt_ids, turn1_ids, turn2_ids)
    suffix_ids = completion_ids[len(turn1_ids):len(completion_ids) - len(turn2_ids)]
    assert completion_ids == turn1_ids + suffix_ids + turn2_ids
    assert turn2_context_ids == prompt_ids + turn1_ids + suffix_ids
    assert tool_mask == [1] * len(turn1_ids) + [0] * len(suffix_ids) + [1] * len(turn2_ids)
    with torch.no_grad():
        ids = torch.tensor([prompt_ids + completion_ids])
        logp = torch.log_softmax(model(ids).logits.float(), -1)[0]
    P, T = len(prompt_ids), len(completion_ids)
    old = torch.stack([logp[P - 1 + t, completion_ids[t]] for t in range(T)])
    new = old + 0.05 * torch.tensor([((t * 7) % 11) - 5 for t in range(T)], dtype=torch.float32)
    episode = {"transformers_version": transformers.__version__, "question": QUESTION, "turn1": TURN1, "turn2": TURN2,
               "prompt_ids": prompt_ids, "turn1_ids": turn1_ids, "suffix_ids": suffix_ids, "turn2_ids": turn2_ids,
               "completion_ids": completion_ids, "tool_mask": tool_mask, "tool_messages": tool_messages,
               "turn2_context_ids": turn2_context_ids,
               "old_logps": old.tolist(), "new_logps": new.tolist(), "losses": {}}
    for loss_type in ["dapo", "grpo", "bnpo", "dr_grpo"]:
        loss, grad = trl_loss(loss_type, prompt_ids, completion_ids, tool_mask, old, new)
        assert all(g == 0.0 for g, m in zip(grad, tool_mask) if m == 0), "tool tokens must get no gradient"
        episode["losses"][loss_type] = {"loss": loss, "grad": grad}
    (out / "episode.json").write_text(json.dumps(episode, ensure_ascii=False, indent=1))
    print(f"rl_agent_episode_ref: trl tool loop: {len(turn1_ids)} + {len(suffix_ids)} (tool) + {len(turn2_ids)} tokens; "
          f"tool said {tool_messages[0]['content']!r}; dapo loss {episode['losses']['dapo']['loss']:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
