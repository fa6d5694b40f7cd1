package cp

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"time"
	"vgpu/engine"
	"vgpu/inject"

	"vgpu/abi"
)

// queue is one activation of an HQD: created by ACTIVE=1, run by one goroutine, kept after
// it stops (for PQ_RPTR, FENCES and the error fields) until the next activation or reset.
//
// Fields are grouped by who may touch them: the immutable configuration; atomics shared with
// the register path; fields guarded by h.mu; and the goroutine's private execution state.
type queue struct {
	c      *CP
	h      *hqd
	mem    engine.Memory
	slot   int
	ringID uint8
	vmid   int   // HQD_VMID: the ring's address space
	client uint8 // memory client of packet data accesses (abi.VM_CID_CPG / CPC)

	// Configuration snapshot taken at activation (immutable).
	base, size   uint64 // ring GPU address, ring size in dwords (a power of two)
	reportAddr   uint64
	noUpdateRptr bool
	pollAddr     uint64
	pollEn       bool
	pollInterval time.Duration
	doorbellEn   bool
	doorbellOff  uint32
	initFault    *fault // invalid configuration: the queue starts halted
	initAddr     uint64 // its ERROR_ADDR and ERROR_INFO, for the report
	initInfo     uint32
	wake         chan struct{}
	grant        chan struct{} // a turn handed over by CP.turns
	prio         uint8         // turn priority (turn.go): Image.Priority, or registerPriority
	waitOn       stopOn        // what the last wait for a turn stops on (guarded by turns.mu; snapshot.go)

	// Mapped queues (mapped.go): started by Map from an Image, immutable.
	mapped        bool
	control       uint32 // Image.Control and DoorbellControl, as HQD registers read them
	doorbellCtl   uint32
	fenceAddr     uint64 // PROTECTED_FENCE_SIGNAL's address in vmid (0: the packet is refused)
	fenceDoorbell uint32 // the protected fence IV's DW4

	gate gate // the call-out gate (gate.go); its own cache line

	// Shared with the register path.
	wptr      atomic.Uint64 // last write pointer delivered (dwords, monotonic)
	rptr      atomic.Uint64 // published read pointer (dwords, monotonic)
	state     atomic.Uint32 // HQD_STATE_*
	fences    atomic.Uint32
	stopReq   atomic.Uint32 // 0, HQD_DEQUEUE_DRAIN or HQD_DEQUEUE_RESET
	stopped   atomic.Bool   // ACTIVE reads 0; written under h.mu
	parkedNow atomic.Bool   // parked in WAIT_REG_MEM: Wake signals it
	idleAt    atomic.Uint64 // sleeping for the wptr to move past idleAt-1 (0: not); QueueStats.Idle
	asleep    atomic.Uint32 // mapped queues: asleepIdle while idle, asleepTaken once Preempt saved it

	// Guarded by h.mu.
	errCode, errInfo uint32
	errAddr          uint64
	stop             StopState // mapped queues: Running until the goroutine ended (or Kill)
	saved            Image     // mapped queues: what Saved returns once stop != Running
	// done: the goroutine can make no further call out (its stop was saved after its last
	// one); it still counts in h.live until it returns, but not against MaxLivePerSlot.
	done    bool
	stopPkt stoppedPacket // the packet it stopped on, for HQDStatus (status.go)

	// Goroutine-private.
	streams   [1 + IBMaxDepth]stream // 0: the ring, 1: IB1, 2: IB2
	level     int
	ibCount   int // IB starts since the last ring-level INDIRECT_BUFFER
	userData  [abi.SH_COMPUTE_USER_DATA_COUNT]uint32
	sh        shRegs      // shader dispatch registers (shader.go)
	runs      []inflight  // its shader dispatches not yet seen ended, oldest first
	pgmBuf    []byte      // program fetch buffer
	lastProg  lastProgram // the last shader decoded
	shaderCSA             // mapped queues: the context save area and the dispatches it holds (shader_save.go)
	count     uint64      // packets executed, not yet added to CP.packets
	reported  uint64      // last rptr written to PQ_RPTR_REPORT_ADDR
	stuck     bool        // the packet at rptr extends past stuckWptr: wait for more
	stuckWptr uint64
	timer     *time.Timer // created on first use (wptr polling, parked waits)
	// Execution state a mapped queue saves and restores (mapped.go): the interrupted
	// DMA_DATA's bytes done, whether the interrupted WAIT_REG_MEM OPERATION 1 wrote its
	// reference, the last protected fence value. resuming: the next packet is the one the
	// image stopped at (Progress and WaitWritten apply to it only).
	progress    uint64
	waitWritten bool
	fenceValue  uint64
	resuming    bool
	scratch     [8]byte // small memory accesses (fences, RMW, COPY_DATA, waits)
	rptrBuf     [4]byte
	pollBuf     [8]byte
	chunk       []byte // DMA_DATA and kernels, dmaChunkBytes, allocated on first use
	haltPkt     []byte // the packet a halt is about, for its log line (halt_decode.go)

	turn      bool      // inside a turn (turn.go)
	turnStart time.Time // when it began
	turnWork  int       // work units done in it
	nextCheck int       // turnWork at which the clock is read next

	tr queueTrace // the timeline state (trace.go)
}

// stream is a dword source being executed: the ring (positions are the monotonic dword
// count, wrapping in the ring) or an IB (positions are indexes into it).
type stream struct {
	base, size uint64
	ring       bool
	vmid       int    // the address space the stream is fetched from and its packets access
	pos, end   uint64 // next dword to execute; ring: wptr of the batch, IB: its size

	buf    []byte // fetched dwords [bufPos, bufPos+bufN)
	bufPos uint64
	bufN   uint64
}

func (s *stream) addr(pos uint64) uint64 {
	if s.ring {
		return s.base + pos&(s.size-1)*4
	}
	return s.base + pos*4
}

func le32(p []byte) uint32 { return binary.LittleEndian.Uint32(p) }

// kick records a new write pointer and wakes the goroutine. A mapped queue's wptr only moves
// forward (max of the current and the delivered value): deliveries from MES (a shadow it
// read) and from doorbells may race.
func (q *queue) kick(wptr uint64) {
	if !q.mapped {
		q.wptr.Store(wptr)
	} else {
		for old := q.wptr.Load(); wptr > old && !q.wptr.CompareAndSwap(old, wptr); old = q.wptr.Load() {
		}
	}
	q.signal()
}

// armTimer starts the goroutine's timer (created on first use: most queues never need it).
func (q *queue) armTimer(d time.Duration) {
	if q.timer == nil {
		q.timer = time.NewTimer(d)
		return
	}
	q.timer.Reset(d)
}

// signal wakes the goroutine without blocking (the channel holds one pending wake).
func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// stopLocked makes the queue inactive (h.mu held): a reset also clears the error.
func (q *queue) stopLocked(reset bool) {
	q.stopped.Store(true)
	q.state.Store(abi.HQD_STATE_IDLE)
	if reset {
		q.errCode, q.errAddr, q.errInfo = 0, 0, 0
	}
}

// current reports whether q is still its slot's activation (a reset replaces it) and not
// revoked.
func (q *queue) current() bool { return q.h.q.Load() == q && !q.gate.revoked.Load() }

// run is the queue goroutine. It executes only inside a turn (turn.go) and gives the turn
// back before every wait.
func (q *queue) run() {
	defer q.c.wg.Done()
	for q != nil {
		q.runActivation()
		q = q.awaitNext() // a preempted mapped queue's goroutine may run the slot's next one
	}
}

// runActivation runs one activation to its end.
func (q *queue) runActivation() {
	defer q.finish()
	if q.initFault != nil {
		if q.takeTurn(stopOnRevoke) {
			q.report(q.initFault, q.initAddr, q.initInfo)
		}
		return
	}
	defer q.exit()
	defer q.endShaders() // before exit: a drain lets the dispatches finish, a reset kills them
	if q.asleep.Load() != 0 && !q.asleep.CompareAndSwap(asleepIdle, 0) {
		return // mapped idle (mapped.go), and Preempt stopped it before it ever ran
	}
	ring := &q.streams[0] // set up by activate or Map
	for {
		if !q.turn && !q.takeTurn(stopOnDequeue) || q.stopReq.Load() != 0 {
			return
		}
		if len(q.restore) > 0 {
			if err := q.restoreShaders(); err != nil { // before any packet: they were first
				q.halt(err, 0, 0)
				return
			}
		}
		if q.pollEn {
			if err := q.readAs(q.ringAccess(), q.pollAddr, q.pollBuf[:]); err != nil {
				q.halt(err, q.pollAddr, 0)
				return
			}
			q.wptr.Store(binary.LittleEndian.Uint64(q.pollBuf[:]))
		}
		if len(q.runs) > 0 {
			if err := q.reapShaders(); err != nil {
				q.halt(err, 0, 0)
				return
			}
		}
		w := q.wptr.Load()
		ahead := w - ring.pos
		// A wptr behind rptr is not work: it is what a 64-bit PQ_WPTR written low half first
		// looks like between the two writes when the high half changes, so it waits.
		if (ahead == 0 || ahead > math.MaxInt64 || q.stuck && w == q.stuckWptr) && len(q.runs) > 0 {
			// Not idle while its dispatches run: wait for them, or for more work.
			if err := q.waitShaders(true); err != nil {
				q.halt(err, 0, 0)
				return
			}
			continue
		}
		if ahead == 0 || ahead > math.MaxInt64 || q.stuck && w == q.stuckWptr {
			if !q.endBatch() {
				return
			}
			q.endTurn()
			if q.mapped {
				// Published before Idle is: a Preempt that sees the queue idle stops it itself.
				q.asleep.Store(asleepIdle)
			}
			q.idleAt.Store(w + 1)
			q.notify()
			if !q.mapped {
				q.sleep()
			} else if !q.sleepMapped() {
				return // a preemption saved the idle queue from outside (mapped.go)
			}
			q.idleAt.Store(0)
			continue
		}
		if ahead > q.size {
			// More than a ring ahead would execute ring contents the driver has not written
			// (or loop over stale ones): refuse it.
			q.halt(&fault{code: abi.CP_ERROR_RING_CONFIG, why: "wptr more than the ring size ahead of rptr"},
				ring.addr(ring.pos), uint32(w))
			return
		}
		if q.c.inj.Has(inject.QueueStall) && q.injectedStall() {
			return
		}
		ring.end, q.stuck = w, false
		switch q.tracedExecute() {
		case execStuck:
			q.stuck, q.stuckWptr = true, w
		case execStop, execHalt:
			return
		}
	}
}

// sleep blocks until a wake (kick, doorbell, dequeue) or, with wptr polling, the poll timer.
// An idle queue without polling costs no CPU.
func (q *queue) sleep() {
	if !q.pollEn {
		<-q.wake
		return
	}
	q.armTimer(q.pollInterval)
	select {
	case <-q.wake:
		q.timer.Stop()
	case <-q.timer.C:
	}
}

// endBatch publishes the read pointer and the packet count and writes the rptr report. It
// returns false if the queue halted.
func (q *queue) endBatch() bool {
	pos := q.streams[0].pos
	q.rptr.Store(pos)
	q.flushCount()
	if pos == q.reported || q.reportAddr == 0 || q.noUpdateRptr {
		return true
	}
	binary.LittleEndian.PutUint32(q.rptrBuf[:], uint32(pos&(q.size-1)))
	if err := q.writeAs(q.ringAccess(), q.reportAddr, q.rptrBuf[:]); err != nil {
		q.halt(err, q.reportAddr, 0)
		return false
	}
	q.reported = pos
	return true
}

func (q *queue) flushCount() {
	if q.count != 0 && q.current() {
		q.c.packets.Add(q.count)
	}
	q.count = 0
}

// finish ends the goroutine: it leaves its turn and the slot's live set.
func (q *queue) finish() {
	q.endTurn()
	q.c.putBufs(q)
	q.h.ended(q)
	if q.asleep.Load() != asleepTaken { // Preempt's caller knows of a stop Preempt took
		q.notify() // a mapped queue stopped: after every lock and the turn are gone
	}
}

// exit ends the activation: a dequeue request makes it inactive; a halted queue stays active
// (HALTED) until DEQUEUE_RESET.
func (q *queue) exit() {
	q.rptr.Store(q.streams[0].pos)
	q.flushCount()
	q.h.mu.Lock()
	defer q.h.mu.Unlock()
	if q.mapped {
		q.saveLocked() // mapped.go
		if q.stop == Preempted && q.h.spare == nil && q.h.q.Load() == q && !q.c.closed.Load() {
			q.h.spare = q // past its last call out: the goroutine may run the next Map
		}
		return
	}
	if q.stopped.Load() {
		return
	}
	if req := q.stopReq.Load(); req != 0 {
		q.stopLocked(req == abi.HQD_DEQUEUE_RESET)
	}
}

type execStatus uint8

const (
	execDone  execStatus = iota // the ring is drained to the batch's wptr
	execStuck                   // the next ring packet extends past wptr
	execStop                    // a dequeue request
	execHalt                    // an error halted the queue
)

// execute runs packets from the ring (and the IBs they start) until the ring reaches the
// batch's wptr, a dequeue request, or an error.
func (q *queue) execute() execStatus {
	for {
		s := &q.streams[q.level]
		if s.pos >= s.end {
			if q.level == 0 {
				return execDone
			}
			q.level--
			q.traceIBEnd()
			continue
		}
		if q.stopReq.Load() != 0 {
			q.stopLevel()
			return execStop
		}
		// Fast path: the packet is in the fetch buffer (off wraps when pos < bufPos).
		pos := s.pos
		var hdr uint32
		if off := pos - s.bufPos; off < s.bufN {
			hdr = le32(s.buf[off*4:])
		} else {
			p, err := q.fetch(s, pos, 1)
			if err != nil {
				q.halt(err, s.addr(pos), 0)
				return execHalt
			}
			hdr = le32(p)
		}
		n := uint64(1)
		switch hdr >> abi.PM4_HEADER_TYPE__SHIFT {
		case abi.PM4_TYPE2:
			if q.resuming {
				if err := q.resume(noOpcode); err != nil {
					q.halt(err, s.addr(pos), hdr)
					return execHalt
				}
			}
			s.pos++
			if !q.packetDone() {
				q.stopLevel()
				return execStop
			}
			continue
		case abi.PM4_TYPE3:
			if hdr&pm4HeaderReserved != 0 {
				q.halt(reserved("PM4 header bits [7:2]"), s.addr(pos), hdr)
				return execHalt
			}
			if hdr&(abi.PM4_HEADER_COUNT_MASK|abi.PM4_HEADER_OPCODE_MASK) != abi.PM4_NOP_ONE_DWORD&(abi.PM4_HEADER_COUNT_MASK|abi.PM4_HEADER_OPCODE_MASK) {
				n = uint64(hdr&abi.PM4_HEADER_COUNT_MASK>>abi.PM4_HEADER_COUNT__SHIFT) + 2
			}
		default:
			q.halt(&fault{code: abi.CP_ERROR_BAD_OPCODE, why: "type-0/type-1 packet"}, s.addr(pos), hdr)
			return execHalt
		}
		if n > s.end-pos {
			if s.ring && n <= q.size {
				// Not all of the packet is submitted yet: wait for the wptr to move.
				return execStuck
			}
			q.halt(badPacket("packet longer than the rest of its ring or IB"), s.addr(pos), hdr)
			return execHalt
		}
		op := hdr & abi.PM4_HEADER_OPCODE_MASK >> abi.PM4_HEADER_OPCODE__SHIFT
		if q.resuming {
			if err := q.resume(op); err != nil {
				q.halt(err, s.addr(pos), hdr)
				return execHalt
			}
		}
		if op == abi.PM4_IT_NOP {
			s.pos += n // skipped without fetching the payload
			if !q.packetDone() {
				q.stopLevel()
				return execStop
			}
			continue
		}
		var p []byte
		if off := pos - s.bufPos; off+n <= s.bufN { // pos ≥ bufPos after the header fetch
			p = s.buf[off*4 : (off+n)*4]
		} else {
			var err error
			if p, err = q.fetch(s, pos, n); err != nil {
				q.halt(err, s.addr(pos), hdr)
				return execHalt
			}
		}
		// An INDIRECT_BUFFER is consumed when its IB starts (the IB returns after it, and a
		// CHAIN replaces *s); any other packet when it finishes, so a parked or interrupted
		// packet keeps rptr on itself.
		isIB := op == abi.PM4_IT_INDIRECT_BUFFER
		if isIB {
			s.pos = pos + n
		}
		var err error
		q.tracePacket(op, s, pos)
		if op == abi.PM4_IT_WRITE_DATA { // the most frequent packet: one call less
			err = q.writeData(hdr&abi.PM4_HEADER_COUNT_MASK>>abi.PM4_HEADER_COUNT__SHIFT, p)
		} else {
			err = q.exec(op, hdr, p)
		}
		q.tracePacketEnd(op, err)
		if err != nil {
			if isIB {
				s.pos = pos // refused before any stream changed
			}
			if err == errStop {
				q.stopLevel()
				return execStop
			}
			q.haltOn(err, s.addr(pos), hdr, p)
			return execHalt
		}
		if !isIB {
			s.pos = pos + n
		}
		if !q.packetDone() {
			q.stopLevel()
			return execStop
		}
	}
}

// fetch returns dwords [pos, pos+n) of s (n ≤ s.end-pos), reading through Memory (bypassing
// L2: command fetch is coherent) up to fetchChunkDwords ahead.
func (q *queue) fetch(s *stream, pos, n uint64) ([]byte, error) {
	if pos >= s.bufPos && pos+n <= s.bufPos+s.bufN {
		off := (pos - s.bufPos) * 4
		return s.buf[off : off+n*4], nil
	}
	want := max(min(s.end-pos, fetchChunkDwords), n)
	if uint64(cap(s.buf)) < want*4 {
		s.buf = q.c.getBuf(s.buf, max(want, fetchChunkDwords)*4)
	}
	b := s.buf[:want*4]
	s.bufN = 0
	if s.ring {
		off := pos & (s.size - 1)
		first := min(s.size-off, want)
		if err := q.fetchRead(s, s.base+off*4, b[:first*4]); err != nil {
			return nil, err
		}
		if first < want {
			if err := q.fetchRead(s, s.base, b[first*4:]); err != nil {
				return nil, err
			}
		}
		// Publish progress now and then during long batches.
		q.rptr.Store(q.streams[0].pos)
	} else if err := q.fetchRead(s, s.base+pos*4, b); err != nil {
		return nil, err
	}
	s.bufPos, s.bufN = pos, want
	return b[:n*4], nil
}

// park blocks the goroutine in a WAIT_REG_MEM until cond holds, re-checking on every wake
// and on a timer that starts at the packet's poll interval and backs off. A dequeue request
// (drain or reset) ends the wait with errStop.
//
// Wake carries no address, so a busy queue elsewhere wakes every parked queue on each of its
// writes: wake-driven re-checks closer together than a hold-off are delayed to it, and the
// hold-off doubles while wakes keep coming that fast (a quiet spell resets it). The first
// wake after a quiet spell re-checks at once.
func (q *queue) park(w *waitCond, interval time.Duration) error {
	if !q.endBatch() {
		return errHalted
	}
	q.traceWait("WAIT_REG_MEM")
	defer q.traceWaitEnd()
	q.notePacket()
	q.state.Store(abi.HQD_STATE_WAITING)
	q.parkedNow.Store(true)
	q.c.parked.Add(1)
	defer func() {
		q.c.parked.Add(-1)
		q.parkedNow.Store(false)
		q.state.CompareAndSwap(abi.HQD_STATE_WAITING, abi.HQD_STATE_RUNNING)
	}()
	d := min(max(interval, minWaitInterval), maxWaitInterval)
	holdoff := minWakeHoldoff
	first := true
	for {
		// Evaluated after parkedNow is set: a write that raced with the caller's first
		// evaluation has woken us or is seen here.
		q.c.checks.Add(1)
		ok, err := w.eval(q)
		if err != nil || ok {
			return err
		}
		checked := time.Now()
		q.endTurn() // a parked queue holds no turn
		if first {
			q.notify()
			first = false
		}
		q.armTimer(d)
		woke := false
		select {
		case <-q.wake:
			q.timer.Stop()
			woke = true
		case <-q.timer.C:
			d = min(2*d, maxWaitInterval)
		}
		if q.stopReq.Load() != 0 {
			return errStop
		}
		if woke {
			if since := time.Since(checked); since < holdoff {
				if q.pause(holdoff - since) {
					return errStop
				}
				holdoff = min(2*holdoff, maxWakeHoldoff)
			} else {
				holdoff = minWakeHoldoff
			}
		}
		if !q.takeTurn(stopOnDequeue) {
			return errStop
		}
	}
}

// pause sleeps for d, absorbing wakes; it returns true early if a dequeue is requested.
func (q *queue) pause(d time.Duration) bool {
	q.armTimer(d)
	for {
		select {
		case <-q.wake:
			if q.stopReq.Load() != 0 {
				q.timer.Stop()
				return true
			}
		case <-q.timer.C:
			return false
		}
	}
}

// endless is the KERNEL_ENDLESS dispatch: the queue is busy until a dequeue reset (a drain
// cannot stop a running dispatch). It waits on the wake channel: no CPU.
func (q *queue) endless() error {
	if !q.endBatch() {
		return errHalted
	}
	q.notePacket()
	q.state.Store(abi.HQD_STATE_BUSY_KERNEL)
	q.endTurn()
	for {
		<-q.wake
		if q.stopReq.Load() == abi.HQD_DEQUEUE_RESET {
			return errStop
		}
	}
}

// resetRequested is checked between chunks of long packets: only a reset interrupts a packet.
func (q *queue) resetRequested() bool { return q.stopReq.Load() == abi.HQD_DEQUEUE_RESET }

// halt stops the queue on an error: STATE=HALTED with the error fields, then (outside the
// lock) the log line and the IV. The queue stays active until DEQUEUE_RESET. A revoked
// activation does not halt: it only stops.
func (q *queue) halt(err error, addr uint64, hdr uint32) {
	if err == errHalted || err == errRevoked || err == errStop {
		return
	}
	f := asFault(err)
	if f.hasAddr {
		addr = f.addr
	}
	if f.hasInfo {
		hdr = f.info
	}
	// Counted before the state shows it: a driver that sees HALTED and then reads CP_HALTS
	// must find the halt counted.
	counted := q.current()
	if counted {
		q.c.halts.Add(1)
	}
	q.notePacket()
	q.h.mu.Lock()
	if !q.stopped.Load() {
		q.errCode, q.errAddr, q.errInfo = f.code, addr, hdr
		q.state.Store(abi.HQD_STATE_HALTED)
	}
	q.h.mu.Unlock()
	if counted {
		q.announce(f, addr, hdr)
	}
}

// report counts, logs (rate-limited) and signals a halt (inside a turn: it calls
// Interrupts). A revoked activation reports nothing.
func (q *queue) report(f *fault, addr uint64, info uint32) {
	if q.current() {
		q.c.halts.Add(1)
		q.announce(f, addr, info)
	}
}

// announce logs (rate-limited) and signals a halt already counted; an activation revoked
// meanwhile says nothing.
func (q *queue) announce(f *fault, addr uint64, info uint32) {
	if !q.current() {
		return
	}
	q.traceHalt(f, addr, info)
	attrs := []any{"slot", q.slot, "error", errorName(f.code), "addr", fmt.Sprintf("%#x", addr),
		"info", fmt.Sprintf("%#x", info), "why", f.why}
	if f.err != nil {
		attrs = append(attrs, "cause", f.err)
	}
	if pkt := q.packetText(f, info); pkt != "" {
		attrs = append(attrs, "packet", pkt)
	}
	q.c.limiter.Warn(logKeyHalt, "cp: queue halted", attrs...)
	if f.code == abi.CP_ERROR_SHADER {
		return // IH_SRC_SHADER_ERROR, raised where the error was found, is the halt's IV
	}
	_ = q.push(engine.IV{
		Client: abi.IH_CLIENT_GRBM_CP, Source: errorSource(f.code), RingID: q.ringID, VMID: uint8(q.curVMID()),
		Data: [4]uint32{f.code, uint32(addr), uint32(addr >> 32), info},
	})
}
