package mes

import (
	"encoding/binary"
	"testing"
	"time"

	"vgpu/abi"
)

// FuzzFrames feeds arbitrary API frames to a running scheduler with queues: whatever they say,
// every frame completes or fails (the trailing barrier's fence arrives), the scheduler never
// panics, and a good frame after them still works.
func FuzzFrames(f *testing.F) {
	seed := func(op uint32, fields map[uint64]uint32) []byte {
		b := make([]byte, 4*abi.MES_API_FRAME_DWORDS)
		binary.LittleEndian.PutUint32(b, header(op))
		for dw, v := range fields {
			binary.LittleEndian.PutUint32(b[4*dw:], v)
		}
		return b
	}
	f.Add(seed(abi.MES_SCH_API_REMOVE_QUEUE, map[uint64]uint32{abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET: 16}))
	f.Add(seed(abi.MES_SCH_API_SUSPEND, map[uint64]uint32{abi.MES_SUSPEND_DW_FLAGS: 1}))
	f.Add(seed(abi.MES_SCH_API_RESET, map[uint64]uint32{abi.MES_RESET_DW_FLAGS: 2, abi.MES_RESET_DW_DOORBELL_OFFSET_ADDR: 0xE000, abi.MES_RESET_DW_QUEUE_TYPE: 1}))
	f.Add(seed(abi.MES_SCH_API_MISC, map[uint64]uint32{abi.MES_MISC_DW_OPCODE: abi.MES_MISC_OP_WAIT_REG_MEM, abi.MES_MISC_DW_WAIT_MASK: 1, abi.MES_MISC_DW_WAIT_REFERENCE: 1}))
	f.Add(seed(abi.MES_SCH_API_ADD_QUEUE, map[uint64]uint32{abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET: 30, abi.MES_ADD_QUEUE_DW_MQD_ADDR: queueBase,
		abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR: 0x1000, abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR: 0x2000, abi.MES_ADD_QUEUE_DW_QUEUE_TYPE: 1}))
	f.Add(seed(abi.MES_SCH_API_SET_LOG_BUFFER, map[uint64]uint32{abi.MES_LOG_DW_BUFFER_ADDR: 0xD000, abi.MES_LOG_DW_NUMBER_OF_ENTRIES: 8}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRig(t)
		r.hwResources(0x3, 0, 0xFFFE)
		cfg := newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG)
		for l := uint64(0); l < abi.MES_PRIORITY_LEVELS; l++ {
			cfg.set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*l, 10000) // 1 ms: hangs are found fast
		}
		r.ok(cfg, abi.MES_SCHED_CFG_DW_API_STATUS)
		qs := []*testQueue{r.queueAt(0, 0), r.queueAt(1, 0)}
		for i, q := range qs {
			q.add(uint32(i), 0)
			q.job(0)
		}
		const frameBytes = 4 * abi.MES_API_FRAME_DWORDS
		for n := 0; n < 4 && len(data) > 0; n++ {
			var fr frameB
			chunk := data[:min(len(data), frameBytes)]
			data = data[len(chunk):]
			for i := 0; i+4 <= len(chunk); i += 4 {
				fr[i/4] = binary.LittleEndian.Uint32(chunk[i:])
			}
			dw, ok := statusDW(fr[0] >> 4 & 0xFF)
			if !ok {
				dw = 2
			}
			r.submit(&fr, dw) // returns once the barrier after it completed: it did not wedge
		}
		// Still a working scheduler: a fresh queue runs a job.
		q := r.queueAt(5, 0)
		q.add(abi.MES_PRIORITY_NORMAL, 0)
		q.job(0)
		r.waitFor("a job after fuzzed frames", 5*time.Second, func() bool { return q.done(0) })
	})
}
