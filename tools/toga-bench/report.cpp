// toga-bench output; see report.hpp.
#include "report.hpp"

#include <cmath>
#include <tuple>

namespace toga::bench {
namespace {

bool is_sim(const std::string& allocator) { return allocator.size() > 4 && allocator.ends_with("-sim"); }

// Rows compare when they measured the same thing: case, op, size, param (T4 puts its requested
// thread count in param, so a row whose count was cut for a slow allocator still compares).
using key = std::tuple<std::string, std::string, std::uint64_t, std::string>;
key key_of(const row& r) { return {r.case_id, r.op, r.size, r.param}; }

std::optional<double> ratio(const row& r, const row* ref) {
  if (!ref || r.ms.empty() || ref->ms.empty()) return std::nullopt;
  // A row with failed requests did less work than ops_per_rep says (a nullptr can be fast): no
  // throughput ratio for it or against it.
  if (r.failures > 0 || ref->failures > 0) return std::nullopt;
  const double a = r.ops_per_s(), b = ref->ops_per_s();
  if (r.ops_per_rep > 0 && ref->ops_per_rep > 0) {
    if (a <= 0 || b <= 0) return std::nullopt;
    return a / b;
  }
  const double ma = r.median_ms(), mb = ref->median_ms();
  if (ma <= 0 || mb <= 0) return std::nullopt;
  return mb / ma;  // same work: time ratio
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string sig(double v) {  // 3 significant figures, no exponent for the common range
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1000) return fixed(v, 0);
  if (a >= 100) return fixed(v, 1);
  if (a >= 10) return fixed(v, 2);
  if (a >= 1) return fixed(v, 2);
  if (a >= 0.01) return fixed(v, 3);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

}  // namespace

std::vector<report_row> with_ratios(const std::vector<row>& rows) {
  std::map<key, const row*> malloc_rows, bump_rows, bump_sim_rows;
  for (const auto& r : rows) {
    if (r.allocator == "cuda-malloc") malloc_rows[key_of(r)] = &r;
    if (r.allocator == floor_gpu) bump_rows[key_of(r)] = &r;
    if (r.allocator == floor_sim) bump_sim_rows[key_of(r)] = &r;
  }
  auto find = [](const std::map<key, const row*>& m, const row& r) -> const row* {
    auto it = m.find(key_of(r));
    return it == m.end() ? nullptr : it->second;
  };
  std::vector<report_row> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    report_row rr{r, std::nullopt, std::nullopt};
    if (is_sim(r.allocator)) {
      rr.ratio_bump = ratio(r, find(bump_sim_rows, r));
    } else {
      rr.ratio_malloc = ratio(r, find(malloc_rows, r));
      rr.ratio_bump = ratio(r, find(bump_rows, r));
    }
    out.push_back(std::move(rr));
  }
  return out;
}

void print_table(std::FILE* out, const std::vector<report_row>& rows) {
  std::fprintf(out, "%-13s %-4s %-8s %-9s %-14s %8s %11s %21s %11s %10s %11s %6s %7s  %s\n", "allocator", "case", "op",
               "size", "param", "threads", "median ms", "min..max ms", "M ops/s", "x malloc", "x bump-warp", "fail",
               "corrupt", "figures / note");
  std::string last_case;
  for (const auto& rr : rows) {
    const row& r = rr.r;
    if (!last_case.empty() && r.case_id != last_case) std::fprintf(out, "\n");
    last_case = r.case_id;
    std::string figs;
    for (const auto& [k, v] : r.metrics) figs += (figs.empty() ? "" : " ") + k + "=" + sig(v);
    if (!r.note.empty()) figs += (figs.empty() ? "" : "  ") + r.note;
    const bool timed = !r.ms.empty();
    std::fprintf(out, "%-13s %-4s %-8s %-9s %-14s %8llu %11s %21s %11s %10s %11s %6llu %7llu  %s\n", r.allocator.c_str(),
                 r.case_id.c_str(), r.op.c_str(), r.size ? format_bytes(r.size).c_str() : "-",
                 r.param.empty() ? "-" : r.param.c_str(), static_cast<unsigned long long>(r.threads),
                 timed ? sig(r.median_ms()).c_str() : "-",
                 timed ? (sig(r.min_ms()) + ".." + sig(r.max_ms())).c_str() : "-",
                 timed && r.ops_per_rep ? sig(r.ops_per_s() / 1e6).c_str() : "-",
                 rr.ratio_malloc ? (sig(*rr.ratio_malloc) + "x").c_str() : "-",
                 rr.ratio_bump ? (sig(*rr.ratio_bump) + "x").c_str() : "-",
                 static_cast<unsigned long long>(r.failures), static_cast<unsigned long long>(r.corrupt), figs.c_str());
  }
}

nlohmann::json to_json(const std::vector<report_row>& rows, const nlohmann::json& header) {
  nlohmann::json doc = header;
  doc["schema"] = "toga-bench/2";
  doc["references"] = {{"floor", floor_gpu}, {"floor_sim", floor_sim}, {"malloc", "cuda-malloc"}};
  auto& arr = doc["rows"] = nlohmann::json::array();
  for (const auto& rr : rows) {
    const row& r = rr.r;
    nlohmann::json j;
    j["allocator"] = r.allocator;
    j["case"] = r.case_id;
    j["op"] = r.op;
    j["param"] = r.param;
    j["size"] = r.size;
    j["threads"] = r.threads;
    j["ops_per_rep"] = r.ops_per_rep;
    j["ms"] = r.ms;
    j["median_ms"] = r.ms.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.median_ms());
    j["min_ms"] = r.ms.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.min_ms());
    j["max_ms"] = r.ms.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.max_ms());
    j["ops_per_s"] = r.ms.empty() || !r.ops_per_rep ? nlohmann::json(nullptr) : nlohmann::json(r.ops_per_s());
    j["ratio_cuda_malloc"] = rr.ratio_malloc ? nlohmann::json(*rr.ratio_malloc) : nlohmann::json(nullptr);
    j["ratio_bump"] = rr.ratio_bump ? nlohmann::json(*rr.ratio_bump) : nlohmann::json(nullptr);
    j["failures"] = r.failures;
    j["corrupt"] = r.corrupt;
    j["metrics"] = r.metrics;
    j["note"] = r.note;
    arr.push_back(std::move(j));
  }
  return doc;
}

}  // namespace toga::bench
