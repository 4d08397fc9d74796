#include "toga/sim/strategy.hpp"

#include <string_view>

#include <algorithm>

namespace toga::sim {

const char* to_string(strategy_kind k) {
  switch (k) {
    case strategy_kind::random: return "random";
    case strategy_kind::pct: return "pct";
    case strategy_kind::replay: return "replay";
    case strategy_kind::exhaustive: return "exhaustive";
    case strategy_kind::portfolio: return "portfolio";
    case strategy_kind::stall: return "stall";
    case strategy_kind::guided: return "guided";
  }
  return "?";
}

bool parse_strategy(const std::string& s, strategy_kind& out) {
  for (auto k : {strategy_kind::random, strategy_kind::pct, strategy_kind::replay,
                 strategy_kind::exhaustive, strategy_kind::portfolio, strategy_kind::stall, strategy_kind::guided}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

// ---- PCT ---------------------------------------------------------------------------------

void pct_strategy::begin(std::uint64_t seed, unsigned lanes) {
  rng_.reseed(seed);
  // Distinct initial priorities d .. d+n-1 in a random order (Fisher-Yates); change point i
  // (1-based) lowers the running lane to priority d-i, below every initial priority.
  prio_.resize(lanes);
  for (unsigned i = 0; i < lanes; ++i) prio_[i] = static_cast<std::int64_t>(depth_ + i);
  for (unsigned i = lanes; i > 1; --i) std::swap(prio_[i - 1], prio_[rng_.below(i)]);
  change_points_.clear();
  for (unsigned i = 1; i < depth_; ++i) change_points_.push_back(1 + rng_.below(k_));
  std::sort(change_points_.begin(), change_points_.end());
  next_change_ = 0;
  low_ = 0;
}

unsigned pct_strategy::pick_lane(const pick_context& c) {
  // Apply every change point we have passed to the lane running now.
  while (next_change_ < change_points_.size() && change_points_[next_change_] <= c.step) {
    if (c.current < prio_.size())
      prio_[c.current] = static_cast<std::int64_t>(depth_) - 1 - static_cast<std::int64_t>(next_change_);
    ++next_change_;
  }
  // A backing-off lane waits for somebody else: drop it below everyone (keeps spin loops
  // from starving the lanes they wait for; a deviation from textbook PCT, documented).
  if (c.yield && c.current < prio_.size()) prio_[c.current] = --low_ - static_cast<std::int64_t>(depth_);
  unsigned best = c.runnable.nth(0);
  for (unsigned i = c.runnable.first_from(best + 1); i < c.runnable.size(); i = c.runnable.first_from(i + 1))
    if (prio_[i] > prio_[best]) best = i;
  return best;
}

// ---- replay ------------------------------------------------------------------------------

unsigned replay_strategy::pick_lane(const pick_context& c) {
  if (pos_ < d_.size()) {
    const std::uint32_t d = d_[pos_++];
    if (d == decision_stay && c.current_runnable) return c.current;
    if (d < c.runnable.size() && c.runnable.test(d)) return d;
  }
  return default_pick(c);
}

replay_strategy::replay_strategy(const std::vector<std::uint32_t>& d, const std::vector<std::uint8_t>& flags,
                                 const std::vector<std::uint32_t>& lanes)
    : per_lane_(true) {
  for (std::size_t i = 0; i < d.size(); ++i) {
    const bool data = i < flags.size() && (flags[i] & 4);
    if (!data) {
      d_.push_back(d[i]);
      continue;
    }
    const unsigned lane = i < lanes.size() ? lanes[i] : 0;
    if (lane >= data_.size()) data_.resize(lane + 1);
    data_[lane].push_back(d[i]);
  }
  data_pos_.assign(data_.size(), 0);
}

std::uint32_t replay_strategy::pick_value(std::uint32_t n, std::uint64_t, unsigned lane) {
  if (per_lane_) {
    if (lane < data_.size() && data_pos_[lane] < data_[lane].size()) {
      const std::uint32_t d = data_[lane][data_pos_[lane]++];
      if (d < n) return d;
    }
    return 0;
  }
  if (pos_ < d_.size()) {
    const std::uint32_t d = d_[pos_++];
    if (d < n) return d;
  }
  return 0;
}

anchored_strategy::anchored_strategy(const std::vector<std::pair<std::uint64_t, std::uint32_t>>& anchors,
                                     std::vector<std::vector<std::uint32_t>> data)
    : data_(std::move(data)), data_pos_(data_.size(), 0) {
  anchors_.reserve(anchors.size());
  for (const auto& [key, lane] : anchors) anchors_.emplace(key, lane);
}

unsigned anchored_strategy::pick_lane(const pick_context& c) {
  if (!anchors_.empty()) {
    const auto it = anchors_.find(c.anchor);
    if (it != anchors_.end() && it->second < c.runnable.size() && c.runnable.test(it->second)) return it->second;
  }
  return default_pick(c);
}

std::uint32_t anchored_strategy::pick_value(std::uint32_t n, std::uint64_t, unsigned lane) {
  if (lane < data_.size() && data_pos_[lane] < data_[lane].size()) {
    const std::uint32_t d = data_[lane][data_pos_[lane]++];
    if (d < n) return d;
  }
  return 0;
}

// ---- exhaustive (delay-bounded DFS) --------------------------------------------------------

std::uint32_t exhaustive_strategy::next_choice(std::uint32_t count) {
  // Alternatives beyond the first are deviations; none left in the budget: only the first.
  if (used_ >= bound_) count = 1;
  if (pos_ == stack_.size()) stack_.push_back({0, count});
  frame& f = stack_[pos_++];
  f.count = count;  // the same prefix gives the same count; keep it exact anyway
  if (f.choice >= count) f.choice = count - 1;
  if (f.choice != 0) ++used_;
  return f.choice;
}

unsigned exhaustive_strategy::pick_lane(const pick_context& c) {
  // Alternative 0 is the default policy's choice; then every other runnable lane ascending.
  const unsigned def = default_pick(c);
  if (c.step >= horizon_) return def;
  if (focused_) {
    if (!c.current_runnable || c.yield) return def;
    bool at = false;
    for (const auto& [file, line] : sites_) at |= file == c.site_file && line == c.site_line;
    if (!at) return def;
  }
  alts_.clear();
  alts_.push_back(def);
  for (unsigned i = c.runnable.first_from(0); i < c.runnable.size(); i = c.runnable.first_from(i + 1))
    if (i != def) alts_.push_back(i);
  return alts_[next_choice(static_cast<std::uint32_t>(alts_.size()))];
}

std::uint32_t exhaustive_strategy::pick_value(std::uint32_t n, std::uint64_t step, unsigned) {
  return step >= horizon_ ? 0 : next_choice(n);
}

bool exhaustive_strategy::advance() {
  stack_.resize(std::min(stack_.size(), pos_));
  while (!stack_.empty()) {
    frame& f = stack_.back();
    if (f.choice + 1 < f.count) {
      ++f.choice;
      return true;
    }
    stack_.pop_back();
  }
  return false;
}

// ---- guided ------------------------------------------------------------------------------

guided_strategy::guided_strategy(std::shared_ptr<const std::vector<std::string>> sites) {
  if (!sites) return;
  for (const std::string& s : *sites) {
    const std::size_t colon = s.rfind(':');
    if (colon == std::string::npos) continue;
    lines_[s.substr(0, colon)].push_back(static_cast<std::uint32_t>(std::stoul(s.substr(colon + 1))));
  }
}

bool guided_strategy::target(const char* file, std::uint32_t line) {
  if (file == nullptr || lines_.empty()) return false;
  auto it = files_.find(file);
  if (it == files_.end()) {
    // site_name() keeps the path from the last "core/", "sim/", "backends/" or "tests/": a
    // target matches the file whose name ends with it
    const std::vector<std::uint32_t>* found = nullptr;
    const std::string_view f(file);
    for (const auto& [suffix, v] : lines_)
      if (f.size() >= suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) found = &v;
    it = files_.emplace(file, found).first;
  }
  if (it->second == nullptr) return false;
  for (const std::uint32_t l : *it->second)
    if (l == line) return true;
  return false;
}

unsigned guided_strategy::pick_lane(const pick_context& c) {
  if (left_ > 0 && --left_ == 0) stalled_ = ~0u;
  if (stalled_ == ~0u && c.current < c.runnable.size() && c.current_runnable) {
    const bool at_target = target(c.site_file, c.site_line);
    if (rng_.below(at_target ? 4 : 64) == 0) {
      stalled_ = c.current;
      left_ = static_cast<unsigned>(1 + rng_.below(256));
    }
  }
  return pick_except(rng_, c.runnable, stalled_);
}

// ---- factory -----------------------------------------------------------------------------

strategy_config resolve_strategy(const strategy_config& cfg, std::uint64_t index) {
  strategy_config e = cfg;
  if (cfg.kind == strategy_kind::portfolio) {
    switch (index % 4) {
      case 0: e.kind = strategy_kind::random; break;
      case 1: e.kind = strategy_kind::pct; e.pct_depth = 2; break;
      case 2: e.kind = strategy_kind::pct; e.pct_depth = 3; break;
      default: e.kind = strategy_kind::stall; break;
    }
  }
  return e;
}

std::unique_ptr<strategy> make_strategy(const strategy_config& cfg, std::uint64_t index,
                                        strategy_config* effective) {
  const strategy_config e = resolve_strategy(cfg, index);
  if (effective) *effective = e;
  switch (e.kind) {
    case strategy_kind::random: return std::make_unique<random_strategy>();
    case strategy_kind::pct: return std::make_unique<pct_strategy>(e.pct_depth, e.pct_steps);
    case strategy_kind::replay: return std::make_unique<replay_strategy>(e.decisions);
    case strategy_kind::exhaustive: return std::make_unique<exhaustive_strategy>(e.bound);
    case strategy_kind::stall: return std::make_unique<stall_strategy>();
    case strategy_kind::guided: return std::make_unique<guided_strategy>(e.guided_sites);
    case strategy_kind::portfolio: break;
  }
  return std::make_unique<random_strategy>();
}

}  // namespace toga::sim
