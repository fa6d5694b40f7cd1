package main

import (
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
	"vgpu/shaders"
)

// shaderIDs2D: the project's ids_2d on 2-D grids, each work-item's ids from the helpers
// (global x and y, number of groups, local size, group id), every one checked; one grid
// dispatched directly and one whose dimensions the CP reads from memory (DISPATCH_INDIRECT).
func shaderIDs2D(t *T) {
	d := openDev(t)
	q := newQueue(t, d, drm.QueueConfig{})
	s := shaders.IDs2D()
	code := build(t, s)
	prog := newProgram(t, d, code, programFlags)
	for _, c := range []struct {
		name     string
		threads  [2]uint32 // workgroup size
		groups   [2]uint32
		indirect bool
	}{
		{"direct 64x32 in 8x4 groups", [2]uint32{8, 4}, [2]uint32{8, 8}, false},
		{"indirect 96x16 in 16x2 groups", [2]uint32{16, 2}, [2]uint32{6, 8}, true},
		{"direct 1x128 in 1x64 groups", [2]uint32{1, 64}, [2]uint32{1, 2}, false},
	} {
		w, h := c.threads[0]*c.groups[0], c.threads[1]*c.groups[1]
		out := newData(t, d, uint64(4*w*h), "ids")
		args := newData(t, d, 4096, "argument")
		ov := u32s(out)
		for i := range ov {
			ov[i] = 0xFFFF_FFFF
		}
		setArgs(t, args, s, map[string]uint64{"out": out.VA})
		p := dispatch{
			sh:   pm4.Shader{Program: prog.VA, Slots: uint32(len(code) / 8), Threads: [3]uint32{c.threads[0], c.threads[1], 1}, Args: args.VA},
			grid: [3]uint32{c.groups[0], c.groups[1], 1},
		}
		if c.indirect {
			dims := newData(t, d, 4096, "indirect dimensions")
			*dims.U32(0), *dims.U32(4), *dims.U32(8) = c.groups[0], c.groups[1], 1
			p.indirect, p.grid = dims.VA, [3]uint32{}
		}
		runDispatch(t, q, p)
		bad := 0
		for y := range h {
			for x := range w {
				want := x | y<<16 | (x/c.threads[0])<<24
				if got := ov[y*w+x]; got != want {
					if bad++; bad <= 3 {
						t.Errorf("%s: work-item (%d,%d) wrote %#x, want %#x", c.name, x, y, got, want)
					}
				}
			}
		}
		if bad > 3 {
			t.Errorf("%s: %d of %d work-items wrote wrong ids", c.name, bad, w*h)
		}
	}
}
