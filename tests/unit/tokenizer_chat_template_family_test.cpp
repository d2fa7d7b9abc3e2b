// Recognising a model folder's Hugging Face chat template (`tokenizer.chat_template: auto`): every
// shipped Jinja source maps to its template; Jinja's whitespace rules (`-` markers, trim_blocks,
// lstrip_blocks, the final newline, comments) are the only freedom; near misses and folders
// without a template are ConfigErrors that say what to set. The parity test
// (tokenizer_chat_templates_parity_test) checks the same against transformers' renders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "src/core/error.h"
#include "src/core/file_util.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_family.h"
#include "src/tokenizer/chat_template_path.h"
#include "src/tokenizer/tokenizer.h"
#include "tests/support/small_bpe_tokenizer.h"
#include "tests/support/scratch_dir.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

const std::string kSource = FERRY_SOURCE_DIR;
const std::string kJinja = kSource + "/configs/templates/jinja/";

std::string jinja(const std::string& relative) { return read_file(kJinja + relative); }

// A folder with the small tokenizer.json and, when given, a chat template in tokenizer_config.json.
fs::path folder_with(const std::string& name, const std::optional<std::string>& chat_template) {
  const fs::path dir = ferry::test_support::process_scratch_dir("ferry_template_family") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << small_bpe_tokenizer_json().dump();
  nlohmann::json config = {{"eos_token", "<|end|>"}};
  if (chat_template) config["chat_template"] = *chat_template;
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir;
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

TEST(ChatTemplateFamily, EveryShippedJinjaSourceMapsToItsFolderAndEveryNameLoads) {
  const auto known = known_jinja_templates();
  ASSERT_GE(known.size(), 8u);
  for (const auto& k : known) {
    SCOPED_TRACE(k.path);
    EXPECT_EQ(fs::path(k.path).parent_path().filename().string(), k.template_name);
    const auto match = recognise_chat_template(read_file(k.path));
    ASSERT_TRUE(match.has_value());
    EXPECT_EQ(match->template_name, k.template_name);
    EXPECT_EQ(load_chat_template(k.template_name).name, k.template_name);
  }
  for (const char* name : {"llama3", "llama3.1", "llama3.2", "qwen2", "qwen2.5", "smollm2", "mistral"}) {
    EXPECT_TRUE(std::any_of(known.begin(), known.end(), [&](const auto& k) { return k.template_name == name; }))
        << name;
  }
}

TEST(ChatTemplateFamily, NormalFormFollowsJinjaWhitespaceRules) {
  // Whitespace inside tags, outside string literals, is not output.
  EXPECT_EQ(normalise_jinja("{{ a + 'x  y' }}"), normalise_jinja("{{a+'x  y'}}"));
  EXPECT_NE(normalise_jinja("{{ a + 'x  y' }}"), normalise_jinja("{{ a + 'x y' }}"));
  EXPECT_NE(normalise_jinja("{% if not x %}"), normalise_jinja("{% if notx %}"));
  // Raw text is output, except what `-`, trim_blocks and lstrip_blocks remove.
  EXPECT_NE(normalise_jinja("{{ a }}\n{{ b }}"), normalise_jinja("{{ a }}{{ b }}"));
  EXPECT_EQ(normalise_jinja("{{ a -}}\n  {{ b }}"), normalise_jinja("{{ a }}{{ b }}"));
  EXPECT_EQ(normalise_jinja("{{ a }}\n  {{- b }}"), normalise_jinja("{{ a }}{{ b }}"));
  EXPECT_EQ(normalise_jinja("{% if a %}\nx{% endif %}"), normalise_jinja("{% if a %}x{% endif %}"));    // trim_blocks
  EXPECT_NE(normalise_jinja("{% if a %}\n\nx{% endif %}"), normalise_jinja("{% if a %}x{% endif %}"));  // one only
  EXPECT_NE(normalise_jinja("{% if a +%}\nx{% endif %}"), normalise_jinja("{% if a %}x{% endif %}"));   // + keeps it
  EXPECT_EQ(normalise_jinja("x\n    {% if a %}y{% endif %}"), normalise_jinja("x\n{% if a %}y{% endif %}"));  // lstrip
  EXPECT_NE(normalise_jinja("x    {% if a %}y{% endif %}"), normalise_jinja("x{% if a %}y{% endif %}"));  // not line start
  EXPECT_NE(normalise_jinja("x\n    {{ a }}"), normalise_jinja("x\n{{ a }}"));  // lstrip_blocks: blocks only
  // Comments, one final newline and CRLF line ends make no difference.
  EXPECT_EQ(normalise_jinja("{#- note #}{{ a }}\n"), normalise_jinja("{{ a }}"));
  EXPECT_NE(normalise_jinja("{{ a }}\n\n"), normalise_jinja("{{ a }}"));
  EXPECT_EQ(normalise_jinja("{{ a }}\r\nx\r\n"), normalise_jinja("{{ a }}\nx"));
  // A quote inside a literal, and a "}}" inside one, do not end it.
  EXPECT_EQ(normalise_jinja("{{ 'a }} \\' b' }}"), "{{'a }} \\' b'}}");
}

TEST(ChatTemplateFamily, ReformattedRealTemplatesAreRecognised) {
  const std::string llama31 = jinja("llama3.1/Llama-3.1-8B-Instruct.jinja");
  std::string crlf;
  for (const char c : llama31) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_EQ(recognise_chat_template(crlf)->template_name, "llama3.1");
  std::string reindented = llama31;
  for (size_t at = reindented.find("\n    "); at != std::string::npos; at = reindented.find("\n    ", at + 1)) {
    reindented.replace(at, 5, "\n\t");
  }
  EXPECT_EQ(recognise_chat_template(reindented)->template_name, "llama3.1");
  EXPECT_EQ(recognise_chat_template(jinja("qwen2/Qwen2-7B-Instruct.jinja") + "\n")->template_name, "qwen2");
}

TEST(ChatTemplateFamily, NearMissesAreNotRecognised) {
  auto edited = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const std::string qwen25 = jinja("qwen2.5/Qwen2.5-7B-Instruct.jinja");
  EXPECT_FALSE(recognise_chat_template(edited(qwen25, "You are Qwen", "You are Qwen2")));
  EXPECT_FALSE(recognise_chat_template(edited(jinja("llama3.1/Llama-3.1-8B-Instruct.jinja"), "26 Jul 2024", "1 Jan 2025")));
  EXPECT_FALSE(recognise_chat_template(edited(jinja("mistral/Mistral-7B-Instruct-v0.2.jinja"), "' [INST] '", "'[INST] '")));
  EXPECT_FALSE(recognise_chat_template(edited(jinja("smollm2/SmolLM2-1.7B-Instruct.jinja"), "Hugging Face", "Hugging Face.")));
  // Llama 3's template without its trim: it renders other text for padded messages.
  EXPECT_FALSE(recognise_chat_template(edited(jinja("llama3/Meta-Llama-3-8B-Instruct.jinja"), " | trim", "")));
  EXPECT_FALSE(recognise_chat_template("{{ messages }}"));
  EXPECT_FALSE(recognise_chat_template(""));
}

TEST(ChatTemplateFamily, AutoPicksTheTemplateFromTokenizerConfigOrChatTemplateJinja) {
  const fs::path with_config = folder_with("in_config", jinja("qwen2.5/Qwen2.5-7B-Instruct.jinja"));
  EXPECT_EQ(resolve_chat_template("auto", Tokenizer(with_config.string())).name, "qwen2.5");
  const fs::path with_file = folder_with("in_file", std::nullopt);
  std::ofstream(with_file / "chat_template.jinja") << jinja("smollm2/SmolLM2-1.7B-Instruct.jinja");
  EXPECT_EQ(resolve_chat_template("auto", Tokenizer(with_file.string())).name, "smollm2");
  // A name is used as given, whatever the folder holds.
  EXPECT_EQ(resolve_chat_template("chatml", Tokenizer(with_config.string())).name, "chatml");
}

TEST(ChatTemplateFamily, CommandLineDefaultIsTheFoldersOwnTemplateElseDemo) {
  const fs::path with_config = folder_with("cli_default", jinja("llama3/Meta-Llama-3-8B-Instruct.jinja"));
  EXPECT_EQ(default_chat_template_name(Tokenizer(with_config.string())), "auto");
  EXPECT_EQ(default_chat_template_name(Tokenizer(kSource + "/data/tokenizer.model")), "demo");
  EXPECT_EQ(default_chat_template_name(Tokenizer(folder_with("cli_none", std::nullopt).string())), "demo");
}

TEST(ChatTemplateFamily, AutoWithoutATemplateSaysToNameOne) {
  const std::string demo = config_error([] { resolve_chat_template("auto", Tokenizer(kSource + "/data/tokenizer.model")); });
  EXPECT_CONTAINS(demo, "tokenizer.chat_template is auto");
  EXPECT_CONTAINS(demo, kSource + "/data");
  EXPECT_CONTAINS(demo, "no chat template");
  for (const char* name : {"demo", "llama2", "chatml", "llama3", "llama3.1", "qwen2.5", "smollm2", "mistral"}) {
    EXPECT_CONTAINS(demo, name);
  }
  const fs::path none = folder_with("none", std::nullopt);
  const std::string cli =
      config_error([&] { resolve_chat_template("auto", Tokenizer(none.string()), "--chat-template"); });
  EXPECT_CONTAINS(cli, "--chat-template is auto");
  EXPECT_CONTAINS(cli, none.string());
  // Without a tokenizer at hand, `auto` cannot be loaded by name.
  EXPECT_CONTAINS(config_error([] { load_chat_template("auto"); }), "recognised from a tokenizer folder");
}

TEST(ChatTemplateFamily, AutoWithAnUnknownTemplateNamesTheFileAndTheWayOut) {
  const fs::path dir = folder_with("unknown", "{% for m in messages %}{{ m['content'] }}{% endfor %}");
  const std::string message = config_error([&] { resolve_chat_template("auto", Tokenizer(dir.string())); });
  EXPECT_CONTAINS(message, (dir / "tokenizer_config.json").string());
  EXPECT_CONTAINS(message, "not one Ferry recognises");
  EXPECT_CONTAINS(message, "qwen2.5 (Qwen2.5-7B-Instruct)");  // what is known
  EXPECT_CONTAINS(message, "set tokenizer.chat_template to a shipped template");
  EXPECT_CONTAINS(message, ".yaml");
  EXPECT_CONTAINS(message, "configs/templates/jinja/<template>/<model>.jinja");
  EXPECT_EQ(message.find("closest"), std::string::npos);  // nothing near it
  // A near miss points at the first difference.
  const fs::path near = folder_with("near", jinja("qwen2/Qwen2-7B-Instruct.jinja") + "{{ eos_token }}");
  const std::string hint = config_error([&] { resolve_chat_template("auto", Tokenizer(near.string())); });
  EXPECT_CONTAINS(hint, "closest is qwen2's");
  EXPECT_CONTAINS(hint, "eos_token");
}

TEST(ChatTemplateFamily, ShippedNamesIncludeTheNewFamilies) {
  const auto names = shipped_chat_template_names();
  for (const char* name : {"demo", "llama2", "chatml", "llama3", "llama3.1", "llama3.2", "qwen2", "qwen2.5", "smollm2",
                           "mistral"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

}  // namespace
}  // namespace ferry
