// `ferry export --format ollama`: a checkpoint as a folder Ollama imports in one command: the GGUF
// model (LoRA merged, or the base plus a llama.cpp adapter with --lora adapter) and a Modelfile
// (src/io/ollama_modelfile.h) with the chat template as a Go TEMPLATE, its stop parameters and the
// training data's system prompt. Prints the `ollama create` line; with --create runs it.
#pragma once

#include <string>

namespace ferry::cli {

struct OllamaExportArgs {
  std::string checkpoint;
  std::string output;         // the folder to write
  std::string lora;           // "", merged or adapter
  std::string gguf_type = "f16";
  std::string name;           // the Ollama model name; empty: the output folder's name
  std::string chat_template;  // empty: the run's tokenizer.chat_template, else the folder's own
  bool create = false;
};

void run_ollama_export(const OllamaExportArgs& args);

}  // namespace ferry::cli
