// Graph loader for the dynamic-graph benchmark workloads (T10/T11, issue 6).
//
// load_graph() reads one real graph (../shared/data/graphs, see SOURCES.md there) into a simple
// undirected edge list. Two text formats are read, each plain or gzip-compressed:
//
//   * SNAP edge list (`.txt`, `.txt.gz`): `#` comment lines anywhere; every other non-blank line
//     is exactly two non-negative integer node ids separated by spaces or TABs.
//   * Matrix Market (`.mtx`, `.mtx.gz`): the banner `%%MatrixMarket matrix coordinate FIELD
//     SYMMETRY` with FIELD one of pattern/real/integer and SYMMETRY one of general/symmetric
//     (case-insensitive, as the MM spec allows), `%` comment lines, the size line
//     `nrows ncols nnz` (nrows == ncols), then exactly nnz entries `i j` (pattern) or `i j value`
//     (real/integer) with 1-based ids in 1..nrows. The value is checked to be a number of the
//     declared field and otherwise ignored: every stored entry is an edge, explicit zeros too.
//
// The format comes from the extension (after an optional `.gz`); a file with any other extension
// is read as Matrix Market when its first line starts with `%%MatrixMarket`, else as SNAP.
// Compression is detected by the gzip magic bytes (1f 8b), whatever the name says, so a `.txt`
// that is really gzip and a `.gz` that is really plain text both load. Concatenated gzip members
// are read as one stream. Lines may end in LF or CRLF (SNAP publishes some files with CRLF); a
// UTF-8 byte-order mark at the start and blank lines are ignored.
//
// What the result holds (the same for both formats):
//   * edges are undirected, each listed once as (u, v) with u < v, sorted by (u, v); no
//     self-loops, no duplicates. Self-loops in the input are dropped (their node still counts).
//   * Directed inputs are symmetrised: SNAP files such as soc-Slashdot0902 are directed, and an
//     MM `general` matrix may hold (i,j) and (j,i). The loader keeps the undirected edge {u,v}
//     when at least one direction is listed; reciprocal pairs collapse into one edge. This is what
//     the benchmark needs: it builds symmetric per-vertex adjacency lists from the pairs.
//   * Matrix Market: nodes = nrows; node k (0-based) is MM row/column k+1. Vertices without
//     entries stay as isolated nodes.
//   * SNAP: the node set is the set of ids that occur in the file (a SNAP edge list cannot name
//     isolated vertices; an id that occurs only in a self-loop is still a node). The ids are
//     compacted, order-preserving: the k-th smallest id becomes k. When the ids are exactly
//     0..N-1 (both SNAP files in shared/data/graphs) this is the identity; when they have gaps or
//     are huge (SNAP ids may be any 64-bit value) the graph gets no phantom isolated vertices and
//     the ids fit in 32 bits. The `# Nodes: N Edges: M` header is not checked: in many SNAP files
//     it counts undirected pairs while the data lists both directions.
//   * name: the file name without directory and without `.gz` / `.mtx` / `.txt`.
//
// Errors throw graph_error. Its message is `PATH:LINE: expected X, found Y` (the line is 1-based;
// file-level errors, such as a file that cannot be opened, have no line: `PATH: ...`), e.g.
//   facebook.txt:17: expected two node ids, found "12 abc"
// Reported: unreadable file, corrupt or truncated gzip data (at the line where the data stops),
// a missing or unsupported MM banner, a bad size line, fewer or more MM entries than the size
// line declares, ids out of range, non-numeric or missing fields, extra fields, a SNAP file with
// no edge line at all, graphs whose node count does not fit 32-bit ids, and inputs beyond the
// limits below.
//
// Limits (graph_limits; the defaults are toga-bench's, documented in docs/benchmarks.md), each
// checked before the memory it bounds is taken, each error naming the limit and the file:
//   * max_bytes (1 GiB): bytes of the file, and bytes of text after decompression. A regular
//     file is measured before it is read; gzip data is inflated twice, first only counting, so
//     that a small file inflating to gigabytes is refused without holding its text. Only
//     regular files and pipes are read: a device such as /dev/zero, a directory or a socket is
//     refused ("expected a regular file or a pipe, found a character device").
//   * max_vertices (2^26 = 67,108,864): MM rows declared on the size line (checked there,
//     before anything is allocated for them), distinct SNAP ids.
//   * max_entries (2^26): MM entries declared on the size line, SNAP edge lines.
// Within them, T10/T11's plan fits its 32-bit offsets and a GPU heap of a few GiB.
//
// Cost: the whole (decompressed) file is held in memory while parsing, plus 8 bytes per stored
// entry (16 for SNAP); coAuthorsDBLP (12 MB of text, 977,676 entries) loads in about 0.1 s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace toga::bench {

struct graph {
  std::uint64_t nodes = 0;  // node ids are 0..nodes-1
  // Undirected, each edge once as (u, v) with u < v, sorted; no self-loops, no duplicates.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  std::string name;  // file name without directory and extensions, e.g. "coAuthorsDBLP"
};

class graph_error : public std::runtime_error {
 public:
  // line == 0: the error concerns the whole file (no line number in the message).
  graph_error(const std::string& file, std::size_t line, const std::string& what);
  const std::string& file() const noexcept { return file_; }
  std::size_t line() const noexcept { return line_; }

 private:
  std::string file_;
  std::size_t line_;
};

// What load_graph accepts at most (see the top of this file).
struct graph_limits {
  std::uint64_t max_bytes = std::uint64_t{1} << 30;     // file bytes, and decompressed text bytes
  std::uint64_t max_vertices = std::uint64_t{1} << 26;  // MM rows, distinct SNAP ids
  std::uint64_t max_entries = std::uint64_t{1} << 26;   // MM entries, SNAP edge lines
};

// Loads the graph at `path` (see the top of this file). Throws graph_error (std::bad_alloc only
// if the machine cannot hold an input within the limits).
graph load_graph(const std::string& path, const graph_limits& limits = {});

// Degree of every node (size g.nodes): the number of edges incident to it.
std::vector<std::uint32_t> degrees(const graph& g);

}  // namespace toga::bench
