package device

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"vgpu/abi"
	"vgpu/dma"
)

// selfTest is the SELFTEST register block: an interrupt trigger and a one-shot DMA engine that
// writes a pattern into guest memory. It exists to prove the interrupt and DMA paths before
// the command processor does.
type selfTest struct {
	d *Device

	mu         sync.Mutex
	addr       uint64
	length     uint32
	pattern    uint32
	status     uint32
	completed  uint32
	irqErrors  uint32
	generation uint64 // bumped by reset: a transfer finishing after a reset reports nothing
	running    sync.WaitGroup
}

// wait waits up to timeout for transfers still running (Close); their DMA fails once the
// device is cut off, so this is short.
func (s *selfTest) wait(timeout time.Duration) {
	done := make(chan struct{})
	go func() { s.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		s.d.log.Error("close: a self-test transfer is still running", "waited", timeout)
	}
}

func (s *selfTest) init(d *Device) { s.d = d }

func (s *selfTest) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.generation++
	s.addr, s.length, s.pattern, s.status, s.completed, s.irqErrors = 0, 0, 0, abi.SELFTEST_DMA_STATUS_IDLE, 0, 0
}

func (s *selfTest) read(off uint32) uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch off + abi.BLOCK_SELFTEST_BASE {
	case abi.REG_SELFTEST_IRQ_ERRORS:
		return s.irqErrors
	case abi.REG_SELFTEST_DMA_ADDR_LO:
		return uint32(s.addr)
	case abi.REG_SELFTEST_DMA_ADDR_HI:
		return uint32(s.addr >> 32)
	case abi.REG_SELFTEST_DMA_LEN:
		return s.length
	case abi.REG_SELFTEST_DMA_PATTERN:
		return s.pattern
	case abi.REG_SELFTEST_DMA_STATUS:
		return s.status
	case abi.REG_SELFTEST_DMA_COUNT:
		return s.completed
	}
	return 0
}

func (s *selfTest) write(off, v uint32) {
	switch off + abi.BLOCK_SELFTEST_BASE {
	case abi.REG_SELFTEST_IRQ:
		s.raise(int(v))
		return
	case abi.REG_SELFTEST_INTX_ACK:
		if v&1 != 0 {
			s.d.irqs.DeassertINTx()
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch off + abi.BLOCK_SELFTEST_BASE {
	case abi.REG_SELFTEST_DMA_ADDR_LO:
		s.addr = s.addr&^0xffffffff | uint64(v)
	case abi.REG_SELFTEST_DMA_ADDR_HI:
		s.addr = s.addr&0xffffffff | uint64(v)<<32
	case abi.REG_SELFTEST_DMA_LEN:
		s.length = v
	case abi.REG_SELFTEST_DMA_PATTERN:
		s.pattern = v
	case abi.REG_SELFTEST_DMA_CTRL:
		if v&abi.REG_SELFTEST_DMA_CTRL__GO_MASK != 0 && s.status != abi.SELFTEST_DMA_STATUS_BUSY {
			s.start(v)
		}
	}
}

// raise delivers a self-test interrupt as any engine's (Device.deliver); a vector the
// function does not have is counted in SELFTEST_IRQ_ERRORS.
func (s *selfTest) raise(vector int) {
	err := s.d.deliver(vector)
	switch {
	case err == nil:
	case errors.Is(err, errNoBusMaster):
		s.d.rl.Warn("selftest-irq-no-bus-master", "self-test interrupt suppressed", "vector", vector, "err", err)
	default:
		s.mu.Lock()
		s.irqErrors++
		s.mu.Unlock()
		s.d.rl.Warn("selftest-irq-refused", "self-test interrupt refused", "vector", vector, "err", err)
	}
}

type dmaJob struct {
	addr       uint64
	length     uint32
	pattern    uint32
	irq        bool
	vector     int
	generation uint64
}

// start launches a transfer on its own goroutine; s.mu is held. The worker must not do the DMA
// itself: see the package comment.
func (s *selfTest) start(ctrl uint32) {
	job := dmaJob{
		addr: s.addr, length: s.length, pattern: s.pattern,
		irq:        ctrl&abi.REG_SELFTEST_DMA_CTRL__IRQ_EN_MASK != 0,
		vector:     int((ctrl & abi.REG_SELFTEST_DMA_CTRL__IRQ_VECTOR_MASK) >> abi.REG_SELFTEST_DMA_CTRL__IRQ_VECTOR__SHIFT),
		generation: s.generation,
	}
	s.status = abi.SELFTEST_DMA_STATUS_BUSY
	s.running.Add(1)
	go s.run(job)
}

func (s *selfTest) run(job dmaJob) {
	defer s.running.Done()
	status := s.transfer(job)
	s.mu.Lock()
	if job.generation != s.generation {
		s.mu.Unlock()
		return
	}
	s.status = status
	if status == abi.SELFTEST_DMA_STATUS_DONE {
		s.completed++
	}
	s.mu.Unlock()
	if job.irq {
		s.raise(job.vector)
	}
}

func (s *selfTest) transfer(job dmaJob) uint32 {
	rl, where := s.d.rl, []any{"iova", job.addr, "len", job.length}
	if job.length == 0 || job.length%4 != 0 || job.length > abi.SELFTEST_DMA_MAX_LEN {
		rl.Warn("selftest-length", "self-test DMA refused: length must be a non-zero multiple of 4 up to SELFTEST_DMA_MAX_LEN", where...)
		return abi.SELFTEST_DMA_STATUS_ERR_LENGTH
	}
	buf := make([]byte, job.length)
	for i := 0; i < len(buf); i += 4 {
		binary.LittleEndian.PutUint32(buf[i:], job.pattern+uint32(i/4))
	}
	err := s.d.mem.Write(job.addr, buf)
	switch {
	case err == nil:
		return abi.SELFTEST_DMA_STATUS_DONE
	case errors.Is(err, dma.ErrBusMasterOff):
		rl.Warn("selftest-bus-master", "self-test DMA refused: Bus Master Enable is off", where...)
		return abi.SELFTEST_DMA_STATUS_ERR_BUS_MASTER
	default:
		rl.Warn("selftest-fault", "self-test DMA faulted", append(where, "err", err)...)
		return abi.SELFTEST_DMA_STATUS_ERR_FAULT
	}
}
