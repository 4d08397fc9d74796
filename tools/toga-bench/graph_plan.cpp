// Planning of the dynamic-graph workload (T10/T11); see graph_plan.hpp.
#include "graph_plan.hpp"

#include <algorithm>
#include <stdexcept>

namespace toga::bench {
namespace {

// Groups (vertex, neighbour) pairs by vertex into one batch.
graph_batch group(std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs, std::uint64_t edges) {
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  graph_batch b;
  b.edges = edges;
  b.nbr.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (i == 0 || pairs[i].first != pairs[i - 1].first) {
      b.vertex.push_back(pairs[i].first);
      b.offsets.push_back(static_cast<std::uint32_t>(b.nbr.size()));
    }
    b.nbr.push_back(pairs[i].second);
  }
  b.offsets.push_back(static_cast<std::uint32_t>(b.nbr.size()));
  return b;
}

}  // namespace

graph_plan make_graph_plan(const graph& g, unsigned rounds, unsigned edges_per_round, std::uint64_t seed) {
  if (g.nodes < 2) throw std::invalid_argument("graph " + g.name + ": needs at least 2 vertices for T10/T11");
  if (g.edges.empty()) throw std::invalid_argument("graph " + g.name + ": has no edges");
  // Vertices, CSR offsets and batch offsets are 32-bit: refuse what would not fit instead of
  // narrowing (a 2^32-vertex graph once wrapped to 0 and crashed).
  constexpr std::uint64_t u32_max = 0xffffffffull;
  if (g.nodes > u32_max)
    throw std::invalid_argument("graph " + g.name + ": " + std::to_string(g.nodes) +
                                " vertices do not fit the plan's 32-bit vertex ids (at most 4294967295)");
  if (2 * (static_cast<std::uint64_t>(g.edges.size()) + std::uint64_t{rounds} * edges_per_round) > u32_max)
    throw std::invalid_argument("graph " + g.name + ": " + std::to_string(g.edges.size()) + " edges plus " +
                                std::to_string(std::uint64_t{rounds} * edges_per_round) +
                                " inserted ones do not fit the plan's 32-bit adjacency offsets");
  graph_plan p;
  p.name = g.name;
  p.vertices = static_cast<std::uint32_t>(g.nodes);
  p.edges = g.edges.size();

  // CSR of the symmetric adjacency.
  std::vector<std::uint32_t> deg(p.vertices, 0);
  for (const auto& [u, v] : g.edges) {
    ++deg[u];
    ++deg[v];
  }
  p.offsets.assign(p.vertices + 1, 0);
  for (std::uint32_t v = 0; v < p.vertices; ++v) p.offsets[v + 1] = p.offsets[v] + deg[v];
  p.adj.resize(p.offsets.back());
  {
    std::vector<std::uint32_t> fill(p.offsets.begin(), p.offsets.end() - 1);
    for (const auto& [u, v] : g.edges) {
      p.adj[fill[u]++] = v;
      p.adj[fill[v]++] = u;
    }
  }
  p.digest_initial.assign(p.vertices, 0);
  for (std::uint32_t v = 0; v < p.vertices; ++v)
    for (std::uint32_t i = p.offsets[v]; i < p.offsets[v + 1]; ++i) p.digest_initial[v] += neighbour_digest(p.adj[i]);

  // Capacity model: grows when a vertex outgrows its array, shrinks to the exact fit.
  std::vector<std::uint64_t> cap(p.vertices);
  for (std::uint32_t v = 0; v < p.vertices; ++v) {
    cap[v] = capacity_bytes(deg[v]);
    p.initial_bytes += cap[v];
  }
  std::uint64_t total = p.initial_bytes;
  p.peak_bytes = total;

  // Insertions.
  // A portable generator (splitmix64 over a counter; style.md: no std distributions, whose output
  // differs between standard libraries). The modulo bias is below 2^-32 for these ranges.
  std::uint64_t counter = mix64(seed ^ 0x7467726170680000ull);
  auto draw = [&](std::uint64_t n) { return mix64(counter++) % n; };
  auto pick_edge = [&](auto&) { return draw(g.edges.size()); };
  auto pick_vertex = [&](auto&) { return static_cast<std::uint32_t>(draw(p.vertices)); };
  auto coin = [&](auto&) { return draw(2) != 0; };
  int rng = 0;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> round_pairs(rounds);
  p.digest_peak = p.digest_initial;
  for (unsigned r = 0; r < rounds; ++r) {
    auto& pairs = round_pairs[r];
    pairs.reserve(2ull * edges_per_round);
    for (unsigned e = 0; e < edges_per_round; ++e) {
      const auto& ed = g.edges[pick_edge(rng)];
      const std::uint32_t u = coin(rng) ? ed.first : ed.second;
      std::uint32_t v = pick_vertex(rng);
      while (v == u) v = pick_vertex(rng);
      pairs.emplace_back(u, v);
      pairs.emplace_back(v, u);
    }
    p.inserts.push_back(group(pairs, edges_per_round));
    const auto& b = p.inserts.back();
    for (std::size_t i = 0; i < b.vertex.size(); ++i) {
      const std::uint32_t v = b.vertex[i];
      deg[v] += b.offsets[i + 1] - b.offsets[i];
      for (std::uint32_t j = b.offsets[i]; j < b.offsets[i + 1]; ++j) p.digest_peak[v] += neighbour_digest(b.nbr[j]);
      const std::uint64_t c = capacity_bytes(deg[v]);
      if (c != cap[v]) {
        total += c - cap[v];
        cap[v] = c;
        ++p.reallocations;
      }
    }
    p.peak_bytes = std::max(p.peak_bytes, total);
  }
  p.degree_peak = deg;

  // Deletions: undo the rounds in reverse order.
  for (unsigned k = 0; k < rounds; ++k) {
    const unsigned r = rounds - 1 - k;
    p.deletes.push_back(group(round_pairs[r], edges_per_round));
    const auto& b = p.deletes.back();
    for (std::size_t i = 0; i < b.vertex.size(); ++i) {
      const std::uint32_t v = b.vertex[i];
      deg[v] -= b.offsets[i + 1] - b.offsets[i];
      const std::uint64_t c = capacity_bytes(deg[v]);
      if (c != cap[v]) {
        total -= cap[v] - c;
        cap[v] = c;
        ++p.reallocations;
      }
    }
  }
  return p;
}

}  // namespace toga::bench
