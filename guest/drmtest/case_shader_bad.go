package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/asm"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
)

// badWait bounds the wait for the driver's reset of a queue that halted on a shader error:
// the fault path (the shader-error IV of the file's PASID, then MES's saved CP_HQD_ERROR)
// acts within milliseconds; this is far below what the hang timer would need without a
// SIGNAL (it never starts).
const badWait = 10 * time.Second

// shaderBad: each shader error from userspace. Every bad program of badShaders runs on a user
// queue of its own, with no SIGNAL (so the hang timer never starts): the queue halts with
// CP_ERROR_SHADER, the driver resets it from the shader-error interrupt, QUERY_STATUS says
// HUNG | RESET, the job's user fence never moves, and the driver's vgpu_mes debugfs names
// the error (reason, program counter, the file's PASID). The reset queue then runs a job, and
// a healthy queue of the file runs a shader throughout.
func shaderBad(t *T) {
	d := openDev(t)
	pasid, err := ownPASID()
	t.Check(err, "find this file's PASID")
	healthy := newQueue(t, d, drm.QueueConfig{})
	args := newData(t, d, 4096, "argument")
	good, err := assemble(asm.Instructions{ // *(u64 *)R1 += 1
		asm.LoadMem(asm.R0, asm.R1, 0, asm.DWord),
		asm.Add.Imm(asm.R0, 1),
		asm.StoreMem(asm.R1, 0, asm.R0, asm.DWord),
		asm.Return(),
	})
	t.Check(err, "assemble the healthy queue's shader")
	goodSh := pm4.Shader{Program: newProgram(t, d, good, programFlags).VA, Slots: uint32(len(good) / 8),
		Threads: [3]uint32{1, 1, 1}, Args: healthy.ScratchVA(1)}
	for i, b := range badShaders {
		code, err := assemble(b.insns)
		t.Check(err, "%s: assemble", b.name)
		var prog uint64
		switch b.place {
		case placeRX:
			prog = newProgram(t, d, code, programFlags).VA
		case placeRW:
			prog = newProgram(t, d, code, drm.RW).VA
		case placeUnmapped:
			prog, err = d.AllocVA(4096, 4096) // reserved in this program's allocator, never mapped
			t.Check(err, "%s: a VA for no program", b.name)
		}
		before, err := lastShaderError()
		t.Check(err, "%s: read vgpu_mes", b.name)
		q := newQueue(t, d, drm.QueueConfig{})
		p := dispatch{sh: pm4.Shader{Program: prog, Slots: b.programSlots(code), Threads: [3]uint32{1, 1, 1}, Args: args.VA},
			grid: [3]uint32{1, 1, 1}}
		end, err := q.Job(p.packets()...)
		t.Check(err, "%s: submit", b.name)
		st, waited := waitStatus(t, d, q.ID, drm.VGPU_USERQ_QUERY_STATUS_FLAGS_HUNG|drm.VGPU_USERQ_QUERY_STATUS_FLAGS_RESET)
		if st&drm.VGPU_USERQ_QUERY_STATUS_FLAGS_RESET == 0 {
			t.Errorf("%s: QUERY_STATUS %#x after %v, want HUNG | RESET", b.name, st, waited)
			continue
		}
		if got := q.UserFence(); got >= end {
			t.Errorf("%s: the failed job's user fence reached %d (its end %d)", b.name, got, end)
		}
		after, err := lastShaderError()
		t.Check(err, "%s: read vgpu_mes", b.name)
		want := shaderError{count: before.count + 1, reason: shaderErrName(b.reason), pc: b.pc,
			addr: b.faultAddr(args.VA, prog), pasid: pasid}
		if after != want {
			t.Errorf("%s: the driver names %+v, want %+v", b.name, after, want)
		}
		// The queue stays added after its reset: new work runs.
		end, err = q.Job(pm4.WriteMem(q.ScratchVA(0), uint32(0x600D0000+i)))
		t.Check(err, "%s: a job after the reset", b.name)
		if err := q.WaitUserFence(end, jobTimeout); err != nil {
			t.Errorf("%s: a job after the reset: %v", b.name, err)
		} else if got := q.Scratch(0); got != uint64(0x600D0000+i) {
			t.Errorf("%s: the job after the reset wrote %#x", b.name, got)
		}
		t.Check(q.Free(), "%s: FREE", b.name)
		// The file's healthy queue is untouched: a dispatch of its own still runs.
		runDispatch(t, healthy, dispatch{sh: goodSh, grid: [3]uint32{1, 1, 1}})
		if got := healthy.Scratch(1); got != uint64(i+1) {
			t.Errorf("after %s: the healthy queue's shader left %d, want %d", b.name, got, i+1)
		}
		t.Logf("%s: %s at slot %d address %#x, HUNG | RESET after %v", b.name, after.reason, after.pc, after.addr,
			waited.Round(time.Millisecond))
	}
	if st, err := d.QueryStatus(healthy.ID); err != nil || st != 0 {
		t.Errorf("the healthy queue's QUERY_STATUS: %#x, %v; want 0", st, err)
	}
}

// waitStatus polls QUERY_STATUS until every bit of want is set or badWait passes.
func waitStatus(t *T, d *drm.Device, id, want uint32) (uint32, time.Duration) {
	start := time.Now()
	for {
		st, err := d.QueryStatus(id)
		t.Check(err, "QUERY_STATUS of queue %d", id)
		if st&want == want || time.Since(start) > badWait {
			return st, time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// shaderError is vgpu_mes's "shader errors" line: how many the driver has seen, and the last.
type shaderError struct {
	count  uint64
	reason string
	pc     uint32
	addr   uint64
	pasid  uint64
}

// lastShaderError parses "shader errors: N last: REASON pc P addr 0xA pasid S vmid V" (a
// line with count 0 has no "last" part).
func lastShaderError() (shaderError, error) {
	s, err := readDebugfs("vgpu_mes")
	if err != nil {
		return shaderError{}, err
	}
	for _, l := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(l, "shader errors: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		var e shaderError
		if e.count, err = strconv.ParseUint(f[0], 10, 64); err != nil {
			return e, fmt.Errorf("vgpu_mes line %q: %v", l, err)
		}
		if e.count == 0 {
			return e, nil
		}
		if len(f) < 11 || f[1] != "last:" || f[3] != "pc" || f[5] != "addr" || f[7] != "pasid" {
			return e, fmt.Errorf("vgpu_mes line %q: want \"shader errors: N last: REASON pc P addr A pasid S vmid V\"", l)
		}
		e.reason = f[2]
		pc, err := strconv.ParseUint(f[4], 10, 32)
		if err != nil {
			return e, fmt.Errorf("vgpu_mes line %q: pc: %v", l, err)
		}
		e.pc = uint32(pc)
		if e.addr, err = strconv.ParseUint(f[6], 0, 64); err != nil {
			return e, fmt.Errorf("vgpu_mes line %q: addr: %v", l, err)
		}
		if e.pasid, err = strconv.ParseUint(f[8], 10, 32); err != nil {
			return e, fmt.Errorf("vgpu_mes line %q: pasid: %v", l, err)
		}
		return e, nil
	}
	return shaderError{}, fmt.Errorf("vgpu_mes has no \"shader errors:\" line (a driver without the shader-error interrupt)")
}

// ownPASID is the PASID of this process's file in vgpu_clients ("client pid P pasid N ...";
// a case opens one file).
func ownPASID() (uint64, error) {
	s, err := readDebugfs("vgpu_clients")
	if err != nil {
		return 0, err
	}
	me := strconv.Itoa(os.Getpid())
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && f[0] == "client" && f[1] == "pid" && f[2] == me && f[3] == "pasid" {
			return strconv.ParseUint(f[4], 10, 32)
		}
	}
	return 0, fmt.Errorf("vgpu_clients has no client pid %s:\n%s", me, s)
}
