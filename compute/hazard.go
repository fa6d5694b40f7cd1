package compute

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"vgpu/abi"
)

// The pipeline-hazard sanitizer's compute half (strict mode, docs/shader.md "Sanitizer").
//
// A run started in strict mode records the bytes its work-items have written so far (stores
// and atomics, each just before it reaches memory, so that whoever sees a value finds it
// recorded): a writeSet of merged ranges. Bytes, not cache
// lines: a packet reading a neighbour of what a dispatch wrote in the same line is no hazard,
// and no report may be a false one. Whoever is not ordered after the run — the CP's packets of
// the same queue, a later dispatch of that queue (Dispatch.After) — asks it, while it is in
// flight, whether an access touches those bytes; if so that is a hazard that happened: the
// write was made, the run had not ended, and nothing in between waited for it. A write the
// run has not made yet is never named. A run started with strict mode off records nothing and
// its checks are a nil test.

// HazardSpans bounds the disjoint ranges a run's write record holds (16 bytes each): a write
// that would need more is not recorded (it is not named: no false report; HazardStats.Unrecorded
// counts them). Contiguous and repeated writes merge, so a dispatch filling buffers needs few.
const HazardSpans = 4096

// Hazard is a pipeline hazard: an access to memory an in-flight dispatch of the same queue had
// written, with nothing ordering it after that dispatch.
type Hazard struct {
	Kind   uint32 // abi.SHADER_HAZARD_*
	Slot   int    // the queue
	VMID   int    // the address space of both accesses
	Opcode uint32 // the accessing packet's PM4 opcode (PACKET_* kinds); 0 for a dispatch's own access
	// Addr and Size are the bytes of the access the writer had written (the first range of them).
	Addr, Size uint64
	// By is the address of the packet that made the access: for a dispatch's own load or store,
	// its DISPATCH packet. Writer is the in-flight dispatch's DISPATCH packet; WriterRun and ByRun
	// are the runs' pool-wide sequence numbers (ByRun 0 for a packet).
	By, Writer       uint64
	WriterRun, ByRun uint64
}

// HazardStats is the sanitizer's state since the pool was made or last Reset.
type HazardStats struct {
	Hazards    uint64 // hazards named
	Last       Hazard // the last one (Kind 0: none yet)
	Unrecorded uint64 // writes a full record could not hold (HazardSpans)
	StaleReads uint64 // stale L0 reads (as Stats.StaleReads, but since Reset)
	LastStale  StaleRead
}

// StaleRead is the last stale L0 read strict mode named.
type StaleRead struct {
	Slot, VMID int
	Addr       uint64
}

// sanitizer is the pool's record of what strict mode named (the SHADER register block).
type sanitizer struct {
	hazards, unrecorded, stale atomic.Uint64
	seq                        atomic.Uint64 // run sequence numbers

	mu        sync.Mutex
	last      Hazard
	lastStale StaleRead
}

func (s *sanitizer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hazards.Store(0)
	s.unrecorded.Store(0)
	s.stale.Store(0)
	s.last, s.lastStale = Hazard{}, StaleRead{}
}

func (s *sanitizer) noteStale(r *Run, addr uint64) {
	s.mu.Lock()
	s.stale.Add(1)
	s.lastStale = StaleRead{Slot: r.d.Slot, VMID: r.d.VMID, Addr: addr}
	s.mu.Unlock()
}

// Strict reports whether strict mode is on now.
func (p *Pool) Strict() bool { return p.strict() }

// Report counts a hazard, keeps it as the last one and logs it (rate-limited). Strict mode off
// by now: nothing is reported.
func (p *Pool) Report(h Hazard) {
	if !p.strict() {
		return
	}
	s := &p.san
	s.mu.Lock()
	s.hazards.Add(1)
	s.last = h
	s.mu.Unlock()
	p.cfg.Log.Warn("compute.hazard", "compute: pipeline hazard (a missing barrier: partial flush, end-of-pipe wait, or a wait on the dispatch's fence)",
		"kind", hazardName(h.Kind), "slot", h.Slot, "vmid", h.VMID, "addr", hex(h.Addr), "size", h.Size,
		"by", hex(h.By), "opcode", hex(uint64(h.Opcode)), "writer", hex(h.Writer), "writer_run", h.WriterRun, "by_run", h.ByRun)
}

// Sanitizer returns what strict mode has named since New or the last Reset.
func (p *Pool) Sanitizer() HazardStats {
	s := &p.san
	s.mu.Lock()
	defer s.mu.Unlock()
	return HazardStats{Hazards: s.hazards.Load(), Last: s.last, Unrecorded: s.unrecorded.Load(),
		StaleReads: s.stale.Load(), LastStale: s.lastStale}
}

func hex(v uint64) string { return fmt.Sprintf("%#x", v) }

func hazardName(k uint32) string {
	switch k {
	case abi.SHADER_HAZARD_PACKET_READ:
		return "packet read"
	case abi.SHADER_HAZARD_PACKET_WRITE:
		return "packet write"
	case abi.SHADER_HAZARD_DISPATCH_READ:
		return "dispatch read"
	case abi.SHADER_HAZARD_DISPATCH_WRITE:
		return "dispatch write"
	}
	return "?"
}

// ID is the run's pool-wide sequence number (from 1), as hazard reports name it.
func (r *Run) ID() uint64 { return r.id }

// Packet is the address of the packet that started the run (Dispatch.Packet).
func (r *Run) Packet() uint64 { return r.d.Packet }

// Tracked reports whether the run records its writes (strict mode was on when it started).
func (r *Run) Tracked() bool { return r.writes != nil }

// Wrote reports the first range of bytes in [va, va+n) of vmid that the run has written so far,
// while it is in flight (an ended run, or one started with strict mode off: nothing).
func (r *Run) Wrote(vmid int, va, n uint64) (addr, size uint64, ok bool) {
	w := r.writes
	if w == nil || n == 0 || vmid != r.d.VMID || r.isDone() {
		return 0, 0, false
	}
	return w.overlap(va, va+n)
}

// Acquire is a wait that saw va hold the value it waited for (a satisfied WAIT_REG_MEM): if
// the run wrote va, what it wrote so far is ordered before what follows the wait, as a fence
// the dispatch signals orders it. Later writes are recorded anew.
func (r *Run) Acquire(vmid int, va uint64) {
	w := r.writes
	if w == nil || vmid != r.d.VMID {
		return
	}
	if _, _, ok := w.overlap(va, va+1); ok {
		w.clear()
	}
}

// span is the byte range [lo, hi).
type span struct{ lo, hi uint64 }

// writeSet is the bytes a run has written: sorted, disjoint, non-adjacent spans, at most
// HazardSpans of them. gen changes with every clear (the lanes' record cache checks it).
type writeSet struct {
	mu    sync.Mutex
	spans []span
	gen   atomic.Uint64
	san   *sanitizer
}

// add records [lo, hi) (hi > lo: an access never wraps).
func (s *writeSet) add(lo, hi uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spans
	// i: the first span that ends at or after lo (it may touch or overlap [lo, hi)).
	i := sort.Search(len(sp), func(k int) bool { return sp[k].hi >= lo })
	j := i
	for j < len(sp) && sp[j].lo <= hi {
		lo, hi = min(lo, sp[j].lo), max(hi, sp[j].hi)
		j++
	}
	switch {
	case j > i: // merged with sp[i:j]
		sp[i] = span{lo, hi}
		s.spans = append(sp[:i+1], sp[j:]...)
	case len(sp) >= HazardSpans:
		s.san.unrecorded.Add(1)
	default:
		sp = append(sp, span{})
		copy(sp[i+1:], sp[i:])
		sp[i] = span{lo, hi}
		s.spans = sp
	}
}

// overlap returns the part of [lo, hi) inside the first recorded span it meets.
func (s *writeSet) overlap(lo, hi uint64) (addr, size uint64, ok bool) {
	if hi < lo { // wraps: up to the top
		hi = ^uint64(0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.spans
	i := sort.Search(len(sp), func(k int) bool { return sp[k].hi > lo })
	if i == len(sp) || sp[i].lo >= hi {
		return 0, 0, false
	}
	a, b := max(lo, sp[i].lo), min(hi, sp[i].hi)
	return a, b - a, true
}

func (s *writeSet) clear() {
	s.mu.Lock()
	s.spans = s.spans[:0]
	s.gen.Add(1)
	s.mu.Unlock()
}

// recordWrite notes a lane's store (strict mode) unless it repeats the lane's last one (and
// no clear happened since): a loop storing to one place costs one record.
func (m *laneMem) recordWrite(addr uint64, size int) {
	w := m.run.writes
	gen := w.gen.Load()
	if addr == m.lastAddr && size <= m.lastSize && gen == m.lastGen {
		return
	}
	w.add(addr, addr+uint64(size))
	m.lastAddr, m.lastSize, m.lastGen = addr, size, gen
}

// checkAfter names an access of the lane's run to a line an earlier, unordered run of its
// queue (Dispatch.After) has written while that run is in flight.
func (m *laneMem) checkAfter(addr uint64, size int, write bool) {
	r := m.run
	for _, a := range r.after {
		at, n, ok := a.Wrote(r.d.VMID, addr, uint64(size))
		if !ok {
			continue
		}
		kind := uint32(abi.SHADER_HAZARD_DISPATCH_READ)
		if write {
			kind = abi.SHADER_HAZARD_DISPATCH_WRITE
		}
		r.p.Report(Hazard{Kind: kind, Slot: r.d.Slot, VMID: r.d.VMID, Addr: at, Size: n,
			By: r.d.Packet, Writer: a.d.Packet, WriterRun: a.id, ByRun: r.id})
		return
	}
}

// startTracking sets up a run's hazard state at Start: in strict mode a write record, and the
// earlier runs it is checked against (those that record theirs).
func (r *Run) startTracking() {
	p := r.p
	r.id = p.san.seq.Add(1)
	if !p.strict() {
		return
	}
	r.writes = &writeSet{san: &p.san}
	for _, a := range r.d.After {
		if a != nil && a.writes != nil {
			r.after = append(r.after, a)
		}
	}
}
