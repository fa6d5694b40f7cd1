package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
	"vgpu/shaders"
)

// endlessWait bounds the wait for the driver's kernel-queue timeout (kq_timeout_ms, 2 s by
// default) and its reset.
const endlessWait = 30 * time.Second

// shaderEndless: an infinite-loop shader on the driver's kernel queue (SUBMIT). The job's
// fence (a RELEASE_MEM after the dispatch) can never be reached: the driver's job timeout
// resets the kernel queue, which kills the dispatch, and the job's fence completes with
// -ETIME; the packet after a CS_PARTIAL_FLUSH behind the dispatch never runs. Meanwhile a
// user queue of the file keeps running the project's ids_2d shader, every result checked;
// afterwards the kernel queue runs a new job.
func shaderEndless(t *T) {
	d := openDev(t)
	before, err := kqCounters()
	t.Check(err, "read vgpu_mes")
	endless, err := assemble(asm.Instructions{asm.Ja.Label("spin").WithSymbol("spin")})
	t.Check(err, "assemble the endless shader")
	prog := newProgram(t, d, endless, programFlags)
	marker := newData(t, d, 4096, "marker")
	k := newKQ(t, d)
	p := dispatch{sh: pm4.Shader{Program: prog.VA, Slots: uint32(len(endless) / 8), Threads: [3]uint32{64, 1, 1}, Args: marker.VA},
		grid: [3]uint32{4, 1, 1}}
	n := uint32(0)
	for _, pk := range append(p.packets(), pm4.CSPartialFlush(), pm4.WriteMem(marker.VA, 0xBAD)) {
		for _, v := range pk {
			*k.ib.U32(uint64(n) * 4) = v
			n++
		}
	}
	// A user queue's shaders run while the kernel queue spins (everything allocated before:
	// the driver's own work on the kernel queue waits behind the endless job).
	q := newQueue(t, d, drm.QueueConfig{})
	s := shaders.IDs2D()
	code := build(t, s)
	ids := newProgram(t, d, code, programFlags)
	out := newData(t, d, 4*64*8, "ids")
	args := newData(t, d, 4096, "argument")
	setArgs(t, args, s, map[string]uint64{"out": out.VA})
	ov := u32s(out)

	sub := drm.Submit{Ib_va: k.ib.VA, Ib_dwords: n, Out_syncobj: k.s}
	t.Check(d.Submit(&sub), "SUBMIT of the endless shader")
	start := time.Now()
	rounds := 0
	for {
		done := d.SyncobjWait([]uint32{k.s}, 0, 0) == nil
		for i := range ov {
			ov[i] = 0xFFFF_FFFF
		}
		runDispatch(t, q, dispatch{sh: pm4.Shader{Program: ids.VA, Slots: uint32(len(code) / 8), Threads: [3]uint32{8, 4, 1}, Args: args.VA},
			grid: [3]uint32{8, 2, 1}})
		for y := range uint32(8) {
			for x := range uint32(64) {
				if got, want := ov[y*64+x], x|y<<16|(x/8)<<24; got != want {
					t.Fatalf("round %d of the user queue's shader, %v after the endless SUBMIT: (%d,%d) = %#x, want %#x",
						rounds, time.Since(start).Round(time.Millisecond), x, y, got, want)
				}
			}
		}
		rounds++
		if done {
			break
		}
		if time.Since(start) > endlessWait {
			t.Fatalf("the endless job's fence did not complete within %v", endlessWait)
		}
	}
	waited := time.Since(start)
	st, err := d.FenceStatus(k.s)
	t.Check(err, "the endless job's fence status")
	if st != -int32(unix.ETIME) {
		t.Errorf("the endless job's fence completed with status %d, want -ETIME (%d)", st, -int32(unix.ETIME))
	}
	if got := *marker.U32(0); got != 0 {
		t.Errorf("the packet behind the endless dispatch's partial flush ran: marker %#x", got)
	}
	after, err := kqCounters()
	t.Check(err, "read vgpu_mes")
	if after.timeouts <= before.timeouts || after.resets <= before.resets {
		t.Errorf("vgpu_mes kernel queue: timeouts %d → %d, resets %d → %d: want both to grow", before.timeouts, after.timeouts, before.resets, after.resets)
	}
	// The kernel queue works again.
	k.run(t, pm4.WriteMem(marker.VA+8, 0x600D))
	if got := *marker.U32(8); got != 0x600D {
		t.Errorf("the kernel queue's job after the reset wrote %#x", got)
	}
	t.Logf("the endless job's fence completed (-ETIME) after %v; the user queue ran %d dispatches of ids_2d meanwhile, all correct",
		waited.Round(time.Millisecond), rounds)
}

// kqState is vgpu_mes's "kernel queue:" line.
type kqState struct{ timeouts, resets uint64 }

func kqCounters() (kqState, error) {
	s, err := readDebugfs("vgpu_mes")
	if err != nil {
		return kqState{}, err
	}
	var k kqState
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "kernel queue:") {
			continue
		}
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "timeouts":
				k.timeouts, err = strconv.ParseUint(f[i+1], 10, 64)
			case "resets":
				k.resets, err = strconv.ParseUint(f[i+1], 10, 64)
			}
			if err != nil {
				return k, err
			}
		}
		return k, nil
	}
	return k, nil
}
