package l2

import (
	"bytes"
	"fmt"
	"testing"
	"vgpu/engine"
)

// The fuzz world: 4 KiB of system memory and 4000 bytes of VRAM (so its last line straddles
// the end), a cache of fuzzLines lines (so evictions are frequent).
const (
	fuzzSys   = 4096
	fuzzVRAM  = 4000
	fuzzLines = 6
	fuzzSteps = 200
)

// FuzzL2 runs a sequence of engine operations against the cache and a flat reference model
// (the GPU's coherent view of memory: what every engine read must return). Host writes are
// made only to lines that are not resident, so the model stays exact and strict mode must
// never report a stale read. Checked after every step: read data and errors, the cache's
// internal invariants; at the end, after a whole-cache write-back, memory equals the model.
func FuzzL2(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 8, 0xAA, 1, 1, 0, 0, 8, 0, 4, 0, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0x80, 0, 200, 1, 0, 0, 0, 1, 200, 2, 0, 0, 0, 2, 200, 3, 0, 0, 0, 3, 200, 4,
		0, 0, 0, 4, 200, 5, 0, 0, 0, 5, 200, 6, 0, 0, 0, 6, 200, 7, 1, 0, 0x80, 0, 255, 0})
	f.Add([]byte{0, 3, 0x90, 0x0F, 100, 9, 1, 3, 0x80, 0x0F, 40, 0, 3, 3, 0x80, 0x0F, 30, 1,
		2, 3, 0x70, 0x0F, 60, 0, 4, 4, 0x80, 0x0F, 0x10, 0x80})
	f.Add([]byte{0, 2, 0x10, 0, 4, 1, 6, 2, 0, 0, 0, 0, 4, 0x4, 0, 0, 0, 0, 1, 2, 0x10, 0, 4, 0,
		5, 0, 0x10, 0, 4, 7, 7, 0, 0, 0, 0, 0, 1, 0, 0x10, 0, 4, 0})
	f.Add([]byte{0, 1, 0, 0, 0xFF, 0x11, 4, 0x0D, 0x40, 0, 0x80, 0x40, 1, 1, 0, 0, 0xFF, 0, 8, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMem(fuzzSys, fuzzVRAM)
		fillPattern(m)
		var model [engine.NumDomains][]byte
		for d := range model {
			model[d] = bytes.Clone(m.mem[d])
		}
		c := NewSize(m, fuzzLines, nil)
		c.SetStrict(true)
		size := func(d engine.Domain) uint64 { return uint64(len(model[d])) }

		arg := func(i int) byte {
			if i < len(data) {
				return data[i]
			}
			return 0
		}
		for i, n := 0, 0; i < len(data) && n < fuzzSteps; i, n = i+6, n+1 {
			op := data[i] % 9
			d := engine.Domain(arg(i+1) & 1)
			slot := int(arg(i+1) >> 1 % 4)
			addr := (uint64(arg(i+2)) | uint64(arg(i+3))<<8) % (size(d) + 64)
			ln := int(arg(i+4)) + 1
			val := arg(i + 5)
			pa := engine.PhysAddr{Domain: d, Addr: addr}
			where := fmt.Sprintf("step %d op %d %v+%d", n, op, pa, ln)

			switch op {
			case 0, 1: // cached write / read
				buf := bytes.Repeat([]byte{val}, ln)
				var err error
				if op == 0 {
					err = c.Write(slot, pa, addr, buf)
				} else {
					err = c.Read(slot, pa, addr, buf)
				}
				// Lines are served in order; the first piece that runs past memory fails.
				end, bad := addr+uint64(ln), false
				for a := addr; a < end; {
					e := min(end, a&^lineMask+LineBytes)
					if e > size(d) {
						bad = true
						break
					}
					if op == 0 {
						copy(model[d][a:e], buf[a-addr:])
					} else if !bytes.Equal(buf[a-addr:e-addr], model[d][a:e]) {
						t.Fatalf("%s: read % x, model % x", where, buf[a-addr:e-addr], model[d][a:e])
					}
					a = e
				}
				if bad != (err != nil) {
					t.Fatalf("%s: error %v, model expects failure %v", where, err, bad)
				}
			case 2, 3: // uncached read / write: all or nothing
				buf := bytes.Repeat([]byte{val}, ln)
				var err error
				if op == 3 {
					err = c.WriteUncached(pa, buf)
				} else {
					err = c.ReadUncached(pa, buf)
				}
				bad := addr+uint64(ln) > size(d)
				if bad != (err != nil) {
					t.Fatalf("%s: error %v, model expects failure %v", where, err, bad)
				}
				if !bad && op == 3 {
					copy(model[d][addr:], buf)
				}
				if !bad && op == 2 && !bytes.Equal(buf, model[d][addr:addr+uint64(ln)]) {
					t.Fatalf("%s: uncached read % x, model % x", where, buf, model[d][addr:addr+uint64(ln)])
				}
			case 4: // cache op on a range (or everything)
				o := Op(val%7 + 1)
				var r *Range
				if val&0x80 == 0 {
					r = &Range{d, addr, uint64(ln) * uint64(arg(i+1)>>3+1)}
				}
				dropped := c.residentIn(r)
				if err := c.Apply(o, r); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if o&OpDiscard != 0 {
					// Discarded dirty data is gone: the GPU's view reverts to memory.
					for _, k := range dropped {
						e := min(k.addr+LineBytes, size(k.domain))
						copy(model[k.domain][k.addr:e], m.mem[k.domain][k.addr:e])
					}
				}
			case 5: // host write to a line that is not resident: the GPU sees it
				e := min(addr+uint64(ln), size(d))
				if e <= addr || c.anyResident(d, addr, e) {
					continue
				}
				buf := bytes.Repeat([]byte{val}, int(e-addr))
				m.cpuWrite(d, addr, buf)
				copy(model[d][addr:], buf)
			case 6: // fence check: reported exactly when strict and the slot has dirty lines
				before := c.Stats().DirtyFences
				dirty := c.DirtyLinesOf(slot)
				c.FenceCheck(slot, addr)
				if got := c.Stats().DirtyFences - before; (got == 1) != (dirty > 0 && c.Strict()) || got > 1 {
					t.Fatalf("%s: %d fence events with %d dirty lines", where, got, dirty)
				}
			case 7: // device reset: dirty data lost
				c.Reset()
				for d := range model {
					copy(model[d], m.mem[d])
				}
			case 8: // strict mode toggles must not matter for data
				c.SetStrict(val&1 == 0)
			}
			if err := c.checkInvariants(); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
		if s := c.Stats(); s.StaleReads != 0 {
			t.Fatalf("%d stale reads reported without any host write to a resident line", s.StaleReads)
		}
		c.WriteBack(nil)
		for d := range model {
			if !bytes.Equal(m.mem[d], model[d]) {
				t.Fatalf("%v memory differs from the model after write-back", engine.Domain(d))
			}
		}
		if s := c.Stats(); s.DirtyLines != 0 {
			t.Fatalf("%d dirty lines after a whole-cache write-back", s.DirtyLines)
		}
	})
}

// residentIn lists the resident lines a range touches (nil: all).
func (c *Cache) residentIn(r *Range) []key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []key
	for _, l := range c.collect(r) {
		keys = append(keys, l.key)
	}
	return keys
}

func (c *Cache) anyResident(d engine.Domain, from, to uint64) bool {
	return len(c.residentIn(&Range{d, from, to - from})) > 0
}

// checkInvariants verifies the bookkeeping: map, LRU list, counters and per-slot dirty counts
// agree, and the capacity holds.
func (c *Cache) checkInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, dirty := 0, 0
	var slots [slotBits]int
	for l := c.lru.next; l != &c.lru; l = l.next {
		n++
		if c.lines[l.key] != l {
			return fmt.Errorf("line %v on the LRU list is not in the map", l.key)
		}
		if l.isDirty() {
			dirty++
			for s := range slotBits {
				if l.writers&(1<<s) != 0 {
					slots[s]++
				}
			}
		} else if l.writers != 0 {
			return fmt.Errorf("clean line %v has writers %#x", l.key, l.writers)
		}
	}
	switch {
	case n != len(c.lines):
		return fmt.Errorf("LRU list has %d lines, map %d", n, len(c.lines))
	case n > c.capacity:
		return fmt.Errorf("%d lines over capacity %d", n, c.capacity)
	case int64(n) != c.nLines.Load() || int64(dirty) != c.nDirty.Load():
		return fmt.Errorf("counters lines %d dirty %d, actual %d %d", c.nLines.Load(), c.nDirty.Load(), n, dirty)
	case slots != c.slotDirty:
		return fmt.Errorf("per-slot dirty counts %v, actual %v", c.slotDirty, slots)
	}
	return nil
}
