// toga-bench's host logic: the T10/T11 workload plan (its bookkeeping is what the GPU and simulator
// runs are verified against) and the report (ratios to the references, bytes, JSON fields).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "graph_plan.hpp"
#include "report.hpp"

namespace toga::bench {
namespace {

graph small_graph() {
  graph g;
  g.name = "small";
  g.nodes = 50;
  for (std::uint32_t u = 0; u < 50; ++u)
    for (std::uint32_t v = u + 1; v < 50; v += 1 + u % 7) g.edges.emplace_back(u, v);
  return g;
}

TEST(CapacityBytes, PowerOfTwoAtLeastSixteen) {
  EXPECT_EQ(capacity_bytes(0), 16u);
  EXPECT_EQ(capacity_bytes(4), 16u);
  EXPECT_EQ(capacity_bytes(5), 32u);
  EXPECT_EQ(capacity_bytes(8), 32u);
  EXPECT_EQ(capacity_bytes(9), 64u);
  EXPECT_EQ(capacity_bytes(1000), 4096u);
}

// Replays the plan on plain multisets: the per-vertex digests and degrees the plan promises must be
// what applying its batches gives, deletions must restore the input, and the byte figures must
// match the capacities.
TEST(GraphPlan, BatchesReproduceTheDigestsAndRestoreTheGraph) {
  const graph g = small_graph();
  const graph_plan p = make_graph_plan(g, 7, 300, 42);
  ASSERT_EQ(p.vertices, 50u);
  ASSERT_EQ(p.offsets.size(), 51u);
  ASSERT_EQ(p.adj.size(), 2 * g.edges.size());
  ASSERT_EQ(p.inserts.size(), 7u);
  ASSERT_EQ(p.deletes.size(), 7u);
  std::vector<std::multiset<std::uint32_t>> adj(p.vertices);
  for (std::uint32_t v = 0; v < p.vertices; ++v) adj[v].insert(p.adj.begin() + p.offsets[v], p.adj.begin() + p.offsets[v + 1]);
  auto digests = [&] {
    std::vector<std::uint64_t> d(p.vertices, 0);
    for (std::uint32_t v = 0; v < p.vertices; ++v)
      for (auto n : adj[v]) d[v] += neighbour_digest(n);
    return d;
  };
  const auto initial_sets = adj;
  EXPECT_EQ(digests(), p.digest_initial);
  std::uint64_t bytes = 0, peak = 0;
  for (const auto& s : adj) bytes += capacity_bytes(s.size());
  EXPECT_EQ(bytes, p.initial_bytes);
  peak = bytes;
  for (const auto& b : p.inserts) {
    EXPECT_EQ(b.edges, 300u);
    EXPECT_EQ(b.nbr.size(), 600u);
    ASSERT_EQ(b.offsets.size(), b.vertex.size() + 1);
    EXPECT_TRUE(std::is_sorted(b.vertex.begin(), b.vertex.end()));
    EXPECT_EQ(std::adjacent_find(b.vertex.begin(), b.vertex.end()), b.vertex.end()) << "one item per vertex";
    for (std::size_t i = 0; i < b.vertex.size(); ++i)
      for (auto j = b.offsets[i]; j < b.offsets[i + 1]; ++j) {
        EXPECT_NE(b.nbr[j], b.vertex[i]) << "no self-loops";
        adj[b.vertex[i]].insert(b.nbr[j]);
      }
    bytes = 0;
    for (const auto& s : adj) bytes += capacity_bytes(s.size());
    peak = std::max(peak, bytes);
  }
  EXPECT_EQ(digests(), p.digest_peak);
  for (std::uint32_t v = 0; v < p.vertices; ++v) EXPECT_EQ(adj[v].size(), p.degree_peak[v]);
  EXPECT_EQ(peak, p.peak_bytes);
  EXPECT_GT(p.peak_bytes, p.initial_bytes);
  for (const auto& b : p.deletes)
    for (std::size_t i = 0; i < b.vertex.size(); ++i)
      for (auto j = b.offsets[i]; j < b.offsets[i + 1]; ++j) {
        auto it = adj[b.vertex[i]].find(b.nbr[j]);
        ASSERT_NE(it, adj[b.vertex[i]].end()) << "a deletion removes a neighbour that is there";
        adj[b.vertex[i]].erase(it);
      }
  EXPECT_EQ(adj, initial_sets);
  EXPECT_GT(p.reallocations, 0u);
}

TEST(GraphPlan, DeterministicInTheSeed) {
  const graph g = small_graph();
  const auto a = make_graph_plan(g, 3, 100, 7), b = make_graph_plan(g, 3, 100, 7), c = make_graph_plan(g, 3, 100, 8);
  EXPECT_EQ(a.inserts[2].nbr, b.inserts[2].nbr);
  EXPECT_EQ(a.digest_peak, b.digest_peak);
  EXPECT_NE(a.digest_peak, c.digest_peak);
}

TEST(GraphPlan, RejectsGraphsWithoutEdges) {
  graph g;
  g.nodes = 10;
  g.name = "empty";
  EXPECT_THROW(make_graph_plan(g, 1, 10, 1), std::invalid_argument);
}

// 2^32 vertices once wrapped to 0 in the plan's 32-bit ids and crashed: now a clear error.
TEST(GraphPlan, RejectsVertexCountsBeyondThirtyTwoBits) {
  graph g;
  g.nodes = std::uint64_t{1} << 32;
  g.name = "huge";
  g.edges = {{0, 1}};
  try {
    (void)make_graph_plan(g, 1, 10, 1);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4294967296 vertices do not fit"), std::string::npos) << e.what();
  }
}

// The --heap check: what a case point needs, and the message naming the point and the fix.
TEST(HeapCheck, NeededBytesAndTheUsageMessage) {
  // 1 KiB blocks: 4/3 per block for bins, 4/124 for chunk headers, one 512 KiB chunk per arena
  const std::uint64_t bins = 1024 * 1024 * 4 / 3;
  EXPECT_EQ(toga_heap_needed({"x", 1024, 1000}, 8), bins + bins * 4 / 124 + 8 * 512 * 1024);
  EXPECT_EQ(toga_heap_needed({"x", 10, 5000}, 8), 10u * 8192) << "TBuddy: powers of two";
  EXPECT_EQ(toga_heap_needed({"x", 10, 100}, 1), toga_heap_needed({"x", 10, 128}, 1)) << "size classes";
  EXPECT_EQ(toga_heap_needed({"x", 0, 100}, 8), 0u);
  EXPECT_EQ(check_heap({{"T1 16 B x 1024 threads", 1024, 16}}, 64ull << 20, 8, "toga-sim", "--heap 64 MiB"), "");
  const std::string m = check_heap({{"T1 16 B x 1024 threads", 1024, 16}, {"T1 8 KiB x 1024 threads", 1024, 8192}},
                                   4096, 8, "toga-sim", "--heap 4 KiB");
  EXPECT_EQ(m.rfind("T1 16 B x 1024 threads needs about 4.0 MiB of toga-sim heap", 0), 0u) << m;
  EXPECT_NE(m.find("--heap 4 KiB gives 4 KiB: use --heap 8 MiB or more"), std::string::npos) << m;
}

TEST(Report, FormatBytes) {
  EXPECT_EQ(format_bytes(16), "16 B");
  EXPECT_EQ(format_bytes(4096), "4 KiB");
  EXPECT_EQ(format_bytes(8ull << 30), "8 GiB");
  EXPECT_EQ(format_bytes(1000), "1000 B");
}

row make_row(std::string alloc, std::string op, std::uint64_t size, double ms, std::uint64_t ops) {
  row r;
  r.allocator = std::move(alloc);
  r.case_id = "T1";
  r.op = std::move(op);
  r.size = size;
  r.threads = ops;
  r.ops_per_rep = ops;
  r.ms = {ms * 1.1, ms, ms * 0.9};
  return r;
}

TEST(Report, RatiosAreThroughputRatiosWithinOneCasePoint) {
  // cuda-malloc ran a cut thread count: the ratio still compares throughput.
  std::vector<row> rows = {make_row("toga", "alloc", 16, 0.1, 1 << 20), make_row("cuda-malloc", "alloc", 16, 10.0, 1 << 14),
                           make_row("bump-warp", "alloc", 16, 0.05, 1 << 20), make_row("toga", "alloc", 256, 1.0, 1 << 20),
                           make_row("toga-sim", "alloc", 16, 4.0, 100), make_row("bump-warp-sim", "alloc", 16, 1.0, 100)};
  const auto rr = with_ratios(rows);
  ASSERT_EQ(rr.size(), rows.size());
  ASSERT_TRUE(rr[0].ratio_malloc && rr[0].ratio_bump);
  EXPECT_NEAR(*rr[0].ratio_malloc, (double(1 << 20) / 0.1) / (double(1 << 14) / 10.0), 1e-6);
  EXPECT_NEAR(*rr[0].ratio_bump, 0.5, 1e-9);
  EXPECT_NEAR(*rr[1].ratio_malloc, 1.0, 1e-9);
  EXPECT_FALSE(rr[3].ratio_malloc) << "no cuda-malloc row at 256 B";
  EXPECT_FALSE(rr[4].ratio_malloc) << "simulator rows compare with bump-warp-sim only";
  ASSERT_TRUE(rr[4].ratio_bump);
  EXPECT_NEAR(*rr[4].ratio_bump, 0.25, 1e-9);
}

// The floor is the warp-aggregated bump: the per-thread bump (25x slower on a GPU) and bump-sim
// are extra rows that no ratio refers to, though they get ratios against the floor themselves.
TEST(Report, TheBumpRatioRefersToTheWarpAggregatedFloor) {
  std::vector<row> rows = {make_row("toga", "alloc", 16, 1.0, 1000), make_row("bump", "alloc", 16, 0.5, 1000),
                           make_row("bump-warp", "alloc", 16, 0.02, 1000), make_row("toga-sim", "alloc", 16, 3.0, 100),
                           make_row("bump-sim", "alloc", 16, 1.0, 100), make_row("bump-warp-sim", "alloc", 16, 2.0, 100)};
  const auto rr = with_ratios(rows);
  ASSERT_TRUE(rr[0].ratio_bump && rr[1].ratio_bump && rr[3].ratio_bump);
  EXPECT_NEAR(*rr[0].ratio_bump, 0.02, 1e-9) << "toga against bump-warp, not against bump";
  EXPECT_NEAR(*rr[1].ratio_bump, 0.04, 1e-9) << "the per-thread bump row against the floor";
  EXPECT_NEAR(*rr[3].ratio_bump, 2.0 / 3.0, 1e-9) << "toga-sim against bump-warp-sim, not against bump-sim";
  rows.erase(rows.begin() + 2);  // no bump-warp row: no ratio at all (never silently against bump)
  EXPECT_FALSE(with_ratios(rows)[0].ratio_bump);
  EXPECT_STREQ(floor_gpu, "bump-warp");
  EXPECT_STREQ(floor_sim, "bump-warp-sim");
}

TEST(Report, JsonRowsCarryEveryRepetitionAndTheRatios) {
  std::vector<row> rows = {make_row("toga", "alloc", 16, 0.1, 1000), make_row("bump-warp", "alloc", 16, 0.1, 1000)};
  rows[0].metrics["registers"] = 56;
  rows[0].failures = 2;
  const auto j = to_json(with_ratios(rows), nlohmann::json{{"command", "x"}});
  EXPECT_EQ(j["schema"], "toga-bench/2");
  EXPECT_EQ(j["references"]["floor"], "bump-warp");
  EXPECT_EQ(j["references"]["floor_sim"], "bump-warp-sim");
  EXPECT_EQ(j["command"], "x");
  ASSERT_EQ(j["rows"].size(), 2u);
  const auto& r = j["rows"][0];
  EXPECT_EQ(r["ms"].size(), 3u);
  EXPECT_DOUBLE_EQ(r["median_ms"].get<double>(), 0.1);
  EXPECT_TRUE(r["ratio_bump"].is_null()) << "a row with failures did less work: no throughput ratio";
  EXPECT_TRUE(r["ratio_cuda_malloc"].is_null());
  EXPECT_EQ(r["failures"], 2);
  EXPECT_EQ(r["metrics"]["registers"], 56);
  EXPECT_DOUBLE_EQ(j["rows"][1]["ratio_bump"].get<double>(), 1.0);
}

TEST(Report, NoRatioAgainstAReferenceThatFailed) {
  std::vector<row> rows = {make_row("toga", "alloc", 16, 0.1, 1000), make_row("bump-warp", "alloc", 16, 0.1, 1000)};
  rows[1].failures = 1;
  const auto rr = with_ratios(rows);
  EXPECT_FALSE(rr[0].ratio_bump);
  rows[1].failures = 0;
  EXPECT_TRUE(with_ratios(rows)[0].ratio_bump);
}

}  // namespace
}  // namespace toga::bench
