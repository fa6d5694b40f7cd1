package mes

import (
	"testing"
	"time"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/compute"
	"vgpu/cp"
	"vgpu/pm4"
	"vgpu/shader"
)

// Shader dispatches on MES queues: preempted at instruction level when unmapped.
const (
	shProg    = 0x200000 // programs, 0x800 apart
	shOut     = 0x210000 // per queue: 0x1000 of counters
	shCSA     = 0x300000 // per queue: shCSASize
	shCSASize = 0x40000
)

// shaderRig is a rig whose CP has two compute units.
func shaderRig(t *testing.T) *rig {
	var pool *compute.Pool
	r := newRig(t, func(c *cp.Config) {
		pool = compute.New(compute.Config{CUs: 2, Memory: c.Memory, Interrupts: c.Interrupts, Budget: 256})
		c.Compute = pool
	})
	t.Cleanup(pool.Close)
	return r
}

// counter: out[global id x] += 1 (64-bit atomic), loops times (forever if loops < 0).
func counter(t *testing.T, r *rig, at, out uint64, loops int32) pm4.Shader {
	insns := asm.Instructions{
		asm.Mov.Imm(asm.R6, loops),
		asm.LoadImm(asm.R7, int64(out), asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R2),
		asm.LSh.Imm(asm.R8, 3),
		asm.Add.Reg(asm.R7, asm.R8),
		asm.Mov.Imm(asm.R8, 1),
		asm.JEq.Imm(asm.R6, 0, "end").WithSymbol("spin"),
		asm.AddAtomic.Mem(asm.R7, asm.R8, asm.DWord, 0),
		asm.Sub.Imm(asm.R6, 1),
		asm.Ja.Label("spin"),
		asm.Return().WithSymbol("end"),
	}
	linked, err := shader.Link(insns)
	if err != nil {
		t.Fatal(err)
	}
	code, err := shader.Assemble(linked)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(code); i += 4 {
		r.mem.Store32(at+uint64(i), le32(code[i:]))
	}
	return pm4.Shader{Program: at, Slots: uint32(len(code) / 8), Threads: [3]uint32{4, 1, 1}}
}

// withCSA gives q's MQD a context save area.
func (q *testQueue) withCSA(base, size uint64) {
	q.r.mem.Store32(q.mqd+4*abi.MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_LO, uint32(base))
	q.r.mem.Store32(q.mqd+4*abi.MES_MQD_DW_CP_HQD_CTX_SAVE_BASE_ADDR_HI, uint32(base>>32))
	q.r.mem.Store32(q.mqd+4*abi.MES_MQD_DW_CP_HQD_CTX_SAVE_SIZE, uint32(size))
}

// An endless shader on a queue sharing its one slot with others is preempted by quantum,
// never found hung, and gets its turn again; the finite shaders of the others complete with
// exact results.
func TestEndlessShaderOversubscribed(t *testing.T) {
	r := shaderRig(t)
	r.hwResources(0x1, 0, 0xFFFE) // one slot
	cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, 50000) // 5 ms
	}
	r.ok(cfg, abi.MES_SCHED_CFG_DW_API_STATUS)
	const n, loops, groups = 3, 3000, 2
	qs := make([]*testQueue, n)
	for i := range qs {
		q := r.queueAt(i, 0)
		q.withCSA(shCSA+uint64(i)*shCSASize, shCSASize)
		q.add(abi.MES_PRIORITY_NORMAL, 2000) // 200 µs quantum
		qs[i] = q
	}
	endless := counter(t, r, shProg, shOut, -1)
	qs[0].submit(endless.Encode()...)
	qs[0].submit(pm4.DispatchDirect(groups, 1, 1)...)
	for i, q := range qs[1:] {
		sh := counter(t, r, shProg+0x800*uint64(i+1), shOut+0x1000*uint64(i+1), loops)
		q.submit(sh.Encode()...)
		q.submit(pm4.DispatchDirect(groups, 1, 1)...)
		q.job(0) // runs while the dispatch does (no barrier before it)
		q.submit(pm4.CSPartialFlush()...)
		q.job(1)
	}
	r.waitFor("the finite shaders", 20*time.Second, func() bool {
		for _, q := range qs[1:] {
			if !q.done(1) {
				return false
			}
		}
		return true
	})
	for i := range qs[1:] {
		for k := range uint64(groups * 4) {
			if got := r.mem.Load64(shOut + 0x1000*uint64(i+1) + 8*k); got != loops {
				t.Fatalf("queue %d out[%d] = %d, want %d", i+1, k, got, loops)
			}
		}
	}
	before := r.mem.Load64(shOut)
	r.waitFor("the endless shader's next turn", 5*time.Second, func() bool { return r.mem.Load64(shOut) > before })
	st := qs[0].status()
	if st&abi.REG_MES_QUERY_STATUS__HUNG_MASK != 0 || r.rreg(abi.REG_MES_HUNG) != 0 {
		t.Fatalf("the endless shader's queue is hung (status %#x)", st)
	}
	r.wreg(abi.REG_MES_QUERY_DOORBELL, qs[0].db)
	if p := r.rreg(abi.REG_MES_QUERY_PREEMPTS); p == 0 {
		t.Error("the endless shader's queue was never preempted")
	}
	if r.mem.Load32(shCSA) != abi.SHADER_CSA_MAGIC {
		t.Errorf("CSA magic %#x: nothing saved", r.mem.Load32(shCSA))
	}
	s := r.cp.Stats()
	if s.ShaderPreempts == 0 || s.ShaderResumes == 0 {
		t.Errorf("ShaderPreempts %d ShaderResumes %d", s.ShaderPreempts, s.ShaderResumes)
	}
	t.Logf("%d dispatches saved, %d restored", s.ShaderPreempts, s.ShaderResumes)
}

// The endless built-in kernel is still not preemptible: with compute units present, its
// queue is found hung at its grace while a shader's is not.
func TestEndlessKernelStillHung(t *testing.T) {
	r := shaderRig(t)
	r.hwResources(0x1, 0, 0xFFFE)
	cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
	for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
		cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, 50000)
	}
	r.ok(cfg, abi.MES_SCHED_CFG_DW_API_STATUS)
	bad := r.queueAt(0, 0)
	bad.withCSA(shCSA, shCSASize)
	bad.add(abi.MES_PRIORITY_NORMAL, 1000)
	bad.submit(pm4.Kernel(abi.KERNEL_ENDLESS, 0, 0, 0)...)
	bad.submit(pm4.DispatchDirect(1, 1, 1)...)
	other := r.queueAt(1, 0)
	other.add(abi.MES_PRIORITY_NORMAL, 1000)
	other.job(0)
	r.waitFor("the endless kernel's queue hung", 5*time.Second, func() bool {
		return bad.status()&abi.REG_MES_QUERY_STATUS__HUNG_MASK != 0
	})
}
