#include "toga/sim/memory.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "toga/sim/world.hpp"

namespace toga::sim {

namespace {
bool is_acquire(memory_order o) {
  return o == memory_order::acquire || o == memory_order::acq_rel || o == memory_order::seq_cst;
}
bool is_release(memory_order o) {
  return o == memory_order::release || o == memory_order::acq_rel || o == memory_order::seq_cst;
}
std::uint64_t read_raw(const void* p, unsigned bytes) {
  if (bytes == 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void write_raw(void* p, unsigned bytes, std::uint64_t v) {
  if (bytes == 8) {
    std::memcpy(p, &v, 8);
  } else {
    const std::uint32_t x = static_cast<std::uint32_t>(v);
    std::memcpy(p, &x, 4);
  }
}
std::size_t hash_addr(std::uintptr_t a) { return static_cast<std::size_t>((a >> 2) * 0x9e3779b97f4a7c15ull >> 20); }
}  // namespace

void memory_state::reset(world& w, memory_model m, const std::vector<unsigned>& blocks, unsigned num_blocks) {
  w_ = &w;
  weak_ = m == memory_model::weak;
  lanes_ = static_cast<unsigned>(blocks.size());
  blocks_count_ = num_blocks;
  block_ = blocks;
  locs_.clear();
  seen_.clear();
  if (table_.empty()) table_.assign(1024, slot{0, 0, 0});
  if (++gen_ == 0) {  // wrapped: clear for real
    for (auto& s : table_) s.gen = 0;
    gen_ = 1;
  }
  stale_reads_ = 0;
  cur_ = 0;
  check_races_ = w.race_check();
  const std::size_t n = lanes_;
  clocks_.assign(n * n, 0);
  for (unsigned i = 0; i < lanes_; ++i) clock(i)[i] = 1;  // epochs start at 1; 0 is "before the launch"
  pend_any_.assign(n * n, 0);
  pend_dev_.assign(n * n, 0);
  observed_.assign(n * n, 0);
  snap_.assign(n, 0);
  rel_fence_.assign(n, token{});
  global_.assign((std::size_t{num_blocks} + 1) * n, 0);
  views_.assign(n, 0);  // row 0: the "no view" handle
  refs_.assign(1, 0);
  free_views_.clear();
  scratch_.assign(n, 0);
}

// ---- views ------------------------------------------------------------------------------------

std::uint32_t memory_state::make_view(const std::uint32_t* src) {
  std::uint32_t h;
  if (!free_views_.empty()) {
    h = free_views_.back();
    free_views_.pop_back();
  } else {
    h = static_cast<std::uint32_t>(refs_.size());
    refs_.push_back(0);
    views_.resize(views_.size() + lanes_);
  }
  std::memcpy(&views_[std::size_t{h} * lanes_], src, sizeof(std::uint32_t) * lanes_);
  refs_[h] = 1;
  return h;
}

bool memory_state::join_clock(std::uint32_t* dst, const std::uint32_t* src) {
  bool changed = false;
  for (unsigned i = 0; i < lanes_; ++i)
    if (src[i] > dst[i]) {
      dst[i] = src[i];
      changed = true;
    }
  return changed;
}

void memory_state::join_into_lane(unsigned me, const std::uint32_t* src) {
  if (join_clock(clock(me), src) && snap_[me]) {
    unref(snap_[me]);
    snap_[me] = 0;
  }
}

std::uint32_t memory_state::snapshot(unsigned me) {
  if (!snap_[me]) snap_[me] = make_view(clock(me));
  ref(snap_[me]);
  return snap_[me];
}

void memory_state::bump(unsigned me) {
  ++clock(me)[me];
  if (snap_[me]) {
    unref(snap_[me]);
    snap_[me] = 0;
  }
}

memory_state::token memory_state::own_release(unsigned me, scope s) { return token{snapshot(me), block_[me], s}; }

memory_state::token memory_state::join_tokens(const token& a, const token& b) {
  if (!a.view) {
    ref(b.view);
    return b;
  }
  if (!b.view || a.view == b.view) {
    ref(a.view);
    return a;
  }
  std::memcpy(scratch_.data(), view(a.view), sizeof(std::uint32_t) * lanes_);
  join_clock(scratch_.data(), view(b.view));
  token t;
  t.view = make_view(scratch_.data());
  // More synchronisation than either part alone (the sound direction): only racy executions,
  // which get their own verdict, mix releases of several blocks on one location.
  t.block = a.block == b.block ? a.block : mixed_block;
  t.sc = (a.sc == scope::device || b.sc == scope::device) ? scope::device : scope::block;
  return t;
}

// A release/acquire pair is morally strong when each operation's scope includes the other lane.
void memory_state::acquire_from(unsigned me, const token& t, scope s) {
  if (!t.view) return;
  const bool same = t.block == block_[me] || t.block == mixed_block;
  if ((t.sc == scope::device || same) && (s == scope::device || same)) join_into_lane(me, view(t.view));
}

void memory_state::keep_for_fence(unsigned me, const token& t) {
  if (!t.view) return;
  const bool same = t.block == block_[me] || t.block == mixed_block;
  if (same) join_clock(&pend_any_[std::size_t{me} * lanes_], view(t.view));
  else if (t.sc == scope::device) join_clock(&pend_dev_[std::size_t{me} * lanes_], view(t.view));
}

void memory_state::acquire_fence(unsigned me, scope s) {
  join_into_lane(me, &pend_any_[std::size_t{me} * lanes_]);
  if (s == scope::device) join_into_lane(me, &pend_dev_[std::size_t{me} * lanes_]);
}

void memory_state::release_fence(unsigned me, scope s) {
  unref(rel_fence_[me].view);
  rel_fence_[me] = own_release(me, s);
  bump(me);
}

void memory_state::sc_fence(unsigned me, scope s) {
  acquire_fence(me, s);
  {  // cumulativity: what we observed happens before the fence (within its scope)
    const std::uint32_t* obs = &observed_[std::size_t{me} * lanes_];
    std::uint32_t* c = clock(me);
    bool changed = false;
    for (unsigned j = 0; j < lanes_; ++j)
      if (obs[j] > c[j] && (s == scope::device || block_[j] == block_[me])) {
        c[j] = obs[j];
        changed = true;
      }
    if (changed && snap_[me]) {
      unref(snap_[me]);
      snap_[me] = 0;
    }
  }
  std::uint32_t* blk = &global_[std::size_t{block_[me]} * lanes_];
  std::uint32_t* dev = &global_[std::size_t{blocks_count_} * lanes_];
  join_into_lane(me, blk);
  if (s == scope::device) join_into_lane(me, dev);
  join_clock(blk, clock(me));
  if (s == scope::device) join_clock(dev, clock(me));
  release_fence(me, s);
}

// ---- locations --------------------------------------------------------------------------------

memory_state::location& memory_state::locate(const void* p, unsigned bytes) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  if (locs_.size() * 2 >= table_.size()) {  // grow: rehash the current generation's entries
    std::vector<slot> old(table_.size() * 2, slot{0, 0, 0});
    old.swap(table_);
    for (const slot& s : old)
      if (s.gen == gen_) {
        std::size_t i = hash_addr(s.addr) & (table_.size() - 1);
        while (table_[i].gen == gen_) i = (i + 1) & (table_.size() - 1);
        table_[i] = s;
      }
  }
  std::size_t i = hash_addr(a) & (table_.size() - 1);
  while (table_[i].gen == gen_ && table_[i].addr != a) i = (i + 1) & (table_.size() - 1);
  const std::uint64_t raw = read_raw(p, bytes);
  if (table_[i].gen != gen_) {
    table_[i] = slot{a, static_cast<std::uint32_t>(locs_.size()), gen_};
    location& l = locs_.emplace_back();
    l.addr = a;
    l.bytes = bytes;
    seen_.resize(seen_.size() + lanes_, 0);
    push_store(l, raw, init_lane, token{});
    return l;
  }
  location& l = locs_[table_[i].index];
  if (l.bytes != bytes || l.newest().value != raw) {
    // Written behind the model's back (plain code, poison, another width): start again from the
    // memory's value, visible to every lane.
    for (std::uint32_t k = 0; k < l.count; ++k) unref(l.ring[(l.first + k) % history_depth].carried.view);
    l.count = 0;
    l.bytes = bytes;
    push_store(l, raw, init_lane, token{});
    const std::size_t li = table_[i].index;
    for (unsigned j = 0; j < lanes_; ++j) seen(static_cast<std::uint32_t>(li), j) = l.newest().mo;
  }
  return l;
}

void memory_state::push_store(location& l, std::uint64_t v, unsigned me, token carried) {
  if (l.count == history_depth) {
    unref(l.ring[l.first].carried.view);
    l.first = (l.first + 1) % history_depth;
    --l.count;
  }
  store_rec& r = l.ring[(l.first + l.count) % history_depth];
  ++l.count;
  r.value = v;
  r.mo = l.next_mo++;
  r.lane = me;
  r.epoch = me == init_lane ? 0 : clock(me)[me];
  r.carried = carried;
}

// ---- happens-before marks -----------------------------------------------------------------------

hb_mark memory_state::mark_here() {
  const unsigned me = w_->self().index;
  return hb_mark{me, clock(me)[me]};
}

bool memory_state::happened_before(const hb_mark& m) { return hb(w_->self().index, m.lane, m.epoch); }

// ---- scoped races ------------------------------------------------------------------------------

void memory_state::check_race(location& l, unsigned me, bool write, scope s, const char* what) {
  if (!check_races_) return;
  const unsigned b = block_[me];
  auto conflicts = [&](const access_rec& a) {
    return a.lane != init_lane && a.lane != me && a.block != b && (s == scope::block || a.sc == scope::block) &&
           !ordered(me, a);
  };
  const access_rec* other = nullptr;
  if (conflicts(l.last_write)) other = &l.last_write;
  if (!other && write)
    for (unsigned k = 0; k < l.nreads; ++k)
      if (conflicts(l.reads[k])) {
        other = &l.reads[k];
        break;
      }
  if (!other) return;
  std::ostringstream m;
  auto name = [&](scope x) { return x == scope::block ? inner_name_ : outer_name_; };
  m << "scoped race: " << w_->describe(me) << " " << what << " with " << name(s) << " scope, and "
    << w_->describe(other->lane) << " " << (other->write ? "wrote" : "read") << " the same " << l.bytes
    << "-byte word with " << name(other->sc) << " scope, "
    << "unordered by happens-before"
    << ": a " << inner_name_ << "-scope atomic is atomic only within its " << inner_name_
    << ", so the two are not morally strong (PTX) and race";
  w_->abort_run(verdict_kind::cuda_rule, m.str());
}

void memory_state::record_access(location& l, unsigned me, bool write, scope s) {
  access_rec a;
  a.lane = me;
  a.epoch = clock(me)[me];
  a.block = block_[me];
  a.sc = s;
  a.write = write;
  if (write) {
    l.last_write = a;
    l.nreads = 0;
    return;
  }
  for (unsigned k = 0; k < l.nreads; ++k)
    if (l.reads[k].lane == me) {
      l.reads[k] = a;
      return;
    }
  if (l.nreads < kept_reads) {
    l.reads[l.nreads++] = a;
  } else {  // keep the newest: drop the oldest
    std::move(l.reads + 1, l.reads + kept_reads, l.reads);
    l.reads[kept_reads - 1] = a;
  }
}

// ---- subsumed reads (run_limits::skip_subsumed_reads) -------------------------------------------

// Acquiring `a` (with any order, at any scope, by any lane) joins no more than acquiring `b`: no
// view, or a view no larger and a block and scope under which `b` joins whenever `a` does
// (acquire_from, keep_for_fence).
bool memory_state::token_leq(const token& a, const token& b) const {
  if (!a.view) return true;
  if (!b.view) return false;
  if (a.block != b.block && b.block != mixed_block) return false;
  if (a.sc != b.sc && b.sc != scope::device) return false;
  if (a.view == b.view) return true;
  const std::uint32_t* va = view(a.view);
  const std::uint32_t* vb = view(b.view);
  for (unsigned i = 0; i < lanes_; ++i)
    if (va[i] > vb[i]) return false;
  return true;
}

// `older` (earlier in modification order) subsumes `newer` for a load: the same value, a view no
// larger, and an observation (observed_, for seq_cst cumulativity) no newer. What else a read
// changes is the lane's coherence floor (seen), lower for the older store: a lane that read it can
// still read everything the other could, and nothing else depends on which of the two it read.
bool memory_state::subsumes(const store_rec& older, const store_rec& newer) const {
  if (older.value != newer.value) return false;
  if (older.lane != init_lane && (older.lane != newer.lane || older.epoch > newer.epoch)) return false;
  return token_leq(older.carried, newer.carried);
}

// ---- operations --------------------------------------------------------------------------------

std::uint64_t memory_state::load(const void* p, unsigned bytes, memory_order o, scope s) {
  const unsigned me = w_->self().index;
  location& l = locate(p, bytes);
  if (o == memory_order::seq_cst) sc_fence(me, s);
  check_race(l, me, false, s, "loads it");
  record_access(l, me, false, s);
  const std::uint32_t li = static_cast<std::uint32_t>(&l - locs_.data());
  const std::uint32_t floor = seen(li, me);
  unsigned candidates = 0;
  for (unsigned k = 0; k < l.count; ++k) {
    const store_rec& r = l.nth_newest(k);
    if (r.mo < floor) break;
    ++candidates;
    if (hb(me, r.lane, r.epoch)) break;
  }
  // Under sc (views kept only for the scoped-race check) every load reads the newest store.
  unsigned pick = 0;
  if (weak_ && candidates > 1) {
    if (w_->limits().skip_subsumed_reads) {
      // The candidates no older candidate subsumes; a subsumed one is read through the oldest
      // candidate that subsumes it. The first choice stays the newest value (the fair tail's and
      // the await rule's "newest"): the newest store, or the store that stands for it.
      unsigned keep[history_depth];
      unsigned n = 0;
      for (unsigned k = 0; k < candidates; ++k) {
        unsigned by = k;
        for (unsigned j = candidates; j-- > k + 1;)
          if (subsumes(l.nth_newest(j), l.nth_newest(k))) {
            by = j;
            break;
          }
        if (k == 0) keep[n++] = by;
        else if (by == k && keep[0] != k) keep[n++] = k;
      }
      pick = n > 1 ? keep[w_->choose(n)] : keep[0];
    } else {
      pick = w_->choose(candidates);
    }
  }
  const store_rec& r = l.nth_newest(pick);
  if (pick) ++stale_reads_;
  seen(li, me) = std::max(floor, r.mo);
  if (r.lane != init_lane) {
    std::uint32_t& o = observed_[std::size_t{me} * lanes_ + r.lane];
    o = std::max(o, r.epoch);
  }
  if (is_acquire(o)) acquire_from(me, r.carried, s);
  else keep_for_fence(me, r.carried);
  if (tracer_) tracer_("load", me, p, r.value, pick, candidates);
  return r.value;
}

void memory_state::store(void* p, unsigned bytes, std::uint64_t v, memory_order o, scope s) {
  const unsigned me = w_->self().index;
  location& l = locate(p, bytes);
  if (o == memory_order::seq_cst) sc_fence(me, s);
  check_race(l, me, true, s, "stores to it");
  record_access(l, me, true, s);
  write_raw(p, bytes, v);
  token t;
  if (is_release(o)) {
    t = own_release(me, s);
  } else {
    t = rel_fence_[me];
    ref(t.view);
  }
  push_store(l, v, me, t);
  seen(static_cast<std::uint32_t>(&l - locs_.data()), me) = l.newest().mo;
  if (is_release(o)) bump(me);
  if (tracer_) tracer_("store", me, p, v, 0, 1);
}

std::uint64_t memory_state::rmw_read(void* p, unsigned bytes) {
  location& l = locate(p, bytes);
  cur_ = static_cast<std::uint32_t>(&l - locs_.data());
  return l.newest().value;
}

void memory_state::rmw_write(void* p, unsigned bytes, std::uint64_t v, memory_order o, scope s) {
  const unsigned me = w_->self().index;
  location& l = locs_[cur_];
  if (o == memory_order::seq_cst) sc_fence(me, s);
  check_race(l, me, true, s, "updates it (RMW)");
  record_access(l, me, true, s);
  write_raw(p, bytes, v);
  const token prev = l.newest().carried;
  if (is_acquire(o)) acquire_from(me, prev, s);
  else keep_for_fence(me, prev);
  token own;
  if (is_release(o)) own = own_release(me, s);
  else {
    own = rel_fence_[me];
    ref(own.view);
  }
  const token carried = join_tokens(prev, own);  // the release sequence continues through RMWs
  unref(own.view);
  push_store(l, v, me, carried);
  seen(cur_, me) = l.newest().mo;
  if (is_release(o)) bump(me);
  if (tracer_) tracer_("rmw", me, p, v, 0, 1);
}

void memory_state::rmw_fail(void*, unsigned, memory_order o, scope s) {
  const unsigned me = w_->self().index;
  location& l = locs_[cur_];
  if (o == memory_order::seq_cst) sc_fence(me, s);
  check_race(l, me, false, s, "compares it (failed CAS)");
  record_access(l, me, false, s);
  if (is_acquire(o)) acquire_from(me, l.newest().carried, s);
  else keep_for_fence(me, l.newest().carried);
  seen(cur_, me) = std::max(seen(cur_, me), l.newest().mo);
  if (tracer_) tracer_("cas-fail", me, reinterpret_cast<const void*>(l.addr), l.newest().value, 0, 1);
}

void memory_state::fence(memory_order o, scope s) {
  const unsigned me = w_->self().index;
  switch (o) {
    case memory_order::relaxed: break;
    case memory_order::acquire: acquire_fence(me, s); break;
    case memory_order::release: release_fence(me, s); break;
    case memory_order::acq_rel:
      acquire_fence(me, s);
      release_fence(me, s);
      break;
    case memory_order::seq_cst: sc_fence(me, s); break;
  }
}

void memory_state::barrier(const unsigned* lanes, unsigned n) {
  if (n < 2) return;
  std::fill(scratch_.begin(), scratch_.end(), 0u);
  for (unsigned k = 0; k < n; ++k) join_clock(scratch_.data(), clock(lanes[k]));
  for (unsigned k = 0; k < n; ++k) {
    join_into_lane(lanes[k], scratch_.data());
    bump(lanes[k]);
  }
}

}  // namespace toga::sim
