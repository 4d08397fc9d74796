//! @file toga/sim/coverage.hpp
//! Coverage of the core's races (docs/simulator.md §19): which pairs of Platform operations that
//! touch one location from two lanes, at least one of them a write, a set of schedules has run in
//! each order.
//!
//! A site is the source line of one Platform operation (`std::source_location` of the call;
//! every atomic of `toga::sim::platform` takes it as a defaulted last argument). While a
//! recorder is installed on the thread (`coverage_recorder::scope`), every atomic load, store,
//! RMW and compare-exchange of the running lane reports (location, site, write?, lane). For each
//! earlier access to the same location by another lane, kept as that lane's latest access there,
//! with at least one of the two a write, the recorder counts the ordered pair (earlier site, later
//! site), and counts it as *adjacent* when the earlier access was its lane's latest operation:
//! the schedule switched away from that lane right after it (a preemption fell between the two).
//! Locations are forgotten at the start of each schedule (begin_schedule). Failed
//! compare-exchanges count as writes (one instruction that may write, as on the GPU).
//!
//! Cost: nothing when no recorder is installed (one thread-local load per operation); with one,
//! a hash lookup per operation and a scan of the lanes that touched the location.
//! Not thread-safe: one recorder per thread; merge() combines them.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

namespace toga::sim {

//! A Platform call site: file (the literal std::source_location gives) and line.
struct coverage_site {
  const char* file = "";
  std::uint32_t line = 0;
  bool operator==(const coverage_site& o) const { return line == o.line && std::string_view(file) == o.file; }
};

struct coverage_site_hash {
  std::size_t operator()(const coverage_site& s) const;
};

//! An ordered pair of sites: `first` ran, then `second` touched the same location from another lane.
struct coverage_pair {
  coverage_site first, second;
  bool operator==(const coverage_pair& o) const { return first == o.first && second == o.second; }
};
struct coverage_pair_hash {
  std::size_t operator()(const coverage_pair& p) const;
};

class coverage_recorder {
 public:
  struct pair_count {
    std::uint64_t seen = 0;      //!< times this order ran
    std::uint64_t adjacent = 0;  //!< of them, with a preemption of the first lane right after its access
  };
  //! Forgets every location (a new schedule's memory).
  void begin_schedule();
  //! One access of `lane` at `site` to `location`.
  void access(const void* location, bool write, const std::source_location& site, unsigned lane);
  //! Adds `o`'s counts to this one's.
  void merge(const coverage_recorder& o);

  const std::unordered_map<coverage_pair, pair_count, coverage_pair_hash>& pairs() const { return pairs_; }
  const std::unordered_map<coverage_site, std::uint64_t, coverage_site_hash>& sites() const { return sites_; }

  //! The recorder installed on this thread, or nullptr.
  static coverage_recorder* current() { return current_; }
  //! Installs `r` on this thread for the scope's lifetime (the previous one comes back after).
  class scope {
   public:
    explicit scope(coverage_recorder* r) : saved_(current_) { current_ = r; }
    ~scope() { current_ = saved_; }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    coverage_recorder* saved_;
  };

 private:
  struct last_access {
    unsigned lane;
    coverage_site site;
    bool write;
    std::uint64_t op;  // the lane's operation count at this access
  };
  static thread_local coverage_recorder* current_;
  std::unordered_map<const void*, std::vector<last_access>> locations_;
  std::vector<std::uint64_t> lane_ops_;
  std::unordered_map<coverage_pair, pair_count, coverage_pair_hash> pairs_;
  std::unordered_map<coverage_site, std::uint64_t, coverage_site_hash> sites_;
};

//! "core/include/toga/ualloc.hpp:563" for a site in the source tree (the path from the last
//! "core/", "sim/", "backends/" or "tests/" on; the file's name otherwise).
std::string site_name(const coverage_site& s);
//! Whether the site is in the allocator core (core/include/toga/).
bool core_site(const coverage_site& s);

//! What `toga-sim coverage` prints: the core's site pairs and whether both orders ran.
struct coverage_summary {
  std::uint64_t core_sites = 0;        //!< core sites that ran
  std::uint64_t unordered_pairs = 0;   //!< pairs {A, B} of core sites that met (either order)
  std::uint64_t both_orders = 0;       //!< of them, run in both orders (A == B counts as both)
  std::uint64_t adjacent_both = 0;     //!< of them, both orders with a preemption between
  //! Pairs run in one order only: {first, second, times}, most frequent first.
  std::vector<std::pair<coverage_pair, std::uint64_t>> one_order;
};
coverage_summary summarize(const coverage_recorder& r);

}  // namespace toga::sim
