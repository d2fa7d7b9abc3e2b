// `ferry version`: Ferry's version, the libtorch it runs on, whether CUDA kernels are compiled in,
// whether a GPU is visible, the CPU SIMD level the kernels use, and whether data parallelism is built.
#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <iostream>

#include "cli/commands.h"
#include "kernels/cpu/cpu_features.h"
#include "src/dist/communicator.h"

namespace ferry::cli {

void add_version_command(CLI::App& app) {
  auto* command = app.add_subcommand("version", "Print versions and what hardware Ferry sees");
  command->callback([] {
#ifdef FERRY_WITH_CUDA
    const bool cuda_compiled = true;
#else
    const bool cuda_compiled = false;
#endif
    const bool gpu = torch::cuda::is_available();
    std::cout << "ferry " << FERRY_VERSION << "\n"
              << "libtorch " << TORCH_VERSION << "\n"
              << "cuda kernels: " << (cuda_compiled ? "compiled in" : "not compiled (CPU-only build)") << "\n"
              << "gpu: " << (gpu ? std::to_string(torch::cuda::device_count()) + " visible" : "none visible") << "\n"
              << "cpu simd: " << kernels::simd_level() << "\n"
              << "cpu threads: " << at::get_num_threads() << " (torch's intra-op threads; OMP_NUM_THREADS sets them)\n"
              << "data parallelism: "
              << (dist::gloo_compiled_in() ? "c10d Gloo (ferry launch, torchrun)"
                                           : "not compiled (no Gloo headers at build time: apt-get install libgloo-dev)")
              << (dist::nccl_compiled_in() ? ", NCCL for CUDA tensors" : "") << "\n";
  });
}

}  // namespace ferry::cli
