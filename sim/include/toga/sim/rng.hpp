//! @file toga/sim/rng.hpp
//! Portable pseudo-random numbers for the simulator and the tests.
//!
//! splitmix64 (Steele, Lea, Flood, OOPSLA'14) seeds xoshiro256** (Blackman, Vigna, 2018).
//! Both are specified bit for bit, so a seed gives the same sequence with every compiler and
//! standard library (unlike `std::uniform_int_distribution`). `below(n)` uses Lemire's
//! multiply-shift reduction (no modulo bias worth mentioning for n << 2^64).
#pragma once

#include <cstdint>

namespace toga::sim {

//! One step of splitmix64: returns the next value and advances `state`.
constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

//! A stateless 64-bit mix (the splitmix64 finaliser of x).
constexpr std::uint64_t mix64(std::uint64_t x) {
  std::uint64_t s = x;
  return splitmix64(s);
}

//! xoshiro256**: 256-bit state, period 2^256 - 1. Not thread-safe; one per schedule.
class rng {
 public:
  explicit constexpr rng(std::uint64_t seed = 0) { reseed(seed); }
  constexpr void reseed(std::uint64_t seed) {
    std::uint64_t sm = seed;
    for (auto& w : s_) w = splitmix64(sm);
  }
  constexpr std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  //! Uniform in [0, n); n > 0.
  constexpr std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4]{};
};

}  // namespace toga::sim
