package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf/asm"

	"vgpu/abi"
	"vgpu/pm4"
	"vgpu/shader"
	"vgpu/trace"
	"vgpu/vfiouser/vfiousertest"
)

// The timeline workload: a short, known piece of work for the picture of docs/timeline.md
// (ci/browser's test records it and opens the page it makes). One in-process device records
// its timeline; the client drives it as the MES rigs do: the scheduler gets two compute slots
// (2 and 3) and three user queues of two processes, so it maps, unmaps and switches them as
// their jobs arrive (a short idle grace); each job is a few WRITE_DATAs and an interrupting
// fence (a doorbell → fence → IV flow), sent in bursts that start together while a kernel queue in slot 1
// dispatches an ALU shader over two compute units, three rounds of it. The set-up before
// (clearing the rig's VRAM areas) shows as a quiet stretch after the first transport commands.

const (
	tlRounds  = 3
	tlBursts  = 3 // of user-queue jobs per dispatch
	tlQueues  = 3
	tlWrites  = 3
	tlIdle    = 20_000 // PROCESS_GRACE_PERIOD_SAME_LEVEL, 100 ns units: 2 ms
	tlGap     = 4 * time.Millisecond
	tlIters   = 20_000 // the shader's loop: a dispatch of a few tens of milliseconds
	tlItems   = 64     // work-items per workgroup
	tlGroups  = 2      // workgroups per dispatch: one per CU
	tlTimeout = 30 * time.Second
	tlGo      = 0x1C0 // in each queue's data page: the burst its jobs may start
)

// tlShader loops tlIters times on registers and stores the result at its work-item's dword
// of the scratch area.
func tlShader() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R9, asm.R2), // global id
		asm.Mov.Imm(asm.R1, tlIters),
		asm.Mov.Imm(asm.R6, 1),
		asm.Add.Reg(asm.R6, asm.R9).WithSymbol("loop"),
		asm.Mul.Imm(asm.R6, 3),
		asm.Sub.Imm(asm.R1, 1),
		asm.JNE.Imm(asm.R1, 0, "loop"),
		asm.LoadImm(asm.R7, abi.GPU_FB_BASE+vramScratch, asm.DWord),
		asm.LSh.Imm(asm.R9, 3),
		asm.Add.Reg(asm.R7, asm.R9),
		asm.StoreMem(asm.R7, 0, asm.R6, asm.DWord),
		asm.Return(),
	}
}

// TimelineWorkload runs the timeline workload recording to rec (the caller closes it) and
// checks that every job and dispatch completed and the scheduler stayed healthy.
func TimelineWorkload(rec *trace.Recorder) error {
	rig, err := NewRig(RigConfig{RingDwords: 1 << 12, ComputeUnits: tlGroups, Trace: rec})
	if err != nil {
		return err
	}
	defer rig.Close()
	r := &mesRig{Rig: rig, mem: &tableMemory{vram: rig.VRAM}, next: mesQueuesOff}
	if err := r.bringUp(0b110, 0, mesSchedConfig{idleGrace: tlIdle, preemptGrace: osPreempt}); err != nil {
		return err
	}
	var queues []*mesQueue
	var adds []*mesFrameB
	procs := make([]*mesProc, 2)
	for i := range procs {
		if procs[i], err = r.newProc(); err != nil {
			return err
		}
	}
	for i := range tlQueues {
		q, f, err := r.newQueue(procs[i%2], fmt.Sprintf("user queue %d", i), osRing, abi.MES_PRIORITY_NORMAL, 0)
		if err != nil {
			return err
		}
		queues, adds = append(queues, q), append(adds, f)
	}
	if err := r.frames(adds); err != nil {
		return err
	}

	_, code, err := shader.Build(tlShader())
	if err != nil {
		return err
	}
	copy(rig.VRAM[vramShader:], code)
	prog := pm4.Shader{Program: abi.GPU_FB_BASE + vramShader, Slots: uint32(len(code) / 8),
		Threads: [3]uint32{tlItems, 1, 1}, Args: abi.GPU_FB_BASE + vramArgs}
	for round := range tlRounds {
		seq := uint32(round + 1)
		rig.Emit(prog.Encode())
		rig.Emit(pm4.DispatchDirect(tlGroups, 1, 1))
		rig.Emit(pm4.Fence(FenceGPU(), seq, seq, true))
		if err := rig.Kick(); err != nil {
			return err
		}
		// While the dispatch runs, bursts of jobs a little longer apart than the idle grace:
		// the scheduler unmaps the idle queues and maps the next burst's.
		for burst := range tlBursts {
			// Each burst's jobs first wait for a go word that the client sets once all of them
			// are submitted: the queues have work at the same time, so the scheduler fills
			// both its slots and switches the third queue in however slowly a loaded host runs
			// the client (submitted one by one, each job could finish before the next arrives
			// and every one use the same slot).
			goWord := uint32(round*tlBursts + burst + 1)
			for _, q := range queues {
				q.emit(pm4.WaitMem(q.va(tlGo), goWord))
				q.job(tlWrites, true)
				if err := q.kick(); err != nil {
					return err
				}
			}
			for _, q := range queues {
				binary.LittleEndian.PutUint32(q.page[tlGo:], goWord)
			}
			if err := r.waitJobs(queues, tlTimeout); err != nil {
				return err
			}
			for _, q := range queues {
				if err := q.checkJobs(tlWrites); err != nil {
					return err
				}
			}
			time.Sleep(tlGap)
		}
		if err := tlWaitKernelFence(rig, seq); err != nil {
			return err
		}
		if err := tlCheckShader(rig); err != nil {
			return err
		}
	}
	// The driver removes the last queue.
	last := queues[len(queues)-1]
	rm := mesFrame(abi.MES_SCH_API_REMOVE_QUEUE).set(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET, last.doorbell).
		set64(abi.MES_REMOVE_QUEUE_DW_GANG_CONTEXT_ADDR, last.mqd+mqGangCtx)
	if err := r.frames([]*mesFrameB{rm}); err != nil {
		return err
	}
	return r.healthy()
}

// tlWaitKernelFence waits for the kernel queue's fence, on the interrupt in short slices (the
// user queues' fences interrupt on the same vector and their waiter may take the wakeup).
func tlWaitKernelFence(rig *Rig, seq uint32) error {
	deadline := time.Now().Add(tlTimeout)
	for int32(rig.Fence()-seq) < 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("kernel queue: fence %d not written after %v (fence %d)", seq, tlTimeout, rig.Fence())
		}
		if _, err := vfiousertest.WaitIRQ(rig.IRQ[0], min(left, time.Millisecond)); err != nil && !errors.Is(err, vfiousertest.ErrTimeout) {
			return err
		}
	}
	return nil
}

// tlShaderResult is what work-item gid of tlShader stores (the check of the dispatch).
func tlShaderResult(gid uint64) uint64 {
	v := uint64(1)
	for range tlIters {
		v = (v + gid) * 3
	}
	return v
}

// tlCheckShader: every work-item of the last dispatch stored its result.
func tlCheckShader(rig *Rig) error {
	for gid := range uint64(tlItems * tlGroups) {
		if got, want := binary.LittleEndian.Uint64(rig.VRAM[vramScratch+8*gid:]), tlShaderResult(gid); got != want {
			return fmt.Errorf("work-item %d stored %#x, want %#x", gid, got, want)
		}
	}
	return nil
}
