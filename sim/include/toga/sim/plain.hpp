//! @file toga/sim/plain.hpp
//! Declared plain state: scenario ghost variables whose every read and write a lane makes is
//! told to the step observer (world::plain_access), so that `toga-sim dpor --plain declared`
//! (docs/simulator.md §20.1) can take two steps as dependent exactly when they touch the same
//! ghost word, instead of ordering every step that may write plain state.
//!
//! A scenario whose plain shared state is *fully declared* (scenario::plain_declared) keeps in
//! `ghost<T>` (or reports with world::plain_access) every non-atomic word that a lane reads and
//! another lane writes, and every word an invariant reads that is not an atomic one; and declares
//! what each invariant reads (world::add_invariant_reading). Lane-private words, and
//! words that only check_final reads, need not be declared: equivalent executions end in the
//! same state.
//!
//! Reads and writes from invariants and from outside lanes (construction, check_final) are not
//! reported. Nothing here changes a value, a scheduling point or a trace hash.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "toga/sim/world.hpp"

namespace toga::sim {

//! A plain variable of scenario ghost state, one word to the step observer (its address).
template <class T>
class ghost {
 public:
  ghost() = default;
  ghost(T v) : v_(std::move(v)) {}  // NOLINT(google-explicit-constructor): reads as a T
  ghost(const ghost& o) : v_(o.v_) {}
  ghost& operator=(const ghost& o) {
    set(o.get());
    return *this;
  }

  //! A read by the running lane.
  T get() const {
    note(false);
    return v_;
  }
  operator T() const { return get(); }  // NOLINT(google-explicit-constructor)
  //! A write by the running lane.
  void set(T v) {
    note(true);
    v_ = std::move(v);
  }
  ghost& operator=(T v) {
    set(std::move(v));
    return *this;
  }
  //! An add by the running lane (integers: told as an add, which commutes with another add of the
  //! word unless an invariant that is not a sum reads it, and with an add of the same direction
  //! where the word's invariants are bounds; dpor, docs/simulator.md §20.1).
  ghost& operator+=(T d) {
    note_add(is_down(d, false));
    v_ += d;
    return *this;
  }
  ghost& operator-=(T d) {
    note_add(is_down(d, true));
    v_ -= d;
    return *this;
  }
  ghost& operator++() { return *this += T(1); }
  ghost& operator--() { return *this -= T(1); }
  //! The value without telling the observer: for invariants, check_final and construction
  //! (which are not reported anyway), where the intent should read plainly.
  const T& peek() const { return v_; }

 private:
  void note(bool write) const {
    if (world* w = world::current()) w->plain_access(&v_, write);
  }
  // Whether `d` added (or, with `minus`, subtracted) lowers the value. An unsigned += that is
  // meant to wrap (x += unsigned(-1)) counts as a raise: lower an unsigned word with -=.
  static bool is_down(const T& d, bool minus) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return minus ? d > T(0) : d < T(0);
    else if constexpr (std::is_integral_v<T>) return minus && d != T(0);
    else return minus;
  }
  void note_add(bool down) const {
    if (world* w = world::current()) {
      if constexpr (std::is_integral_v<T>) w->plain_add(&v_, down);
      else w->plain_access(&v_, true);
    }
  }
  T v_{};
};

//! The byte range of a contiguous container's elements, for world::add_invariant_reading.
template <class C>
std::pair<const void*, const void*> range_of(const C& c) {
  return {static_cast<const void*>(c.data()), static_cast<const void*>(c.data() + c.size())};
}
//! The byte range of one object, for world::add_invariant_reading.
template <class T>
std::pair<const void*, const void*> range_of_object(const T& x) {
  return {static_cast<const void*>(&x), static_cast<const void*>(&x + 1)};
}

}  // namespace toga::sim
