// The family descriptions Ferry has, one function per family file; model_family.cpp's
// model_families() lists them. A new family is one more file and one more line there.
#pragma once

#include "src/model/family/model_family.h"

namespace ferry {

const ModelFamily& llama_family();    // llama_family.cpp: Llama 2 / 3.x, SmolLM2, TinyLlama
const ModelFamily& mistral_family();  // mistral_family.cpp
const ModelFamily& qwen2_family();    // qwen2_family.cpp: Qwen2, Qwen2.5
const ModelFamily& qwen3_family();    // qwen3_family.cpp
const ModelFamily& gemma2_family();   // gemma2_family.cpp
const ModelFamily& gemma3_family();   // gemma3_family.cpp: Gemma 3 text (270M, 1B; the text model of 4B+)
const ModelFamily& smollm3_family();  // smollm3_family.cpp
const ModelFamily& olmo2_family();    // olmo2_family.cpp
const ModelFamily& olmo3_family();    // olmo3_family.cpp
const ModelFamily& phi3_family();     // phi3_family.cpp: Phi-3, Phi-3.5, Phi-4, Phi-4-mini
// Mixtures of Experts (model_shape.h's MoeShape):
const ModelFamily& qwen3_moe_family();  // qwen3_moe_family.cpp: Qwen3-30B-A3B, Qwen3-235B-A22B
const ModelFamily& qwen2_moe_family();  // qwen2_moe_family.cpp: Qwen1.5-MoE, Qwen2-57B-A14B
const ModelFamily& mixtral_family();    // mixtral_family.cpp: Mixtral 8x7B, 8x22B
const ModelFamily& olmoe_family();      // olmoe_family.cpp: OLMoE-1B-7B

}  // namespace ferry
