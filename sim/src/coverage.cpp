// Coverage of the core's races: ordered site pairs per location (toga/sim/coverage.hpp).
#include "toga/sim/coverage.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <string_view>

namespace toga::sim {

thread_local coverage_recorder* coverage_recorder::current_ = nullptr;

std::size_t coverage_site_hash::operator()(const coverage_site& s) const {
  return std::hash<std::string_view>{}(s.file) * 31u + s.line;
}
std::size_t coverage_pair_hash::operator()(const coverage_pair& p) const {
  const coverage_site_hash h;
  return h(p.first) * 1000003u ^ h(p.second);
}

void coverage_recorder::begin_schedule() {
  locations_.clear();
  std::fill(lane_ops_.begin(), lane_ops_.end(), 0);
}

void coverage_recorder::access(const void* location, bool write, const std::source_location& where, unsigned lane) {
  const coverage_site site{where.file_name(), where.line()};
  ++sites_[site];
  if (lane >= lane_ops_.size()) lane_ops_.resize(lane + 1, 0);
  const std::uint64_t op = ++lane_ops_[lane];
  auto& seen = locations_[location];
  last_access* mine = nullptr;
  for (auto& r : seen) {
    if (r.lane == lane) {
      mine = &r;
      continue;
    }
    if (!write && !r.write) continue;
    pair_count& c = pairs_[coverage_pair{r.site, site}];
    ++c.seen;
    if (lane_ops_[r.lane] == r.op) ++c.adjacent;  // that lane has done nothing since: preempted right after it
  }
  if (mine) *mine = last_access{lane, site, write, op};
  else seen.push_back(last_access{lane, site, write, op});
}

void coverage_recorder::merge(const coverage_recorder& o) {
  for (const auto& [k, v] : o.pairs_) {
    pair_count& c = pairs_[k];
    c.seen += v.seen;
    c.adjacent += v.adjacent;
  }
  for (const auto& [k, v] : o.sites_) sites_[k] += v;
}

std::string site_name(const coverage_site& s) {
  std::string_view f = s.file;
  std::size_t at = std::string_view::npos;
  for (std::string_view root : {"core/", "sim/", "backends/", "tests/"}) {
    const std::size_t k = f.rfind(root);
    if (k != std::string_view::npos && (at == std::string_view::npos || k < at)) at = k;
  }
  if (at == std::string_view::npos) {
    const std::size_t slash = f.rfind('/');
    at = slash == std::string_view::npos ? 0 : slash + 1;
  }
  return std::string(f.substr(at)) + ":" + std::to_string(s.line);
}

bool core_site(const coverage_site& s) { return std::string_view(s.file).find("core/include/toga/") != std::string_view::npos; }

coverage_summary summarize(const coverage_recorder& r) {
  coverage_summary out;
  for (const auto& [s, n] : r.sites())
    if (n && core_site(s)) ++out.core_sites;
  // every unordered pair of core sites once, keyed by names (stable order for the report)
  std::map<std::pair<std::string, std::string>, std::pair<const coverage_pair*, const coverage_pair*>> unordered;
  for (const auto& [p, c] : r.pairs()) {
    if (!c.seen || !core_site(p.first) || !core_site(p.second)) continue;
    const std::string a = site_name(p.first), b = site_name(p.second);
    auto& slot = unordered[a <= b ? std::make_pair(a, b) : std::make_pair(b, a)];
    (a <= b ? slot.first : slot.second) = &p;
  }
  const auto count = [&](const coverage_pair* p) { return p ? r.pairs().at(*p) : coverage_recorder::pair_count{}; };
  for (const auto& [names, ps] : unordered) {
    ++out.unordered_pairs;
    const bool same = names.first == names.second;
    const auto x = count(ps.first), y = count(ps.second);
    if (same || (x.seen && y.seen)) {
      ++out.both_orders;
      if (same ? (x.adjacent || y.adjacent) : (x.adjacent && y.adjacent)) ++out.adjacent_both;
    } else {
      const coverage_pair* p = ps.first ? ps.first : ps.second;
      out.one_order.emplace_back(*p, (ps.first ? x : y).seen);
    }
  }
  std::stable_sort(out.one_order.begin(), out.one_order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace toga::sim
