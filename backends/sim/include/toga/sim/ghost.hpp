//! @file toga/sim/ghost.hpp
//! The simulator's ghost table (toga/ghost.hpp): counters the core reports with
//! `toga::ghost_add<P>` and scenario invariants read, keyed by (kind, address). One table per OS
//! thread (a world runs on one thread); a scenario clears it when it builds its instance, before
//! the schedule starts. `for_each` visits one kind's counters in the order they were first
//! touched, which the schedule decides: checks are deterministic.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "toga/ghost.hpp"

namespace toga::sim {

class ghost_table {
 public:
  static ghost_table& current() {
    thread_local ghost_table t;
    return t;
  }
  void clear() {
    index_.clear();
    entries_.clear();
    nonzero_.clear();
  }
  void add(ghost_kind k, const void* key, std::int64_t delta) {
    if (delta == 0) return;
    auto [it, fresh] = index_.try_emplace(make_key(k, key), entries_.size());
    if (fresh) entries_.push_back({k, reinterpret_cast<std::uintptr_t>(key), 0, npos});
    entry& e = entries_[it->second];
    e.value += delta;
    if (e.value != 0 && e.slot == npos) {  // keep the list of non-zero counters
      e.slot = nonzero_.size();
      nonzero_.push_back(it->second);
    } else if (e.value == 0 && e.slot != npos) {
      entries_[nonzero_.back()].slot = e.slot;
      nonzero_[e.slot] = nonzero_.back();
      nonzero_.pop_back();
      e.slot = npos;
    }
  }
  //! The word that stands for counter (k, key) in a step observer's accesses (declared plain
  //! state, world::plain_access): not an address of real memory (bit 63 set), so it never
  //! names a real word. An invariant that reads the counter declares [word, word + 1).
  static const void* word(ghost_kind k, const void* key) {
    return reinterpret_cast<const void*>((std::uintptr_t{1} << 63) | (static_cast<std::uintptr_t>(k) << 56) |
                                         (reinterpret_cast<std::uintptr_t>(key) & ((std::uintptr_t{1} << 56) - 1)));
  }
  std::int64_t get(ghost_kind k, const void* key) const {
    auto it = index_.find(make_key(k, key));
    return it == index_.end() ? 0 : entries_[it->second].value;
  }
  //! f(address, value) for every counter of kind k, in first-touch order.
  template <class F>
  void for_each(ghost_kind k, F&& f) const {
    for (const entry& e : entries_)
      if (e.kind == k) f(e.addr, e.value);
  }
  //! f(address, value) for every non-zero counter of kind k (order: decided by the schedule).
  template <class F>
  void for_each_nonzero(ghost_kind k, F&& f) const {
    for (std::size_t i : nonzero_)
      if (entries_[i].kind == k) f(entries_[i].addr, entries_[i].value);
  }
  //! The i-th counter ever touched (i < size()), for checks that visit one in turn.
  std::size_t size() const { return entries_.size(); }
  ghost_kind kind_at(std::size_t i) const { return entries_[i].kind; }
  std::uintptr_t addr_at(std::size_t i) const { return entries_[i].addr; }
  std::int64_t value_at(std::size_t i) const { return entries_[i].value; }

 private:
  static constexpr std::size_t npos = ~std::size_t{0};
  struct entry {
    ghost_kind kind;
    std::uintptr_t addr;
    std::int64_t value;
    std::size_t slot;  // position in nonzero_, or npos
  };
  static std::uint64_t make_key(ghost_kind k, const void* key) {
    return (reinterpret_cast<std::uintptr_t>(key) << 3) ^ static_cast<std::uint64_t>(k);
  }
  std::unordered_map<std::uint64_t, std::size_t> index_;
  std::vector<entry> entries_;
  std::vector<std::size_t> nonzero_;
};

}  // namespace toga::sim
