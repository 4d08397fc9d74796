// toga-bench: the benchmark protocol of ../shared/docs/benchmarks.md (cases T1-T13), run on the
// GPU (allocators toga, cuda-malloc, bump-warp, bump) or in the fiber simulator (toga-sim,
// bump-warp-sim, bump-sim).
//
// The front end (main.cpp) parses the command line, picks the backends, and turns rows into the
// terminal table and the JSON file; a backend runs one case for a list of its allocators and
// appends rows to a sink. Every figure is computed from `row::ms` (one entry per timed
// repetition) and `row::ops_per_rep`; ratios to the references are taken between rows of one run
// that share (case_id, op, size, param).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace toga::bench {

enum class profile { quick, full };

//! What `toga-bench run` was asked to do. Empty vectors mean "the case's defaults for the
//! profile" (see docs/benchmarks.md and each backend).
struct options {
  profile prof = profile::quick;
  std::vector<std::uint64_t> sizes;    //!< bytes per allocation, overrides the case's sizes
  std::vector<std::uint64_t> threads;  //!< overrides the case's thread counts (T1-T6)
  unsigned reps = 5;                   //!< timed repetitions, after one untimed warm-up
  std::uint64_t heap_bytes = 0;        //!< toga heap for T1-T7, T9; 0: the backend's default
  std::uint64_t superbin_bytes = 0;    //!< toga's superbins (heap_options::superbin_bytes); 0: toga's choice
  unsigned superbin_sharing = 0;       //!< SMs per superbin arena (heap_options::superbin_sharing); 0: toga's choice
  std::uint64_t presplit_bytes = ~std::uint64_t{0};  //!< fixed heaps' pre-split reserve (heap_options::presplit_bytes); ~0: toga's choice (half), 0: none
  bool tenants = false;                //!< GPU toga heaps with tenants (heap_options::tenants): kernels allocate as tenant 0
  bool sweep = false;                  //!< T1: every size 4..8192 step 4 instead of the list
  std::vector<std::string> graphs;     //!< graph files for T10/T11 (already expanded from directories)
  std::uint64_t seed = 1;              //!< seeds every random choice (sizes, frees, edges, schedules)
  double slow_budget_ms = 400;         //!< a slow allocator's thread count is cut so that one
                                       //!< repetition stays near this (rows record the count used)
};

//! One measured line: one allocator, one case, one parameter point, one timed operation.
struct row {
  std::string allocator;  //!< "toga", "cuda-malloc", "bump-warp", "bump", "toga-sim", "bump-warp-sim", "bump-sim"
  std::string case_id;    //!< "T1" .. "T13"
  std::string op;         //!< what was timed: alloc, free, churn, build, insert, delete, init, ...
  std::string param;      //!< other parameter, free text: "hi=512", a graph name, "warp", ...
  std::uint64_t size = 0;           //!< bytes per allocation; 0 where sizes vary or do not apply
  std::uint64_t threads = 0;        //!< threads launched (after any cut for slow allocators)
  std::uint64_t ops_per_rep = 0;    //!< operations one repetition performs (allocations, pairs, edges)
  std::vector<double> ms;           //!< every timed repetition, milliseconds (empty: nothing timed)
  std::uint64_t failures = 0;       //!< nullptr returned where the case expects memory
  std::uint64_t corrupt = 0;        //!< blocks whose pattern did not verify, overlapping blocks,
                                    //!< blocks outside the allocator's memory, wrong graph digests
  std::map<std::string, double> metrics;  //!< case figures: utilisation, range_ratio, registers, ...
  std::string note;                 //!< why a figure is missing or what was cut, for the reader

  double median_ms() const;
  double min_ms() const;
  double max_ms() const;
  //! ops_per_rep / median seconds (0 when nothing was timed).
  double ops_per_s() const;
};

//! Where a backend puts its rows and its progress messages.
class sink {
 public:
  virtual ~sink() = default;
  virtual void add(row r) = 0;
  //! A short status line ("T1 toga 256 B: rep 3/5"); shown on a terminal, not stored.
  virtual void progress(const std::string& what) = 0;
};

//! One case of the protocol.
struct case_info {
  std::string id;      //!< "T1"
  std::string name;    //!< "alloc / free"
  std::string what;    //!< parameters and metric, one line
};
//! T1 .. T13 in order.
const std::vector<case_info>& all_cases();

//! An execution engine for the cases.
class backend {
 public:
  virtual ~backend() = default;
  //! "gpu" or "sim".
  virtual std::string name() const = 0;
  //! Allocator names this backend measures, e.g. {"toga", "cuda-malloc", "bump-warp", "bump"}.
  virtual std::vector<std::string> allocators() const = 0;
  //! Why this backend cannot run here (e.g. "no CUDA device: cudaGetDeviceCount returned ..."),
  //! or nullopt when it can.
  virtual std::optional<std::string> unavailable() const = 0;
  //! Facts for the JSON header: gpu, sms, driver, cuda_runtime, ... (strings).
  virtual std::map<std::string, std::string> environment() const = 0;
  //! Runs case `id` for each allocator of `allocs` (names from allocators()), adding rows to
  //! `out`. Throws std::runtime_error with a clear message on an environment failure (a CUDA
  //! error, a graph that cannot be read); allocation failures are rows, not exceptions.
  virtual void run_case(const std::string& id, const std::vector<std::string>& allocs, const options& o,
                        sink& out) = 0;
  //! Why toga's heap (options::heap_bytes, or the backend's default) cannot hold what case `id`
  //! asks for with these options: a usage error naming the case point, the bytes it needs and
  //! the --heap that would do; "" when it can. Checked for every case before the run.
  virtual std::string heap_problem(const std::string& id, const options& o) const = 0;
};

//! Blocks a case point keeps live at once on toga's heap (for backend::heap_problem).
struct heap_demand {
  std::string what;          //!< "T1 8 KiB x 1048576 threads"
  std::uint64_t blocks = 0;  //!< live at once
  std::uint64_t size = 0;    //!< bytes of the largest
};

//! Heap bytes toga needs for `d`, conservatively: up to 1 KiB, blocks x size class x 4/3 (a
//! 4 KiB bin holds at worst 3 of 4 KiB in 1 KiB blocks) x 128/124 (the chunk's header pages) plus
//! one 512 KiB chunk per arena (each arena fills its own); above 1 KiB, blocks x the power of two
//! of at least 4 KiB (TBuddy).
std::uint64_t toga_heap_needed(const heap_demand& d, unsigned arenas);

//! The usage error for the first of `demands` that a toga heap of `heap_bytes` with `arenas`
//! arenas cannot hold, or "". `heap_origin` says where the size came from ("--heap 4 KiB").
std::string check_heap(const std::vector<heap_demand>& demands, std::uint64_t heap_bytes, unsigned arenas,
                       const std::string& allocator, const std::string& heap_origin);

//! The GPU backend (nullptr when toga-bench was built without CUDA).
std::unique_ptr<backend> make_gpu_backend();
//! The simulator backend (nullptr when toga-bench was built without the simulator).
std::unique_ptr<backend> make_sim_backend();

//! Bytes as "16 B", "4 KiB", "8 GiB": the largest binary unit that divides them exactly.
std::string format_bytes(std::uint64_t b);

//! Median, min and max of a sample (0 for an empty one).
double median(std::vector<double> v);

//! A 64-bit mix (splitmix64 finaliser); used for per-allocation patterns and sizes.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

//! T3's size for thread `tid`: uniform in [16, hi] from a per-thread hash.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline std::uint64_t mixed_size(std::uint64_t tid, std::uint64_t hi, std::uint64_t seed) {
  return 16 + mix64(tid ^ (seed << 40)) % (hi - 15);
}

}  // namespace toga::bench
