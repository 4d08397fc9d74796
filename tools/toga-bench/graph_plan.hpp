// The dynamic-graph workload of T10/T11, planned on the host so that the GPU and the simulator
// backends run exactly the same operations and can verify the result.
//
// T10 (build): vertex v gets an adjacency array of capacity_bytes(degree(v)) bytes holding its
// neighbours (4-byte ids). T11 (updates): `rounds` rounds of `edges_per_round` edge insertions
// (each edge adds one neighbour to both endpoints: a vertex that outgrows its array gets a new
// array of the next capacity, copies, frees the old one), then the same rounds of deletions in
// reverse order (a vertex whose degree fits a smaller capacity gets a smaller array: shrink).
// After the deletions every vertex holds its initial neighbours again.
//
// Inserted edges: u is an endpoint of a uniformly drawn edge of the input graph (so high-degree
// vertices grow more, as in preferential attachment), v is uniform over the vertices, u != v.
// Duplicated edges are allowed (the arrays are multisets); every draw comes from `seed`.
//
// Each batch is grouped by vertex (one item = one vertex and the neighbours it gains or loses in
// that round), so one GPU thread owns one vertex per round and no locks are needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench.hpp"
#include "graph.hpp"

namespace toga::bench {

//! Bytes of a vertex's adjacency array for `degree` neighbours of 4 bytes: the next power of two,
//! at least 16.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline std::uint64_t capacity_bytes(std::uint64_t degree) {
  std::uint64_t b = 16;
  while (b < degree * 4) b <<= 1;
  return b;
}

//! Order-independent digest term of one neighbour id; a vertex's digest is the sum (mod 2^64)
//! over its neighbours. Equal multisets give equal digests; a lost, duplicated or overwritten
//! entry changes it with overwhelming probability.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline std::uint64_t neighbour_digest(std::uint32_t id) { return mix64(0xA5A5000000000000ull ^ id); }

struct graph_batch {
  std::vector<std::uint32_t> vertex;   //!< the distinct vertices this round touches
  std::vector<std::uint32_t> offsets;  //!< vertex.size() + 1 entries into nbr
  std::vector<std::uint32_t> nbr;      //!< neighbours vertex[i] gains (insert) or loses (delete)
  std::uint64_t edges = 0;             //!< edges of this round (each is in two items)
};

struct graph_plan {
  std::string name;
  std::uint32_t vertices = 0;
  std::uint64_t edges = 0;                 //!< undirected edges of the input
  std::vector<std::uint32_t> offsets;      //!< CSR of the symmetric initial adjacency, vertices + 1
  std::vector<std::uint32_t> adj;          //!< 2 * edges neighbour ids
  std::vector<graph_batch> inserts;        //!< rounds, in order
  std::vector<graph_batch> deletes;        //!< rounds, in order: deletes[r] undoes inserts[rounds-1-r]
  std::vector<std::uint64_t> digest_initial;  //!< per vertex, after build (and after all deletions)
  std::vector<std::uint64_t> digest_peak;     //!< per vertex, after all insertions
  std::vector<std::uint32_t> degree_peak;     //!< per vertex, after all insertions
  std::uint64_t initial_bytes = 0;  //!< sum of capacity_bytes over vertices after build
  std::uint64_t peak_bytes = 0;     //!< the largest sum of capacities at a round boundary
  std::uint64_t reallocations = 0;  //!< arrays replaced (grow + shrink) over all rounds
};

//! Plans the workload for `g` (see the top of this file).
graph_plan make_graph_plan(const graph& g, unsigned rounds, unsigned edges_per_round, std::uint64_t seed);

}  // namespace toga::bench
