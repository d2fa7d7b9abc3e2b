// Strict YAML/JSON config parsing, overrides and printing, driven by each section's visit().
#include "core/config/config_io.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/byte_size.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/text.h"

namespace ferry {
namespace {

// Where a value came from, for error messages: "configs/demo.yaml:12" or "--set train.x=1".
std::string location(const std::string& source, const YAML::Node& node) {
  if (node.Mark().line >= 0 && source.rfind("--set", 0) != 0) {
    return source + ":" + std::to_string(node.Mark().line + 1);
  }
  return source;
}

[[noreturn]] void type_error(const std::string& where, const std::string& key, const std::string& expected,
                             const YAML::Node& node) {
  std::string got;
  if (node.IsScalar()) {
    got = "'" + node.Scalar() + "'";
  } else if (node.IsSequence()) {
    got = "a list";
  } else if (node.IsMap()) {
    got = "a mapping";
  } else {
    got = "nothing";
  }
  throw ConfigError(where + ": " + key + ": expected " + expected + ", got " + got);
}

template <class Number>
bool parse_number(const std::string& text, Number& out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, out);
  return ec == std::errc() && ptr == end;
}

// --- value parsing, one overload per field type ---------------------------------------------
void parse_value(const YAML::Node& n, bool& out, const std::string& where, const std::string& key) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "yes" || s == "on") { out = true; return; }
    if (s == "false" || s == "False" || s == "no" || s == "off") { out = false; return; }
  }
  type_error(where, key, "true or false", n);
}

void parse_value(const YAML::Node& n, int64_t& out, const std::string& where, const std::string& key) {
  if (n.IsScalar() && parse_number(n.Scalar(), out)) return;
  type_error(where, key, "an integer", n);
}

void parse_value(const YAML::Node& n, double& out, const std::string& where, const std::string& key) {
  if (n.IsScalar() && parse_number(n.Scalar(), out) && std::isfinite(out)) return;
  type_error(where, key, "a number", n);
}

void parse_value(const YAML::Node& n, std::string& out, const std::string& where, const std::string& key) {
  if (n.IsNull()) { out.clear(); return; }
  if (n.IsScalar()) { out = n.Scalar(); return; }
  type_error(where, key, "a string", n);
}

void parse_value(const YAML::Node& n, std::vector<std::string>& out, const std::string& where,
                 const std::string& key) {
  if (n.IsNull()) { out.clear(); return; }
  if (n.IsSequence()) {
    std::vector<std::string> items;
    for (const auto& item : n) {
      if (!item.IsScalar()) type_error(where, key, "a list of strings", n);
      items.push_back(item.Scalar());
    }
    out = std::move(items);
    return;
  }
  type_error(where, key, "a list of strings, e.g. [a, b]", n);
}

void parse_value(const YAML::Node& n, ByteSize& out, const std::string& where, const std::string& key) {
  if (n.IsScalar()) {
    if (auto bytes = parse_byte_size(n.Scalar())) { out.bytes = *bytes; return; }
  }
  type_error(where, key, "a memory size such as 8GiB, 512MiB or 0", n);
}

// A YAML node as JSON: plain scalars typed as YAML types them, quoted ones text.
nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& entry : n) out[entry.first.Scalar()] = yaml_to_json(entry.second);
    return out;
  }
  if (n.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : n) out.push_back(yaml_to_json(item));
    return out;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  int64_t integer = 0;
  if (parse_number(s, integer)) return integer;
  double number = 0;
  if (parse_number(s, number) && std::isfinite(number)) return number;
  return s;
}

void parse_value(const YAML::Node& n, KeywordMap& out, const std::string& where, const std::string& key) {
  if (n.IsNull()) { out.json = "{}"; return; }
  nlohmann::json value;
  if (n.IsMap()) {
    value = yaml_to_json(n);
  }
  if (!value.is_object()) type_error(where, key, "a mapping, e.g. {enable_thinking: false}", n);
  out.json = value.dump();
}

template <class E>
void parse_value(const YAML::Node& n, E& out, const std::string& where, const std::string& key)
  requires std::is_enum_v<E>
{
  std::vector<std::string> names;
  for (const auto& [value, name] : EnumNames<E>::table) names.emplace_back(name);
  if (n.IsScalar() && enum_parse(n.Scalar(), out)) return;
  std::string hint = n.IsScalar() ? did_you_mean(n.Scalar(), names) : "";
  std::string got = n.IsScalar() ? "'" + n.Scalar() + "'" : "a non-string";
  throw ConfigError(where + ": " + key + ": expected one of " + join(names, ", ") + ", got " + got + hint);
}

// One value or a list of them: `loss_type: sigmoid` or `loss_type: [sigmoid, sft]`.
template <class E>
void parse_value(const YAML::Node& n, std::vector<E>& out, const std::string& where, const std::string& key)
  requires std::is_enum_v<E>
{
  std::vector<E> items;
  if (n.IsSequence()) {
    for (const auto& item : n) {
      E value{};
      parse_value(item, value, where, key);
      items.push_back(value);
    }
  } else {
    E value{};
    parse_value(n, value, where, key);
    items.push_back(value);
  }
  if (items.empty()) type_error(where, key, "a value or a non-empty list of values", n);
  out = std::move(items);
}

void parse_value(const YAML::Node& n, std::vector<double>& out, const std::string& where, const std::string& key) {
  if (n.IsNull()) { out.clear(); return; }
  if (n.IsSequence()) {
    std::vector<double> items;
    for (const auto& item : n) {
      double value = 0;
      if (!item.IsScalar() || !parse_number(item.Scalar(), value) || !std::isfinite(value)) {
        type_error(where, key, "a list of numbers, e.g. [0.8, 0.2]", n);
      }
      items.push_back(value);
    }
    out = std::move(items);
    return;
  }
  type_error(where, key, "a list of numbers, e.g. [0.8, 0.2]", n);
}

// --- value printing ---------------------------------------------------------------------------
std::string to_text(bool v) { return v ? "true" : "false"; }
std::string to_text(int64_t v) { return std::to_string(v); }
std::string to_text(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ptr);
  if (s.find_first_of(".eE") == std::string::npos && s.find_first_of("0123456789") != std::string::npos) s += ".0";
  return s;
}
std::string to_text(const ByteSize& v) { return format_byte_size(v.bytes); }
template <class E>
std::string to_text(E v) requires std::is_enum_v<E> { return std::string(enum_name(v)); }
// A list as YAML's flow form; a one-item list of enum values as the value alone.
template <class T>
std::string to_text(const std::vector<T>& items) {
  if constexpr (std::is_enum_v<T>) {
    if (items.size() == 1) return to_text(items.front());
  }
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i > 0 ? ", " : "") + to_text(items[i]);
  return s + "]";
}

// --- visitors -----------------------------------------------------------------------------------

// Reads the keys present in a YAML mapping into a section; rejects keys the section lacks.
class Reader {
 public:
  Reader(const YAML::Node& node, std::string prefix, const std::string& source)
      : node_(node), prefix_(std::move(prefix)), source_(source) {}

  template <class T>
  void operator()(const char* name, T& field, const char* /*doc*/) {
    names_.emplace_back(name);
    const YAML::Node child = node_[name];
    if (!child.IsDefined()) return;
    parse_value(child, field, location(source_, child), prefix_ + name);
  }

  template <class S>
  void section(const char* name, S& s) {
    names_.emplace_back(name);
    const YAML::Node child = node_[name];
    if (!child.IsDefined() || child.IsNull()) return;
    if (!child.IsMap()) type_error(location(source_, child), prefix_ + name, "a mapping of keys", child);
    Reader sub(child, prefix_ + name + ".", source_);
    s.visit(sub);
    sub.reject_unknown();
  }

  // A list of sections, e.g. rewards: [{kind: verifier}, {kind: model, path: ...}]; replaces the whole list.
  template <class S>
  void list(const char* name, std::vector<S>& items, const char* /*doc*/) {
    names_.emplace_back(name);
    const YAML::Node child = node_[name];
    if (!child.IsDefined()) return;
    if (child.IsNull()) {
      items.clear();
      return;
    }
    if (!child.IsSequence()) type_error(location(source_, child), prefix_ + name, "a list of mappings, e.g. [{kind: verifier}]", child);
    std::vector<S> parsed;
    for (size_t i = 0; i < child.size(); ++i) {
      const YAML::Node item = child[i];
      const std::string item_key = prefix_ + name + "[" + std::to_string(i) + "]";
      if (!item.IsMap()) type_error(location(source_, item), item_key, "a mapping of keys", item);
      Reader sub(item, item_key + ".", source_);
      S value;
      value.visit(sub);
      sub.reject_unknown();
      parsed.push_back(std::move(value));
    }
    items = std::move(parsed);
  }

  void reject_unknown() const {
    for (const auto& entry : node_) {
      const std::string key = entry.first.Scalar();
      if (std::find(names_.begin(), names_.end(), key) != names_.end()) continue;
      const std::string match = closest_match(key, names_);
      std::string hint = match.empty() ? "" : " (did you mean '" + prefix_ + match + "'?)";
      if (hint.empty()) {
        // The key may belong to another section: "train.packing" -> "data.packing".
        for (const auto& path : config_key_paths()) {
          if (path.size() > key.size() && path.ends_with("." + key)) {
            hint = " (did you mean '" + path + "'?)";
            break;
          }
        }
      }
      if (hint.empty()) hint = "; valid keys here: " + join(names_, ", ");
      throw ConfigError(location(source_, entry.first) + ": unknown key '" + prefix_ + key + "'" + hint);
    }
  }

 private:
  const YAML::Node& node_;
  std::string prefix_;
  const std::string& source_;
  std::vector<std::string> names_;
};

template <class T>
constexpr bool is_enum_list = false;
template <class E>
constexpr bool is_enum_list<std::vector<E>> = std::is_enum_v<E>;

// Emits every key with its description as a YAML comment.
class Writer {
 public:
  explicit Writer(YAML::Emitter& out) : out_(out) {}

  template <class T>
  void operator()(const char* name, const T& field, const char* doc) {
    out_ << YAML::Key << name << YAML::Value;
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      out_ << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : field) out_ << item;
      out_ << YAML::EndSeq;
    } else if constexpr (std::is_same_v<T, std::vector<double>>) {
      out_ << YAML::Flow << YAML::BeginSeq;
      for (double item : field) out_ << to_text(item);
      out_ << YAML::EndSeq;
    } else if constexpr (is_enum_list<T>) {
      if (field.size() == 1) {
        out_ << to_text(field.front());
      } else {
        out_ << YAML::Flow << YAML::BeginSeq;
        for (auto item : field) out_ << to_text(item);
        out_ << YAML::EndSeq;
      }
    } else if constexpr (std::is_same_v<T, std::string>) {
      out_ << YAML::DoubleQuoted << field;
    } else if constexpr (std::is_same_v<T, KeywordMap>) {
      YAML::Node mapping = YAML::Load(field.json);  // JSON is YAML: {enable_thinking: false}
      mapping.SetStyle(YAML::EmitterStyle::Flow);
      out_ << mapping;
    } else {
      out_ << to_text(field);
    }
    out_ << YAML::Comment(doc);
  }

  template <class S>
  void section(const char* name, S& s) {
    out_ << YAML::Newline << YAML::Key << name << YAML::Value << YAML::BeginMap;
    s.visit(*this);
    out_ << YAML::EndMap;
  }

  template <class S>
  void list(const char* name, std::vector<S>& items, const char* doc) {
    out_ << YAML::Newline << YAML::Key << name << YAML::Value;
    if (items.empty()) {
      out_ << YAML::Flow << YAML::BeginSeq << YAML::EndSeq << YAML::Comment(doc);
      return;
    }
    out_ << YAML::Comment(doc) << YAML::BeginSeq;
    for (S& item : items) {
      out_ << YAML::BeginMap;
      item.visit(*this);
      out_ << YAML::EndMap;
    }
    out_ << YAML::EndSeq;
  }

 private:
  YAML::Emitter& out_;
};

// Collects key paths.
class KeyLister {
 public:
  template <class T>
  void operator()(const char* name, const T&, const char*) { paths.push_back(prefix + name); }
  template <class S>
  void section(const char* name, S& s) {
    const std::string saved = prefix;
    prefix += std::string(name) + ".";
    s.visit(*this);
    prefix = saved;
  }
  template <class S>
  void list(const char* name, std::vector<S>&, const char*) { paths.push_back(prefix + name); }
  std::vector<std::string> paths;
  std::string prefix;
};

void read_into(Config& config, const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) return;
  if (!root.IsMap()) {
    throw ConfigError(location(source, root) + ": a config must be a mapping of sections (model:, train:, ...)");
  }
  Reader reader(root, "", source);
  config.visit(reader);
  reader.reject_unknown();
}

YAML::Node load_yaml(std::string_view text, const std::string& source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": syntax error: " + e.msg);
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError("invalid config: " + message);
}

}  // namespace

std::vector<std::string> config_key_paths() {
  static const std::vector<std::string> paths = [] {
    KeyLister lister;
    Config config;
    config.visit(lister);
    return lister.paths;
  }();
  return paths;
}

Config parse_config(std::string_view text, const std::string& source) {
  Config config;
  read_into(config, load_yaml(text, source), source);
  return config;
}

void apply_override(Config& config, std::string_view assignment) {
  const std::string source = "--set " + std::string(assignment);
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ConfigError(source + ": expected section.key=value, e.g. --set train.learning_rate=1e-4");
  }
  const std::string key = trim(assignment.substr(0, eq));
  const std::string value_text(assignment.substr(eq + 1));

  // A value starting with [ { " or ' is read as YAML (lists, quoted strings); anything else is taken
  // literally, so "--set model.path=dir/with: colon" needs no quoting.
  const std::string trimmed = trim(value_text);
  YAML::Node value(trimmed);
  if (!trimmed.empty() && std::string_view("[{\"'").find(trimmed.front()) != std::string_view::npos) {
    value = load_yaml(trimmed, source);
  }

  // Build the sparse tree {a: {b: value}} and read it like a file.
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  YAML::Node root = value;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (it->empty()) throw ConfigError(source + ": empty key segment in '" + key + "'");
    YAML::Node parent(YAML::NodeType::Map);
    parent[*it] = root;
    root = parent;
  }
  read_into(config, root, source);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  Config config;
  if (!path.empty()) {
    std::ifstream in(path);
    if (!in) {
      throw ConfigError("config file '" + path + "' cannot be read (does it exist? paths are relative to " +
                        std::filesystem::current_path().string() + ")");
    }
    std::stringstream text;
    text << in.rdbuf();
    config = parse_config(text.str(), path);
  }
  for (const auto& assignment : overrides) apply_override(config, assignment);
  validate_config(config);
  return config;
}

void validate_config(const Config& c) {
  const auto& t = c.train;
  require(t.learning_rate > 0, "train.learning_rate must be > 0 (got " + to_text(t.learning_rate) + ")");
  require(t.micro_batch_size >= 1, "train.micro_batch_size must be >= 1 (got " + to_text(t.micro_batch_size) + ")");
  require(t.grad_accumulation >= 1, "train.grad_accumulation must be >= 1 (got " + to_text(t.grad_accumulation) + ")");
  require(t.logits_chunk >= -1,
          "train.logits_chunk must be -1 (auto), 0 (all logits at once) or a number of token rows, got " +
              to_text(t.logits_chunk));
  require(!t.activation_offload || t.gradient_checkpointing || c.offload.policy == OffloadPolicy::params ||
              c.offload.policy == OffloadPolicy::auto_,
          "train.activation_offload moves the inputs that activation checkpointing keeps to host memory, and offload.policy " +
              std::string(enum_name(c.offload.policy)) +
              " checkpoints no layer without it: set train.gradient_checkpointing: true as well");
  require(t.max_steps == -1 || t.max_steps >= 1, "train.max_steps must be -1 (use epochs) or >= 1");
  require(t.epochs >= 1, "train.epochs must be >= 1");
  require(t.warmup_steps >= 0, "train.warmup_steps must be >= 0");
  require(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1, "train.min_lr_ratio must be in [0, 1]");
  require(t.weight_decay >= 0, "train.weight_decay must be >= 0");
  require(t.adam_beta1 >= 0 && t.adam_beta1 < 1, "train.adam_beta1 must be in [0, 1)");
  require(t.adam_beta2 >= 0 && t.adam_beta2 < 1, "train.adam_beta2 must be in [0, 1)");
  require(t.adam_eps > 0, "train.adam_eps must be > 0");
  require(t.max_grad_norm >= 0, "train.max_grad_norm must be >= 0 (0 disables clipping)");
  require(t.eval_every >= 0 && t.save_every >= 0, "train.eval_every and train.save_every must be >= 0");
  require(t.fp16_initial_scale > 0, "train.fp16_initial_scale must be > 0");
  require(c.data.max_length >= 2, "data.max_length must be >= 2");
  require(c.data.eval_fraction >= 0 && c.data.eval_fraction < 1, "data.eval_fraction must be in [0, 1)");
  require(c.data.max_samples >= 0, "data.max_samples must be >= 0 (0: all)");
  require(c.lora.rank >= 0, "lora.rank must be >= 0 (0: full fine-tuning)");
  require(c.lora.rank == 0 || c.lora.alpha > 0, "lora.alpha must be > 0");
  require(c.lora.dropout >= 0 && c.lora.dropout < 1, "lora.dropout must be in [0, 1)");
  require(c.lora.rank == 0 || !c.lora.target_modules.empty(), "lora.target_modules must name at least one projection");
  // qkv_proj and gate_up_proj: the fused projections of Phi-3 (src/model/family/model_tensors.h
  // maps q/k/v and gate/up onto them on such a model). gate (a router), w1/w3/w2 (Mixtral's
  // experts) and experts (every expert projection): Mixtures of Experts (src/model/lora.h).
  static const std::vector<std::string> kLoraTargets{"q_proj",    "k_proj", "v_proj",       "qkv_proj", "o_proj",
                                                      "gate_proj", "up_proj", "gate_up_proj", "down_proj", "gate",
                                                      "w1",        "w3",      "w2",           "experts"};
  for (const auto& m : c.lora.target_modules) {
    require(std::find(kLoraTargets.begin(), kLoraTargets.end(), m) != kLoraTargets.end(),
            "lora.target_modules: unknown module '" + m + "'" + did_you_mean(m, kLoraTargets) +
                "; valid: " + join(kLoraTargets, ", "));
  }
  if (c.lora.quantize_base != BaseQuantization::none) {
    require(c.lora.rank > 0, "lora.quantize_base " + to_text(c.lora.quantize_base) +
                                 " quantises the frozen base under LoRA adapters (QLoRA): it needs lora.rank > 0; "
                                 "set lora.rank (e.g. 8) or lora.quantize_base=none");
  }
  require(c.lora.quantize_base != BaseQuantization::gguf || !c.model.path.empty(),
          "lora.quantize_base gguf keeps the projections of a GGUF model as the file stores them: it needs model.path "
          "(a .gguf file or ollama:NAME); a model built from model.config has no GGUF to keep, so use "
          "lora.quantize_base nf4 or int8");
  require(c.offload.cpu_threads >= 0, "offload.cpu_threads must be >= 0 (0: all cores)");
  require(c.offload.prefetch >= 0, "offload.prefetch must be >= 0");
  require(c.offload.pcie_bandwidth_gbps >= 0, "offload.pcie_bandwidth_gbps must be >= 0 (0: measure)");
  require(c.offload.optimizer_state != OptimizerState::int8 || c.offload.policy != OffloadPolicy::none,
          "offload.optimizer_state int8 keeps the Adam moments on the host in 8 bits, for the CPU optimizer: it "
          "needs offload.policy optimizer, params or auto (under none the optimizer runs on the device); set "
          "offload.optimizer_state=fp32 or another policy");
  if (c.offload.master_weights != MasterWeights::fp32) {
    const std::string name(enum_name(c.offload.master_weights));
    require(c.offload.policy != OffloadPolicy::none,
            "offload.master_weights " + name + " keeps the master weights on the host for the CPU optimizer: it needs "
            "offload.policy optimizer, params or auto; set offload.master_weights=fp32 or another policy");
    require(t.precision == Precision::bf16,
            "offload.master_weights " + name + " makes the bf16 weights the master (" +
                (c.offload.master_weights == MasterWeights::bf16_kahan ? "with a bf16 compensation"
                                                                       : "rounded stochastically") +
                "): it needs train.precision bf16 (got " + std::string(enum_name(t.precision)) +
                "); set offload.master_weights=fp32");
  }
  for (const auto& [key, tier] : {std::pair{"offload.optimizer_state_tier", c.offload.optimizer_state_tier},
                                   std::pair{"offload.params_tier", c.offload.params_tier}}) {
    if (tier != StateTier::nvme) continue;
    require(c.offload.policy != OffloadPolicy::none,
            std::string(key) + " nvme keeps host state on the NVMe drive for the offloading engine: it needs "
            "offload.policy optimizer, params or auto; set " + key + "=host or another policy");
    require(!c.offload.nvme_dir.empty(),
            std::string(key) + " nvme needs offload.nvme_dir: a folder on the NVMe drive for its working file "
            "(e.g. --set offload.nvme_dir=/mnt/nvme/ferry)");
  }
  if (c.offload.overlap_step) {
    require(c.offload.policy != OffloadPolicy::none,
            "offload.overlap_step overlaps the CPU optimizer with backward: it needs offload.policy optimizer, "
            "params or auto (under none the optimizer runs where the model does); set offload.overlap_step=false");
    require(t.max_grad_norm == 0,
            "offload.overlap_step updates chunks before backward has produced every gradient, so it cannot clip "
            "by the global gradient norm: set train.max_grad_norm=0 or offload.overlap_step=false (got "
            "train.max_grad_norm " + to_text(t.max_grad_norm) + ")");
    require(t.precision != Precision::fp16,
            "offload.overlap_step cannot be used with train.precision fp16: the loss scale is only checked after "
            "backward; use bf16 or fp32, or set offload.overlap_step=false");
  }
  const auto& g = c.generation;
  require(g.max_new_tokens >= 1, "generation.max_new_tokens must be >= 1");
  require(g.temperature > 0, "generation.temperature must be > 0 (use generation.greedy: true for greedy)");
  require(g.top_k >= 0, "generation.top_k must be >= 0 (0: no limit)");
  require(g.top_p > 0 && g.top_p <= 1, "generation.top_p must be in (0, 1]");
  require(g.max_batch_rows >= 0, "generation.max_batch_rows must be >= 0 (0: a rollout's rows all at once)");
  require(c.rm.center_rewards_coefficient >= 0, "rm.center_rewards_coefficient must be >= 0 (0: off)");
  const auto& dpo = c.dpo;
  require(dpo.beta > 0, "dpo.beta must be > 0 (got " + to_text(dpo.beta) + ")");
  require(dpo.label_smoothing >= 0 && dpo.label_smoothing < 0.5,
          "dpo.label_smoothing must be in [0, 0.5) (got " + to_text(dpo.label_smoothing) + ")");
  require(dpo.cpo_alpha >= 0, "dpo.cpo_alpha must be >= 0");
  require(!dpo.has_loss(DpoLoss::exo_pair) || dpo.label_smoothing > 0,
          "dpo.loss_type exo_pair needs dpo.label_smoothing > 0 (its epsilon; the EXO paper recommends 1e-3)");
  require(dpo.discopop_tau > 0, "dpo.discopop_tau must be > 0");
  require(dpo.loss_weights.empty() || dpo.loss_weights.size() == dpo.loss_type.size(),
          "dpo.loss_weights has " + std::to_string(dpo.loss_weights.size()) + " weights for " +
              std::to_string(dpo.loss_type.size()) + " losses in dpo.loss_type " + to_text(dpo.loss_type) +
              ": give one weight per loss, or none (1 each)");
  require(dpo.loss_type.size() == 1 || (!dpo.has_loss(DpoLoss::simpo) && !dpo.has_loss(DpoLoss::orpo)),
          "dpo.loss_type " + to_text(dpo.loss_type) + ": simpo and orpo are reference-free trainers of their own "
          "(TRL's CPO and ORPO) and cannot be combined with other losses; use one of them alone");
  require(dpo.ld_alpha >= 0 && dpo.ld_alpha <= 1, "dpo.ld_alpha must be in [0, 1] (got " + to_text(dpo.ld_alpha) +
                                                      "; 1: plain DPO)");
  require(dpo.ld_alpha == 1 || (!dpo.has_loss(DpoLoss::simpo) && !dpo.has_loss(DpoLoss::orpo)),
          "dpo.ld_alpha weights the log-ratios to the reference; simpo and orpo have none: set dpo.ld_alpha=1");
  {
    static const std::vector<DpoLoss> f_losses{DpoLoss::sigmoid, DpoLoss::sigmoid_norm, DpoLoss::hinge, DpoLoss::ipo,
                                               DpoLoss::exo_pair, DpoLoss::robust, DpoLoss::discopop, DpoLoss::sft};
    bool all_f = true;
    for (DpoLoss l : dpo.loss_type) all_f = all_f && std::find(f_losses.begin(), f_losses.end(), l) != f_losses.end();
    require(dpo.f_divergence_type == FDivergence::reverse_kl || all_f,
            "dpo.f_divergence_type " + to_text(dpo.f_divergence_type) + " only applies to dpo.loss_type sigmoid, "
            "sigmoid_norm, hinge, ipo, exo_pair, robust, discopop or sft (got " + to_text(dpo.loss_type) +
            "); use f_divergence_type reverse_kl");
  }
  require(!dpo.online || !dpo.has_loss(DpoLoss::orpo),
          "dpo.online: orpo's NLL runs over the whole chosen sequence, which online DPO does not score; use another "
          "dpo.loss_type (sigmoid, as TRL's OnlineDPOTrainer)");
  require(!dpo.online || dpo.reference != DpoReference::precompute,
          "dpo.online: the answers are sampled during training, so their reference log-probs cannot be precomputed; "
          "use dpo.reference auto, model or lora_off");
  require(dpo.missing_eos_penalty >= 0, "dpo.missing_eos_penalty must be >= 0");
  require(c.distill.beta >= 0 && c.distill.beta <= 1, "distill.beta must be in [0, 1]");
  require(c.distill.lmbda >= 0 && c.distill.lmbda <= 1, "distill.lmbda must be in [0, 1]");
  require(c.distill.temperature > 0, "distill.temperature must be > 0");
  const auto& kto = c.kto;
  require(kto.beta > 0, "kto.beta must be > 0 (got " + to_text(kto.beta) + ")");
  require(kto.desirable_weight > 0 && kto.undesirable_weight > 0,
          "kto.desirable_weight and kto.undesirable_weight must be > 0");
  const auto& p = c.ppo;
  require(p.rollout_batch_size >= 1 && p.ppo_epochs >= 1 && p.num_episodes >= 1,
          "ppo.rollout_batch_size, ppo.ppo_epochs and ppo.num_episodes must be >= 1");
  require(p.clip_eps > 0 && p.value_clip_eps > 0, "ppo.clip_eps and ppo.value_clip_eps must be > 0");
  require(p.kl_coef >= 0, "ppo.kl_coef must be >= 0");
  require(p.gamma > 0 && p.gamma <= 1 && p.lam >= 0 && p.lam <= 1, "ppo.gamma must be in (0, 1] and ppo.lam in [0, 1]");
  require(p.critic_learning_rate > 0, "ppo.critic_learning_rate must be > 0");
  require(p.vf_coef >= 0 && p.entropy_coef >= 0 && p.ptx_coef >= 0,
          "ppo.vf_coef, ppo.entropy_coef and ppo.ptx_coef must be >= 0");
  require(p.kl_target >= 0 && p.kl_horizon > 0, "ppo.kl_target must be >= 0 and ppo.kl_horizon > 0");
  require(p.reward_clip >= 0 && p.missing_eos_penalty >= 0, "ppo.reward_clip and ppo.missing_eos_penalty must be >= 0");
  require(p.num_generations >= 1, "ppo.num_generations must be >= 1");
  require(p.advantage_estimator == AdvantageEstimator::gae || p.num_generations >= 2,
          "ppo.advantage_estimator " + to_text(p.advantage_estimator) +
              " takes each response's baseline from the other responses to its prompt: set ppo.num_generations >= 2 "
              "(e.g. 4), or ppo.advantage_estimator=gae");
  const auto& g2 = c.grpo;
  require(g2.num_generations >= 2, "grpo.num_generations must be >= 2 (advantages compare completions of one prompt)");
  require(g2.generation_batch_size >= g2.num_generations && g2.generation_batch_size % g2.num_generations == 0,
          "grpo.generation_batch_size (" + to_text(g2.generation_batch_size) + ") must be a multiple of "
              "grpo.num_generations (" + to_text(g2.num_generations) + ")");
  require(g2.num_iterations >= 1 && g2.num_episodes >= 1, "grpo.num_iterations and grpo.num_episodes must be >= 1");
  require(g2.epsilon > 0 && g2.epsilon < 1, "grpo.epsilon must be in (0, 1)");
  require(g2.epsilon_high >= 0, "grpo.epsilon_high must be >= 0 (0: grpo.epsilon)");
  require(g2.beta >= 0, "grpo.beta must be >= 0");
  require(g2.sapo_temperature_pos > 0 && g2.sapo_temperature_neg > 0,
          "grpo.sapo_temperature_pos and grpo.sapo_temperature_neg must be > 0");
  require(g2.vespo_k_pos >= 0 && g2.vespo_k_neg >= 0 && g2.vespo_lambda_pos >= 0 && g2.vespo_lambda_neg >= 0,
          "grpo.vespo_k_pos, vespo_k_neg, vespo_lambda_pos and vespo_lambda_neg must be >= 0");
  int64_t model_rewards = 0;
  for (size_t i = 0; i < c.rewards.size(); ++i) {
    const RewardConfig& r = c.rewards[i];
    const std::string key = "rewards[" + std::to_string(i) + "]";
    require(std::isfinite(r.weight), key + ".weight must be a finite number");
    if (r.kind == RewardKind::model) {
      ++model_rewards;
      require(!r.path.empty(), key + ".path: a model reward needs the reward model folder (from `ferry train-rm`)");
    } else {
      require(r.path.empty(), key + ".path is for kind: model (this reward is " + to_text(r.kind) + ")");
    }
    if (r.kind == RewardKind::command) {
      require(!r.command.empty(), key + ".command: a command reward needs the program to run, e.g. "
                                        "\"python3 scripts/reward-exact-match.py\"");
      require(r.timeout > 0, key + ".timeout must be > 0 seconds");
    } else {
      require(r.command.empty(), key + ".command is for kind: command (this reward is " + to_text(r.kind) + ")");
    }
  }
  require(model_rewards <= 1, "rewards: at most one reward of kind model (found " + std::to_string(model_rewards) + ")");
  const auto& ro = c.rollout;
  for (size_t i = 0; i < c.rewards.size(); ++i) {
    require(c.rewards[i].kind != RewardKind::environment || !ro.environment.empty(),
            "rewards[" + std::to_string(i) + "] is kind environment: set rollout.environment to the environment "
            "program whose episodes give it (docs/environments.md)");
  }
  require(ro.env_workers >= 1, "rollout.env_workers must be >= 1 (got " + to_text(ro.env_workers) + ")");
  require(ro.env_timeout > 0, "rollout.env_timeout must be > 0 seconds (got " + to_text(ro.env_timeout) + ")");
  require(ro.max_turns >= 1, "rollout.max_turns must be >= 1 (got " + to_text(ro.max_turns) + ")");
  require(ro.max_total_tokens >= 1, "rollout.max_total_tokens must be >= 1 (got " + to_text(ro.max_total_tokens) + ")");
  require(!c.output.dir.empty(), "output.dir must not be empty");
  require(c.output.keep_last >= 0, "output.keep_last must be >= 0 (0: keep all)");
  require(c.logging.log_every >= 1, "logging.log_every must be >= 1");
  require(c.distributed.timeout > 0, "distributed.timeout must be > 0 seconds");
  require(c.distributed.zero_stage >= 0 && c.distributed.zero_stage <= 3,
          "distributed.zero_stage must be 0, 1, 2 or 3 (got " + to_text(c.distributed.zero_stage) + ")");
  require(c.distributed.zero_stage < 3 || c.offload.policy != OffloadPolicy::none,
          "distributed.zero_stage 3 shards the weights over the processes' host memory and pages them in: set "
          "offload.policy optimizer, params or auto (under none every process keeps the whole model where it "
          "runs), or use zero_stage 2");
  if (c.distributed.mode == DistributedMode::diloco) {
    require(c.distributed.inner_steps >= 1, "distributed.inner_steps must be >= 1");
    require(c.distributed.outer_lr > 0, "distributed.outer_lr must be > 0");
    require(c.distributed.outer_momentum >= 0 && c.distributed.outer_momentum < 1,
            "distributed.outer_momentum must be in [0, 1)");
    require(c.distributed.zero_stage == 0,
            "distributed.mode diloco keeps each process's own optimizer state: set distributed.zero_stage 0");
    require(c.train.save_every % c.distributed.inner_steps == 0,
            "distributed.mode diloco saves checkpoints where the processes agree, after an outer step: make "
            "train.save_every (" + to_text(c.train.save_every) + ") a multiple of distributed.inner_steps (" +
                to_text(c.distributed.inner_steps) + ")");
    require(c.train.eval_every % c.distributed.inner_steps == 0,
            "distributed.mode diloco evaluates where the processes agree, after an outer step: make "
            "train.eval_every (" + to_text(c.train.eval_every) + ") a multiple of distributed.inner_steps (" +
                to_text(c.distributed.inner_steps) + ")");
  }
}

std::string config_to_yaml(const Config& config) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << YAML::BeginMap;
  Writer writer(out);
  const_cast<Config&>(config).visit(writer);  // visit() is shared with the readers; Writer only reads.
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void save_resolved_config(const Config& config, const std::string& dir) {
  write_file_atomic(std::filesystem::path(dir) / "config.yaml",
                    "# Resolved Ferry config (every key, defaults included)\n" + config_to_yaml(config));
}

}  // namespace ferry
