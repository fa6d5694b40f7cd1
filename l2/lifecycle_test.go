package l2

import (
	"bytes"
	"errors"
	"fmt"
	"vgpu/engine"

	"testing"
	"time"

	"vgpu/abi"
)

// splitBacking is memory of which the part from slowFrom on is "message-served": its direct
// path refuses with ErrNotDirect, and its slow path blocks until release is closed, as a DMA
// message waits for a client.
type splitBacking struct {
	*memBacking
	slowFrom uint64
	entered  chan struct{} // one value per slow access that started
	release  chan struct{}
}

func (b *splitBacking) slow(d engine.Domain, addr uint64) bool {
	return d == engine.DomainSystem && addr >= b.slowFrom
}

func (b *splitBacking) ReadDirect(d engine.Domain, addr uint64, p []byte) error {
	if b.slow(d, addr+uint64(len(p))-1) {
		return fmt.Errorf("test: %v:%#x: %w", d, addr, ErrNotDirect)
	}
	return b.memBacking.ReadPhys(d, addr, p)
}

func (b *splitBacking) WriteDirect(d engine.Domain, addr uint64, p []byte) error {
	if b.slow(d, addr+uint64(len(p))-1) {
		return fmt.Errorf("test: %v:%#x: %w", d, addr, ErrNotDirect)
	}
	return b.memBacking.WritePhys(d, addr, p)
}

func (b *splitBacking) wait(d engine.Domain, addr uint64) {
	if b.slow(d, addr) {
		b.entered <- struct{}{}
		<-b.release
	}
}

func (b *splitBacking) ReadPhys(d engine.Domain, addr uint64, p []byte) error {
	b.wait(d, addr)
	return b.memBacking.ReadPhys(d, addr, p)
}

func (b *splitBacking) WritePhys(d engine.Domain, addr uint64, p []byte) error {
	b.wait(d, addr)
	return b.memBacking.WritePhys(d, addr, p)
}

// TestSlowMemoryNeverHoldsTheLock: while an access to message-served memory waits, other
// accesses, cache maintenance and Reset go on; such memory is never cached.
func TestSlowMemoryNeverHoldsTheLock(t *testing.T) {
	tests := []struct {
		name string
		op   func(c *Cache) error
	}{
		{"cached read", func(c *Cache) error { return c.Read(1, sys(0x1000), 0, make([]byte, 8)) }},
		{"cached write", func(c *Cache) error { return c.Write(1, sys(0x1000), 0, []byte{1, 2, 3, 4}) }},
		{"uncached read", func(c *Cache) error { return c.ReadUncached(sys(0x1000), make([]byte, 8)) }},
		{"uncached write", func(c *Cache) error { return c.WriteUncached(sys(0x1000), []byte{5, 6}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &splitBacking{memBacking: newMem(0x2000, 0x1000), slowFrom: 0x1000,
				entered: make(chan struct{}, 1), release: make(chan struct{})}
			c := NewSize(b, 8, nil)
			done := make(chan error, 1)
			go func() { done <- tc.op(c) }()
			<-b.entered // the slow access is waiting for its "client"
			// Everything else must go on meanwhile: a deadlock here fails the test by timeout.
			if err := c.Write(2, sys(0x80), 0, []byte{9}); err != nil {
				t.Fatal(err)
			}
			if err := c.Apply(OpWriteBackInvalidate, nil); err != nil {
				t.Fatal(err)
			}
			c.FenceCheck(2, 0)
			if c.Stats().SlowAccesses != 1 {
				t.Errorf("slow accesses %d, want 1", c.Stats().SlowAccesses)
			}
			c.Reset()
			close(b.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := c.Stats().Lines; n != 0 {
				t.Errorf("%d lines resident: message-served memory was cached", n)
			}
		})
	}
}

// TestWriteBackToMemoryNoLongerDirect: a line filled from direct memory whose mapping became
// message-served is lost (its memory is gone), counted as a write-back error, never written
// through the slow path under the lock.
func TestWriteBackToMemoryNoLongerDirect(t *testing.T) {
	b := &splitBacking{memBacking: newMem(0x2000, 0x1000), slowFrom: 0x2000,
		entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := NewSize(b, 8, nil)
	if err := c.Write(1, sys(0x1000), 0, []byte{7}); err != nil {
		t.Fatal(err)
	}
	b.slowFrom = 0x1000
	err := c.Apply(OpWriteBack, nil)
	var wb *WriteBackError
	if !errors.As(err, &wb) || !errors.Is(err, ErrNotDirect) {
		t.Fatalf("write-back error %v, want a WriteBackError wrapping ErrNotDirect", err)
	}
	if s := c.Stats(); s.WriteBackErrors != 1 || s.Lines != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestMaintenanceIsAsynchronous(t *testing.T) {
	b := &splitBacking{memBacking: newMem(0x2000, 0x1000), slowFrom: 0x2000}
	c := NewSize(b, 64, nil)
	for i := range 16 {
		if err := c.Write(1, sys(uint64(i)*LineBytes), 0, []byte{byte(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the cache lock: the register write must still return, with BUSY set.
	c.mu.Lock()
	c.WriteReg(regControl, abi.REG_L2_CONTROL__WB_MASK)
	if c.ReadReg(regStatus)&abi.REG_L2_STATUS__BUSY_MASK == 0 {
		t.Error("BUSY clear while the pass cannot have run")
	}
	// More requests while busy are merged, not queued one goroutine each.
	for range 1000 {
		c.WriteReg(regControl, abi.REG_L2_CONTROL__WB_MASK|abi.REG_L2_CONTROL__INV_MASK)
	}
	c.mu.Unlock()
	waitFor(t, func() bool { return c.ReadReg(regStatus) == 0 })
	if done := c.ReadReg(regControlDone); done < 1 || done > 2 {
		t.Errorf("CONTROL_DONE %d, want the first pass plus one merged pass", done)
	}
	if s := c.Stats(); s.Lines != 0 || s.WriteBacks != 16 {
		t.Errorf("after WB then WB+INV: %+v", s)
	}
	for i := range 16 {
		if got := b.cpuRead(engine.DomainSystem, uint64(i)*LineBytes, 1)[0]; got != byte(i+1) {
			t.Errorf("line %d: memory has %d", i, got)
		}
	}
}

func TestMaintenanceErrorAndReset(t *testing.T) {
	m := newMem(0x1000, 0x1000)
	c := NewSize(m, 8, nil)
	if err := c.Write(1, sys(0x100), 0, []byte{1}); err != nil {
		t.Fatal(err)
	}
	m.fail = func(engine.Domain, uint64, int, bool) error { return errTestFault }
	c.StartMaintenance(OpWriteBack)
	waitFor(t, func() bool { return c.ReadReg(regStatus)&abi.REG_L2_STATUS__BUSY_MASK == 0 })
	if c.ReadReg(regStatus) != abi.REG_L2_STATUS__ERROR_MASK || c.ReadReg(regWBErrors) != 1 {
		t.Errorf("status %#x, WB_ERRORS %d; want ERROR and 1", c.ReadReg(regStatus), c.ReadReg(regWBErrors))
	}
	c.Reset()
	if c.ReadReg(regStatus) != 0 || c.ReadReg(regControlDone) != 0 || c.ReadReg(regWBErrors) != 0 {
		t.Error("reset kept the maintenance status")
	}
	c.Close()
	c.StartMaintenance(OpWriteBack) // refused after Close: no goroutine, no panic
	if c.ReadReg(regStatus) != 0 {
		t.Error("a request after Close is busy")
	}
}

func TestDropLost(t *testing.T) {
	m := newMem(0x1000, 0x1000)
	c := NewSize(m, 16, nil)
	for i := range 4 {
		_ = c.Write(1, sys(uint64(i)*LineBytes), 0, []byte{0xAA})
		_ = c.Write(1, vram(uint64(i)*LineBytes), 0, []byte{0xBB})
	}
	_ = c.Read(1, sys(0x800), 0, make([]byte, 4)) // clean system line
	n := c.DropLost(&Range{Domain: engine.DomainSystem, Addr: 0, Size: 1 << 63})
	if n != 4 {
		t.Errorf("DropLost dropped %d dirty lines, want 4", n)
	}
	if s := c.Stats(); s.Lines != 4 || s.DirtyLines != 4 || s.Lost != 4 {
		t.Errorf("after dropping system lines: %+v", s)
	}
	if !bytes.Equal(m.cpuRead(engine.DomainSystem, 0, 1), []byte{0}) {
		t.Error("a lost line was written back")
	}
	c.Reset()
	if c.ReadReg(regDiscarded) != 4 {
		t.Errorf("L2_DISCARDED %d after reset, want 4 (kept since power-on)", c.ReadReg(regDiscarded))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}
