package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/abi"
	"vgpu/bars"
	"vgpu/cp/cptest"
	"vgpu/device"
	"vgpu/vfiouser/vfiousertest"
)

// A Result is one measurement and, when it has one, its baseline from the same run.
type Result struct {
	Name     string
	Value    float64 // in Unit
	Unit     string
	Baseline string  // what Value is compared with
	Base     float64 // baseline value in Unit (0: none)
	Note     string
}

// Ratio is Value/Base.
func (r Result) Ratio() float64 {
	if r.Base == 0 {
		return 0
	}
	return r.Value / r.Base
}

// run is a timing of n iterations.
type run struct {
	N int
	T time.Duration
}

// measureFor is the target duration of one measurement.
var measureFor = 300 * time.Millisecond

// measure runs f(n) with growing n until one call lasts measureFor, like testing.Benchmark
// (which cannot be used here: it deadlocks when called from inside a running benchmark).
// f reports failure by returning an error.
func measure(f func(n int) error) (run, error) {
	n := 1
	for {
		start := time.Now()
		if err := f(n); err != nil {
			return run{}, err
		}
		d := time.Since(start)
		if d >= measureFor || n >= 1<<30 {
			return run{n, d}, nil
		}
		next := n * 100
		if d > 0 {
			next = int(float64(n) * 1.2 * float64(measureFor) / float64(d))
		}
		n = max(min(next, 100*n), n+1)
	}
}

func perOp(r run) float64 { return float64(r.T.Nanoseconds()) / float64(r.N) / 1e3 }

// must is measure for baselines that cannot fail.
func must(f func(n int)) run {
	r, _ := measure(func(n int) error { f(n); return nil })
	return r
}

// RegionRead is a 4-byte register read round trip through the client (µs/op), beside a raw
// unix-socket ping-pong of the same message sizes.
func RegionRead() (Result, error) {
	rig, err := NewRig(RigConfig{RingDwords: 1024})
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	dev, err := measure(func(n int) error {
		for range n {
			if _, err := rig.Reg(abi.REG_ID_MAGIC); err != nil {
				return err
			}
		}
		return nil
	})
	return Result{Name: "REGION_READ round trip", Value: perOp(dev), Unit: "µs", Baseline: "unix socket echo", Base: perOp(must(unixEcho))}, err
}

// unixEcho ping-pongs a 32-byte request and a 36-byte reply over a socketpair. Reads are
// io.ReadFull: a stream socket may return a message in pieces.
func unixEcho(n int) {
	a, c, err := vfiousertest.Socketpair()
	if err != nil {
		return
	}
	defer a.Close()
	defer c.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(c, buf[:32]); err != nil {
				return
			}
			if _, err := c.Write(buf[:36]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64)
	for range n {
		if _, err := a.Write(buf[:32]); err != nil {
			return
		}
		if _, err := io.ReadFull(a, buf[:36]); err != nil {
			return
		}
	}
}

// DoorbellToInterrupt is an empty job (a fence with an interrupt) from doorbell to eventfd
// wake-up (µs/op). Trapped doorbells are compared with a socket round trip plus an eventfd
// wake-up (the least the path can cost); polled doorbells with a cache-line round trip between
// two goroutines plus an eventfd wake-up.
func DoorbellToInterrupt(mode bars.DoorbellMode) (Result, error) {
	rig, err := NewRig(RigConfig{Doorbells: mode, RingDwords: 1 << 16})
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	seq := uint32(0)
	dev, err := measure(func(n int) error {
		for range n {
			seq++
			rig.Emit(fence(seq, true))
			if err := rig.Kick(); err != nil {
				return err
			}
			if err := rig.WaitIRQ(5 * time.Second); err != nil {
				return fmt.Errorf("job %d: %w", seq, err)
			}
		}
		return nil
	})
	if err == nil && rig.Fence() != seq {
		err = fmt.Errorf("fence reads %d after %d jobs", rig.Fence(), seq)
	}
	r := Result{Name: fmt.Sprintf("doorbell (%s) → fence → interrupt", mode), Value: perOp(dev), Unit: "µs"}
	wake := perOp(must(eventfdWake))
	if mode == bars.DoorbellTrap {
		r.Baseline, r.Base = "socket round trip + eventfd wake", perOp(must(unixEcho))+wake
	} else {
		r.Baseline, r.Base = "cache-line round trip + eventfd wake", perOp(must(cacheLinePingPong))+wake
	}
	return r, err
}

// stopValue, written to eventfdWake's eventfd when nothing is pending, ends its reader.
const stopValue = 0xff

// eventfdWake is one eventfd signal seen by a goroutine blocked in read, and back. The
// reader must be gone before the fds are closed: a goroutine still using a closed fd number
// would read or write whatever file gets that number next.
func eventfdWake(n int) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return
	}
	back, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(efd)
		return
	}
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for {
			// The counter is 1 per round; the stop value below is the only other one.
			if _, err := unix.Read(efd, buf); err != nil || buf[0] == stopValue {
				return
			}
			unix.Write(back, one)
		}
	}()
	buf := make([]byte, 8)
	for range n {
		unix.Write(efd, one)
		unix.Read(back, buf)
	}
	unix.Write(efd, []byte{stopValue, 0, 0, 0, 0, 0, 0, 0})
	<-done
	unix.Close(efd)
	unix.Close(back)
}

// cacheLinePingPong bounces a value between two spinning goroutines through one cache line.
func cacheLinePingPong(n int) {
	var line [16]atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); ; i += 2 {
			for line[0].Load() != i {
				if line[1].Load() != 0 {
					return
				}
			}
			line[0].Store(i + 1)
		}
	}()
	for i := uint64(0); i < uint64(n); i++ {
		line[0].Store(2*i + 1)
		for line[0].Load() != 2*i+2 {
		}
	}
	line[1].Store(1)
	line[0].Store(^uint64(0))
	<-done
}

// PacketRate is the CP's rate for 1-dword WRITE_DATA packets to VRAM through the whole device
// (GPU MMU, L2), in packets per second, beside a Go loop storing the same dwords.
func PacketRate() (Result, error) {
	const ringDwords = 1 << 21 // 8 MiB ring
	rig, err := NewRig(RigConfig{RingDwords: ringDwords})
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	dst := uint64(abi.GPU_FB_BASE) + vramScratch
	pkt := cptest.WriteMem(dst, 0)
	n := (ringDwords - 64) / len(pkt)
	for i := range n {
		pkt[len(pkt)-1] = uint32(i)
		rig.Emit(pkt)
	}
	rig.Emit(cptest.Fence(FenceGPU(), 1, 1, false))
	start := time.Now()
	if err := rig.Kick(); err != nil {
		return Result{}, err
	}
	if err := rig.WaitFence(1, time.Minute); err != nil {
		return Result{}, err
	}
	rate := float64(n) / time.Since(start).Seconds()
	// Baseline: the stores the packets ask for, done by Go directly on VRAM.
	base := must(func(n int) {
		for i := range n {
			binary.LittleEndian.PutUint32(rig.VRAM[vramScratch:], uint32(i))
		}
	})
	return Result{Name: "CP WRITE_DATA (1 dword) via device", Value: rate, Unit: "packets/s",
		Baseline: "Go store loop", Base: float64(base.N) / base.T.Seconds(),
		Note: fmt.Sprintf("%d packets; target ≥ 20 M/s on one core", n)}, nil
}

// CopyBandwidth is DMA_DATA system memory → VRAM (uncached, through the GART) in copies of
// size bytes, in MB/s, beside Go's copy of the same bytes between the same mappings. Copies are
// queued the way a driver batches them — up to 64 MiB of copies per submission, one fence at
// the end — so the number is the copy engine's, not the doorbell round trip's (measured on its
// own above).
func CopyBandwidth(size int) (Result, error) {
	const ringDwords = 1 << 16
	batch := max(1, min((64<<20)/size, (ringDwords-64)/8)) // a DMA_DATA packet is 7 dwords
	rig, err := NewRig(RigConfig{RingDwords: ringDwords, GuestBytes: max(size, 1<<16)})
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	src := rig.Guest.Bytes()[:size]
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := rig.VRAM[vramCopyDst : vramCopyDst+size]
	seq := uint32(0)
	submit := func(copies int) error {
		seq++
		for range copies {
			for off := 0; off < size; off += 32 << 20 { // BYTE_COUNT has 26 bits
				n := min(size-off, 32<<20)
				rig.Emit(cptest.DMAData{
					SrcSel: abi.PM4_DMA_DATA_SEL_ADDR, DstSel: abi.PM4_DMA_DATA_SEL_ADDR,
					SrcPolicy: abi.PM4_CACHE_POLICY_BYPASS, DstPolicy: abi.PM4_CACHE_POLICY_BYPASS,
					Src: gartBase + uint64(off), Dst: abi.GPU_FB_BASE + vramCopyDst + uint64(off), Count: uint32(n), CPSync: true,
				}.Encode())
			}
		}
		rig.Emit(cptest.Fence(FenceGPU(), seq, seq, false))
		if err := rig.Kick(); err != nil {
			return err
		}
		return rig.WaitFence(seq, time.Minute)
	}
	if err := submit(1); err != nil {
		return Result{}, err
	}
	if dst[size-1] != src[size-1] || dst[size/2] != src[size/2] {
		return Result{}, fmt.Errorf("DMA_DATA copy of %d bytes produced wrong data", size)
	}
	dev, err := measure(func(n int) error {
		for range n {
			if err := submit(batch); err != nil {
				return err
			}
		}
		return nil
	})
	base := must(func(n int) {
		for range n {
			copy(dst, src)
		}
	})
	mbs := func(r run, copies int) float64 {
		return float64(size) * float64(copies) * float64(r.N) / r.T.Seconds() / 1e6
	}
	return Result{Name: fmt.Sprintf("DMA_DATA copy %s", sizeName(size)), Value: mbs(dev, batch), Unit: "MB/s",
		Baseline: "Go copy", Base: mbs(base, 1), Note: fmt.Sprintf("%d copies per submission; target ≥ 0.8× from 64 KiB up", batch)}, err
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}

// IdleCPU is the CPU time the whole process uses per second of wall time while a device sits
// idle, in poll mode, beside the same device in trap mode (which has nothing to poll).
func IdleCPU(wall time.Duration) (Result, error) {
	measure := func(mode bars.DoorbellMode) (float64, error) {
		cfg := device.DefaultConfig()
		cfg.VRAMSize, cfg.VRAMWindow, cfg.Doorbells = 16<<20, 16<<20, mode
		dev, err := device.New(cfg)
		if err != nil {
			return 0, err
		}
		defer dev.Close()
		time.Sleep(100 * time.Millisecond) // let the poller back off
		runtime.GC()
		before := cpuTime()
		time.Sleep(wall)
		return (cpuTime() - before).Seconds() / wall.Seconds() * 100, nil
	}
	poll, err := measure(bars.DoorbellPoll)
	if err != nil {
		return Result{}, err
	}
	trap, err := measure(bars.DoorbellTrap)
	return Result{Name: "idle device, poll mode", Value: poll, Unit: "%CPU", Baseline: "trap mode", Base: trap,
		Note: "whole process"}, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
