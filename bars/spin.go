package bars

import (
	"fmt"
	"sort"
)

// The spin detector: a driver that reads one register over and over while nothing writes it
// and its value never changes is polling for something that will not happen (a status bit the
// device will never set, an engine it never started). It gets one named warning per episode
// instead of a silent hang; the episode ends, and the detector re-arms, when the register is
// written or its value changes.

// SpinThreshold is the reads without a write or a change after which a register counts as
// spun on. A driver's legitimate register waits on this device end within a few hundred reads
// (the engines answer in microseconds; the guest drivers sleep 5-400 µs between reads), and
// a trapped read costs at least ~10 µs (bench: REGION_READ), so 10000 unchanged reads are at
// least 0.1 s of a tight loop, or seconds of a sleeping one. It is a tenth of amdgpu's own
// give-up point for a register poll (adev->usec_timeout: 100000 reads with udelay(1)), so
// the warning comes before such a driver's timeout message, and names the register.
const SpinThreshold = 10000

// spinSlots is how many registers are watched at once. A polling loop reads one to three
// registers; 64 slots, hashed by offset, keep a loop's registers apart while the
// rest of the driver's accesses come and go.
const spinSlots = 64

// maxSpinReports bounds the recent spins kept for Status.
const maxSpinReports = 8

// logKeySpin is the ratelog key of the spin warning.
const logKeySpin = "regs-spin"

// spinEntry watches one register. The detector has no lock of its own: it is on the read path
// of every trapped register access (atomics tripled the register file's own cost of a read,
// see BenchmarkRegisterRead), and the register file's accesses are serialised by its user
// already (the device's register lock); Spins is called under the same lock.
type spinEntry struct {
	key   uint64 // (dword index + 1) << 32 | last value; 0: empty
	reads uint64 // reads of key without a change
}

type spinDetector struct {
	threshold uint64
	slots     [spinSlots]spinEntry
	warnings  uint64
	recent    []Spin // the last maxSpinReports warnings, oldest first
}

// Spin is one register a driver spun on.
type Spin struct {
	Offset uint32 `json:"offset"`
	Name   string `json:"name"`
	Value  uint32 `json:"value"`
	Reads  uint64 `json:"reads"` // unchanged reads so far (at the warning: the threshold)
}

// SpinStats is the detector's report: the warnings raised, the registers being spun on now
// (reads still counting), and the last few warnings.
type SpinStats struct {
	Threshold uint64 `json:"threshold"`
	Warnings  uint64 `json:"warnings"`
	Active    []Spin `json:"active,omitempty"`
	Recent    []Spin `json:"recent,omitempty"`
}

func spinSlot(off uint32) int {
	d := off >> 2
	return int((d ^ d>>6 ^ d>>12) % spinSlots)
}

func spinKey(off, v uint32) uint64 { return uint64(off>>2+1)<<32 | uint64(v) }

// found records a spin: the read of off that returned v for the threshold's time.
func (s *spinDetector) found(off, v uint32, reads uint64) Spin {
	sp := Spin{Offset: off, Value: v, Reads: reads}
	s.warnings++
	if len(s.recent) == maxSpinReports {
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	s.recent = append(s.recent, sp)
	return sp
}

// wrote re-arms off: a write is the driver doing something about what it polls.
func (s *spinDetector) wrote(off uint32) {
	if e := &s.slots[spinSlot(off)]; e.key>>32 == uint64(off>>2+1) {
		*e = spinEntry{}
	}
}

func (s *spinDetector) stats(name func(uint32) string) SpinStats {
	st := SpinStats{Threshold: s.threshold, Warnings: s.warnings, Recent: append([]Spin(nil), s.recent...)}
	for i := range s.slots {
		k, n := s.slots[i].key, s.slots[i].reads
		if k != 0 && n >= st.Threshold {
			st.Active = append(st.Active, Spin{Offset: uint32(k>>32-1) << 2, Value: uint32(k), Reads: n})
		}
	}
	sort.Slice(st.Active, func(i, j int) bool { return st.Active[i].Offset < st.Active[j].Offset })
	for _, l := range [][]Spin{st.Active, st.Recent} {
		for i := range l {
			l[i].Name = name(l[i].Offset)
		}
	}
	return st
}

// SetRegisterNames gives the register file the names of its registers (for the spin warning
// and report); without it a register is named by its claim and offset. Call before serving.
func (f *RegisterFile) SetRegisterNames(name func(off uint32) string) { f.names = name }

// SetSpinThreshold changes the unchanged reads that make a spin (tests; 0: SpinThreshold).
// Call before serving.
func (f *RegisterFile) SetSpinThreshold(n uint64) {
	if n == 0 {
		n = SpinThreshold
	}
	f.spin.threshold = n
}

// Spins returns the spin detector's report. Like Read and Write, it must not run concurrently
// with them (the device calls it under its register lock).
func (f *RegisterFile) Spins() SpinStats { return f.spin.stats(f.registerName) }

// registerName names the register at off: by the names given, else by its claim.
func (f *RegisterFile) registerName(off uint32) string {
	if f.names != nil {
		if n := f.names(off); n != "" {
			return n
		}
	}
	if c, ok := f.Claimed(off); ok {
		return fmt.Sprintf("%s+%#x", c, off-f.claims[f.owner[off/4]-1].Offset)
	}
	return fmt.Sprintf("%#x", off)
}

// noteRead runs the detector on a completed read of a claimed register: a compare and an
// increment, unless this read is the one that reaches the threshold.
func (f *RegisterFile) noteRead(off, v uint32) {
	e := &f.spin.slots[spinSlot(off)]
	if k := spinKey(off, v); e.key != k {
		e.key, e.reads = k, 1
		return
	}
	e.reads++
	if e.reads == f.spin.threshold {
		f.warnSpin(f.spin.found(off, v, e.reads))
	}
}

func (f *RegisterFile) warnSpin(sp Spin) {
	if l := f.limit.Load(); l != nil {
		name := f.registerName(sp.Offset)
		l.Warn(logKeySpin, fmt.Sprintf("register spin: the driver polls %s, last value %#x, %d reads without a change", name, sp.Value, sp.Reads),
			"register", name, "offset", fmt.Sprintf("%#x", sp.Offset), "value", fmt.Sprintf("%#x", sp.Value), "reads", sp.Reads)
	}
}

// ReadUntracked is Read for the device's own engines (a CP packet that reads or polls a
// register): the spin detector watches the driver, and a queue parked on a register is the
// driver's choice already reported by the queue's state.
func (f *RegisterFile) ReadUntracked(off uint64, p []byte) error { return f.read(off, p, false) }
