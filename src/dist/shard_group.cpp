// Owners of the units a sharding engine splits its state into (shard_group.h).
#include "src/dist/shard_group.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"

namespace ferry::dist {

std::vector<int64_t> assign_owners(const std::vector<uint64_t>& unit_bytes, std::vector<uint64_t>& owned) {
  FERRY_CHECK(!owned.empty(), "assign_owners: no processes");
  // Largest first, each to the process owning the fewest bytes so far (the first of equal ones):
  // within 4/3 of the best split (Graham's LPT bound).
  std::vector<size_t> order(unit_bytes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return unit_bytes[a] > unit_bytes[b]; });
  std::vector<int64_t> owners(unit_bytes.size(), 0);
  for (const size_t i : order) {
    const auto least = std::min_element(owned.begin(), owned.end());
    *least += unit_bytes[i];
    owners[i] = static_cast<int64_t>(least - owned.begin());
  }
  return owners;
}

namespace {

std::vector<at::Tensor> owned_by(const std::vector<OwnedTensor>& tensors, int64_t rank) {
  std::vector<at::Tensor> out;
  for (const OwnedTensor& t : tensors) {
    if (t.owner == rank) out.push_back(t.tensor);
  }
  return out;
}

}  // namespace

void reduce_to_owners(ShardGroup& group, const std::vector<OwnedTensor>& tensors) {
  for (int64_t r = 0; r < group.size(); ++r) {
    const std::vector<at::Tensor> list = owned_by(tensors, r);
    if (!list.empty()) group.reduce_sum(list, r);
  }
}

void broadcast_from_owners(ShardGroup& group, const std::vector<OwnedTensor>& tensors) {
  for (int64_t r = 0; r < group.size(); ++r) {
    const std::vector<at::Tensor> list = owned_by(tensors, r);
    if (!list.empty()) group.broadcast(list, r);
  }
}

void sum_over_processes(const std::vector<double*>& values, ShardGroup* group) {
  if (group == nullptr || group->size() == 1 || values.empty()) return;
  std::vector<double> flat;
  flat.reserve(values.size());
  for (const double* v : values) flat.push_back(*v);
  at::Tensor packed = at::tensor(flat, at::TensorOptions().dtype(at::kDouble));
  group->all_reduce_sum({packed});
  for (size_t i = 0; i < values.size(); ++i) *values[i] = packed[static_cast<int64_t>(i)].item<double>();
}

double sum_over_processes(ShardGroup& group, double value) {
  sum_over_processes({&value}, &group);
  return value;
}

}  // namespace ferry::dist
