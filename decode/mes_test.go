package decode_test

import (
	"errors"
	"strings"
	"testing"

	"vgpu/abi"
	"vgpu/decode"
)

// frame builds a 64-dword API frame as amdgpu's mes_v11_0 does: the header, then fields at
// abi's dword offsets (mes's own tests build theirs the same way; mes/decode_test.go checks
// decode against mes's decoder on those).
type frame [abi.MES_API_FRAME_DWORDS]uint32

func newFrame(op uint32) *frame {
	f := &frame{}
	f[0] = abi.MES_API_TYPE_SCHEDULER | op<<abi.MES_API_HEADER_OPCODE__SHIFT | abi.MES_API_FRAME_DWORDS<<abi.MES_API_HEADER_DWSIZE__SHIFT
	return f
}
func (f *frame) set(dw int, v uint32) *frame { f[dw] = v; return f }
func (f *frame) set64(dw int, v uint64) *frame {
	f[dw], f[dw+1] = uint32(v), uint32(v>>32)
	return f
}
func (f *frame) status(dw int, addr, value uint64) *frame {
	return f.set64(dw+abi.MES_API_STATUS_FENCE_ADDR, addr).set64(dw+abi.MES_API_STATUS_FENCE_VALUE, value)
}

func TestMESFrames(t *testing.T) {
	cases := []struct {
		name string
		f    *frame
		want []string // parts of String(), in order
	}{
		{"add-queue", newFrame(abi.MES_SCH_API_ADD_QUEUE).set(abi.MES_ADD_QUEUE_DW_PROCESS_ID, 0x8001).
			set64(abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR, 0x123001).set64(abi.MES_ADD_QUEUE_DW_PROCESS_VA_END, 0xFFFFFFFFF).
			set64(abi.MES_ADD_QUEUE_DW_PROCESS_QUANTUM, 100000).set64(abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR, 0x7000).
			set64(abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR, 0x8000).set(abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL, abi.MES_PRIORITY_HIGH).
			set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, 0x30).set64(abi.MES_ADD_QUEUE_DW_MQD_ADDR, 0x100000).
			set64(abi.MES_ADD_QUEUE_DW_WPTR_ADDR, 0x200008).set(abi.MES_ADD_QUEUE_DW_QUEUE_TYPE, abi.MES_QUEUE_TYPE_COMPUTE).
			set(abi.MES_ADD_QUEUE_DW_FLAGS, abi.MES_ADD_QUEUE_FLAG_IS_GANG_SUSPENDED_MASK|abi.MES_ADD_QUEUE_FLAG_TRAP_EN_MASK).
			set64(abi.MES_ADD_QUEUE_DW_UNMAP_FLAG_ADDR, 0x300004).status(abi.MES_ADD_QUEUE_DW_API_STATUS, 0xF100, 9),
			[]string{"ADD_QUEUE process_id=32769 page_table_base_addr=0x123001 process_va_start=0x0 process_va_end=0xfffffffff process_quantum=100000 process_context_addr=0x7000",
				"gang_context_addr=0x8000", "gang_global_priority_level=HIGH(3) doorbell_offset=0x30 mqd_addr=0x100000 wptr_addr=0x200008",
				"queue_type=COMPUTE(1)", "flags=IS_GANG_SUSPENDED|TRAP_EN", "unmap_flag_addr=0x300004 fence_addr=0xf100 fence_value=0x9"}},
		{"remove-queue", newFrame(abi.MES_SCH_API_REMOVE_QUEUE).set(abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET, 0x32).
			set64(abi.MES_REMOVE_QUEUE_DW_GANG_CONTEXT_ADDR, 0x8000).status(abi.MES_REMOVE_QUEUE_DW_API_STATUS, 0xF108, 10),
			[]string{"REMOVE_QUEUE doorbell_offset=0x32 gang_context_addr=0x8000 flags=0x0", "fence_addr=0xf108 fence_value=0xa"}},
		{"hw-rsrc", newFrame(abi.MES_SCH_API_SET_HW_RSRC).set(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB, 0xFF00).
			set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, 0xC).set(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK+1, 0x3).
			set(abi.MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS+4, 0x40).set(abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER, 50).
			status(abi.MES_SET_HW_RSRC_DW_API_STATUS, 0xF000, 1),
			[]string{"SET_HW_RSRC vmid_mask_mmhub=0x0 vmid_mask_gfxhub=0xff00", "compute_hqd_mask=[0xc 0x3 0x0 0x0 0x0 0x0 0x0 0x0] gfx_hqd_mask=[0x0 0x0]",
				"aggregated_doorbells=[0x0 0x0 0x0 0x0 0x40]", "oversubscription_timer=50", "fence_addr=0xf000 fence_value=0x1"}},
		{"sched-config", newFrame(abi.MES_SCH_API_SET_SCHEDULING_CONFIG).set64(abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS+2*4, 7).
			set(abi.MES_SCHED_CFG_DW_NORMAL_YIELD_PERCENT, 10),
			[]string{"SET_SCHEDULING_CONFIG grace_period_other_levels=[0 0 0 0 7]", "normal_yield_percent=10 fence_addr=0x0"}},
		{"suspend", newFrame(abi.MES_SCH_API_SUSPEND).set(abi.MES_SUSPEND_DW_FLAGS, 1).set64(abi.MES_SUSPEND_DW_SUSPEND_FENCE_ADDR, 0x5008).
			set(abi.MES_SUSPEND_DW_SUSPEND_FENCE_VALUE, 3),
			[]string{"SUSPEND flags=SUSPEND_ALL_GANGS gang_context_addr=0x0 suspend_fence_addr=0x5008 suspend_fence_value=0x3"}},
		{"resume", newFrame(abi.MES_SCH_API_RESUME).set64(abi.MES_RESUME_DW_GANG_CONTEXT_ADDR, 0x8000),
			[]string{"RESUME flags=0 gang_context_addr=0x8000"}},
		{"reset", newFrame(abi.MES_SCH_API_RESET).set(abi.MES_RESET_DW_FLAGS, abi.MES_RESET_FLAG_HANG_DETECT_THEN_RESET_MASK).
			set64(abi.MES_RESET_DW_DOORBELL_OFFSET_ADDR, 0x6000).set(abi.MES_RESET_DW_QUEUE_TYPE, abi.MES_QUEUE_TYPE_COMPUTE),
			[]string{"RESET flags=HANG_DETECT_THEN_RESET", "doorbell_offset_addr=0x6000 queue_type=COMPUTE(1)"}},
		{"change-prio", newFrame(abi.MES_SCH_API_CHANGE_GANG_PRIORITY).set(abi.MES_CHANGE_PRIO_DW_GANG_GLOBAL_PRIORITY_LEVEL, 4).
			set64(abi.MES_CHANGE_PRIO_DW_GANG_QUANTUM, 10000).set64(abi.MES_CHANGE_PRIO_DW_GANG_CONTEXT_ADDR, 0x8000),
			[]string{"CHANGE_GANG_PRIORITY inprocess_gang_priority=0 gang_global_priority_level=REALTIME(4) gang_quantum=10000 gang_context_addr=0x8000"}},
		{"log", newFrame(abi.MES_SCH_API_SET_LOG_BUFFER).set64(abi.MES_LOG_DW_BUFFER_ADDR, 0x9000).set(abi.MES_LOG_DW_NUMBER_OF_ENTRIES, 64),
			[]string{"SET_LOG_BUFFER log_type=0 buffer_addr=0x9000 number_of_entries=64"}},
		{"query", newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS).status(abi.MES_QUERY_DW_API_STATUS, 0xF000, 0x1234567890),
			[]string{"QUERY_SCHEDULER_STATUS mes_healthy=0 fence_addr=0xf000 fence_value=0x1234567890"}},
		{"root", newFrame(abi.MES_SCH_API_UPDATE_ROOT_PAGE_TABLE).set64(abi.MES_ROOT_PT_DW_PAGE_TABLE_BASE_ADDR, 0x4001).
			set64(abi.MES_ROOT_PT_DW_PROCESS_CONTEXT_ADDR, 0x7000),
			[]string{"UPDATE_ROOT_PAGE_TABLE page_table_base_addr=0x4001 process_context_addr=0x7000"}},
		{"misc-write-reg", newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_WRITE_REG).
			set(abi.MES_MISC_DW_REG_OFFSET, abi.REG_SCRATCH_3/4).set(abi.MES_MISC_DW_WRITE_REG_VALUE, 0xAB),
			[]string{"MISC misc_opcode=WRITE_REG(0) reg_offset=0xc043(REG_SCRATCH_3) reg_value=0xab"}},
		{"misc-wait", newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_WAIT_REG_MEM).
			set(abi.MES_MISC_DW_WAIT_OP, abi.MES_MISC_OP_WAIT_OP_WRITE_WAIT_WRITE).set(abi.MES_MISC_DW_WAIT_REFERENCE, 1).
			set(abi.MES_MISC_DW_WAIT_MASK, 1).set(abi.MES_MISC_DW_WAIT_REG_OFFSET1, (abi.BLOCK_VM_INV_ENG_BASE+abi.REG_VM_INV_ENG_REQ)/4).
			set(abi.MES_MISC_DW_WAIT_REG_OFFSET2, (abi.BLOCK_VM_INV_ENG_BASE+abi.REG_VM_INV_ENG_ACK)/4),
			[]string{"MISC misc_opcode=WAIT_REG_MEM(4) op=WRITE_WAIT_WRITE(1) reference=0x1 mask=0x1 reg_offset1=0xd01(REG_VM_INV_ENG0_REQ) reg_offset2=0xd02(REG_VM_INV_ENG0_ACK)"}},
		{"misc-inv-gart", newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_INV_GART).
			set64(abi.MES_MISC_DW_INV_GART_VA_START, 0x100000).set64(abi.MES_MISC_DW_INV_GART_SIZE, 0x2000),
			[]string{"MISC misc_opcode=INV_GART(1) inv_gart_va_start=0x100000 inv_gart_size=0x2000"}},
		{"misc-read-reg", newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, abi.MES_MISC_OP_READ_REG).
			set(abi.MES_MISC_DW_REG_OFFSET, abi.REG_ID_MAGIC/4).set64(abi.MES_MISC_DW_READ_REG_BUFFER_ADDR, 0xE000),
			[]string{"MISC misc_opcode=READ_REG(3) reg_offset=0x0(REG_ID_MAGIC) buffer_addr=0xe000"}},
		{"misc-unknown-sub", newFrame(abi.MES_SCH_API_MISC).set(abi.MES_MISC_DW_OPCODE, 77),
			[]string{"MISC misc_opcode=77? fence_addr=0x0"}},
		{"yield", newFrame(abi.MES_SCH_API_PERFORM_YIELD).status(abi.MES_STATUS_DW_PERFORM_YIELD, 0x10, 2),
			[]string{"PERFORM_YIELD fence_addr=0x10 fence_value=0x2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fr := decode.MESFrame(c.f[:])
			if fr.Err != nil {
				t.Errorf("error %v", fr.Err)
			}
			s := fr.String()
			at := 0
			for _, w := range c.want {
				i := strings.Index(s[at:], w)
				if i < 0 {
					t.Fatalf("%q not found (in order) in\n%s", w, s)
				}
				at += i + len(w)
			}
		})
	}
}

func TestMESFrameErrors(t *testing.T) {
	bad := newFrame(abi.MES_SCH_API_ADD_QUEUE)
	bad[0] &^= abi.MES_API_HEADER_DWSIZE_MASK // DWSIZE 0
	unknown := newFrame(99)
	cases := []struct {
		name string
		dws  []uint32
		err  error
		text string
	}{
		{"empty", nil, decode.ErrTruncated, "EMPTY"},
		{"bad-header", bad[:], decode.ErrBadHeader, "ADD_QUEUE type=SCHEDULER(1) dwsize=0"},
		{"unknown", unknown[:], decode.ErrUnknownOpcode, "UNKNOWN_99 error=\"unknown opcode 99\" raw=[0x40631"},
		{"truncated", newFrame(abi.MES_SCH_API_ADD_QUEUE).set(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET, 8)[:20], decode.ErrTruncated, "doorbell_offset=0x8 error=\"truncated: 20 dwords of 64\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fr := decode.MESFrame(c.dws)
			if !errors.Is(fr.Err, c.err) {
				t.Errorf("error %v, want %v", fr.Err, c.err)
			}
			if s := fr.String(); !strings.Contains(s, c.text) {
				t.Errorf("%q does not contain %q", s, c.text)
			}
		})
	}
}

func TestMESFramesRing(t *testing.T) {
	ring := append(newFrame(abi.MES_SCH_API_RESUME)[:], newFrame(abi.MES_SCH_API_QUERY_SCHEDULER_STATUS)[:]...)
	fs := decode.MESFrames(append(ring, 1, 2))
	if len(fs) != 3 || fs[1].Offset != 64 || fs[1].Name != "QUERY_SCHEDULER_STATUS" || !errors.Is(fs[2].Err, decode.ErrTruncated) {
		t.Fatalf("%s", fs)
	}
	if s := fs.String(); !strings.Contains(s, "0x0040: QUERY_SCHEDULER_STATUS") {
		t.Errorf("%s", s)
	}
	if decode.MESOpcodeName(abi.MES_SCH_API_MISC) != "MISC" || decode.MESOpcodeName(200) != "UNKNOWN_200" {
		t.Error("MESOpcodeName")
	}
}
