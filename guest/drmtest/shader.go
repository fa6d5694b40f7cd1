package main

import (
	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/guest/drmtest/drm"
	"vgpu/pm4"
	"vgpu/shader"
	"vgpu/shaders"
)

// The shader cases run the project's own shaders (package shaders, the definitions the host
// tests and the KTAP module's header use too) on user queues: the program in an EXECUTABLE
// mapping of the file's VM (the CP fetches it as an instruction client, docs/shader.md), the
// dispatch a job in the queue's ring, its results checked through the CPU mappings.

// invalidateAll is amdgpu's full cache flush before work (gfx_v11_0_emit_mem_sync): it drops
// every CU's L0 (GLV_INV, GL1_INV) so a dispatch reads what the CPU wrote, not a line a
// previous dispatch left.
const invalidateAll = abi.PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK | abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK |
	abi.PM4_ACQUIRE_MEM_GCR_GLM_INV_MASK | abi.PM4_ACQUIRE_MEM_GCR_GLM_WB_MASK |
	abi.PM4_ACQUIRE_MEM_GCR_GL1_INV_MASK | abi.PM4_ACQUIRE_MEM_GCR_GLV_INV_MASK |
	abi.PM4_ACQUIRE_MEM_GCR_GLK_INV_MASK | 1<<abi.PM4_ACQUIRE_MEM_GCR_GLI_INV__SHIFT

// programFlags is how a program is mapped: readable and executable, not writable by the GPU.
const programFlags = drm.VGPU_VM_PAGE_READABLE | drm.VGPU_VM_PAGE_EXECUTABLE

// dispatch is one shader dispatch as the payload of a user-queue job: the SET_SH_REG state,
// the grid (workgroups per dimension), and, when indirect is set, the grid is read by the CP
// from that GPU address (SET_BASE + DISPATCH_INDIRECT) instead.
type dispatch struct {
	sh       pm4.Shader
	grid     [3]uint32
	indirect uint64
}

// packets is the job's payload. The job's tail (Queue.Job: RELEASE_MEM, then the protected
// fence) is an end-of-pipe event, which waits for the dispatch: the user fence moves only
// once every work-item's store is done.
func (p dispatch) packets() [][]uint32 {
	out := [][]uint32{pm4.AcquireMem{GCR: invalidateAll, Size: pm4.SizeAll}.Encode(), p.sh.Encode()}
	if p.indirect != 0 {
		return append(out, pm4.SetBase(p.indirect), pm4.DispatchIndirect(0))
	}
	return append(out, pm4.DispatchDirect(p.grid[0], p.grid[1], p.grid[2]))
}

// assemble encodes insns without loading them (so a program the device must refuse can be
// built too).
func assemble(insns asm.Instructions) ([]byte, error) {
	linked, err := shader.Link(insns)
	if err != nil {
		return nil, err
	}
	return shader.Assemble(linked)
}

// build encodes one of the project's shaders, checked by the interpreter's loader.
func build(t *T, s shaders.Shader) []byte {
	_, code, err := shader.Build(s.Insns)
	t.Check(err, "build shader %s", s.Name)
	return code
}

// newProgram puts code into a new system BO mapped with flags (programFlags for a program
// that runs) and returns it; its VA is 4 KiB aligned, as COMPUTE_PGM needs 256.
func newProgram(t *T, d *drm.Device, code []byte, flags uint32) *drm.Buffer {
	b, err := d.NewBuffer(uint64(max(len(code), 1)), drm.VGPU_GEM_DOMAIN_SYSTEM, 0, flags, 4096, true)
	t.Check(err, "program buffer (%d bytes, VM flags %#x)", len(code), flags)
	t.Cleanup(func() { b.Free() })
	copy(b.Mem, code)
	return b
}

// newData is a CPU-mapped system BO of size bytes, GPU read-write, freed when the case ends.
func newData(t *T, d *drm.Device, size uint64, what string) *drm.Buffer {
	b, err := d.NewBuffer(size, drm.VGPU_GEM_DOMAIN_SYSTEM, 0, drm.RW, 4096, true)
	t.Check(err, "%s buffer (%d bytes)", what, size)
	t.Cleanup(func() { b.Free() })
	return b
}

// setArgs writes a shader's argument block: one 8-byte field per name in s.Args, in order.
func setArgs(t *T, args *drm.Buffer, s shaders.Shader, vals map[string]uint64) {
	if len(vals) != len(s.Args) {
		t.Fatalf("shader %s takes %v, given %d values", s.Name, s.Args, len(vals))
	}
	for i, name := range s.Args {
		v, ok := vals[name]
		if !ok {
			t.Fatalf("shader %s: no value for argument %q", s.Name, name)
		}
		*args.U64(uint64(8 * i)) = v
	}
}

// runDispatch submits p as one job on q and waits for its user fence.
func runDispatch(t *T, q *drm.Queue, p dispatch) {
	end, err := q.Job(p.packets()...)
	t.Check(err, "submit the dispatch to queue %d", q.ID)
	t.Check(q.WaitUserFence(end, jobTimeout), "wait for the dispatch")
}
