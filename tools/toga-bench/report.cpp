// toga-bench output; see report.hpp.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
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

std::optional<double> spread(const row& r) {
  if (r.case_id == "T9" || r.case_id == "T11") return std::nullopt;  // one entry per round
  if (r.ms.size() < 2) return std::nullopt;
  const double lo = r.min_ms(), hi = r.max_ms();
  if (lo <= 0) return std::nullopt;
  return hi / lo;
}

std::vector<report_row> with_ratios(const std::vector<row>& rows) {
  std::map<key, const row*> malloc_rows, bump_rows, bump_sim_rows, second_sim_rows;
  for (const auto& r : rows) {
    if (r.allocator == second_gpu) malloc_rows[key_of(r)] = &r;
    if (r.allocator == floor_gpu) bump_rows[key_of(r)] = &r;
    if (r.allocator == floor_sim) bump_sim_rows[key_of(r)] = &r;
    if (r.allocator == second_sim) second_sim_rows[key_of(r)] = &r;
  }
  auto find = [](const std::map<key, const row*>& m, const row& r) -> const row* {
    auto it = m.find(key_of(r));
    return it == m.end() ? nullptr : it->second;
  };
  std::vector<report_row> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    report_row rr{r, std::nullopt, std::nullopt, std::nullopt};
    if (r.op == "init") {
      // T12: the references' init only obtains the memory; see report.hpp.
    } else if (is_sim(r.allocator)) {
      rr.ratio_bump = ratio(r, find(bump_sim_rows, r));
      rr.ratio_second = ratio(r, find(second_sim_rows, r));
    } else {
      rr.ratio_malloc = ratio(r, find(malloc_rows, r));
      rr.ratio_bump = ratio(r, find(bump_rows, r));
      rr.ratio_second = rr.ratio_malloc;
    }
    out.push_back(std::move(rr));
  }
  return out;
}

namespace {

//! A ratio as "0.354x", "12.3x", "1/16181x" (below 0.01: how many times slower, no exponent).
std::string times(double v) {
  if (v <= 0) return "0x";
  if (v < 0.01) {
    const double inv = 1.0 / v;
    return "1/" + (inv < 1e6 ? fixed(inv, 0) : sig(inv)) + "x";
  }
  return sig(v) + "x";
}

//! A ratio in the summary, 2 significant digits: "12x", "1.5x", "0.16x", "0.016x", "1/160x".
std::string times2(double v) {
  if (v <= 0) return "0x";
  if (v < 0.01) return "1/" + fixed(1.0 / v, 0) + "x";
  return fixed(v, v >= 10 ? 0 : v >= 1 ? 1 : v >= 0.1 ? 2 : 3) + "x";
}

//! A time: "370 ms", "12.5 ms", "0.52 ms", "7.7 us".
std::string duration(double ms) {
  if (ms >= 100) return fixed(ms, 0) + " ms";
  if (ms >= 10) return fixed(ms, 1) + " ms";
  if (ms >= 0.1) return fixed(ms, 2) + " ms";
  const double us = ms * 1000;
  return fixed(us, us >= 10 ? 0 : 1) + " us";
}

std::string spread_cell(const row& r) {
  const auto s = spread(r);
  if (!s) return "-";
  const std::string v = *s >= 1000 ? ">999x" : *s >= 10 ? fixed(*s, 0) + "x" : fixed(*s, 1) + "x";
  return *s > noisy_spread ? v + "!" : v;
}

//! Splits `text` at blanks into lines: the first at most `first` characters, the others at most
//! `rest` (a word longer than a line is cut).
std::vector<std::string> wrap(const std::string& text, std::size_t first, std::size_t rest) {
  std::vector<std::string> lines(1);
  std::size_t width = first;
  std::stringstream ss(text);
  std::string word;
  while (ss >> word) {
    std::string& cur = lines.back();
    if (cur.size() + (cur.empty() ? 0 : 1) + word.size() <= width) {
      cur += (cur.empty() ? "" : " ") + word;
      continue;
    }
    if (!cur.empty() || lines.size() == 1) {
      lines.emplace_back();
      width = rest;
    }
    while (word.size() > width) {
      lines.back() = word.substr(0, width);
      word.erase(0, width);
      lines.emplace_back();
    }
    lines.back() = word;
  }
  return lines;
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

}  // namespace

void print_table(std::FILE* out, const std::vector<report_row>& rows) {
  bool gpu = false, sim = false;
  for (const auto& rr : rows) (is_sim(rr.r.allocator) ? sim : gpu) = true;
  const std::string second = gpu && sim ? "x malloc|bump-sim" : sim ? std::string("x ") + second_sim : "x malloc";
  std::fprintf(out, "x floor: throughput / %s's (a warp-aggregated bump, no free); %s: / %s's%s%s\n"
                    "median: ms; spread: slowest / fastest repetition (!: over %.0fx); min..max, every repetition: JSON\n",
               gpu && sim ? "bump-warp's or bump-warp-sim" : sim ? floor_sim : floor_gpu, second.c_str(),
               gpu ? second_gpu : second_sim, gpu && sim ? " or " : "", gpu && sim ? second_sim : "", noisy_spread);
  if (sim) std::fprintf(out, "steps/op: the JSON's sim_steps_per_op (simulated steps per operation)\n");
  struct column {
    std::string head;
    bool right;
    std::size_t width = 0;
  };
  std::vector<column> cols = {{"allocator", false}, {"case", false},   {"op", false},    {"size", false},
                              {"threads", true},    {"median", true}, {"spread", true}, {"M ops/s", true},
                              {second, true},       {"x floor", true}, {"fail", true},   {"corr", true}};
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> tails;
  cells.reserve(rows.size());
  for (const auto& rr : rows) {
    const row& r = rr.r;
    const bool timed = !r.ms.empty();
    cells.push_back({r.allocator, r.case_id, r.op, r.size ? format_bytes(r.size) : "-", r.threads ? std::to_string(r.threads) : "-",
                     timed ? sig(r.median_ms()) : "-", spread_cell(r), timed && r.ops_per_rep ? sig(r.ops_per_s() / 1e6) : "-",
                     rr.ratio_second ? times(*rr.ratio_second) : "-", rr.ratio_bump ? times(*rr.ratio_bump) : "-",
                     std::to_string(r.failures), std::to_string(r.corrupt)});
    // param without a "threads=N" that the threads column already shows (T4 keys its rows by the
    // requested count); metrics under shorter names where the JSON's are long
    std::string tail;
    {
      std::stringstream ps(r.param);
      for (std::string w; ps >> w;)
        if (w != "threads=" + std::to_string(r.threads)) tail += (tail.empty() ? "" : " ") + w;
    }
    std::string figs;
    for (const auto& [k, v] : r.metrics) figs += (figs.empty() ? "" : " ") + (k == "sim_steps_per_op" ? "steps/op" : k) + "=" + sig(v);
    if (!figs.empty()) tail += (tail.empty() ? "" : "  ") + figs;
    if (!r.note.empty()) tail += (tail.empty() ? "" : "  ") + r.note;
    tails.push_back(tail);
  }
  for (std::size_t c = 0; c < cols.size(); ++c) {
    cols[c].width = cols[c].head.size();
    for (const auto& line : cells) cols[c].width = std::max(cols[c].width, line[c].size());
  }
  auto fixed_part = [&](const std::vector<std::string>& line) {
    std::string s;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (c) s += ' ';
      s += pad(line[c], cols[c].width, cols[c].right);
    }
    return s;
  };
  std::vector<std::string> head;
  for (const auto& c : cols) head.push_back(c.head);
  std::string h = fixed_part(head) + "  param / figures / note";
  if (h.size() > table_columns) h = fixed_part(head);
  std::fprintf(out, "%s\n", h.c_str());
  constexpr std::size_t indent = 8;
  std::string last_case;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i].r;
    if (!last_case.empty() && r.case_id != last_case) std::fprintf(out, "\n");
    last_case = r.case_id;
    std::string line = fixed_part(cells[i]);
    const std::size_t room = line.size() + 2 < table_columns ? table_columns - line.size() - 2 : 0;
    // The tail on the row when it fits (or when a third of it would); else on indented lines.
    std::vector<std::string> parts = wrap(tails[i], tails[i].size() <= room || room >= 24 ? room : 0, table_columns - indent);
    if (!parts.front().empty()) line += "  " + parts.front();
    std::fprintf(out, "%s\n", line.c_str());
    for (std::size_t p = 1; p < parts.size(); ++p)
      if (!parts[p].empty()) std::fprintf(out, "%s%s\n", std::string(indent, ' ').c_str(), parts[p].c_str());
  }
}

// ---- the summary ---------------------------------------------------------------------------------

namespace {

std::string short_name(const std::string& id) {
  static const std::map<std::string, std::string> names = {
      {"T1", "alloc/free"},    {"T2", "one per warp"},  {"T3", "mixed sizes"},    {"T4", "scaling"},
      {"T5", "churn"},         {"T6", "warp API"},      {"T7", "large blocks"},   {"T8", "out of memory"},
      {"T9", "fragmentation"}, {"T10", "graph build"},  {"T11", "graph updates"}, {"T12", "init"},
      {"T13", "registers"},    {"T14", "edges"}};
  if (auto it = names.find(id); it != names.end()) return it->second;
  for (const auto& c : all_cases())
    if (c.id == id) return c.name.substr(0, 13);
  return "";
}

//! 1048576 -> "1M", 262144 -> "256K", 1000 -> "1000".
std::string count(std::uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= (1u << 10) && n % (1u << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::optional<double> geomean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

bool measured(const row& r) { return !r.ms.empty() || !r.metrics.empty(); }

std::string percent(double v) { return fixed(100 * v, v >= 0.995 ? 0 : 1) + " %"; }

//! What a point is: "8 KiB", "hi=4096", "facebook_combined" (size and param, the op when asked).
std::string point(const row& r, bool with_op) {
  std::string s = with_op ? r.op : "";
  if (r.size) s += (s.empty() ? "" : " ") + format_bytes(r.size);
  if (!r.param.empty()) s += (s.empty() ? "" : " ") + r.param;
  return s.empty() ? r.op : s;
}

struct backend_refs {
  bool sim;
  std::string toga, floor, second, floor_short, second_short;
};

backend_refs refs_for(const std::string& toga) {
  const bool sim = is_sim(toga);
  return sim ? backend_refs{true, toga, floor_sim, second_sim, "floor", "bump-sim"}
             : backend_refs{false, toga, floor_gpu, second_gpu, "floor", "malloc"};
}

//! The candidate texts of a case's figure, most informative first; the printer takes the first
//! that fits.
using figure_texts = std::vector<std::string>;

//! "<what>: 0.21x floor, 12.3x malloc" and shorter forms (each of `whats`, longest first, with both
//! ratios; then with the floor's alone).
figure_texts ratio_texts(const std::vector<std::string>& whats, const report_row& w, const backend_refs& b) {
  const std::string f = w.ratio_bump ? times2(*w.ratio_bump) + " " + b.floor_short : "";
  const std::string m = w.ratio_second ? times2(*w.ratio_second) + " " + b.second_short : "";
  figure_texts t;
  if (!f.empty() && !m.empty())
    for (const auto& what : whats) t.push_back(what + ": " + f + ", " + m);
  if (!f.empty())
    for (const auto& what : whats) t.push_back(what + ": " + f);
  return t;
}

//! The row of `mine` with the largest value of metric `key` (nullptr when none has it).
const report_row* max_metric(const std::vector<const report_row*>& mine, const std::string& key) {
  const report_row* w = nullptr;
  for (const report_row* rr : mine)
    if (rr->r.metrics.count(key) && (!w || rr->r.metrics.at(key) > w->r.metrics.at(key))) w = rr;
  return w;
}
//! The toga row of `mine` (passing `keep`) with the lowest ratio to the floor.
const report_row* worst_ratio(const std::vector<const report_row*>& mine, const std::function<bool(const report_row&)>& keep) {
  const report_row* w = nullptr;
  for (const report_row* rr : mine)
    if (rr->ratio_bump && keep(*rr) && (!w || *rr->ratio_bump < *w->ratio_bump)) w = rr;
  return w;
}

const report_row* same_point(const std::vector<const report_row*>& rows, const std::string& allocator, const row& r) {
  for (const report_row* rr : rows)
    if (rr->r.allocator == allocator && key_of(rr->r) == key_of(r)) return rr;
  return nullptr;
}

figure_texts case_figure(const std::string& id, const std::vector<const report_row*>& mine,
                         const std::vector<const report_row*>& all, const backend_refs& b) {
  auto op_is = [](std::vector<std::string> ops) {
    return [ops](const report_row& rr) { return std::find(ops.begin(), ops.end(), rr.r.op) != ops.end(); };
  };
  figure_texts t;
  if (id == "T1" || id == "T4" || id == "T6") {
    // alloc at the largest thread count, the worst size
    std::uint64_t most = 0;
    for (const report_row* rr : mine)
      if (rr->r.op == "alloc" && rr->ratio_bump) most = std::max(most, rr->r.threads);
    if (const report_row* w = worst_ratio(mine, [&](const report_row& rr) { return rr.r.op == "alloc" && rr.r.threads == most; })) {
      const std::string sz = w->r.size ? format_bytes(w->r.size) : point(w->r, false);
      t = ratio_texts({"alloc at " + count(most) + " threads, worst " + sz, "alloc " + count(most) + " thr, worst " + sz,
                       "worst alloc " + count(most) + " x " + sz}, *w, b);
    }
  } else if (id == "T2" || id == "T3" || id == "T7" || id == "T10" || id == "T11") {
    const auto keep = id == "T10" ? op_is({"build"}) : id == "T11" ? op_is({"insert", "delete"}) : op_is({"alloc"});
    if (const report_row* w = worst_ratio(mine, keep)) {
      const bool with_op = id == "T11";
      const std::string p = point(w->r, with_op);
      t = ratio_texts({std::string(id == "T10" || id == "T11" ? "" : "alloc, ") + "worst " + p, "worst " + p.substr(0, 24)}, *w, b);
    }
  } else if (id == "T5") {
    if (const report_row* w = worst_ratio(mine, op_is({"churn"}))) {
      const std::string what = "churn, worst " + point(w->r, false) + ": " + sig(w->r.ops_per_s() / 1e6) + " M pairs/s";
      const std::string f = times2(*w->ratio_bump) + " " + b.floor_short;
      if (w->ratio_second) t.push_back(what + ", " + f + ", " + times2(*w->ratio_second) + " " + b.second_short);
      t.push_back(what + ", " + f);
      t.push_back(what);
    }
  } else if (id == "T8") {
    const report_row* w = nullptr;
    for (const report_row* rr : mine)
      if (rr->r.metrics.count("utilisation") && (!w || rr->r.metrics.at("utilisation") < w->r.metrics.at("utilisation"))) w = rr;
    if (w) {
      const std::string what = "utilisation, worst " + point(w->r, false) + ": " + percent(w->r.metrics.at("utilisation"));
      auto util = [&](const std::string& ref, const std::string& label) -> std::string {
        const report_row* o = same_point(all, ref, w->r);
        return o && o->r.metrics.count("utilisation") ? label + " " + percent(o->r.metrics.at("utilisation")) : "";
      };
      const std::string f = util(b.floor, b.floor_short), m = util(b.second, b.second_short);
      if (!f.empty() && !m.empty()) t.push_back(what + " (" + m + ", " + f + ")");
      if (!m.empty()) t.push_back(what + " (" + m + ")");
      if (!f.empty()) t.push_back(what + " (" + f + ")");
      t.push_back(what);
    }
  } else if (id == "T9") {
    const report_row* w = max_metric(mine, "range_ratio");
    if (w) {
      const std::string v = sig(w->r.metrics.at("range_ratio"));
      t.push_back("address range / live bytes, worst " + point(w->r, false) + ": " + v + " (1: none lost)");
      t.push_back("address range / live bytes, worst " + point(w->r, false) + ": " + v);
      t.push_back("range_ratio, worst " + point(w->r, false) + ": " + v);
    }
  } else if (id == "T12") {
    for (const report_row* rr : mine) {
      if (rr->r.op != "init" || rr->r.ms.empty()) continue;
      std::string heap = rr->r.param;
      if (heap.rfind("heap=", 0) == 0) heap.erase(0, 5);
      const std::string what = "init " + (heap.empty() ? std::string("heap") : heap + " heap") + ": " + duration(rr->r.median_ms());
      const report_row* f = same_point(all, b.floor, rr->r);
      if (f && !f->r.ms.empty()) {
        t.push_back(what + "; the floor's (memory only): " + duration(f->r.median_ms()));
        t.push_back(what + "; floor (memory only) " + duration(f->r.median_ms()));
        t.push_back(what + "; floor " + duration(f->r.median_ms()));
      }
      t.push_back(what);
      break;
    }
  } else if (id == "T13") {
    // "alloc 64, free 48" and the compact "alloc/free" + "64/48"
    struct regs_text {
      std::string full, labels, values;
    };
    auto regs = [](const std::vector<const report_row*>& rows, const std::string& allocator) {
      regs_text t;
      for (const report_row* rr : rows)
        if (rr->r.allocator == allocator && rr->r.metrics.count("registers")) {
          const std::string label = rr->r.op + (rr->r.param.empty() ? "" : " " + rr->r.param);
          const std::string v = fixed(rr->r.metrics.at("registers"), 0);
          t.full += (t.full.empty() ? "" : ", ") + label + " " + v;
          t.labels += (t.labels.empty() ? "" : "/") + label;
          t.values += (t.values.empty() ? "" : "/") + v;
        }
      return t;
    };
    const regs_text me = regs(mine, b.toga);
    if (!me.full.empty()) {
      const regs_text other = regs(all, b.second);
      if (!other.full.empty()) {
        t.push_back("registers: " + me.full + " (" + b.second_short + ": " + other.full + ")");
        t.push_back("registers " + me.labels + ": " + me.values + " (" + b.second_short + " " + other.labels + ": " +
                    other.values + ")");
        t.push_back("registers " + me.labels + ": " + me.values + " (" + b.second_short + " " + other.values + ")");
      }
      t.push_back("registers: " + me.full);
    }
  } else if (id == "T14") {
    const report_row* w = max_metric(mine, "x_ref");
    if (w) {
      const std::string v = times2(w->r.metrics.at("x_ref"));
      t.push_back("worst " + point(w->r, true) + ": " + v + " its reference's time");
      t.push_back("worst " + w->r.op + " " + (w->r.size ? format_bytes(w->r.size) : "") + ": " + v + " its reference's time");
      t.push_back("worst " + w->r.op + ": " + v + " ref time");
    }
  }
  if (t.empty()) {  // a case without its own figure: the worst point against the floor
    if (const report_row* w = worst_ratio(mine, [](const report_row&) { return true; })) {
      t = ratio_texts({"worst " + point(w->r, true), "worst " + point(w->r, true).substr(0, 24)}, *w, b);
    } else {
      for (const report_row* rr : mine)
        if (!rr->r.ms.empty()) {
          t.push_back(point(rr->r, true) + ": " + sig(rr->r.median_ms()) + " ms");
          break;
        }
    }
  }
  return t;
}

//! `s` without its parenthesised asides: "the edges (full, ...) are GPU figures" -> "the edges
//! are GPU figures" (a shorter form of a note).
std::string without_asides(const std::string& s) {
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (depth == 0) out += c;
    if (c == ')' && depth > 0) --depth;
  }
  std::string squeezed;
  for (char c : out)
    if (!(c == ' ' && (squeezed.empty() || squeezed.back() == ' '))) squeezed += c;
  for (const char* p : {" :", " ;", " ,"})
    for (std::size_t i; (i = squeezed.find(p)) != std::string::npos;) squeezed.erase(i, 1);
  while (!squeezed.empty() && squeezed.back() == ' ') squeezed.pop_back();
  return squeezed;
}

std::string first_fitting(const figure_texts& t, std::size_t room) {
  for (const auto& s : t)
    if (s.size() <= room) return s;
  if (t.empty()) return "";
  std::string s = t.back();
  if (s.size() > room) s = room > 3 ? s.substr(0, room - 3) + "..." : s.substr(0, room);
  return s;
}

// Column widths of the summary (the figure takes what is left of summary_columns).
constexpr std::size_t w_case = 4, w_name = 13, w_result = 6;

std::size_t ratio_width(const std::string& ref) { return std::max<std::size_t>(7, 2 + ref.size()); }

std::size_t figure_room(const backend_refs& b) {
  const std::size_t wf = ratio_width(b.floor_short), ws = ratio_width(b.second_short);
  return summary_columns - (w_case + 1 + w_name + 1 + wf + 1 + ws + 1 + w_result + 1);
}

}  // namespace

std::vector<case_summary> summarise(const std::vector<report_row>& rows, const std::string& toga,
                                    const std::vector<std::string>& cases, const std::vector<case_error>& errors) {
  const backend_refs b = refs_for(toga);
  const std::string backend = b.sim ? "sim" : "gpu";
  const std::size_t room = figure_room(b);
  std::vector<case_summary> out;
  for (const std::string& c : cases) {
    case_summary s;
    s.case_id = c;
    s.name = short_name(c);
    std::vector<const report_row*> all, mine;
    for (const auto& rr : rows) {
      if (rr.r.case_id != c || is_sim(rr.r.allocator) != b.sim) continue;
      all.push_back(&rr);
      if (rr.r.allocator == toga) mine.push_back(&rr);
    }
    std::vector<double> xf, xs;
    std::uint64_t failures = 0, corrupt = 0;
    const report_row* failed = nullptr;
    for (const report_row* rr : mine) {
      if (rr->ratio_bump && *rr->ratio_bump > 0) xf.push_back(*rr->ratio_bump);
      if (rr->ratio_second && *rr->ratio_second > 0) xs.push_back(*rr->ratio_second);
      failures += rr->r.failures;
      if (rr->r.failures && (!failed || rr->r.failures > failed->r.failures)) failed = rr;
    }
    s.x_floor = geomean(xf);
    s.x_second = geomean(xs);
    std::string corrupt_who;
    bool any_measured = false;
    for (const report_row* rr : all) {
      corrupt += rr->r.corrupt;
      if (rr->r.corrupt && corrupt_who.find(rr->r.allocator) == std::string::npos)
        corrupt_who += (corrupt_who.empty() ? "" : ", ") + rr->r.allocator;
      if (const auto sp = spread(rr->r); sp && *sp > noisy_spread) s.noisy = true;
      any_measured = any_measured || measured(rr->r);
    }
    // toga's point not measured where a reference measured the same point
    const report_row* unrun = nullptr;
    for (const report_row* rr : mine) {
      if (measured(rr->r)) continue;
      for (const report_row* o : all)
        if (o->r.allocator != toga && key_of(o->r) == key_of(rr->r) && measured(o->r)) {
          unrun = rr;
          break;
        }
      if (unrun) break;
    }
    const case_error* err = nullptr;
    for (const auto& e : errors)
      if (e.case_id == c && e.backend == backend) {
        err = &e;
        break;
      }
    if (err) {
      s.result = "FAIL";
      s.figure = first_fitting({"did not run: " + err->what}, room);
    } else if (corrupt) {
      s.result = "FAIL";
      s.figure = first_fitting({std::to_string(corrupt) + " corrupt or overlapping blocks (" + corrupt_who + ")",
                                std::to_string(corrupt) + " corrupt blocks"}, room);
    } else if (failures) {
      s.result = "FAIL";
      s.figure = first_fitting({std::to_string(failures) + " nullptrs where memory was available (worst " +
                                    point(failed->r, true) + ")",
                                std::to_string(failures) + " nullptrs where memory was available"}, room);
    } else if (mine.empty()) {
      s.result = "FAIL";
      s.figure = first_fitting({toga + " has no row in this case"}, room);
    } else if (unrun) {
      s.result = "FAIL";
      s.figure = first_fitting({toga + " did not run " + point(unrun->r, true) + ": " + unrun->r.note,
                                toga + " did not run " + point(unrun->r, true) + ": " + without_asides(unrun->r.note),
                                toga + " did not run " + point(unrun->r, true)}, room);
    } else if (!any_measured) {
      s.result = "-";
      std::string why = mine.front()->r.note.empty() ? "nothing measured here" : mine.front()->r.note;
      s.figure = first_fitting({why, without_asides(why)}, room);
    } else {
      s.result = "pass";
      s.figure = first_fitting(case_figure(c, mine, all, b), room);
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {
std::vector<std::string> toga_allocators(const std::vector<report_row>& rows) {
  std::vector<std::string> out;
  for (const char* t : {"toga", "toga-sim"})
    if (std::any_of(rows.begin(), rows.end(), [&](const report_row& rr) { return rr.r.allocator == t; })) out.push_back(t);
  return out;
}
}  // namespace

unsigned print_summary(std::FILE* out, const std::vector<report_row>& rows, const std::vector<std::string>& cases,
                       const std::vector<case_error>& errors) {
  unsigned fails = 0;
  const auto togas = toga_allocators(rows);
  if (togas.empty()) {
    std::fprintf(out, "Summary: no toga or toga-sim rows (run with --allocators toga or toga-sim for one)\n");
    return 0;
  }
  for (const std::string& toga : togas) {
    const backend_refs b = refs_for(toga);
    const auto sum = summarise(rows, toga, cases, errors);
    if (b.sim) {
      std::fprintf(out, "Summary of toga-sim (toga in the fiber simulator). Simulator figures are host time, for\n"
                        "trends only (GPU figures need a GPU). floor: %s, a warp-aggregated bump that never\n"
                        "frees; bump-sim: one atomic per thread. Both ran in this run.\n", b.floor.c_str());
    } else {
      std::fprintf(out, "Summary of toga on the GPU. floor: %s, a warp-aggregated bump that never frees;\n"
                        "malloc: %s (the device heap of CUDA). Both ran in this run.\n", b.floor.c_str(), b.second.c_str());
    }
    const std::size_t wf = ratio_width(b.floor_short), ws = ratio_width(b.second_short);
    std::fprintf(out, "%-*s %-*s %*s %*s %-*s %s\n", int(w_case), "case", int(w_name), "what", int(wf), ("x " + b.floor_short).c_str(),
                 int(ws), ("x " + b.second_short).c_str(), int(w_result), "result", "the figure that matters");
    std::string failed;
    unsigned passed = 0;
    for (const auto& s : sum) {
      std::string res = s.result + (s.noisy ? " !" : "");
      std::fprintf(out, "%-*s %-*s %*s %*s %-*s %s\n", int(w_case), s.case_id.c_str(), int(w_name), s.name.c_str(), int(wf),
                   s.x_floor ? times2(*s.x_floor).c_str() : "-", int(ws), s.x_second ? times2(*s.x_second).c_str() : "-",
                   int(w_result), res.c_str(), s.figure.c_str());
      if (s.result == "FAIL") {
        ++fails;
        failed += (failed.empty() ? "" : ", ") + s.case_id;
      }
      if (s.result == "pass") ++passed;
    }
    std::fprintf(out, "x REF: %s's throughput / REF's, geometric mean over the case's points (>1: faster; -: none)\n",
                 toga.c_str());
    std::fprintf(out, "FAIL: nullptrs where memory was available, a corrupt block, a case or point toga did not run\n");
    std::fprintf(out, "!: a row of the case spread over %.0fx between its fastest and slowest repetition (noisy:\n"
                      "   more --reps, or a quieter machine)\n", noisy_spread);
    const std::size_t none = sum.size() - passed - fails;
    std::fprintf(out, "%u pass, %u FAIL%s%s%s", passed, fails, fails ? " (" : "", failed.c_str(), fails ? ")" : "");
    if (none) std::fprintf(out, ", %zu not measured on this backend (-)", none);
    std::fprintf(out, "\n");
  }
  return fails;
}

nlohmann::json summary_json(const std::vector<report_row>& rows, const std::vector<std::string>& cases,
                            const std::vector<case_error>& errors) {
  auto arr = nlohmann::json::array();
  for (const std::string& toga : toga_allocators(rows)) {
    const backend_refs b = refs_for(toga);
    for (const auto& s : summarise(rows, toga, cases, errors)) {
      arr.push_back({{"case", s.case_id}, {"name", s.name}, {"allocator", toga}, {"result", s.result},
                     {"floor", b.floor}, {"second", b.second},
                     {"x_floor", s.x_floor ? nlohmann::json(*s.x_floor) : nlohmann::json(nullptr)},
                     {"x_second", s.x_second ? nlohmann::json(*s.x_second) : nlohmann::json(nullptr)},
                     {"noisy", s.noisy}, {"figure", s.figure}});
    }
  }
  return arr;
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
