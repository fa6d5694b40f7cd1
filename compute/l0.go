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
}

func newL0(p *Pool, lines int) *l0 {
	return &l0{p: p, tags: make([]uint64, lines), vmids: make([]int, lines), gens: make([]uint64, lines),
		data: make([][LineBytes]byte, lines), mask: uint64(lines - 1)}
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
	i := (line / LineBytes) & c.mask
	gen := c.p.l0Gen.Load()
	if c.tags[i] == line|1 && c.vmids[i] == m.acc.VMID && c.gens[i] == gen {
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
	c.tags[i], c.vmids[i], c.gens[i] = line|1, m.acc.VMID, gen
	c.data[i] = c.buf
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
	if err := m.c.p.cfg.Memory.Write(m.acc, addr, b[:size]); err != nil {
		return err
	}
	if m.run.writes != nil {
		m.recordWrite(addr, size)
	}
	m.c.update(m.acc.VMID, addr, size, v)
	return nil
}

// Atomic is done at the L2 (the pool's atomic lock makes the read-modify-write indivisible
// for every CU); the CU's own line follows, other CUs' lines do not (they are not coherent).
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
	put(b[:], size, nv)
	if err := p.cfg.Memory.Write(m.acc, addr, b[:size]); err != nil {
		return 0, err
	}
	if m.run.writes != nil {
		m.recordWrite(addr, size)
	}
	m.c.update(m.acc.VMID, addr, size, nv)
	p.stats.atomics.Add(1)
	return old, nil
}

// update writes a stored value into the line if the L0 holds it (write-through, no
// allocate).
func (c *l0) update(vmid int, addr uint64, size int, v uint64) {
	line := addr &^ (LineBytes - 1)
	i := (line / LineBytes) & c.mask
	if c.tags[i] == line|1 && c.vmids[i] == vmid && c.gens[i] == c.p.l0Gen.Load() {
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
