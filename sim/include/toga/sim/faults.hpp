//! @file toga/sim/faults.hpp
//! The simulator's fault-site registry (docs/simulator.md §6.8; sites named in toga/fault.hpp).
//!
//! A run enables a set of sites (`run_limits::faults`, one bit per `toga::fault_site`; the
//! command line's `--faults all|none|site,site,...`). Activation is two-level, as in
//! FoundationDB's BUGGIFY, and every decision is a data choice drawn from the schedule
//! (`world::choose`), so replay and shrinking cover faults exactly like scheduling decisions:
//!  1. per schedule: at its first hit, an enabled site becomes active with probability 1/4
//!     (choice value 3 of 4);
//!  2. per hit: an active site fires with probability 1/4 (choice value 3 of 4).
//! Value 0 of every choice means "no fault", so the fair tail (which answers 0) and the
//! shrinker (which resets choices to 0) never add faults. A disabled site draws nothing: with
//! `faults = 0` schedules are exactly those of a simulator without the registry.
//!
//! What a firing site does (`world::inject`, `world::activemask`, `platform::poison`):
//!  - stall sites: the lane is kept off for `stall_steps_min`..`stall_steps_max` scheduling
//!    points (drawn from the schedule) while the other lanes run; it is woken early only when no
//!    other lane can run. The call itself is not a scheduling point.
//!  - delay sites: as a stall, `delay_factor` times longer.
//!  - failure sites: `inject` returns true (the core takes its out-of-memory path).
//!  - partial-mask: the lane closing an `activemask` group keeps a random subset of it (each
//!    other lane joins with probability 1/2); the rest stay parked and form their own groups.
//!  - poison-freed: `platform::poison(p, n)` fills the n bytes with `poison_byte`.
#pragma once

#include <cstdint>
#include <string>

#include "toga/fault.hpp"

namespace toga::sim {

inline constexpr std::uint32_t all_fault_sites = (std::uint32_t{1} << toga::fault_site_count) - 1;
static_assert(toga::fault_site_count <= 32, "run_limits::faults has one bit per site");
inline constexpr std::uint32_t fault_bit(toga::fault_site s) { return std::uint32_t{1} << static_cast<unsigned>(s); }

//! Stall length in scheduling points (a stall site that fires keeps its lane off this long).
inline constexpr std::uint32_t stall_steps_min = 64;
inline constexpr std::uint32_t stall_steps_max = 512;
//! A delay site stalls this many times longer.
inline constexpr std::uint32_t delay_factor = 4;
//! The byte poison() writes (0xA5: no valid link, count or state of the core reads as it).
inline constexpr unsigned char poison_byte = 0xa5;

//! "none", "all", or the enabled sites' names joined by commas (toga::to_string(fault_site)).
std::string faults_to_string(std::uint32_t mask);
//! Parses "none", "all" or a comma-separated list of site names. False and a message naming
//! the valid sites on an unknown name.
bool parse_faults(const std::string& s, std::uint32_t& mask, std::string& error);

}  // namespace toga::sim
