// Loading a model folder for generation and the generation settings that follow from it.
#include "cli/inference_model.h"

#include "src/generate/chat_generate_options.h"

#include <torch/cuda.h>

#include "core/error.h"
#include "core/text.h"
#include "src/io/model_path.h"
#include "src/model/packed_parameters.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"

namespace ferry::cli {

InferenceModel load_inference_model(const std::string& path) {
  const std::string dir = io::resolve_model_path(path).string();  // a GGUF file or ollama: name too
  const bool cuda = torch::cuda::is_available();
  const c10::Device device = cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  InferenceModel loaded{causal_lm_from_pretrained(dir, cuda ? at::kBFloat16 : at::kFloat, device), Tokenizer(dir)};
  pack_parameters(*loaded.model);  // a no-op on a GPU
  const int64_t model_vocab = loaded.model->config().vocab_size;
  if (loaded.tokenizer.vocab_size() > model_vocab) {
    throw InputError(detail::concat(loaded.tokenizer.path(), " has ", loaded.tokenizer.vocab_size(),
                                    " tokens but the model in ", dir, " only ", model_vocab,
                                    "; use the model's own tokenizer"));
  }
  return loaded;
}

GenerateOptions InferenceModel::generate_options(const ChatTemplate* chat_template) const {
  return chat_generate_options(model->config(), tokenizer, chat_template);
}

}  // namespace ferry::cli
