package hostile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/vfiouser/vfiousertest"
)

// Budgets of the checks after each attack and over the suite.
const (
	// quietTime is how long guest memory and VRAM must stay unchanged after DEVICE_RESET.
	quietTime = 150 * time.Millisecond
	// logBudget bounds how much one attack may add to the server's log (guest-triggered log
	// lines must be rate limited).
	logBudget = 512 << 10
	// Once the attack's client is gone, the server must be back within these of its idle
	// figures (taken after a warm-up connection, before the first attack), and hold no
	// mapping of any client's guest memory. (The total number of mappings is only logged: the
	// Go heap, and the race detector's shadow of it, add mappings as they grow.)
	goroutineSlack = 4
	fdSlack        = 2
	// settleTime is how long the server gets to get back to idle after a disconnect.
	settleTime = 3 * time.Second
	// Over the whole suite RSS may grow by the VRAM the attacks touch (VRAM survives resets,
	// and its pages stay resident) plus anonBudget of heap.
	anonBudget = 64 << 20
)

// attack is one hostile scenario. run drives the server through e (which starts with a
// brought-up device and guarded guest memory mapped) and checks what the scenario itself
// promises; the suite then checks the server's health whatever run did.
type attack struct {
	name string
	run  func(t *testing.T, e *env)
}

// env is what an attack works with.
type env struct {
	srv  *server
	d    *driver   // the current client; an attack may replace it (reconnects)
	mem  *guestMem // the current client's guest memory
	rng  *rand.Rand
	more []func() // extra cleanups (other clients, memory)
}

// suite runs attacks against one server, restarting it when an attack killed or wedged it.
type suite struct {
	t        *testing.T
	srv      *server
	base     resources // idle figures of the current server after its warm-up
	start    resources // idle figures of the first server
	seed     uint64
	restarts int
	extra    []string // server flags
}

func newSuite(t *testing.T, extra ...string) *suite {
	s := &suite{t: t, seed: 0x5eed_0001, extra: extra}
	if v := os.Getenv("VGPU_HOSTILE_SEED"); v != "" {
		fmt.Sscan(v, &s.seed)
	}
	t.Logf("seed %#x (VGPU_HOSTILE_SEED), race-detector server: %v", s.seed, raceServer())
	t.Cleanup(func() {
		if s.srv != nil {
			s.srv.stop(t)
			s.retire(t)
		}
	})
	s.boot(t)
	s.start = s.base
	return s
}

// retire removes a server's directory, or keeps it (with its log) when the test failed.
func (s *suite) retire(t *testing.T) {
	if t.Failed() {
		t.Logf("server log kept: %s", s.srv.logPath)
		return
	}
	s.srv.cleanup()
}

// boot starts a server, warms it up with one clean connection (bring-up, ring test, reset,
// disconnect) and takes its idle figures.
func (s *suite) boot(t *testing.T) {
	s.srv = startServer(t, s.extra...)
	mem, err := newGuestMem(defaultAreas(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.close()
	d, err := redial(s.srv.socket)
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	if err := d.attach(mem); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	if err := d.ringTest(rand.New(rand.NewPCG(s.seed, 0))); err != nil {
		t.Fatalf("warm-up ring test on a fresh server: %v\nserver log:\n%s", err, tail(s.srv.log(0), 8<<10))
	}
	if err := d.c.Reset(); err != nil {
		t.Fatalf("warm-up reset: %v", err)
	}
	d.close()
	time.Sleep(100 * time.Millisecond)
	s.base, err = s.idle(nil)
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	t.Logf("server pid %d idle after warm-up: %v", s.srv.pid(), s.base)
}

// idle reads the server's resources; with want, it waits (up to settleTime) until they are
// back within the slack of want.
func (s *suite) idle(want *resources) (resources, error) {
	deadline := time.Now().Add(settleTime)
	for {
		r, err := procResources(s.srv.pid())
		if err != nil {
			return r, err
		}
		if r.Goroutines, err = s.srv.goroutines(); err != nil {
			return r, err
		}
		if want == nil || r.Goroutines <= want.Goroutines+goroutineSlack && r.FDs <= want.FDs+fdSlack && r.GuestMaps == 0 {
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%v after %v without a client; idle was %v", r, settleTime, *want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs one attack and the checks after it.
func (s *suite) run(t *testing.T, a attack) {
	if s.srv == nil || !s.srv.alive() {
		s.restarts++
		t.Logf("restarting the server (restart %d)", s.restarts)
		if s.srv != nil {
			t.Logf("the previous server's log: %s", s.srv.logPath)
		}
		s.boot(t)
	}
	before, err := s.idle(nil)
	if err != nil {
		t.Fatalf("before the attack: %v", err)
	}
	logOff := s.srv.logSize()
	e := &env{srv: s.srv, rng: rand.New(rand.NewPCG(s.seed, hashName(a.name)))}
	defer func() {
		if e.d != nil {
			e.d.close()
		}
		for i := len(e.more) - 1; i >= 0; i-- {
			e.more[i]()
		}
	}()
	if e.mem, err = newGuestMem(defaultAreas(), false); err != nil {
		t.Fatal(err)
	}
	e.more = append(e.more, e.mem.close)
	if e.d, err = redial(s.srv.socket); err != nil {
		t.Fatalf("connect: %v", err)
	}
	if err := e.d.attach(e.mem); err != nil {
		t.Fatal(err)
	}
	if err := e.d.bringUp(); err != nil {
		t.Fatal(err)
	}
	e.mem.allow(ringTestIOVA, abi.PTE_PAGE_SIZE)
	start := time.Now()
	t.Run("attack", func(t *testing.T) { a.run(t, e) })
	t.Logf("attack ran %v", time.Since(start).Round(time.Millisecond))
	t.Run("after", func(t *testing.T) {
		s.verify(t, e, logOff)
		if !s.srv.alive() {
			return
		}
		after, err := s.idle(&s.base)
		if err != nil {
			t.Errorf("server not back to idle once the client left: %v", err)
		}
		t.Logf("server before: %v", before)
		t.Logf("server after:  %v", after)
	})
}

// verify is the health check after an attack: liveness, log, reset, quiescence, ring test,
// guard memory. It disconnects e's client at the end.
func (s *suite) verify(t *testing.T, e *env, logOff int64) {
	srv := s.srv
	defer func() {
		if e.d != nil {
			e.d.close()
			e.d = nil
		}
	}()
	if !srv.alive() {
		t.Fatalf("the server died: %v\nlog of the attack:\n%s", srv.exitErr, tail(srv.log(logOff), 16<<10))
	}
	// Liveness: the attack's client if it still works, else a new one.
	var lat time.Duration
	err := errors.New("the attack left no client")
	if e.d != nil {
		lat, err = e.d.alive()
	}
	if err != nil {
		t.Logf("the attack's connection is unusable (%v); connecting again", err)
		if e.d != nil {
			e.d.close()
		}
		if e.d, err = redial(srv.socket); err == nil {
			lat, err = e.d.alive()
		}
		if err == nil {
			err = e.d.attach(e.mem)
		}
	}
	if err != nil {
		s.wedged(t, fmt.Sprintf("no register read answered within %v: %v", livenessTimeout, err), logOff)
		return
	}
	t.Logf("liveness: ID_MAGIC read in %v", lat.Round(time.Microsecond))

	// Reset, then nothing may move: engines stopped, Bus Master off.
	resetStart := time.Now()
	if err := e.d.c.Reset(); err != nil {
		s.wedged(t, fmt.Sprintf("DEVICE_RESET: %v", err), logOff)
		return
	}
	t.Logf("DEVICE_RESET answered in %v", time.Since(resetStart).Round(time.Microsecond))
	memSnap, vramSnap := e.mem.snapshot(), bytes.Clone(e.d.vram)
	time.Sleep(quietTime)
	for _, p := range e.mem.changedSince(memSnap, fmt.Sprintf("guest memory changed within %v after DEVICE_RESET returned (an engine outlived the reset)", quietTime)) {
		t.Error(p)
	}
	if off, n := firstDiff(e.d.vram, vramSnap); n > 0 {
		t.Errorf("VRAM changed within %v after DEVICE_RESET returned (an engine outlived the reset): %d bytes, first at VRAM offset %#x", quietTime, n, off)
	}
	// Guard memory and untargeted memory, before the ring test writes its page.
	for _, p := range e.mem.check() {
		t.Error(p)
	}
	e.mem.accept()
	e.mem.allow(ringTestIOVA, abi.PTE_PAGE_SIZE)
	if err := e.d.ringTest(e.rng); err != nil {
		t.Errorf("ring test after reset: %v", err)
	}
	for _, p := range e.mem.check() {
		t.Errorf("after the ring test: %s", p)
	}
	if r, err := procResources(srv.pid()); err == nil {
		t.Logf("while connected: %d mappings of the client's guest memory", r.GuestMaps)
	}
	s.checkLog(t, logOff, s.srv.logSize())
}

// checkLog looks at what the server logged in [off, end).
func (s *suite) checkLog(t *testing.T, off, end int64) {
	log := s.srv.log(off)
	log = log[:min(int64(len(log)), end-off)]
	for _, p := range logProblems(log) {
		t.Errorf("server log:\n%s", p)
	}
	if len(log) > logBudget {
		t.Errorf("the attack added %d bytes to the server log (budget %d); most frequent lines:\n%s", len(log), logBudget, topLines(log, 5))
	} else {
		t.Logf("server log grew by %d bytes", len(log))
	}
}

// wedged reports a server that stopped answering: it asks Go for every goroutine's stack
// (SIGQUIT), keeps them in the test log, and kills the server so the next attack gets a new one.
func (s *suite) wedged(t *testing.T, what string, logOff int64) {
	off := s.srv.logSize()
	s.checkLog(t, logOff, off)
	s.srv.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.srv.done:
	case <-time.After(3 * time.Second):
	}
	s.srv.kill()
	t.Errorf("%s\nserver log of the attack (tail):\n%s\ngoroutine dump (SIGQUIT):\n%s",
		what, tail(s.srv.log(logOff)[:off-logOff], 6<<10), relevantStacks(s.srv.log(off), 24<<10))
}

// checkGrowth compares the end of the suite with its start.
func (s *suite) checkGrowth(t *testing.T) {
	if s.srv == nil || !s.srv.alive() {
		return
	}
	end, err := s.idle(&s.base)
	if err != nil {
		t.Errorf("end of suite: %v", err)
	}
	t.Logf("suite start: %v", s.start)
	t.Logf("suite end:   %v (server restarts: %d)", end, s.restarts)
	anon := uint64(anonBudget)
	if raceServer() {
		anon *= 8 // the race detector's shadow memory
	}
	if end.Anon > s.base.Anon+anon>>10 {
		t.Errorf("RssAnon grew from %d KiB to %d KiB over the suite (budget %d KiB)", s.base.Anon, end.Anon, anon>>10)
	}
	if end.RSS > s.base.RSS+(vramSize+anon)>>10 {
		t.Errorf("VmRSS grew from %d KiB to %d KiB over the suite (budget: VRAM %d KiB + %d KiB)", s.base.RSS, end.RSS, vramSize>>10, anon>>10)
	}
}

// ringTest is the proof of a working device after a reset: bring-up, then one compute queue
// runs WRITE_DATA and a fenced RELEASE_MEM with an interrupt; the MSI-X eventfd must fire, the
// data and fence must be in guest memory and the IH ring must hold the end-of-pipe IV.
func (d *driver) ringTest(rng *rand.Rand) error {
	if err := d.bringUp(); err != nil {
		return fmt.Errorf("bring-up: %w", err)
	}
	// Unmask vector 0 in the MSI-X table, as a driver does after a reset (masks them all).
	// QEMU emulates the table and never forwards this; a client that does, gets PCI semantics.
	if err := d.setReg(abi.REGS_MSIX_TABLE_OFFSET+12, 0); err != nil {
		return fmt.Errorf("MSI-X table: %w", err)
	}
	q, err := d.startQueue(1, queueOpts{})
	if err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	data, fence := uint64(ringTestIOVA), uint64(ringTestIOVA+64)
	token, seq, ctx := rng.Uint32()|1, rng.Uint32()|1, rng.Uint32()
	d.mem.set(data, make([]byte, 4))
	d.mem.set(fence, make([]byte, 4))
	drainEventfd(d.irq[0])
	if err := q.submit(pm4.WriteMem(gartSys(data), token), pm4.Fence(gartSys(fence), seq, ctx, true)); err != nil {
		return fmt.Errorf("doorbell: %w", err)
	}
	if _, err := vfiousertest.WaitIRQ(d.irq[0], livenessTimeout); err != nil {
		state, code, _ := d.status(q.slot)
		entries, _ := d.reg(abi.REG_IH_ENTRIES)
		return fmt.Errorf("no MSI-X interrupt within %v: %v (queue %s, IH entries %d, fence %#x want %#x)",
			livenessTimeout, err, describeState(state, code), entries, le32(d.mem.at(fence, 4)), seq)
	}
	if got := le32(d.mem.at(fence, 4)); got != seq {
		return fmt.Errorf("fence reads %#x after the interrupt, want %#x", got, seq)
	}
	if got := le32(d.mem.at(data, 4)); got != token {
		return fmt.Errorf("WRITE_DATA target reads %#x after the fence, want %#x", got, token)
	}
	d.mem.set(data, le(token))
	d.mem.set(fence, le(seq))
	dw0, dw4 := d.vramU32(vIH), d.vramU32(vIH+16)
	src := dw0 & abi.IH_DW0_SOURCE_ID_MASK >> abi.IH_DW0_SOURCE_ID__SHIFT
	if src != abi.IH_SRC_CP_EOP || dw4 != ctx {
		return fmt.Errorf("first IH entry: source %#x context %#x, want %#x and %#x", src, dw4, abi.IH_SRC_CP_EOP, ctx)
	}
	return nil
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le(v uint32) []byte   { return binary.LittleEndian.AppendUint32(nil, v) }

// drainEventfd clears an eventfd's counter (it is non-blocking).
func drainEventfd(fd int) {
	var b [8]byte
	syscall.Read(fd, b[:])
}

func firstDiff(a, b []byte) (first, n int) {
	first = -1
	for c := 0; c < len(a); c += 1 << 16 {
		e := min(c+1<<16, len(a))
		if bytes.Equal(a[c:e], b[c:e]) {
			continue
		}
		for i := c; i < e; i++ {
			if a[i] != b[i] {
				if first < 0 {
					first = i
				}
				n++
			}
		}
	}
	return first, n
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// topLines lists the most frequent log messages (by their "msg" field).
func topLines(log []byte, n int) string {
	counts := map[string]int{}
	for _, l := range strings.Split(string(log), "\n") {
		if i := strings.Index(l, `"msg":"`); i >= 0 {
			m := l[i+7:]
			if j := strings.IndexByte(m, '"'); j >= 0 {
				m = m[:j]
			}
			counts[m]++
		}
	}
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range counts {
		all = append(all, kv{k, v})
	}
	for i := range all { // small n: selection is enough
		for j := i + 1; j < len(all); j++ {
			if all[j].v > all[i].v {
				all[i], all[j] = all[j], all[i]
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(all) && i < n; i++ {
		fmt.Fprintf(&b, "  %7d × %s\n", all[i].v, all[i].k)
	}
	return b.String()
}

// relevantStacks keeps the goroutines of a SIGQUIT dump that are in vgpu code, up to n bytes.
func relevantStacks(dump []byte, n int) string {
	var b strings.Builder
	for _, g := range strings.Split(string(dump), "\n\n") {
		if strings.Contains(g, "vgpu/") && b.Len()+len(g) < n {
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	if b.Len() == 0 {
		return tail(dump, n)
	}
	return b.String()
}

// hashName derives an attack's random stream from its name (FNV-1a).
func hashName(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}
