// Fuzz target for toga-bench's graph loader (tools/toga-bench/graph.hpp) and the T10/T11 plan.
// Compiled three times, with TOGA_FUZZ_FORMAT 0 (SNAP, ".txt"), 1 (Matrix Market, ".mtx") or
// 2 (gzip, ".mtx.gz": the driver feeds compressed, mutated-then-compressed and corrupted gzip).
//
// The oracle: load_graph either returns a graph that keeps every documented invariant (ids
// below nodes, u < v, sorted, no duplicates, counts within the limits) or throws graph_error
// whose message starts with the file name; make_graph_plan on a loaded graph either plans or
// throws std::invalid_argument, and its CSR holds exactly the graph's edges. Small limits keep
// every input cheap (a header may declare up to 2^16 vertices).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz_target.hpp"
#include "graph.hpp"
#include "graph_plan.hpp"

#ifndef TOGA_FUZZ_FORMAT
#error "TOGA_FUZZ_FORMAT must be 0 (SNAP), 1 (Matrix Market) or 2 (gzip)"
#endif

namespace {

constexpr const char* kExt[] = {".txt", ".mtx", ".mtx.gz"};
constexpr const char* kName[] = {"graph-snap", "graph-mtx", "graph-gzip"};

void check_graph(const toga::bench::graph& g, const toga::bench::graph_limits& lim) {
  using toga::fuzz::fuzz_fail;
  if (g.nodes > lim.max_vertices) fuzz_fail("nodes " + std::to_string(g.nodes) + " above the limit");
  if (g.edges.size() > lim.max_entries) fuzz_fail("more edges than entries allowed");
  for (std::size_t i = 0; i < g.edges.size(); ++i) {
    const auto [u, v] = g.edges[i];
    if (!(u < v && v < g.nodes)) fuzz_fail("edge (" + std::to_string(u) + ", " + std::to_string(v) + ") breaks u < v < nodes");
    if (i > 0 && !(g.edges[i - 1] < g.edges[i])) fuzz_fail("edges not strictly increasing at " + std::to_string(i));
  }
  const auto deg = toga::bench::degrees(g);
  std::uint64_t total = 0;
  for (auto d : deg) total += d;
  if (deg.size() != g.nodes || total != 2 * g.edges.size()) fuzz_fail("degrees do not add up");
  if (g.nodes < 2 || g.edges.empty()) return;
  try {
    const auto p = toga::bench::make_graph_plan(g, 2, 20, 7);
    if (p.vertices != g.nodes || p.adj.size() != 2 * g.edges.size() || p.offsets.size() != g.nodes + 1)
      fuzz_fail("the plan's CSR does not hold the graph");
    if (p.inserts.size() != 2 || p.deletes.size() != 2) fuzz_fail("the plan has the wrong number of rounds");
  } catch (const std::invalid_argument&) {
    // documented for graphs the plan cannot hold
  }
}

}  // namespace

const toga::fuzz::target_info& toga::fuzz::toga_fuzz_info() {
  static const target_info info{
      kName[TOGA_FUZZ_FORMAT],
      {"%%MatrixMarket", "matrix", "coordinate", "array", "pattern", "real", "integer", "complex", "general", "symmetric",
       "hermitian", "%", "#", "\n", "\r\n", "\r", "\t", " ", "0", "1", "2", "-1", "+1", "1.5", "1e999", "nan", "65536",
       "65537", "4294967295", "4294967296", "18446744073709551615", "18446744073709551616", "\xEF\xBB\xBF",
       "\x1f\x8b", "%%MatrixMarket matrix coordinate pattern symmetric\n", "%%MatrixMarket matrix coordinate real general\n"},
      TOGA_FUZZ_FORMAT == 2};
  return info;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = toga::fuzz::write_input(data, size, kExt[TOGA_FUZZ_FORMAT]);
  toga::bench::graph_limits lim;
  lim.max_bytes = std::uint64_t{1} << 20;
  lim.max_vertices = std::uint64_t{1} << 16;
  lim.max_entries = std::uint64_t{1} << 16;
  try {
    check_graph(toga::bench::load_graph(path, lim), lim);
  } catch (const toga::bench::graph_error& e) {
    const std::string m = e.what();
    if (m.rfind(path + ":", 0) != 0) toga::fuzz::fuzz_fail("graph_error without the file name: " + m);
    if (e.file() != path) toga::fuzz::fuzz_fail("graph_error::file() is not the path");
  }
  return 0;
}
