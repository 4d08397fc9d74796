// toga-bench's host logic: the T10/T11 workload plan (its bookkeeping is what the GPU and simulator
// runs are verified against) and the report (ratios to the references, bytes, JSON fields, the
// per-row table's width, the summary's lines, verdicts and width).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

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

// ---- the per-row table and the summary -----------------------------------------------------------

//! What `print` writes to a FILE*, as lines.
template <class F>
std::vector<std::string> printed(F print) {
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  print(f);
  std::fclose(f);
  std::vector<std::string> lines;
  std::stringstream ss(std::string(buf, len));
  std::free(buf);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  return lines;
}

std::size_t widest(const std::vector<std::string>& lines) {
  std::size_t w = 0;
  for (const auto& l : lines) w = std::max(w, l.size());
  return w;
}

bool contains(const std::vector<std::string>& lines, const std::string& s) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(s) != std::string::npos; });
}

//! The line of `lines` that starts with case `id` (followed by a blank), or "".
std::string line_of(const std::vector<std::string>& lines, const std::string& id) {
  for (const auto& l : lines)
    if (l.rfind(id + " ", 0) == 0) return l;
  return "";
}

row point(std::string alloc, std::string case_id, std::string op, std::uint64_t size, std::uint64_t threads, double ms,
          std::string param = "") {
  row r = make_row(std::move(alloc), std::move(op), size, ms, threads);
  r.case_id = std::move(case_id);
  r.param = std::move(param);
  return r;
}

//! One simulator run of T1 (two sizes, two thread counts), T8, T12 and T13, as the backend adds
//! rows: toga-sim and its references bump-warp-sim and bump-sim.
std::vector<row> sim_run() {
  std::vector<row> rows;
  for (const char* a : {"toga-sim", "bump-warp-sim", "bump-sim"}) {
    const double k = std::string(a) == "toga-sim" ? 4.0 : std::string(a) == "bump-warp-sim" ? 1.0 : 2.0;
    for (std::uint64_t t : {256u, 1024u})
      for (std::uint64_t s : {16u, 4096u}) {
        // toga-sim is 4x slower than the floor, except at 4 KiB x 1024 threads: 12x
        const double extra = std::string(a) == "toga-sim" && s == 4096 && t == 1024 ? 3.0 : 1.0;
        rows.push_back(point(a, "T1", "alloc", s, t, 0.01 * t * k * extra, "threads=" + std::to_string(t)));
      }
    row u;
    u.allocator = a;
    u.case_id = "T8";
    u.op = "exhaust";
    u.size = 256;
    u.metrics["utilisation"] = std::string(a) == "toga-sim" ? 0.93 : 0.999;
    rows.push_back(u);
    row init = point(a, "T12", "init", 0, 0, std::string(a) == "toga-sim" ? 700.0 : 0.008, "heap=8 GiB");
    init.ops_per_rep = 1;
    init.note = "host time: map the heap (untouched), zero the metadata, make + init_after_zero, unmap; a long note "
                "that would make the line far wider than any terminal if it were printed on the row itself";
    rows.push_back(init);
    row reg;
    reg.allocator = a;
    reg.case_id = "T13";
    reg.op = "registers";
    reg.note = "registers are a GPU figure: run toga-bench on a GPU";
    rows.push_back(reg);
  }
  return rows;
}

const std::vector<std::string> sim_cases = {"T1", "T8", "T12", "T13"};

TEST(Summary, OneLinePerCaseWithBothSimulatorReferencesAndFiguresThatMatter) {
  const auto rr = with_ratios(sim_run());
  const auto sum = summarise(rr, "toga-sim", sim_cases, {});
  ASSERT_EQ(sum.size(), 4u);
  // T1: every point is 1/4 of the floor's throughput but one (1/12); bump-sim takes 2x the floor's time
  const double gm = std::exp((3 * std::log(0.25) + std::log(1.0 / 12)) / 4);
  ASSERT_TRUE(sum[0].x_floor && sum[0].x_second);
  EXPECT_NEAR(*sum[0].x_floor, gm, 1e-9);
  EXPECT_NEAR(*sum[0].x_second, 2 * gm, 1e-9) << "the second reference in the simulator is bump-sim (2x the floor's time)";
  EXPECT_EQ(sum[0].result, "pass");
  // the alloc ratio at the largest thread count, worst size (the longer wording does not fit)
  EXPECT_EQ(sum[0].figure, "alloc 1K thr, worst 4 KiB: 0.083x floor, 0.17x bump-sim");
  EXPECT_EQ(sum[1].result, "pass");
  EXPECT_NE(sum[1].figure.find("utilisation, worst 256 B: 93.0 %"), std::string::npos) << sum[1].figure;
  // T12 compares times, not throughput: no ratio (it used to print 6.18e-05x)
  EXPECT_EQ(sum[2].result, "pass");
  EXPECT_FALSE(sum[2].x_floor);
  EXPECT_FALSE(sum[2].x_second);
  EXPECT_NE(sum[2].figure.find("init 8 GiB heap: 700 ms"), std::string::npos) << sum[2].figure;
  EXPECT_NE(sum[2].figure.find("8.0 us"), std::string::npos) << "the floor's time beside it: " << sum[2].figure;
  // T13 has no simulator figure: "-", saying why
  EXPECT_EQ(sum[3].result, "-");
  EXPECT_NE(sum[3].figure.find("GPU figure"), std::string::npos) << sum[3].figure;
  for (const auto& s : sum) EXPECT_FALSE(s.noisy) << s.case_id << ": every hand-made row spreads 1.1 / 0.9";
}

TEST(Summary, PrintedSummaryFitsOneHundredColumnsAndSaysHostTimeOnce) {
  const auto rr = with_ratios(sim_run());
  const auto lines = printed([&](std::FILE* f) { print_summary(f, rr, sim_cases, {}); });
  EXPECT_LE(widest(lines), summary_columns);
  EXPECT_LE(summary_columns, 100u);
  for (const auto& id : sim_cases) EXPECT_NE(line_of(lines, id), "") << "no summary line for " << id;
  const std::string t1 = line_of(lines, "T1");
  EXPECT_NE(t1.find("pass"), std::string::npos) << t1;
  // both ratio columns are filled in the simulator (cuda-malloc's column used to be empty there)
  std::istringstream cells(t1);
  std::string id, w1, w2, x_floor, x_second;
  cells >> id >> w1 >> x_floor >> x_second;
  EXPECT_EQ(x_floor, "0.19x") << t1;
  EXPECT_EQ(x_second, "0.38x") << t1;
  EXPECT_TRUE(contains(lines, "x floor")) << "the header names the references";
  EXPECT_TRUE(contains(lines, "x bump-sim"));
  unsigned host_time = 0;
  for (const auto& l : lines) host_time += l.find("host time, for") != std::string::npos;
  EXPECT_EQ(host_time, 1u) << "the simulator says once that its figures are host time, for trends only";
  EXPECT_TRUE(contains(lines, "!: a row of the case spread over 3x")) << "the legend of the noisy mark";
  EXPECT_TRUE(contains(lines, "3 pass, 0 FAIL, 1 not measured on this backend (-)"));
  for (const auto& l : lines) EXPECT_EQ(l.find("e-0"), std::string::npos) << "no exponents: " << l;
}

TEST(Summary, FailuresCorruptionErrorsAndUnrunPointsFail) {
  auto rows = sim_run();
  rows[2].failures = 3;  // toga-sim T1 alloc 4 KiB x 256: nullptrs where memory was expected
  auto sum = summarise(with_ratios(rows), "toga-sim", sim_cases, {});
  EXPECT_EQ(sum[0].result, "FAIL");
  EXPECT_NE(sum[0].figure.find("3 nullptrs where memory was available"), std::string::npos) << sum[0].figure;
  EXPECT_EQ(sum[1].result, "pass") << "a failure in T1 fails T1 only";

  rows = sim_run();
  for (auto& r : rows)
    if (r.allocator == "bump-sim" && r.case_id == "T1") {
      r.corrupt = 2;  // a reference's corrupt block fails the case too: the run is not to be trusted
      break;
    }
  sum = summarise(with_ratios(rows), "toga-sim", sim_cases, {});
  EXPECT_EQ(sum[0].result, "FAIL");
  EXPECT_NE(sum[0].figure.find("2 corrupt"), std::string::npos) << sum[0].figure;

  rows = sim_run();
  rows[0].ms.clear();  // toga-sim did not run a point that bump-warp-sim ran
  rows[0].note = "could not run";
  sum = summarise(with_ratios(rows), "toga-sim", sim_cases, {});
  EXPECT_EQ(sum[0].result, "FAIL");
  EXPECT_NE(sum[0].figure.find("toga-sim did not run alloc 16 B"), std::string::npos) << sum[0].figure;

  sum = summarise(with_ratios(sim_run()), "toga-sim", sim_cases, {{"T8", "sim", "boom: out of host memory"}, {"T1", "gpu", "x"}});
  EXPECT_EQ(sum[0].result, "pass") << "an error of the other backend is not this summary's";
  EXPECT_EQ(sum[1].result, "FAIL");
  EXPECT_NE(sum[1].figure.find("did not run: boom"), std::string::npos) << sum[1].figure;

  // a case without any toga row (nothing added) fails too
  sum = summarise(with_ratios(sim_run()), "toga-sim", {"T5"}, {});
  EXPECT_EQ(sum[0].result, "FAIL");

  // the printed form counts them, and still fits
  rows = sim_run();
  rows[2].failures = 3;
  const auto rr = with_ratios(rows);
  const auto lines = printed([&](std::FILE* f) { EXPECT_EQ(print_summary(f, rr, sim_cases, {{"T8", "sim", std::string(300, 'x')}}), 2u); });
  EXPECT_NE(line_of(lines, "T1").find("FAIL"), std::string::npos);
  EXPECT_NE(line_of(lines, "T8").find("FAIL"), std::string::npos);
  EXPECT_TRUE(contains(lines, "1 pass, 2 FAIL (T1, T8), 1 not measured on this backend (-)"));
  EXPECT_LE(widest(lines), summary_columns) << "a long error is cut to the width";
}

TEST(Summary, RowsThatSpreadOverThreeTimesAreMarked) {
  auto rows = sim_run();
  rows[1].ms = {1.0, 3.5, 2.0};  // toga-sim T1: slowest / fastest = 3.5
  ASSERT_TRUE(spread(rows[1]));
  EXPECT_DOUBLE_EQ(*spread(rows[1]), 3.5);
  auto sum = summarise(with_ratios(rows), "toga-sim", sim_cases, {});
  EXPECT_TRUE(sum[0].noisy);
  EXPECT_FALSE(sum[1].noisy);
  const auto rr = with_ratios(rows);
  EXPECT_NE(line_of(printed([&](std::FILE* f) { print_summary(f, rr, sim_cases, {}); }), "T1").find("pass !"), std::string::npos);
  rows[1].ms = {1.0, 3.0, 2.0};  // exactly 3x: not marked
  EXPECT_FALSE(summarise(with_ratios(rows), "toga-sim", sim_cases, {})[0].noisy);
  // T9 and T11 record one entry per round (rounds differ by design): no spread
  row t11 = point("toga-sim", "T11", "insert", 0, 0, 1.0);
  t11.ms = {1.0, 10.0};
  EXPECT_FALSE(spread(t11));
}

TEST(Summary, GpuReferencesAreTheFloorAndCudaMalloc) {
  std::vector<row> rows = {point("toga", "T1", "alloc", 16, 1 << 20, 0.2), point("cuda-malloc", "T1", "alloc", 16, 1 << 14, 10.0),
                           point("bump-warp", "T1", "alloc", 16, 1 << 20, 0.1), point("bump", "T1", "alloc", 16, 1 << 20, 0.4)};
  row init_t = point("toga", "T12", "init", 0, 0, 30.0, "8 GiB"), init_b = point("bump-warp", "T12", "init", 0, 0, 2.0, "8 GiB");
  init_t.ops_per_rep = init_b.ops_per_rep = 1;
  rows.push_back(init_t);
  rows.push_back(init_b);
  for (const auto& [op, regs] : {std::pair{"alloc", 56.0}, {"free", 30.0}}) {
    for (const char* a : {"toga", "cuda-malloc"}) {
      row r;
      r.allocator = a;
      r.case_id = "T13";
      r.op = op;
      r.metrics["registers"] = std::string(a) == "toga" ? regs : regs / 2;
      rows.push_back(r);
    }
  }
  const auto rr = with_ratios(rows);
  EXPECT_FALSE(rr[4].ratio_bump) << "T12 init: no throughput ratio";
  const auto sum = summarise(rr, "toga", {"T1", "T12", "T13"}, {});
  ASSERT_TRUE(sum[0].x_floor && sum[0].x_second);
  EXPECT_NEAR(*sum[0].x_floor, 0.5, 1e-9);
  EXPECT_NEAR(*sum[0].x_second, (double(1 << 20) / 0.2) / (double(1 << 14) / 10.0), 1e-6);
  EXPECT_EQ(sum[0].figure, "alloc 1M thr, worst 16 B: 0.50x floor, 3200x malloc");
  EXPECT_EQ(sum[1].figure, "init 8 GiB heap: 30.0 ms; floor (memory only) 2.00 ms");
  EXPECT_EQ(sum[2].figure, "registers: alloc 56, free 30 (malloc: alloc 28, free 15)");
  const auto lines = printed([&](std::FILE* f) { print_summary(f, rr, {"T1", "T12", "T13"}, {}); });
  EXPECT_TRUE(contains(lines, "x malloc"));
  EXPECT_FALSE(contains(lines, "host time")) << "GPU figures are device time";
  EXPECT_LE(widest(lines), summary_columns);
}

TEST(Summary, RatiosNeverUseExponents) {
  std::vector<row> rows = {point("toga-sim", "T1", "alloc", 16, 100, 1000.0), point("bump-warp-sim", "T1", "alloc", 16, 100, 0.0618)};
  const auto rr = with_ratios(rows);
  ASSERT_TRUE(rr[0].ratio_bump);
  const auto lines = printed([&](std::FILE* f) { print_summary(f, rr, {"T1"}, {}); });
  EXPECT_NE(line_of(lines, "T1").find("1/16181x"), std::string::npos) << line_of(lines, "T1");
  const auto table = printed([&](std::FILE* f) { print_table(f, rr); });
  EXPECT_TRUE(contains(table, "1/16181x"));
}

TEST(Table, FitsOneHundredTwentyColumnsAndMarksNoisyRows) {
  auto rows = sim_run();
  rows[1].ms = {1.0, 5.0, 2.0};
  rows[0].metrics["sim_steps_per_op"] = 30.28;
  const auto rr = with_ratios(rows);
  const auto lines = printed([&](std::FILE* f) { print_table(f, rr); });
  EXPECT_LE(widest(lines), table_columns);
  EXPECT_LE(table_columns, 120u);
  EXPECT_TRUE(contains(lines, "5.0x!")) << "the spread of a noisy row, marked";
  EXPECT_TRUE(contains(lines, "1.2x ")) << "the spread of a quiet row (1.1 / 0.9), unmarked";
  EXPECT_TRUE(contains(lines, "far wider than any terminal")) << "long notes are wrapped, not dropped";
  EXPECT_TRUE(contains(lines, "x bump-sim")) << "the simulator's second reference, not an empty x malloc column";
  EXPECT_FALSE(contains(lines, "x malloc"));
  // the second-reference column is filled for the simulator's rows
  bool filled = false;
  for (const auto& l : lines)
    if (l.rfind("toga-sim      T1", 0) == 0) {
      std::istringstream cells(l);
      std::vector<std::string> c;
      for (std::string x; cells >> x;) c.push_back(x);
      // allocator case op size(2) threads median spread M-ops/s x-second x-floor fail corrupt
      ASSERT_GE(c.size(), 12u) << l;
      filled = filled || (c[9] != "-" && c[9].back() == 'x');
    }
  EXPECT_TRUE(filled);
}

TEST(Summary, JsonHasOneEntryPerCaseAndToga) {
  const auto j = summary_json(with_ratios(sim_run()), sim_cases, {});
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0]["case"], "T1");
  EXPECT_EQ(j[0]["allocator"], "toga-sim");
  EXPECT_EQ(j[0]["floor"], "bump-warp-sim");
  EXPECT_EQ(j[0]["second"], "bump-sim");
  EXPECT_EQ(j[0]["result"], "pass");
  EXPECT_TRUE(j[0]["x_floor"].is_number());
  EXPECT_TRUE(j[2]["x_floor"].is_null()) << "T12";
  EXPECT_EQ(j[3]["result"], "-");
}

}  // namespace
}  // namespace toga::bench
