package bars

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/ratelog"
)

func TestRegisterFileClaims(t *testing.T) {
	tests := []struct {
		name    string
		size    uint32
		claims  []Claim
		wantErr string
	}{
		{"disjoint", 0x100, []Claim{{Name: "a", Offset: 0, Size: 0x10}, {Name: "b", Offset: 0x10, Size: 0x10}}, ""},
		{"overlap", 0x100, []Claim{{Name: "a", Offset: 0, Size: 0x10}, {Name: "b", Offset: 0xC, Size: 0x10}}, `claim "b" overlaps claim "a" at 0xc`},
		{"outside", 0x100, []Claim{{Name: "a", Offset: 0xF0, Size: 0x20}}, "outside"},
		{"unaligned", 0x100, []Claim{{Name: "a", Offset: 2, Size: 4}}, "not dword-aligned"},
		{"empty claim", 0x100, []Claim{{Name: "a", Offset: 0, Size: 0}}, "not dword-aligned"},
		{"bad size", 0x102, nil, "not a positive multiple of 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRegisterFile(tc.size, tc.claims...)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("NewRegisterFile error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRegisterFileAccess(t *testing.T) {
	regs := make([]uint32, 4)
	f, err := NewRegisterFile(0x100, Claim{
		Name: "r", Offset: 0x20, Size: 0x10,
		Read:  func(off uint32) uint32 { return regs[off/4] },
		Write: func(off uint32, v uint32) { regs[off/4] = v },
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func(off uint64, v ...uint32) {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], x)
		}
		if err := f.Write(off, b); err != nil {
			t.Fatal(err)
		}
	}
	get := func(off uint64, n int) []byte {
		b := make([]byte, n)
		if err := f.Read(off, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	put(0x24, 0xdeadbeef)
	if regs[1] != 0xdeadbeef {
		t.Errorf("32-bit write: reg = %#x", regs[1])
	}
	put(0x28, 1, 2) // 8-byte write: two registers, low first
	if regs[2] != 1 || regs[3] != 2 {
		t.Errorf("64-bit write: regs = %#x %#x", regs[2], regs[3])
	}
	if got := binary.LittleEndian.Uint64(get(0x28, 8)); got != 2<<32|1 {
		t.Errorf("64-bit read = %#x", got)
	}
	put(0x80, 7)     // unclaimed write
	_ = get(0x80, 4) // unclaimed read
	un, _ := f.Diagnostics()
	if len(un) != 1 || un[0].Offset != 0x80 || un[0].Count != 2 {
		t.Errorf("unclaimed = %+v, want one offset 0x80 counted twice", un)
	}
	if err := f.Check(0xFC, 8); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Check past end = %v, want EINVAL", err)
	}
}

// TestRegisterFileMisshapen: only dword-aligned 4-byte and qword-aligned 8-byte accesses are
// decoded (docs/device.md); every other shape reads all-ones, changes nothing, and is counted.
func TestRegisterFileMisshapen(t *testing.T) {
	tests := []struct {
		name string
		off  uint64
		n    int
	}{
		{"8 bytes at 4 mod 8", 0x24, 8},
		{"8 bytes at 4 mod 8 at the end of the BAR", 0xF8 - 4, 8},
		{"8 bytes at 2 mod 8", 0x22, 8},
		{"4 bytes at 2 mod 4", 0x22, 4},
		{"4 bytes at 1 mod 4", 0x21, 4},
		{"2 bytes", 0x20, 2},
		{"1 byte", 0x20, 1},
		{"16 bytes", 0x20, 16},
		{"3 bytes", 0x20, 3},
	}
	regs := make([]uint32, 0x40)
	f, err := NewRegisterFile(0x100, Claim{
		Name: "r", Offset: 0, Size: 0x100,
		Read:  func(off uint32) uint32 { return regs[off/4] },
		Write: func(off uint32, v uint32) { regs[off/4] = v },
	})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	lim := ratelog.New(slog.New(slog.NewTextHandler(&logBuf, nil)), time.Hour, 5)
	f.SetLimiter(lim)
	for i := range regs {
		regs[i] = 0x1000 + uint32(i)
	}
	want := append([]uint32(nil), regs...)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := f.Check(tc.off, tc.n); err != nil {
				t.Fatalf("Check: %v (a misshapen access inside the BAR is not a transport error)", err)
			}
			p := make([]byte, tc.n)
			if err := f.Read(tc.off, p); err != nil {
				t.Fatal(err)
			}
			for _, c := range p {
				if c != 0xff {
					t.Fatalf("read = %x, want all-ones", p)
				}
			}
			if err := f.Write(tc.off, make([]byte, tc.n)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(regs, want) {
				t.Errorf("a misshapen write changed registers")
			}
			if _, bad := f.Diagnostics(); bad != uint64(2*(i+1)) {
				t.Errorf("misshapen = %d, want %d", bad, 2*(i+1))
			}
		})
	}
	// The decoded shapes next to them.
	p := make([]byte, 8)
	if err := f.Read(0x28, p); err != nil || binary.LittleEndian.Uint64(p) != 0x100b<<32|0x100a {
		t.Errorf("8-byte read at 0x28 = %x, %v", p, err)
	}
	if err := f.Read(0x24, p[:4]); err != nil || binary.LittleEndian.Uint32(p) != 0x1009 {
		t.Errorf("4-byte read at 0x24 = %x, %v", p[:4], err)
	}
	if _, bad := f.Diagnostics(); bad != uint64(2*len(tests)) {
		t.Errorf("a decoded access was counted as misshapen")
	}
	// The log says what happened, within the limiter's budget; the count says how often.
	if lines := bytes.Count(logBuf.Bytes(), []byte("\n")); lines != 5 || !bytes.Contains(logBuf.Bytes(), []byte("offset=0x24 bytes=8")) {
		t.Errorf("%d log lines, want 5 naming the first access:\n%s", lines, logBuf.String())
	}
	if c := lim.Counts(); len(c) != 1 || c[0].Logged != 5 || c[0].Suppressed != uint64(2*len(tests)-5) {
		t.Errorf("limiter counts = %+v", c)
	}
}

func TestVRAMWindow(t *testing.T) {
	v, err := NewVRAM(1<<24, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Write(0x1000, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if v.Bytes()[0x1002] != 3 {
		t.Error("write through the window did not reach VRAM")
	}
	if err := v.Write(1<<20-2, []byte{1, 2, 3, 4}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("write across the window end = %v, want EINVAL", err)
	}
	v.Bytes()[(1<<24)-1] = 9 // beyond the window: reachable by the GPU only
	// QEMU maps the same fd: a second mapping must see the same bytes.
	m, err := unix.Mmap(int(v.File().Fd()), 0, 1<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if m[0x1003] != 4 {
		t.Error("the memfd mapping does not share VRAM")
	}
	if _, err := NewVRAM(1<<20, 1<<21); err == nil {
		t.Error("window larger than VRAM accepted")
	}
}

// TestSharedMemoryIsSealed plays a client that got the memfd of a mappable region and tries to
// resize it or take write access away: every attempt fails with EPERM, and both the server's
// trapped accesses and the client's shared mapping keep working.
func TestSharedMemoryIsSealed(t *testing.T) {
	vram, err := NewVRAM(1<<22, 1<<21)
	if err != nil {
		t.Fatal(err)
	}
	defer vram.Close()
	dbs, err := NewDoorbells(DoorbellPoll, 0x4000, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dbs.Close()
	regions := []struct {
		name string
		file *os.File
		size int64
		rw   interface {
			Read(uint64, []byte) error
			Write(uint64, []byte) error
		}
	}{
		{"VRAM", vram.File(), 1 << 22, vram},
		{"doorbells", dbs.File(), 0x4000, dbs},
	}
	attacks := []struct {
		name string
		do   func(fd int, size int64) error
	}{
		{"truncate to 0", func(fd int, _ int64) error { return unix.Ftruncate(fd, 0) }},
		{"truncate by a page", func(fd int, size int64) error { return unix.Ftruncate(fd, size-4096) }},
		{"grow", func(fd int, size int64) error { return unix.Ftruncate(fd, 2*size) }},
		{"fallocate past the end", func(fd int, size int64) error { return unix.Fallocate(fd, 0, size, 4096) }},
		{"seal writes", func(fd int, _ int64) error {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
			return err
		}},
	}
	for _, r := range regions {
		t.Run(r.name, func(t *testing.T) {
			// The client's descriptor: a dup shares the open file, as SCM_RIGHTS does.
			fd, err := unix.FcntlInt(r.file.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			for _, a := range attacks {
				if err := a.do(fd, r.size); !errors.Is(err, unix.EPERM) {
					t.Errorf("%s: got %v, want EPERM", a.name, err)
				}
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Size != r.size {
				t.Errorf("size after the attacks = %d (%v), want %d", st.Size, err, r.size)
			}
			m, err := unix.Mmap(fd, 0, int(r.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatalf("the client can no longer map the region shared: %v", err)
			}
			defer unix.Munmap(m)
			last := uint64(r.size) - 8
			if r.name == "VRAM" {
				last = 1<<21 - 8 // the trapped window
			}
			m[last] = 0x5a
			b := make([]byte, 8)
			if err := r.rw.Read(last, b); err != nil || b[0] != 0x5a {
				t.Errorf("trapped read of the last qword = %x, %v; want the client's 0x5a", b, err)
			}
			if err := r.rw.Write(last, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil || m[last+7] != 8 {
				t.Errorf("trapped write of the last qword: %v; client sees %#x", err, m[last+7])
			}
		})
	}
}

type ringLog struct {
	mu    sync.Mutex
	rings [][2]uint64
}

func (r *ringLog) ring(i int, v uint64) {
	r.mu.Lock()
	r.rings = append(r.rings, [2]uint64{uint64(i), v})
	r.mu.Unlock()
}

// take returns the rings so far and forgets them.
func (r *ringLog) take() [][2]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rings
	r.rings = nil
	return out
}

func (r *ringLog) snapshot() [][2]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]uint64(nil), r.rings...)
}

func TestDoorbellTrap(t *testing.T) {
	var log ringLog
	d, err := NewDoorbells(DoorbellTrap, 0x4000, log.ring)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.File() != nil {
		t.Error("trap mode must not offer an mmap fd")
	}
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, 0x1_0000_0040)
	d.Write(3*8, b)                      // 64-bit doorbell 3
	d.Write(5*8+4, []byte{0x2, 0, 0, 0}) // upper half of doorbell 5
	d.Write(5*8, []byte{0x10, 0, 0, 0})  // lower half of doorbell 5
	want := [][2]uint64{{3, 0x1_0000_0040}, {5, 0x2_0000_0000}, {5, 0x2_0000_0010}}
	if got := log.snapshot(); !equalRings(got, want) {
		t.Errorf("rings = %x, want %x", got, want)
	}
	if err := d.Write(0x4000-4, b); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("write past the end = %v, want EINVAL", err)
	}
	d.Reset()
	if err := d.Read(3*8, b); err != nil || binary.LittleEndian.Uint64(b) != 0 {
		t.Errorf("doorbell 3 after Reset = %x, %v; want 0", b, err)
	}
	if got := log.snapshot(); len(got) != len(want) {
		t.Errorf("Reset rang %x", got[len(want):])
	}
}

func TestDoorbellPoll(t *testing.T) {
	var log ringLog
	d, err := NewDoorbells(DoorbellPoll, 0x4000, log.ring)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The guest writes through QEMU's mapping of the memfd, not through the server.
	m, err := unix.Mmap(int(d.File().Fd()), 0, 0x4000, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	time.Sleep(50 * time.Millisecond) // let the poller back off to its idle sleep
	binary.LittleEndian.PutUint64(m[511*8:], 42)
	deadline := time.Now().Add(5 * time.Second)
	for len(log.snapshot()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := log.snapshot(); !equalRings(got, [][2]uint64{{511, 42}}) {
		t.Fatalf("rings = %v, want doorbell 511 = 42", got)
	}
	// A second write to the same doorbell is seen too.
	binary.LittleEndian.PutUint64(m[511*8:], 43)
	for len(log.snapshot()) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := log.snapshot(); len(got) != 2 || got[1] != [2]uint64{511, 43} {
		t.Fatalf("rings = %v, want a second ring with 43", got)
	}
}

// mapDoorbells maps a poll-mode aperture as QEMU does for the guest.
func mapDoorbells(t testing.TB, d *Doorbells) []byte {
	t.Helper()
	m, err := unix.Mmap(int(d.File().Fd()), 0, int(d.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// settle waits until the poller has finished two whole scans that started after the call: what
// was in the page before settle has been seen by then.
func settle(t testing.TB, d *Doorbells) {
	t.Helper()
	target := d.scans.Load() + 2
	deadline := time.Now().Add(5 * time.Second)
	for d.scans.Load() < target {
		d.kick() // wakes a sleeping poller at once: no timer in the loop
		runtime.Gosched()
		if time.Now().After(deadline) {
			t.Fatal("the poller did not scan")
		}
	}
}

// TestDoorbellPollReset: after Reset the poller compares against the zeroed page. Before the
// fix its last-seen values survived Reset: the zeroing rang every used doorbell with 0, and a
// post-reset ring with the pre-reset value was never seen.
func TestDoorbellPollReset(t *testing.T) {
	tests := []struct {
		name        string
		before      map[int]uint64 // rung before Reset
		after       map[int]uint64 // rung after Reset
		wantOnReset [][2]uint64
	}{
		{"same value again", map[int]uint64{7: 42}, map[int]uint64{7: 42}, nil},
		{"new value", map[int]uint64{7: 42}, map[int]uint64{7: 43}, nil},
		{"other doorbells stay quiet", map[int]uint64{7: 42, 300: 1 << 40}, map[int]uint64{300: 1 << 40}, nil},
		{"nothing rung after", map[int]uint64{2047: 9}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log ringLog
			d, err := NewDoorbells(DoorbellPoll, 0x4000, log.ring)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			m := mapDoorbells(t, d)
			for i, v := range tc.before {
				binary.LittleEndian.PutUint64(m[8*i:], v)
			}
			settle(t, d)
			if got := len(log.snapshot()); got != len(tc.before) {
				t.Fatalf("rings before Reset = %v, want %d", log.snapshot(), len(tc.before))
			}
			n0 := len(log.snapshot())
			d.Reset()
			settle(t, d)
			if got := log.snapshot()[n0:]; len(got) != 0 {
				t.Errorf("Reset rang %x", got)
			}
			for i, v := range tc.after {
				binary.LittleEndian.PutUint64(m[8*i:], v)
			}
			settle(t, d)
			got := log.snapshot()[n0:]
			if len(got) != len(tc.after) {
				t.Fatalf("rings after Reset = %x, want %v", got, tc.after)
			}
			for _, r := range got {
				if v, ok := tc.after[int(r[0])]; !ok || v != r[1] {
					t.Errorf("ring after Reset %x, want one of %v", r, tc.after)
				}
			}
			for i := range tc.before {
				if b := m[8*i : 8*i+8]; tc.after[i] == 0 && binary.LittleEndian.Uint64(b) != 0 {
					t.Errorf("doorbell %d = %x after Reset, want 0", i, b)
				}
			}
		})
	}
}

// TestDoorbellClear: a queue that takes a doorbell over (Clear) has its first ring seen even
// when it writes the value the doorbell already held (the previous queue's last wptr: in poll
// mode that write changed nothing in the page, and the ring was lost, as the guest suite's
// GPUVM cases showed on a reused slot); the zeroing rings nothing; other doorbells stay as they
// were. Trap mode rings every write anyway; Clear only zeroes.
func TestDoorbellClear(t *testing.T) {
	for _, mode := range []DoorbellMode{DoorbellPoll, DoorbellTrap} {
		t.Run(mode.String(), func(t *testing.T) {
			var log ringLog
			d, err := NewDoorbells(mode, 0x4000, log.ring)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var b [8]byte
			var mapped []byte // the guest's mapping (poll mode)
			ring := func(i int, v uint64) {
				binary.LittleEndian.PutUint64(b[:], v)
				if mode == DoorbellPoll {
					copy(mapped[8*i:], b[:])
				} else if err := d.Write(uint64(8*i), b[:]); err != nil {
					t.Fatal(err)
				}
			}
			if mode == DoorbellPoll {
				mapped = mapDoorbells(t, d)
			}
			ring(3, 12)
			ring(9, 5)
			if mode == DoorbellPoll {
				settle(t, d)
			}
			n0 := len(log.snapshot())
			d.Clear(3)
			if mode == DoorbellPoll {
				settle(t, d)
			}
			if got := log.snapshot()[n0:]; len(got) != 0 {
				t.Fatalf("Clear rang %x", got)
			}
			if err := d.Read(8*3, b[:]); err != nil || binary.LittleEndian.Uint64(b[:]) != 0 {
				t.Fatalf("doorbell 3 reads %x (%v) after Clear, want 0", b, err)
			}
			ring(3, 12) // the new queue's first wptr, the old queue's last
			if mode == DoorbellPoll {
				settle(t, d)
			}
			if got := log.snapshot()[n0:]; !equalRings(got, [][2]uint64{{3, 12}}) {
				t.Fatalf("rings after Clear = %x, want doorbell 3 with 12 once", got)
			}
			if err := d.Read(8*9, b[:]); err != nil || binary.LittleEndian.Uint64(b[:]) != 5 {
				t.Errorf("doorbell 9 reads %x (%v), want 5: Clear touched another doorbell", b, err)
			}
		})
	}
}

// TestDoorbellPollResetRace resets while the guest rings (run with -race): the poller never
// invents a ring with value 0 (the guest never writes 0), and once the resets stop, every
// doorbell's last value is rung.
func TestDoorbellPollResetRace(t *testing.T) {
	var log ringLog
	d, err := NewDoorbells(DoorbellPoll, 0x4000, log.ring)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := mapDoorbells(t, d)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the guest
		defer wg.Done()
		for v := uint64(1); ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			binary.LittleEndian.PutUint64(m[8*int(v%16):], v)
		}
	}()
	for range 200 {
		d.Reset() // the vfio-user worker
		time.Sleep(20 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	d.Reset()
	settle(t, d)
	n0 := len(log.snapshot())
	for i := range 16 {
		binary.LittleEndian.PutUint64(m[8*i:], 1<<32|uint64(i))
	}
	settle(t, d)
	all := log.snapshot()
	for _, r := range all {
		if r[1] == 0 {
			t.Fatalf("doorbell %d rang with 0", r[0])
		}
	}
	final := map[uint64]bool{}
	for _, r := range all[n0:] {
		if r[1] != 1<<32|r[0] {
			t.Errorf("ring %x after the last Reset, want only the final values", r)
		}
		final[r[0]] = true
	}
	if len(final) != 16 {
		t.Errorf("final values rung on %d doorbells, want 16", len(final))
	}
}

func equalRings(a, b [][2]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseDoorbellMode(t *testing.T) {
	for in, want := range map[string]DoorbellMode{"trap": DoorbellTrap, "poll": DoorbellPoll} {
		if got, err := ParseDoorbellMode(in); err != nil || got != want {
			t.Errorf("ParseDoorbellMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseDoorbellMode("mmap"); err == nil {
		t.Error("unknown mode accepted")
	}
}
