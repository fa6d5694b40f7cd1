package compute

import (
	"encoding/binary"

	"vgpu/abi"
	"vgpu/engine"
	"vgpu/shader"
)

// LineBytes is the L0 line size.
const LineBytes = 64

// l0 is one CU's cache: direct mapped, tagged by (VMID, line address), write-through,
// no write-allocate. gen lets InvalidateL0 drop every line at once: a line is valid only if
// it was filled in the current generation.
type l0 struct {
	p     *Pool
	tags  []uint64 // line address | 1 (a line address has its low 6 bits free)
	vmids []int
	gens  []uint64
	data  [][LineBytes]byte
	mask  uint64
	buf   [LineBytes]byte
	fill  []byte // a wave's run of missing lines
}

func newL0(p *Pool, lines int) *l0 {
	return &l0{p: p, tags: make([]uint64, lines), vmids: make([]int, lines), gens: make([]uint64, lines),
		data: make([][LineBytes]byte, lines), mask: uint64(lines - 1)}
}

// lookup finds line (of vmid) among the lines filled in generation gen: its index.
func (c *l0) lookup(line uint64, vmid int, gen uint64) (int, bool) {
	i := int((line / LineBytes) & c.mask)
	return i, c.tags[i] == line|1 && c.vmids[i] == vmid && c.gens[i] == gen
}

// install fills line's slot with data (LineBytes) and returns its index.
func (c *l0) install(line uint64, vmid int, gen uint64, data []byte) int {
	i := int((line / LineBytes) & c.mask)
	c.tags[i], c.vmids[i], c.gens[i] = line|1, vmid, gen
	copy(c.data[i][:], data)
	return i
}

// laneMem is the shader.Memory of the work-items a CU runs for one dispatch: its L0, with
// the dispatch's address space.
type laneMem struct {
	c   *l0
	acc engine.Access
	run *Run
	// The last store the sanitizer recorded, and the record's generation then (hazard.go).
	lastAddr, lastGen uint64
	lastSize          int
}

var _ shader.Memory = (*laneMem)(nil)

func (m *laneMem) Load(addr uint64, size int) (uint64, error) {
	if m.run.killed.Load() {
		return 0, ErrKilled
	}
	if m.run.after != nil {
		m.checkAfter(addr, size, false)
	}
	c := m.c
	line := addr &^ (LineBytes - 1)
	gen := c.p.l0Gen.Load()
	if i, ok := c.lookup(line, m.acc.VMID, gen); ok {
		v := get(c.data[i][addr-line:], size)
		if c.p.strict() {
			m.checkStale(addr, size, v)
		}
		c.p.stats.l0Hits.Add(1)
		return v, nil
	}
	c.p.stats.l0Misses.Add(1)
	if err := c.p.cfg.Memory.Read(m.acc, line, c.buf[:]); err != nil {
		// A line that does not read whole (its page faults) is not cached: read just the
		// value, so the fault is the access's own.
		var b [8]byte
		if err := c.p.cfg.Memory.Read(m.acc, addr, b[:size]); err != nil {
			return 0, err
		}
		return get(b[:], size), nil
	}
	i := c.install(line, m.acc.VMID, gen, c.buf[:])
	return get(c.data[i][addr-line:], size), nil
}

// checkStale compares a value the L0 served with what memory (the L2) holds now.
func (m *laneMem) checkStale(addr uint64, size int, cached uint64) {
	var b [8]byte
	if err := m.c.p.cfg.Memory.Read(m.acc, addr, b[:size]); err != nil {
		return
	}
	if now := get(b[:], size); now != cached {
		m.c.p.staleRead(m.run, addr, cached, now)
	}
}

func (m *laneMem) Store(addr uint64, size int, v uint64) error {
	if m.run.killed.Load() {
		return ErrKilled
	}
	if m.run.after != nil {
		m.checkAfter(addr, size, true)
	}
	var b [8]byte
	put(b[:], size, v)
	if m.run.writes != nil {
		// Recorded before the write lands: whoever sees the value in memory must also find
		// it recorded (a write that then fails is still one its dispatch was making).
		m.recordWrite(addr, size)
	}
	if err := m.c.p.cfg.Memory.Write(m.acc, addr, b[:size]); err != nil {
		return err
	}
	m.c.update(m.acc.VMID, addr, size, v)
	return nil
}

// Atomic is done at the L2 (the pool's atomic lock makes the read-modify-write indivisible
// for every CU); the CU's own line follows, other CUs' lines do not (they are not coherent).
// It is not indivisible against the CPU or the CP: a store of theirs between the read and the
// write is lost (docs/shader.md says so). An atomic that changes nothing writes nothing.
func (m *laneMem) Atomic(op shader.AtomicOp, addr uint64, size int, v, cmp uint64) (uint64, error) {
	p := m.c.p
	if m.run.killed.Load() {
		return 0, ErrKilled
	}
	if m.run.after != nil {
		m.checkAfter(addr, size, true)
	}
	p.atomicMu.Lock()
	defer p.atomicMu.Unlock()
	var b [8]byte
	if err := p.cfg.Memory.Read(m.acc, addr, b[:size]); err != nil {
		return 0, err
	}
	old := get(b[:], size)
	nv := op.Apply(old, v, cmp)
	p.stats.atomics.Add(1)
	if nv == old {
		// Nothing to write (a failed CMPXCHG, an ADD of 0 used as an atomic read): writing
		// the old value back could undo a store another agent made meanwhile — the CPU or a
		// CP packet, which this lock does not order.
		return old, nil
	}
	put(b[:], size, nv)
	if m.run.writes != nil {
		m.recordWrite(addr, size) // before the write lands, as Store
	}
	if err := p.cfg.Memory.Write(m.acc, addr, b[:size]); err != nil {
		return 0, err
	}
	m.c.update(m.acc.VMID, addr, size, nv)
	return old, nil
}

var _ shader.RangeMemory = (*laneMem)(nil)

// LoadRange is a wave's coalesced load: the lines the L0 holds are served from it (checked in
// strict mode), each run of missing lines is read with one access and filled.
func (m *laneMem) LoadRange(addr uint64, p []byte, size int) error {
	if m.run.killed.Load() {
		return ErrKilled
	}
	if m.run.after != nil {
		for o := 0; o < len(p); o += size { // each work-item's access, as the sanitizer names them
			m.checkAfter(addr+uint64(o), size, false)
		}
	}
	c := m.c
	gen := c.p.l0Gen.Load()
	lo, hi := addr&^(LineBytes-1), (addr+uint64(len(p))+LineBytes-1)&^(LineBytes-1)
	hit := func(line uint64) bool { _, ok := c.lookup(line, m.acc.VMID, gen); return ok }
	// One pass over the lines: a hit is served from the L0 (checked in strict mode), a run of
	// missing lines is read with one access, filled and served from what was read (the fill
	// of a range longer than the L0 may evict its own earlier lines).
	end := addr + uint64(len(p))
	for line := lo; line < hi; {
		if i, ok := c.lookup(line, m.acc.VMID, gen); ok {
			from, to := max(line, addr), min(line+LineBytes, end)
			cached := c.data[i][from-line : to-line]
			if c.p.strict() {
				// Compared element by element: a stale read is a work-item's, as a lone load's.
				var now [LineBytes]byte
				if err := c.p.cfg.Memory.Read(m.acc, from, now[:to-from]); err == nil && string(now[:to-from]) != string(cached) {
					for o := uint64(0); o+uint64(size) <= to-from; o += uint64(size) {
						if was, is := get(cached[o:], size), get(now[o:], size); was != is {
							c.p.staleRead(m.run, from+o, was, is)
						}
					}
				}
			}
			copy(p[from-addr:to-addr], cached)
			c.p.stats.l0Hits.Add((to - from) / uint64(size)) // per work-item, as a lone load counts
			line += LineBytes
			continue
		}
		runEnd := line
		for runEnd < hi && !hit(runEnd) {
			runEnd += LineBytes
		}
		n := int(runEnd - line)
		if cap(c.fill) < n {
			c.fill = make([]byte, n)
		}
		buf := c.fill[:n]
		if err := c.p.cfg.Memory.Read(m.acc, line, buf); err != nil {
			return err
		}
		c.p.stats.l0Misses.Add(uint64(n / LineBytes))
		for o := 0; o < n; o += LineBytes {
			c.install(line+uint64(o), m.acc.VMID, gen, buf[o:o+LineBytes])
		}
		from, to := max(line, addr), min(runEnd, end)
		copy(p[from-addr:to-addr], buf[from-line:to-line])
		line = runEnd
	}
	return nil
}

// StoreRange is a wave's coalesced store: one write through to the L2, then the lines the L0
// holds follow.
func (m *laneMem) StoreRange(addr uint64, p []byte, size int) error {
	if m.run.killed.Load() {
		return ErrKilled
	}
	if m.run.after != nil {
		for o := 0; o < len(p); o += size {
			m.checkAfter(addr+uint64(o), size, true)
		}
	}
	if m.run.writes != nil {
		m.recordWrite(addr, len(p)) // before the write lands, as Store
	}
	if err := m.c.p.cfg.Memory.Write(m.acc, addr, p); err != nil {
		return err
	}
	c := m.c
	gen := c.p.l0Gen.Load()
	for line := addr &^ (LineBytes - 1); line < addr+uint64(len(p)); line += LineBytes {
		if i, ok := c.lookup(line, m.acc.VMID, gen); ok {
			from, to := max(line, addr), min(line+LineBytes, addr+uint64(len(p)))
			copy(c.data[i][from-line:to-line], p[from-addr:to-addr])
		}
	}
	return nil
}

// update writes a stored value into the line if the L0 holds it (write-through, no
// allocate).
func (c *l0) update(vmid int, addr uint64, size int, v uint64) {
	line := addr &^ (LineBytes - 1)
	if i, ok := c.lookup(line, vmid, c.p.l0Gen.Load()); ok {
		put(c.data[i][addr-line:], size, v)
	}
}

func get(b []byte, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func put(b []byte, size int, v uint64) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// dataAccess is how work-items reach memory: through the L2, as the texture pipe (TCP).
func dataAccess(vmid, slot int) engine.Access {
	return engine.Access{VMID: vmid, Slot: slot, Kind: engine.Data, Client: abi.VM_CID_TCP}
}

// fetchAccess reads the program: an instruction fetch (EXECUTABLE pages in a process VM).
func fetchAccess(vmid, slot int) engine.Access {
	return engine.Access{VMID: vmid, Slot: slot, Kind: engine.Fetch, Client: abi.VM_CID_SQC_INST}
}
