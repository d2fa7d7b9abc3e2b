// `ferry export --format ollama` (see export_ollama.h).
#include "cli/export_ollama.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/byte_size.h"
#include "core/config/config_io.h"
#include "core/error.h"
#include "core/file_util.h"
#include "src/data/data_file.h"
#include "src/data/row_format.h"
#include "src/io/gguf_adapter_export.h"
#include "src/io/gguf_export.h"
#include "src/io/gguf_tensor_layout.h"
#include "src/io/model_path.h"
#include "src/io/ollama_modelfile.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry::cli {
namespace {
namespace fs = std::filesystem;

// The run's resolved config.yaml: beside the checkpoint (a run folder) or one level up (final/,
// step-N/); nullopt for a folder no Ferry run wrote.
std::optional<Config> run_config(const fs::path& checkpoint) {
  for (const fs::path& file : {checkpoint / "config.yaml", checkpoint.parent_path() / "config.yaml"}) {
    std::error_code error;
    if (fs::is_regular_file(file, error)) return load_config(file.string());
  }
  return std::nullopt;
}

// The system prompt every conversation of the run's training data starts with (its first 200
// rows), if they all share one.
std::string training_system_prompt(const Config& config, std::string& note) {
  const std::string& file = config.data.train_file;
  if (file.empty()) return {};
  std::optional<std::string> shared;
  bool same = true;
  int rows = 0;
  try {
    const RowFormat format = RowFormat::from_config(config.data);
    DataFile::open(file).for_each(true, [&](int64_t, uint64_t, const nlohmann::ordered_json& raw) {
      if (!same || ++rows > 200) return;
      const nlohmann::ordered_json row = normalize_row(raw, format);
      const nlohmann::ordered_json* messages = nullptr;
      for (const char* key : {"messages", "prompt", "context"}) {
        if (row.contains(key) && row[key].is_array()) {
          messages = &row[key];
          break;
        }
      }
      std::string system;
      if (messages != nullptr && !messages->empty() && (*messages)[0].value("role", "") == "system" &&
          (*messages)[0]["content"].is_string()) {
        system = (*messages)[0]["content"].get<std::string>();
      }
      if (!shared) shared = system;
      same = same && *shared == system;
    });
  } catch (const UserError& e) {
    note = std::string("the training data was not read for its system prompt (") + e.what() + ")";
    return {};
  }
  return same && shared ? *shared : std::string();
}

// The tokenizer's EOS and the ids generation_config.json and config.json name as eos_token_id
// (Llama 3's <|eot_id|>, GLM's <|user|> and <|observation|>), as text; special tokens only (a plain
// piece is no end of turn). The files are read leniently: they only add stops, and the export
// needs neither to be valid JSON.
std::vector<std::string> end_of_turn_tokens(const fs::path& checkpoint, const Tokenizer& tokenizer) {
  std::vector<int64_t> ids;
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  for (const char* name : {"generation_config.json", "config.json"}) {
    std::error_code error;
    if (!fs::is_regular_file(checkpoint / name, error)) continue;
    const nlohmann::json json = nlohmann::json::parse(read_file(checkpoint / name), nullptr, false);
    if (!json.is_object() || !json.contains("eos_token_id")) continue;
    const nlohmann::json& eos = json["eos_token_id"];
    for (const nlohmann::json& id : eos.is_array() ? eos : nlohmann::json::array({eos})) {
      if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
    }
  }
  std::vector<std::string> out;
  for (const int64_t id : ids) {
    if (id >= 0 && id < tokenizer.vocab_size() && tokenizer.is_control(id)) out.push_back(tokenizer.id_to_piece(id));
  }
  return out;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

void run_ollama_export(const OllamaExportArgs& args) {
  const fs::path checkpoint = io::resolve_model_path(args.checkpoint);
  const fs::path dir = args.output;
  if (dir.extension() == ".gguf") {
    throw UserError("--format ollama writes a folder (model.gguf and a Modelfile): give --output a folder, not " +
                    args.output);
  }
  fs::create_directories(dir);
  const std::optional<Config> config = run_config(checkpoint);

  // The weights: merged, or the base and a llama.cpp adapter.
  io::GgufExportOptions model;
  model.checkpoint = checkpoint;
  model.output = dir / "model.gguf";
  model.type = io::parse_gguf_file_type(args.gguf_type);
  model.merge_lora = args.lora != "adapter";
  const io::GgufExportSummary summary = io::export_gguf_model(model);
  for (const auto& warning : summary.warnings) std::cerr << "warning: " << warning << "\n";
  std::cout << "exported " << summary.tensors << " tensors as GGUF " << summary.architecture << " to "
            << summary.file.string() << " (" << format_bytes_approx(summary.file_bytes) << ")\n";
  io::ModelfileSpec spec;
  spec.from = "./model.gguf";
  if (args.lora == "adapter") {
    io::GgufAdapterExportOptions adapter;
    adapter.checkpoint = checkpoint;
    adapter.output = dir / "adapter.gguf";
    adapter.type = model.type == io::GgufFileType::f32 ? io::GgufFileType::f32 : io::GgufFileType::f16;
    const io::GgufAdapterExportSummary a = io::export_gguf_adapter(adapter);
    std::cout << "exported the LoRA adapter (rank " << a.rank << ") to " << a.file.string() << "\n";
    spec.adapter = "./adapter.gguf";
  }

  // The chat template as Ollama's TEMPLATE, its end of turn as stop parameters.
  const Tokenizer tokenizer(checkpoint.string());
  std::string template_name = args.chat_template;
  nlohmann::ordered_json kwargs = nullptr;
  if (template_name.empty() && config) {
    template_name = config->tokenizer.chat_template;
    kwargs = nlohmann::ordered_json::parse(config->tokenizer.chat_template_kwargs.json);
  }
  if (template_name.empty()) template_name = default_chat_template_name(tokenizer);
  const ChatTemplate chat_template = resolve_chat_template(template_name, tokenizer, kwargs, "--chat-template");
  const std::string bos_text = tokenizer.bos_id() >= 0 ? tokenizer.id_to_piece(tokenizer.bos_id()) : std::string();
  std::string why;
  spec.chat_template = io::infer_ollama_template(chat_template, bos_text, &why);
  if (!spec.chat_template) {
    std::cerr << "warning: the chat template '" << chat_template.name << "' is not written as a TEMPLATE (" << why
              << "); Ollama takes the GGUF's tokenizer.chat_template and matches it against the templates it knows\n";
  }
  spec.stops = io::infer_ollama_stops(chat_template, end_of_turn_tokens(checkpoint, tokenizer));
  spec.stops.insert(spec.stops.end(), chat_template.stop_strings.begin(), chat_template.stop_strings.end());
  std::string note;
  if (config) spec.system = training_system_prompt(*config, note);
  if (!spec.system.empty() && spec.chat_template && spec.chat_template->system_layout == io::OllamaSystemLayout::none) {
    note = "the training data's system prompt is left out: the chat template takes no system message";
    spec.system.clear();
  }
  if (!note.empty()) std::cerr << "note: " << note << "\n";
  spec.note = "written by ferry export --format ollama from " + checkpoint.string() + " (chat template " +
              chat_template.name + ")";
  const fs::path modelfile = dir / "Modelfile";
  write_file_atomic(modelfile, io::modelfile_text(spec));

  const std::string name = !args.name.empty() ? args.name : fs::absolute(dir).lexically_normal().filename().string();
  const std::string create = "ollama create " + shell_quote(name) + " -f " + shell_quote(modelfile.string());
  std::cout << "wrote " << modelfile.string() << (spec.chat_template ? " (TEMPLATE from the chat template" : " (no TEMPLATE")
            << (spec.system.empty() ? "" : ", the training data's SYSTEM prompt") << ")\n"
            << "import it into Ollama: " << create << "\n";
  if (!args.create) return;
  if (!on_path("ollama")) {
    throw UserError("--create runs `ollama create`, but no ollama program is on PATH; install Ollama "
                    "(https://ollama.com/download) or run the line above where it is");
  }
  const int status = std::system(create.c_str());
  if (status != 0) {
    throw UserError("`" + create + "` failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
  }
  std::cout << "created the Ollama model " << name << ": ollama run " << name << "\n";
}

}  // namespace ferry::cli
