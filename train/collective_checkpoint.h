// A step-N checkpoint of a data-parallel run (or of one process), written once for all processes.
//
// Rank 0 (or the only process) writes the folder (write_checkpoint_atomic) and then prunes to
// output.keep_last. When every process holds state of its own (ZeRO shards, DiLoCo replicas:
// `own` is set), each other process first writes its files into a staging folder beside the
// checkpoint (".step-N.tmp-shards", a temporary name that resume never takes and prune removes),
// which rank 0 moves into the checkpoint before its manifest; the others then make the collective
// calls rank 0's writing makes (`join`: ZeRO 3's weight gathers) and wait until the checkpoint is
// complete. Without `own` the other processes return at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

namespace ferry {

namespace dist {
class Communicator;
}

struct CheckpointWriters {
  // Rank 0: everything it writes into the checkpoint folder.
  std::function<void(const std::filesystem::path& folder)> primary;
  // The other processes: their own files, into the staging folder (null: they have none).
  std::function<void(const std::filesystem::path& staging)> own;
  // The other processes: the collective calls `primary` makes, in its order (null: none).
  std::function<void()> join;
};

// `comm` null: one process, rank 0.
void write_checkpoint_collective(dist::Communicator* comm, const std::filesystem::path& output_dir, int64_t step,
                                 int64_t keep_last, const CheckpointWriters& writers);

}  // namespace ferry
