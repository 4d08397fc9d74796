//! @file toga/fault.hpp
//! Named fault sites: places in the core where a test platform may inject a fault (a long stall
//! of the lane, a failed backing allocation, a delayed grace period, poisoned memory), after
//! FoundationDB's BUGGIFY (docs/simulator.md §6.8).
//!
//! Core code marks a site with `P::inject(fault_site::X)`. The meaning of the result depends on
//! the site's kind:
//!  - stall sites: the call is a scheduling point at which the simulator may keep the lane off
//!    for a long time; the result is ignored (always false).
//!  - failure sites: `true` means "make this operation fail as if the resource were exhausted";
//!    the core then takes its out-of-memory path.
//! `P::poison(p, bytes)` marks memory that the core has just given back (a retired bin, a freed
//! chunk): a test platform may overwrite it so that a stale reader reads garbage.
//!
//! On CUDA and native threads both are constexpr no-ops (`inject` returns false), so the sites
//! compile to nothing. The simulator decides per schedule which sites are active and draws every
//! decision from the recorded choice stream, so replay and shrinking cover faults too.
#pragma once

#include <cstdint>

namespace toga {

//! Every fault site of the core. Keep `fault_site_count` last; names for reports in to_string.
enum class fault_site : std::uint16_t {
  // stall sites (a lane stops for a long time here while the rest of the machine moves on)
  stall_read_to_rmw,        //!< between reading a shared word and the RMW/CAS that depends on it
  stall_speculative_undo,   //!< between a speculative decrement (semaphore or bin free count) and its undo
  stall_read_section,       //!< inside an RCU read-side critical section
  stall_tbuddy_split,       //!< in the middle of a buddy split (between publishing a half and signalling)
  stall_tbuddy_merge,       //!< in the middle of a buddy merge cascade
  stall_pin_swap,           //!< between seeing a pinned bin exhausted and replacing the pin
  stall_grow,               //!< between a GROW result and the publication of the new bin(s)
  stall_inbox_hold,         //!< while a taker holds an inbox bin it found exhausted, before it lets go
  // failure sites (true: fail this operation as if memory were exhausted)
  fail_chunk,               //!< UAlloc's request for a chunk from TBuddy fails
  fail_tbuddy_block,        //!< a TBuddy allocation (chunk or large block) fails at the top level
  // delay sites
  delay_grace_period,       //!< an RCU barrier waits longer before flipping the epoch
  // sites the simulator consults itself (no P::inject call in the core)
  partial_mask,             //!< __activemask() at a warp-aggregated entry point splits its group into random subsets
  poison_freed,             //!< P::poison overwrites the memory the core just gave back
  fault_site_count
};

inline constexpr unsigned fault_site_count = static_cast<unsigned>(fault_site::fault_site_count);

constexpr const char* to_string(fault_site s) {
  switch (s) {
    case fault_site::stall_read_to_rmw: return "stall-read-to-rmw";
    case fault_site::stall_speculative_undo: return "stall-speculative-undo";
    case fault_site::stall_read_section: return "stall-read-section";
    case fault_site::stall_tbuddy_split: return "stall-tbuddy-split";
    case fault_site::stall_tbuddy_merge: return "stall-tbuddy-merge";
    case fault_site::stall_pin_swap: return "stall-pin-swap";
    case fault_site::stall_grow: return "stall-grow";
    case fault_site::stall_inbox_hold: return "stall-inbox-hold";
    case fault_site::fail_chunk: return "fail-chunk";
    case fault_site::fail_tbuddy_block: return "fail-tbuddy-block";
    case fault_site::delay_grace_period: return "delay-grace-period";
    case fault_site::partial_mask: return "partial-mask";
    case fault_site::poison_freed: return "poison-freed";
    case fault_site::fault_site_count: break;
  }
  return "?";
}

//! Whether a site is a failure site (its `inject` result matters) rather than a stall or delay.
constexpr bool is_failure_site(fault_site s) {
  return s == fault_site::fail_chunk || s == fault_site::fail_tbuddy_block;
}

}  // namespace toga
