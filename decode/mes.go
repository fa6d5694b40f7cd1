package decode

import (
	"fmt"
	"strings"

	"vgpu/abi"
)

// Frame is one decoded MES v11 API frame (mes_v11_api_def.h, 64 dwords).
type Frame struct {
	Offset int      // dword offset in its ring (MESFrames; MESFrame: 0)
	Dwords []uint32 // the frame's dwords (truncated: those there were)
	Type   uint32   // MES_API_HEADER TYPE (MES_API_TYPE_SCHEDULER)
	Opcode uint32   // MES_SCH_API_*
	DWSize uint32   // DWSIZE: 64
	Name   string   // the opcode's abi name without MES_SCH_API_ (ADD_QUEUE, MISC, ...), or UNKNOWN_n
	Fields []Field
	// The frame's MES_API_STATUS: the completion fence the scheduler writes Value to when
	// the frame succeeds (HasFence false for an opcode vgpu does not know).
	FenceAddr, FenceValue uint64
	HasFence              bool
	Err                   error
}

// Field returns the field named name.
func (f Frame) Field(name string) (Field, bool) {
	for _, x := range f.Fields {
		if x.Name == name {
			return x, true
		}
	}
	return Field{}, false
}

// String is the frame on one line: its opcode name, its fields, then the api_status fence.
func (f Frame) String() string {
	var b strings.Builder
	b.WriteString(f.Name)
	for _, x := range f.Fields {
		b.WriteByte(' ')
		b.WriteString(x.String())
	}
	if f.HasFence {
		fmt.Fprintf(&b, " fence_addr=%#x fence_value=%#x", f.FenceAddr, f.FenceValue)
	}
	if f.Err != nil {
		fmt.Fprintf(&b, " error=%q raw=%s", f.Err.Error(), rawText(f.Dwords))
	}
	return b.String()
}

// Frames is a decoded API ring: one line per frame, its dword offset first.
type Frames []Frame

func (fs Frames) String() string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "0x%04x: %s\n", f.Offset, f.String())
	}
	return b.String()
}

// MESFrames decodes consecutive frames from dws[0] (a partial last frame is ErrTruncated).
func MESFrames(dws []uint32) Frames {
	var out Frames
	for off := 0; off < len(dws); off += abi.MES_API_FRAME_DWORDS {
		f := MESFrame(dws[off:min(off+abi.MES_API_FRAME_DWORDS, len(dws))])
		f.Offset = off
		out = append(out, f)
	}
	return out
}

// MESFrame decodes one frame from dws (its first 64 dwords; fewer is ErrTruncated, and only
// the fields there are decoded).
func MESFrame(dws []uint32) Frame {
	if len(dws) > abi.MES_API_FRAME_DWORDS {
		dws = dws[:abi.MES_API_FRAME_DWORDS]
	}
	f := Frame{Dwords: dws}
	if len(dws) == 0 {
		f.Name, f.Err = "EMPTY", fmt.Errorf("%w: no dwords", ErrTruncated)
		return f
	}
	h := dws[0]
	f.Type = uint32(field(h, abi.MES_API_HEADER_TYPE_MASK, abi.MES_API_HEADER_TYPE__SHIFT))
	f.Opcode = uint32(field(h, abi.MES_API_HEADER_OPCODE_MASK, abi.MES_API_HEADER_OPCODE__SHIFT))
	f.DWSize = uint32(field(h, abi.MES_API_HEADER_DWSIZE_MASK, abi.MES_API_HEADER_DWSIZE__SHIFT))
	op, known := mesOps[f.Opcode]
	f.Name = fmt.Sprintf("UNKNOWN_%d", f.Opcode)
	if known {
		f.Name = op.name
	}
	qw := func(i int) uint64 { return addr64(dws[i], dws[i+1]) }
	if len(dws) < abi.MES_API_FRAME_DWORDS {
		f.Err = fmt.Errorf("%w: %d dwords of %d", ErrTruncated, len(dws), abi.MES_API_FRAME_DWORDS)
	}
	if f.Type != abi.MES_API_TYPE_SCHEDULER || f.DWSize != abi.MES_API_FRAME_DWORDS {
		f.Fields = append(f.Fields, sel("type", uint64(f.Type), names{abi.MES_API_TYPE_SCHEDULER: "SCHEDULER"}), dec("dwsize", uint64(f.DWSize)))
		if f.Err == nil {
			f.Err = fmt.Errorf("%w: TYPE %d DWSIZE %d", ErrBadHeader, f.Type, f.DWSize)
		}
	}
	if !known {
		if f.Err == nil {
			f.Err = fmt.Errorf("%w %d", ErrUnknownOpcode, f.Opcode)
		}
		return f
	}
	fields := op.fields
	if f.Opcode == abi.MES_SCH_API_MISC && len(dws) > abi.MES_MISC_DW_OPCODE {
		sub := uint64(dws[abi.MES_MISC_DW_OPCODE])
		f.Fields = append(f.Fields, sel("misc_opcode", sub, miscOps))
		fields = miscFields[sub]
	}
	for _, s := range fields {
		if x, ok := s.decode(dws); ok {
			f.Fields = append(f.Fields, x)
		}
	}
	if op.status >= 0 && op.status+4 <= len(dws) {
		f.HasFence = true
		f.FenceAddr = qw(op.status + abi.MES_API_STATUS_FENCE_ADDR)
		f.FenceValue = qw(op.status + abi.MES_API_STATUS_FENCE_VALUE)
	}
	return f
}

// mesKind is how a frame field is shown.
type mesKind uint8

const (
	mHex   mesKind = iota // u32 in hex
	mDec                  // u32 in decimal
	mQHex                 // u64 in hex (two dwords, pack(4))
	mQDec                 // u64 in decimal
	mSel                  // u32 select shown by name
	mBits                 // u32 flags shown by name
	mArr                  // n u32 in hex
	mQArr                 // n u64 in decimal
	mRegDW                // a register operand (dword offset into the register BAR), by name
)

type mesField struct {
	name  string
	dw    int
	kind  mesKind
	n     int // mArr, mQArr: entries
	names names
	bits  []bitName
}

// decode reads the field from dws; false when the frame is too short to hold it.
func (s mesField) decode(dws []uint32) (Field, bool) {
	width := 1
	switch s.kind {
	case mQHex, mQDec:
		width = 2
	case mArr:
		width = s.n
	case mQArr:
		width = 2 * s.n
	}
	if s.dw+width > len(dws) {
		return Field{}, false
	}
	v := dws[s.dw]
	switch s.kind {
	case mDec:
		return dec(s.name, uint64(v)), true
	case mRegDW:
		return reg(s.name, uint64(v)), true
	case mQHex:
		return hex(s.name, addr64(v, dws[s.dw+1])), true
	case mQDec:
		return dec(s.name, addr64(v, dws[s.dw+1])), true
	case mSel:
		return sel(s.name, uint64(v), s.names), true
	case mBits:
		return bits(s.name, uint64(v), s.bits), true
	case mArr:
		return list(s.name, dws[s.dw:s.dw+s.n]), true
	case mQArr:
		parts := make([]string, s.n)
		for i := range parts {
			parts[i] = fmt.Sprintf("%d", addr64(dws[s.dw+2*i], dws[s.dw+2*i+1]))
		}
		return Field{s.name, uint64(s.n), "[" + strings.Join(parts, " ") + "]"}, true
	}
	return hex(s.name, uint64(v)), true
}

type mesOp struct {
	name   string
	status int // MES_API_STATUS dword (-1: none)
	fields []mesField
}

var priorities = names{
	abi.MES_PRIORITY_LOW: "LOW", abi.MES_PRIORITY_NORMAL: "NORMAL", abi.MES_PRIORITY_MEDIUM: "MEDIUM",
	abi.MES_PRIORITY_HIGH: "HIGH", abi.MES_PRIORITY_REALTIME: "REALTIME",
}

var queueTypes = names{abi.MES_QUEUE_TYPE_GFX: "GFX", abi.MES_QUEUE_TYPE_COMPUTE: "COMPUTE", abi.MES_QUEUE_TYPE_SDMA: "SDMA"}

var addQueueFlags = []bitName{
	{abi.MES_ADD_QUEUE_FLAG_PAGING_MASK, "PAGING"}, {abi.MES_ADD_QUEUE_FLAG_PROGRAM_GDS_MASK, "PROGRAM_GDS"},
	{abi.MES_ADD_QUEUE_FLAG_IS_GANG_SUSPENDED_MASK, "IS_GANG_SUSPENDED"}, {abi.MES_ADD_QUEUE_FLAG_IS_TMZ_QUEUE_MASK, "IS_TMZ_QUEUE"},
	{abi.MES_ADD_QUEUE_FLAG_MAP_KIQ_UTILITY_QUEUE_MASK, "MAP_KIQ_UTILITY_QUEUE"}, {abi.MES_ADD_QUEUE_FLAG_IS_KFD_PROCESS_MASK, "IS_KFD_PROCESS"},
	{abi.MES_ADD_QUEUE_FLAG_TRAP_EN_MASK, "TRAP_EN"}, {abi.MES_ADD_QUEUE_FLAG_IS_AQL_QUEUE_MASK, "IS_AQL_QUEUE"},
	{abi.MES_ADD_QUEUE_FLAG_SKIP_PROCESS_CTX_CLEAR_MASK, "SKIP_PROCESS_CTX_CLEAR"}, {abi.MES_ADD_QUEUE_FLAG_MAP_LEGACY_KQ_MASK, "MAP_LEGACY_KQ"},
	{abi.MES_ADD_QUEUE_FLAG_EXCLUSIVELY_SCHEDULED_MASK, "EXCLUSIVELY_SCHEDULED"}, {abi.MES_ADD_QUEUE_FLAG_IS_LONG_RUNNING_MASK, "IS_LONG_RUNNING"},
	{abi.MES_ADD_QUEUE_FLAG_DEBUG_VMID_MASK, "DEBUG_VMID"},
}

var resetFlags = []bitName{
	{abi.MES_RESET_FLAG_RESET_QUEUE_ONLY_MASK, "RESET_QUEUE_ONLY"}, {abi.MES_RESET_FLAG_HANG_DETECT_THEN_RESET_MASK, "HANG_DETECT_THEN_RESET"},
	{abi.MES_RESET_FLAG_HANG_DETECT_ONLY_MASK, "HANG_DETECT_ONLY"}, {abi.MES_RESET_FLAG_RESET_LEGACY_GFX_MASK, "RESET_LEGACY_GFX"},
}

var miscOps = names{
	abi.MES_MISC_OP_WRITE_REG: "WRITE_REG", abi.MES_MISC_OP_INV_GART: "INV_GART", abi.MES_MISC_OP_QUERY_STATUS: "QUERY_STATUS",
	abi.MES_MISC_OP_READ_REG: "READ_REG", abi.MES_MISC_OP_WAIT_REG_MEM: "WAIT_REG_MEM",
	abi.MES_MISC_OP_SET_SHADER_DEBUGGER: "SET_SHADER_DEBUGGER", abi.MES_MISC_OP_NOTIFY_WORK_ON_UNMAPPED_QUEUE: "NOTIFY_WORK_ON_UNMAPPED_QUEUE",
	abi.MES_MISC_OP_NOTIFY_TO_UNMAP_PROCESSES: "NOTIFY_TO_UNMAP_PROCESSES", abi.MES_MISC_OP_CHANGE_CONFIG: "CHANGE_CONFIG",
	abi.MES_MISC_OP_LAUNCH_CLEANER_SHADER: "LAUNCH_CLEANER_SHADER",
}

var miscWaitOps = names{abi.MES_MISC_OP_WAIT_OP_WAIT: "WAIT", abi.MES_MISC_OP_WAIT_OP_WRITE_WAIT_WRITE: "WRITE_WAIT_WRITE"}

// miscFields are MISC's payload (the union at dword 6) by sub-opcode.
var miscFields = map[uint64][]mesField{
	abi.MES_MISC_OP_WRITE_REG: {{name: "reg_offset", dw: abi.MES_MISC_DW_REG_OFFSET, kind: mRegDW}, {name: "reg_value", dw: abi.MES_MISC_DW_WRITE_REG_VALUE}},
	abi.MES_MISC_OP_READ_REG:  {{name: "reg_offset", dw: abi.MES_MISC_DW_REG_OFFSET, kind: mRegDW}, {name: "buffer_addr", dw: abi.MES_MISC_DW_READ_REG_BUFFER_ADDR, kind: mQHex}},
	abi.MES_MISC_OP_WAIT_REG_MEM: {
		{name: "op", dw: abi.MES_MISC_DW_WAIT_OP, kind: mSel, names: miscWaitOps},
		{name: "reference", dw: abi.MES_MISC_DW_WAIT_REFERENCE}, {name: "mask", dw: abi.MES_MISC_DW_WAIT_MASK},
		{name: "reg_offset1", dw: abi.MES_MISC_DW_WAIT_REG_OFFSET1, kind: mRegDW}, {name: "reg_offset2", dw: abi.MES_MISC_DW_WAIT_REG_OFFSET2, kind: mRegDW},
	},
	abi.MES_MISC_OP_INV_GART:                      {{name: "inv_gart_va_start", dw: abi.MES_MISC_DW_INV_GART_VA_START, kind: mQHex}, {name: "inv_gart_size", dw: abi.MES_MISC_DW_INV_GART_SIZE, kind: mQHex}},
	abi.MES_MISC_OP_QUERY_STATUS:                  {{name: "context_id", dw: abi.MES_MISC_DW_QUERY_CONTEXT_ID}},
	abi.MES_MISC_OP_NOTIFY_WORK_ON_UNMAPPED_QUEUE: {{name: "priority_level", dw: abi.MES_MISC_DW_NOTIFY_PRIORITY_LEVEL, kind: mSel, names: priorities}},
}

var changePrio = []mesField{
	{name: "inprocess_gang_priority", dw: abi.MES_CHANGE_PRIO_DW_INPROCESS_GANG_PRIORITY, kind: mDec},
	{name: "gang_global_priority_level", dw: abi.MES_CHANGE_PRIO_DW_GANG_GLOBAL_PRIORITY_LEVEL, kind: mSel, names: priorities},
	{name: "gang_quantum", dw: abi.MES_CHANGE_PRIO_DW_GANG_QUANTUM, kind: mQDec},
	{name: "gang_context_addr", dw: abi.MES_CHANGE_PRIO_DW_GANG_CONTEXT_ADDR, kind: mQHex},
}

// mesOps is every opcode the scheduler knows (abi MES_SCH_API_*), with its fields and the
// dword of its MES_API_STATUS.
var mesOps = map[uint32]mesOp{
	abi.MES_SCH_API_SET_HW_RSRC: {"SET_HW_RSRC", abi.MES_SET_HW_RSRC_DW_API_STATUS, []mesField{
		{name: "vmid_mask_mmhub", dw: abi.MES_SET_HW_RSRC_DW_VMID_MASK_MMHUB},
		{name: "vmid_mask_gfxhub", dw: abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB},
		{name: "gds_size", dw: abi.MES_SET_HW_RSRC_DW_GDS_SIZE},
		{name: "paging_vmid", dw: abi.MES_SET_HW_RSRC_DW_PAGING_VMID, kind: mDec},
		{name: "compute_hqd_mask", dw: abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK, kind: mArr, n: 8},
		{name: "gfx_hqd_mask", dw: abi.MES_SET_HW_RSRC_DW_GFX_HQD_MASK, kind: mArr, n: 2},
		{name: "sdma_hqd_mask", dw: abi.MES_SET_HW_RSRC_DW_SDMA_HQD_MASK, kind: mArr, n: 2},
		{name: "aggregated_doorbells", dw: abi.MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS, kind: mArr, n: abi.MES_PRIORITY_LEVELS},
		{name: "g_sch_ctx_gpu_mc_ptr", dw: abi.MES_SET_HW_RSRC_DW_G_SCH_CTX_GPU_MC_PTR, kind: mQHex},
		{name: "query_status_fence_gpu_mc_ptr", dw: abi.MES_SET_HW_RSRC_DW_QUERY_STATUS_FENCE_GPU_MC_PTR, kind: mQHex},
		{name: "flags", dw: abi.MES_SET_HW_RSRC_DW_FLAGS},
		{name: "oversubscription_timer", dw: abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER, kind: mDec},
		{name: "doorbell_info", dw: abi.MES_SET_HW_RSRC_DW_DOORBELL_INFO, kind: mQHex},
		{name: "event_intr_history_gpu_mc_ptr", dw: abi.MES_SET_HW_RSRC_DW_EVENT_INTR_HISTORY_GPU_MC_PTR, kind: mQHex},
		{name: "timestamp", dw: abi.MES_SET_HW_RSRC_DW_TIMESTAMP, kind: mQHex},
		{name: "os_tdr_timeout_in_sec", dw: abi.MES_SET_HW_RSRC_DW_OS_TDR_TIMEOUT_IN_SEC, kind: mDec},
	}},
	abi.MES_SCH_API_SET_SCHEDULING_CONFIG: {"SET_SCHEDULING_CONFIG", abi.MES_SCHED_CFG_DW_API_STATUS, []mesField{
		{name: "grace_period_other_levels", dw: abi.MES_SCHED_CFG_DW_GRACE_PERIOD_OTHER_LEVELS, kind: mQArr, n: abi.MES_PRIORITY_LEVELS},
		{name: "process_quantum_for_level", dw: abi.MES_SCHED_CFG_DW_PROCESS_QUANTUM_FOR_LEVEL, kind: mQArr, n: abi.MES_PRIORITY_LEVELS},
		{name: "process_grace_period_same_level", dw: abi.MES_SCHED_CFG_DW_PROCESS_GRACE_PERIOD_SAME_LEVEL, kind: mQArr, n: abi.MES_PRIORITY_LEVELS},
		{name: "normal_yield_percent", dw: abi.MES_SCHED_CFG_DW_NORMAL_YIELD_PERCENT, kind: mDec},
	}},
	abi.MES_SCH_API_ADD_QUEUE: {"ADD_QUEUE", abi.MES_ADD_QUEUE_DW_API_STATUS, []mesField{
		{name: "process_id", dw: abi.MES_ADD_QUEUE_DW_PROCESS_ID, kind: mDec},
		{name: "page_table_base_addr", dw: abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR, kind: mQHex},
		{name: "process_va_start", dw: abi.MES_ADD_QUEUE_DW_PROCESS_VA_START, kind: mQHex},
		{name: "process_va_end", dw: abi.MES_ADD_QUEUE_DW_PROCESS_VA_END, kind: mQHex},
		{name: "process_quantum", dw: abi.MES_ADD_QUEUE_DW_PROCESS_QUANTUM, kind: mQDec},
		{name: "process_context_addr", dw: abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR, kind: mQHex},
		{name: "gang_quantum", dw: abi.MES_ADD_QUEUE_DW_GANG_QUANTUM, kind: mQDec},
		{name: "gang_context_addr", dw: abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR, kind: mQHex},
		{name: "inprocess_gang_priority", dw: abi.MES_ADD_QUEUE_DW_INPROCESS_GANG_PRIORITY, kind: mDec},
		{name: "gang_global_priority_level", dw: abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL, kind: mSel, names: priorities},
		{name: "doorbell_offset", dw: abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET},
		{name: "mqd_addr", dw: abi.MES_ADD_QUEUE_DW_MQD_ADDR, kind: mQHex},
		{name: "wptr_addr", dw: abi.MES_ADD_QUEUE_DW_WPTR_ADDR, kind: mQHex},
		{name: "h_context", dw: abi.MES_ADD_QUEUE_DW_H_CONTEXT, kind: mQHex},
		{name: "h_queue", dw: abi.MES_ADD_QUEUE_DW_H_QUEUE, kind: mQHex},
		{name: "queue_type", dw: abi.MES_ADD_QUEUE_DW_QUEUE_TYPE, kind: mSel, names: queueTypes},
		{name: "gds_base", dw: abi.MES_ADD_QUEUE_DW_GDS_BASE}, {name: "gds_size", dw: abi.MES_ADD_QUEUE_DW_GDS_SIZE},
		{name: "gws_base", dw: abi.MES_ADD_QUEUE_DW_GWS_BASE}, {name: "gws_size", dw: abi.MES_ADD_QUEUE_DW_GWS_SIZE},
		{name: "oa_mask", dw: abi.MES_ADD_QUEUE_DW_OA_MASK},
		{name: "trap_handler_addr", dw: abi.MES_ADD_QUEUE_DW_TRAP_HANDLER_ADDR, kind: mQHex},
		{name: "vm_context_cntl", dw: abi.MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL},
		{name: "flags", dw: abi.MES_ADD_QUEUE_DW_FLAGS, kind: mBits, bits: addQueueFlags},
		{name: "tma_addr", dw: abi.MES_ADD_QUEUE_DW_TMA_ADDR, kind: mQHex},
		{name: "sch_id", dw: abi.MES_ADD_QUEUE_DW_SCH_ID},
		{name: "timestamp", dw: abi.MES_ADD_QUEUE_DW_TIMESTAMP, kind: mQHex},
		{name: "process_context_array_index", dw: abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ARRAY_INDEX, kind: mDec},
		{name: "gang_context_array_index", dw: abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ARRAY_INDEX, kind: mDec},
		{name: "pipe_id", dw: abi.MES_ADD_QUEUE_DW_PIPE_ID, kind: mDec},
		{name: "queue_id", dw: abi.MES_ADD_QUEUE_DW_QUEUE_ID, kind: mDec},
		{name: "alignment_mode_setting", dw: abi.MES_ADD_QUEUE_DW_ALIGNMENT_MODE_SETTING, kind: mDec},
		{name: "unmap_flag_addr", dw: abi.MES_ADD_QUEUE_DW_UNMAP_FLAG_ADDR, kind: mQHex},
	}},
	abi.MES_SCH_API_REMOVE_QUEUE: {"REMOVE_QUEUE", abi.MES_REMOVE_QUEUE_DW_API_STATUS, []mesField{
		{name: "doorbell_offset", dw: abi.MES_REMOVE_QUEUE_DW_DOORBELL_OFFSET},
		{name: "gang_context_addr", dw: abi.MES_REMOVE_QUEUE_DW_GANG_CONTEXT_ADDR, kind: mQHex},
		{name: "flags", dw: abi.MES_REMOVE_QUEUE_DW_FLAGS},
		{name: "pipe_id", dw: abi.MES_REMOVE_QUEUE_DW_PIPE_ID, kind: mDec},
		{name: "queue_id", dw: abi.MES_REMOVE_QUEUE_DW_QUEUE_ID, kind: mDec},
		{name: "tf_addr", dw: abi.MES_REMOVE_QUEUE_DW_TF_ADDR, kind: mQHex},
		{name: "tf_data", dw: abi.MES_REMOVE_QUEUE_DW_TF_DATA},
		{name: "queue_type", dw: abi.MES_REMOVE_QUEUE_DW_QUEUE_TYPE, kind: mSel, names: queueTypes},
	}},
	abi.MES_SCH_API_PERFORM_YIELD:           {"PERFORM_YIELD", abi.MES_STATUS_DW_PERFORM_YIELD, nil},
	abi.MES_SCH_API_SET_GANG_PRIORITY_LEVEL: {"SET_GANG_PRIORITY_LEVEL", abi.MES_CHANGE_PRIO_DW_API_STATUS, changePrio},
	abi.MES_SCH_API_SUSPEND: {"SUSPEND", abi.MES_SUSPEND_DW_API_STATUS, []mesField{
		{name: "flags", dw: abi.MES_SUSPEND_DW_FLAGS, kind: mBits, bits: []bitName{{1, "SUSPEND_ALL_GANGS"}}},
		{name: "gang_context_addr", dw: abi.MES_SUSPEND_DW_GANG_CONTEXT_ADDR, kind: mQHex},
		{name: "suspend_fence_addr", dw: abi.MES_SUSPEND_DW_SUSPEND_FENCE_ADDR, kind: mQHex},
		{name: "suspend_fence_value", dw: abi.MES_SUSPEND_DW_SUSPEND_FENCE_VALUE},
	}},
	abi.MES_SCH_API_RESUME: {"RESUME", abi.MES_RESUME_DW_API_STATUS, []mesField{
		{name: "flags", dw: abi.MES_RESUME_DW_FLAGS, kind: mBits, bits: []bitName{{1, "RESUME_ALL_GANGS"}}},
		{name: "gang_context_addr", dw: abi.MES_RESUME_DW_GANG_CONTEXT_ADDR, kind: mQHex},
	}},
	abi.MES_SCH_API_RESET: {"RESET", abi.MES_RESET_DW_API_STATUS, []mesField{
		{name: "flags", dw: abi.MES_RESET_DW_FLAGS, kind: mBits, bits: resetFlags},
		{name: "gang_context_addr", dw: abi.MES_RESET_DW_GANG_CONTEXT_ADDR, kind: mQHex},
		{name: "doorbell_offset", dw: abi.MES_RESET_DW_DOORBELL_OFFSET},
		{name: "doorbell_offset_addr", dw: abi.MES_RESET_DW_DOORBELL_OFFSET_ADDR, kind: mQHex},
		{name: "queue_type", dw: abi.MES_RESET_DW_QUEUE_TYPE, kind: mSel, names: queueTypes},
	}},
	abi.MES_SCH_API_SET_LOG_BUFFER: {"SET_LOG_BUFFER", abi.MES_LOG_DW_API_STATUS, []mesField{
		{name: "log_type", dw: abi.MES_LOG_DW_LOG_TYPE, kind: mDec},
		{name: "buffer_addr", dw: abi.MES_LOG_DW_BUFFER_ADDR, kind: mQHex},
		{name: "number_of_entries", dw: abi.MES_LOG_DW_NUMBER_OF_ENTRIES, kind: mDec},
		{name: "interrupt_entry", dw: abi.MES_LOG_DW_INTERRUPT_ENTRY, kind: mDec},
	}},
	abi.MES_SCH_API_CHANGE_GANG_PRIORITY: {"CHANGE_GANG_PRIORITY", abi.MES_CHANGE_PRIO_DW_API_STATUS, changePrio},
	abi.MES_SCH_API_QUERY_SCHEDULER_STATUS: {"QUERY_SCHEDULER_STATUS", abi.MES_QUERY_DW_API_STATUS, []mesField{
		{name: "mes_healthy", dw: abi.MES_QUERY_DW_MES_HEALTHY, kind: mDec},
	}},
	abi.MES_SCH_API_PROGRAM_GDS:    {"PROGRAM_GDS", abi.MES_STATUS_DW_PROGRAM_GDS, nil},
	abi.MES_SCH_API_SET_DEBUG_VMID: {"SET_DEBUG_VMID", abi.MES_STATUS_DW_SET_DEBUG_VMID, nil},
	abi.MES_SCH_API_MISC:           {"MISC", abi.MES_MISC_DW_API_STATUS, nil},
	abi.MES_SCH_API_UPDATE_ROOT_PAGE_TABLE: {"UPDATE_ROOT_PAGE_TABLE", abi.MES_ROOT_PT_DW_API_STATUS, []mesField{
		{name: "page_table_base_addr", dw: abi.MES_ROOT_PT_DW_PAGE_TABLE_BASE_ADDR, kind: mQHex},
		{name: "process_context_addr", dw: abi.MES_ROOT_PT_DW_PROCESS_CONTEXT_ADDR, kind: mQHex},
	}},
	abi.MES_SCH_API_AMD_LOG:       {"AMD_LOG", abi.MES_STATUS_DW_AMD_LOG, nil},
	abi.MES_SCH_API_SET_HW_RSRC_1: {"SET_HW_RSRC_1", abi.MES_STATUS_DW_SET_HW_RSRC_1, nil},
}

// MESOpcodeName is the name of an MES API opcode ("UNKNOWN_n" for one vgpu does not know).
func MESOpcodeName(op uint32) string {
	if o, ok := mesOps[op]; ok {
		return o.name
	}
	return fmt.Sprintf("UNKNOWN_%d", op)
}
