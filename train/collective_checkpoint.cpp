// A checkpoint written once for all processes (see collective_checkpoint.h).
#include "train/collective_checkpoint.h"

#include <string>
#include <system_error>

#include "src/dist/communicator.h"
#include "train/checkpoint_folders.h"

namespace fs = std::filesystem;

namespace ferry {

void write_checkpoint_collective(dist::Communicator* comm, const fs::path& output_dir, int64_t step, int64_t keep_last,
                                 const CheckpointWriters& writers) {
  const bool several = comm != nullptr && comm->size() > 1;
  const bool staged = several && writers.own != nullptr;
  const fs::path staging = output_dir / (".step-" + std::to_string(step) + ".tmp-shards");
  if (several && comm->rank() != 0) {
    if (!staged) return;
    fs::create_directories(staging);
    writers.own(staging);
    comm->barrier();  // the staged files are written
    if (writers.join) writers.join();
    comm->barrier();  // rank 0 has moved them into the checkpoint and pruned
    return;
  }
  if (staged) comm->barrier();
  try {
    write_checkpoint_atomic(output_dir, step, [&](const fs::path& folder) {
      writers.primary(folder);
      if (staged && fs::is_directory(staging)) {
        for (const auto& entry : fs::directory_iterator(staging)) fs::rename(entry.path(), folder / entry.path().filename());
      }
    });
  } catch (...) {
    if (staged) {
      std::error_code ignored;
      fs::remove_all(staging, ignored);
      comm->barrier();
    }
    throw;
  }
  prune_checkpoints(output_dir, keep_last);
  if (staged) {
    fs::remove_all(staging);
    comm->barrier();
  }
}

}  // namespace ferry
