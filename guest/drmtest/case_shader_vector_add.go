package main

import (
	"time"
	"unsafe"

	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
	"vgpu/shaders"
)

const (
	vaddN     = 1 << 20 // vector_add elements (u32)
	vaddGroup = 256     // work-items per workgroup
)

// shaderVectorAdd: the project's vector_add over 1 Mi elements on a user queue, every output
// checked. The program is in an EXECUTABLE mapping; the inputs wrap (a 32-bit add).
func shaderVectorAdd(t *T) {
	d := openDev(t)
	q := newQueue(t, d, drm.QueueConfig{})
	s := shaders.VectorAdd()
	code := build(t, s)
	prog := newProgram(t, d, code, programFlags)
	args := newData(t, d, 4096, "argument")
	a := newData(t, d, 4*vaddN, "a")
	b := newData(t, d, 4*vaddN, "b")
	out := newData(t, d, 4*vaddN, "out")
	av, bv, ov := u32s(a), u32s(b), u32s(out)
	for i := range uint32(vaddN) {
		av[i], bv[i], ov[i] = 3*i, 0x8000_0000+i, 0xDEADBEEF
	}
	setArgs(t, args, s, map[string]uint64{"a": a.VA, "b": b.VA, "out": out.VA})
	start := time.Now()
	runDispatch(t, q, dispatch{
		sh:   pm4.Shader{Program: prog.VA, Slots: uint32(len(code) / 8), Threads: [3]uint32{vaddGroup, 1, 1}, Args: args.VA},
		grid: [3]uint32{vaddN / vaddGroup, 1, 1},
	})
	took := time.Since(start)
	bad, first := 0, -1
	for i := range uint32(vaddN) {
		if ov[i] != 3*i+0x8000_0000+i {
			if bad++; first < 0 {
				first = int(i)
			}
		}
	}
	if bad > 0 {
		f := uint32(first)
		t.Errorf("%d of %d outputs wrong; the first out[%d] = %#x, want %#x", bad, vaddN, f, ov[f], 3*f+0x8000_0000+f)
	}
	t.Logf("%d work-items in %d workgroups: %v from the doorbell to the user fence", vaddN, vaddN/vaddGroup,
		took.Round(time.Microsecond))
}

// u32s is a buffer's CPU mapping as dwords.
func u32s(b *drm.Buffer) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b.Mem[0])), len(b.Mem)/4)
}
