// Which logged series share a chart, as people read a run: the loss with the eval loss, the
// learning rate, the gradient norm; for RL the reward, KL, entropy and clip fraction; for reward
// models and DPO the accuracy and the rewards and margins; tokens per second, time and memory;
// then every other key in a chart of its own (keys sharing a "prefix/" share one), so no logged
// series is left out. An "eval_" key goes to the chart of the key without the prefix (eval_loss
// beside loss). Charts come in the order of the table in chart_groups.cpp, the "other" ones last
// in the order their keys first appear.
#pragma once

#include <string>
#include <vector>

namespace ferry {

struct ChartGroup {
  std::string id;                   // a file-name-safe name: "loss", "reward", "other-comm_bytes"
  std::string title;                // "Loss", "Learning rate", "comm_bytes"
  std::vector<std::string> series;  // the keys drawn, in the order given
  bool other = false;               // a key the table does not know
};

// Every name lands in exactly one group; names keep their given order within a group.
std::vector<ChartGroup> group_series(const std::vector<std::string>& names);

}  // namespace ferry
