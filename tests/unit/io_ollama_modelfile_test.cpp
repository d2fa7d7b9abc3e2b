// Ollama Modelfiles from chat templates (src/io/ollama_modelfile.h): the pieces read off a template's
// renderings make the Go TEMPLATE; they must reproduce the template's own rendering of conversations
// the inference never probed (three rounds, with and without a system message), for the demo template
// and for published models' Jinja templates (tests/data/chat-templates: ChatML, Llama 3, Mistral,
// Gemma with its system message in the first user turn, Gemma 2 without system messages, Phi-3 and
// Zephyr at least); a template they cannot reproduce gets none. The demo's Go template is written out
// by hand. The stop parameters are the whole end of an answer, checked against what transformers'
// renderings write after one (GigaChat 3.5, Phi-3.5, GLM, Nemotron Nano 2 and plain-text formats).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "src/io/ollama_modelfile.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/chat_template_corpus.h"
#include "tests/support/scratch_dir.h"

namespace ferry::io {
namespace {

using Messages = std::vector<std::pair<std::string, std::string>>;

const Messages kUnprobed{{"system", "Be kind."}, {"user", "Hi there"}, {"assistant", "Hello!"},
                         {"user", "Two plus two?"}, {"assistant", "Four."}, {"user", "Thanks"}};
const Messages kUnprobedNoSystem{{"user", "Hi there"}, {"assistant", "Hello!"}, {"user", "Thanks"}};

std::string rendered(const ChatTemplate& t, const Messages& messages, const std::string& bos) {
  Conversation c;
  for (const auto& [role, content] : messages) c.push_back(ChatMessage{*parse_chat_role(role), content});
  std::string text = t.render_text(c, RenderEnd::generation_prompt);
  if (!bos.empty() && text.rfind(bos, 0) == 0) text.erase(0, bos.size());
  return text;
}

TEST(OllamaModelfile, DemoTemplateGivesItsGoTemplate) {
  const ChatTemplate demo = load_chat_template("demo");
  const auto pieces = infer_ollama_template(demo, "");
  ASSERT_TRUE(pieces.has_value());
  EXPECT_EQ(pieces->go_template(),
            "{{ if .System }}<|system|>\n{{ .System }}<|end|>\n{{ else }}{{ end }}"
            "{{ range $i, $_ := .Messages }}{{ $last := eq (len (slice $.Messages $i)) 1 }}"
            "{{ if eq .Role \"user\" }}<|user|>\n{{ .Content }}{{ if $last }}<|end|>\n<|assistant|>\n{{ else }}"
            "<|end|>\n<|assistant|>\n{{ end }}{{ else if eq .Role \"assistant\" }}{{ .Content }}"
            "{{ if not $last }}<|end|>{{ end }}{{ end }}{{ end }}");
  EXPECT_EQ(render_ollama_pieces(*pieces, kUnprobed), rendered(demo, kUnprobed, ""));
  EXPECT_EQ(pieces->answer_end, "<|end|>");
}

TEST(OllamaModelfile, PublishedTemplatesThePiecesReproduce) {
  // A tokenizer folder that names BOS and EOS, which many templates write.
  const std::filesystem::path dir = test_support::process_scratch_dir("ferry_ollama_modelfile") / "tokenizer";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model", dir / "tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": "<s>", "eos_token": "</s>"})";
  const Tokenizer tokenizer(dir.string());
  int inferred = 0;
  std::vector<std::string> refused;
  for (const std::string& name : test_support::chat_template_corpus_files()) {
    const ChatTemplate t =
        resolve_chat_template((test_support::chat_template_corpus_dir() / name).string(), tokenizer);
    std::string why;
    const auto pieces = infer_ollama_template(t, "<s>", &why);
    if (!pieces) {
      refused.push_back(name + " (" + why + ")");
      continue;
    }
    ++inferred;
    for (const Messages& m : {kUnprobed, kUnprobedNoSystem}) {
      std::string expected;
      try {
        expected = rendered(t, m, "<s>");
      } catch (const Error&) {
        continue;  // the template refuses this conversation (a system message, say)
      }
      if (pieces->system_layout == OllamaSystemLayout::none && m.front().first == "system") continue;
      EXPECT_EQ(render_ollama_pieces(*pieces, m), expected) << name;
    }
  }
  for (const char* must : {"chujiezheng__chatml.jinja", "chujiezheng__llama-3-instruct.jinja",
                           "chujiezheng__gemma-it.jinja", "llamacpp__google-gemma-2-2b-it.jinja",
                           "chujiezheng__phi-3.jinja", "chujiezheng__zephyr.jinja",
                           "chujiezheng__mistral-instruct.jinja"}) {
    for (const std::string& r : refused) EXPECT_NE(r.rfind(must, 0), 0u) << r;
  }
  std::cout << inferred << " of " << inferred + refused.size() << " corpus templates become Go templates; refused:\n";
  for (const std::string& r : refused) std::cout << "  " << r << "\n";
  EXPECT_GE(inferred, 30);
}

// The stops of templates whose end of an answer is not the text both renderings share, each read
// off transformers' render_jinja_template (bos_token <s>, eos_token </s>) of [user Q1, assistant A,
// user Q2] with the generation prompt and of the closed [user Q1, assistant A]; the text after A:
//   GigaChat 3.5  inside "<|message_sep|>\n\nuser<|role_sep|>\n"  closed "</s>"
//   Phi-3.5       inside "<|end|>\n<|user|>\n"                 closed "<|end|>\n</s>"
//   GLM-4.5       inside "<|user|>"  GLM-4.6 "<|user|>\n"        closed ""            (EOS too)
//   Nemotron Nano 2 inside "\n<SPECIAL_12>\n\n<SPECIAL_11>User\n" closed "\n<SPECIAL_12>\n\n"
//   Amberchat     inside "\n\n\n        ###Human: "           closed "\n\n\n"       (EOS too)
//   ChatQA        inside "\n\n        \n\nUser: "              closed "\n\n"         (EOS too)
//   Falcon        inside "\n\n    \n\nUser: "                  closed "\n\n"         (EOS too)
//   Solar         inside "\n\n\n\n    ### User:\n"              closed "\n\n\n\n"     (EOS too)
// and, for the common case, ChatML, Llama 3, Gemma and Llama 2 (" </s><s>[INST] ", closed " </s>").
TEST(OllamaModelfile, StopsAreWholeEndsOfAnAnswer) {
  const std::filesystem::path dir = test_support::process_scratch_dir("ferry_ollama_modelfile") / "stop-tokenizer";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(FERRY_SOURCE_DIR) + "/data/tokenizer.model", dir / "tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": "<s>", "eos_token": "</s>"})";
  const Tokenizer tokenizer(dir.string());
  const std::vector<std::string> eos{"</s>"};
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
      {"llamacpp__GigaChat3.5.jinja", {"<|message_sep|>", "</s>"}},
      {"llamacpp__microsoft-Phi-3.5-mini-instruct.jinja", {"<|end|>"}},
      {"llamacpp__glm_4_5.jinja", {"<|user|>", "</s>"}},
      {"llamacpp__GLM-4.6.jinja", {"<|user|>", "</s>"}},
      {"llamacpp__NVIDIA-Nemotron-Nano-v2.jinja", {"<SPECIAL_12>"}},
      {"chujiezheng__amberchat.jinja", {"###Human:", "</s>"}},
      {"chujiezheng__chatqa.jinja", {"User:", "</s>"}},
      {"chujiezheng__falcon-instruct.jinja", {"User:", "</s>"}},
      {"chujiezheng__solar-instruct.jinja", {"### User:", "</s>"}},
      {"chujiezheng__chatml.jinja", {"<|im_end|>"}},
      {"chujiezheng__llama-3-instruct.jinja", {"<|eot_id|>"}},
      {"chujiezheng__gemma-it.jinja", {"<end_of_turn>"}},
      {"chujiezheng__llama-2-chat.jinja", {"</s>"}},
  };
  for (const auto& [name, stops] : expected) {
    const ChatTemplate t = resolve_chat_template((test_support::chat_template_corpus_dir() / name).string(), tokenizer);
    EXPECT_EQ(infer_ollama_stops(t, eos), stops) << name;
  }
  // Shipped templates: their end of turn.
  EXPECT_EQ(infer_ollama_stops(load_chat_template("demo"), eos), std::vector<std::string>{"<|end|>"});
  EXPECT_EQ(infer_ollama_stops(load_chat_template("chatml"), {}), std::vector<std::string>{"<|im_end|>"});
  // A template that refuses the probes (it wants a system message): the end tokens.
  const std::filesystem::path refusing = dir / "refusing.jinja";
  std::ofstream(refusing) << "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message first') }}"
                             "{% endif %}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}";
  EXPECT_EQ(infer_ollama_stops(resolve_chat_template(refusing.string(), tokenizer), eos), eos);
}

TEST(OllamaModelfile, ModelfileLines) {
  ModelfileSpec spec;
  spec.from = "./model.gguf";
  spec.adapter = "./adapter.gguf";
  spec.chat_template = infer_ollama_template(load_chat_template("demo"), "");
  spec.stops = {"<|end|>", " <|end|>\n", "say \"stop\""};
  spec.system = "You answer briefly.";
  spec.note = "test";
  const std::string text = modelfile_text(spec);
  EXPECT_EQ(text.substr(0, text.find("TEMPLATE")), "# test\nFROM ./model.gguf\nADAPTER ./adapter.gguf\n");
  EXPECT_NE(text.find("\nSYSTEM \"\"\"You answer briefly.\"\"\"\n"), std::string::npos) << text;
  // Trimmed, each once; one holding a quote between triple quotes (Ollama's parser has no escapes).
  EXPECT_NE(text.find("PARAMETER stop \"<|end|>\"\nPARAMETER stop \"\"\"say \"stop\"\"\"\"\n"), std::string::npos) << text;
  spec.system = "a \"\"\" b";
  EXPECT_THROW(modelfile_text(spec), InputError);
}

}  // namespace
}  // namespace ferry::io
