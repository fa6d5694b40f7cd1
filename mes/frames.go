package mes

import (
	"encoding/binary"

	"vgpu/abi"
)

// frame is one 64-dword API frame as fetched from the ring. Decoding never fails on content:
// the handlers check the fields they use and fail the frame with a named reason.
type frame [abi.MES_API_FRAME_DWORDS]uint32

func (f *frame) dw(i uint64) uint32 { return f[i] }

// qw is the little-endian u64 at dwords i, i+1 (pack(4): 64-bit fields are dword aligned).
func (f *frame) qw(i uint64) uint64 { return uint64(f[i]) | uint64(f[i+1])<<32 }

func (f *frame) opcode() uint32 {
	return f[0] & abi.MES_API_HEADER_OPCODE_MASK >> abi.MES_API_HEADER_OPCODE__SHIFT
}

// headerOK: TYPE scheduler and DWSIZE 64, as every frame must be.
func (f *frame) headerOK() bool {
	return f[0]&abi.MES_API_HEADER_TYPE_MASK>>abi.MES_API_HEADER_TYPE__SHIFT == abi.MES_API_TYPE_SCHEDULER &&
		f[0]&abi.MES_API_HEADER_DWSIZE_MASK>>abi.MES_API_HEADER_DWSIZE__SHIFT == abi.MES_API_FRAME_DWORDS
}

// statusDW is where the frame's MES_API_STATUS sits, by opcode (mes_v11_api_def.h, pack(4)).
// ok is false for an opcode the scheduler does not know: it has no status to write.
func statusDW(op uint32) (uint64, bool) {
	switch op {
	case abi.MES_SCH_API_SET_HW_RSRC:
		return abi.MES_SET_HW_RSRC_DW_API_STATUS, true
	case abi.MES_SCH_API_SET_SCHEDULING_CONFIG:
		return abi.MES_SCHED_CFG_DW_API_STATUS, true
	case abi.MES_SCH_API_ADD_QUEUE:
		return abi.MES_ADD_QUEUE_DW_API_STATUS, true
	case abi.MES_SCH_API_REMOVE_QUEUE:
		return abi.MES_REMOVE_QUEUE_DW_API_STATUS, true
	case abi.MES_SCH_API_SUSPEND:
		return abi.MES_SUSPEND_DW_API_STATUS, true
	case abi.MES_SCH_API_RESUME:
		return abi.MES_RESUME_DW_API_STATUS, true
	case abi.MES_SCH_API_RESET:
		return abi.MES_RESET_DW_API_STATUS, true
	case abi.MES_SCH_API_SET_LOG_BUFFER:
		return abi.MES_LOG_DW_API_STATUS, true
	case abi.MES_SCH_API_CHANGE_GANG_PRIORITY, abi.MES_SCH_API_SET_GANG_PRIORITY_LEVEL:
		return abi.MES_CHANGE_PRIO_DW_API_STATUS, true
	case abi.MES_SCH_API_QUERY_SCHEDULER_STATUS:
		return abi.MES_QUERY_DW_API_STATUS, true
	case abi.MES_SCH_API_MISC:
		return abi.MES_MISC_DW_API_STATUS, true
	case abi.MES_SCH_API_UPDATE_ROOT_PAGE_TABLE:
		return abi.MES_ROOT_PT_DW_API_STATUS, true
	case abi.MES_SCH_API_PERFORM_YIELD:
		return abi.MES_STATUS_DW_PERFORM_YIELD, true
	case abi.MES_SCH_API_SET_DEBUG_VMID:
		return abi.MES_STATUS_DW_SET_DEBUG_VMID, true
	case abi.MES_SCH_API_SET_HW_RSRC_1:
		return abi.MES_STATUS_DW_SET_HW_RSRC_1, true
	case abi.MES_SCH_API_PROGRAM_GDS:
		return abi.MES_STATUS_DW_PROGRAM_GDS, true
	case abi.MES_SCH_API_AMD_LOG:
		return abi.MES_STATUS_DW_AMD_LOG, true
	}
	return 0, false
}

// apiStatus returns the frame's completion fence (address, value), if its opcode has one.
func (f *frame) apiStatus() (addr, value uint64, ok bool) {
	dw, ok := statusDW(f.opcode())
	if !ok {
		return 0, 0, false
	}
	return f.qw(dw + abi.MES_API_STATUS_FENCE_ADDR), f.qw(dw + abi.MES_API_STATUS_FENCE_VALUE), true
}

// decodeFrame reads a frame from the 256 bytes fetched from the ring.
func decodeFrame(p []byte) (f frame) {
	for i := range f {
		f[i] = binary.LittleEndian.Uint32(p[i*4:])
	}
	return f
}

// addQueue is ADD_QUEUE's fields.
type addQueue struct {
	pasid                  uint16
	pasidHigh              bool // process_id wider than 16 bits
	ptBase                 uint64
	vaStart, vaEnd         uint64 // pages
	procQuantum            uint64 // 100 ns
	procCtx                uint64
	gangQuantum            uint64
	gangCtx                uint64
	inprocPrio, globalPrio uint32
	doorbell               uint32
	mqd, wptr              uint64
	queueType              uint32
	vmCntl                 uint32
	flags                  uint32
	unmapFlag              uint64
}

func (f *frame) addQueue() addQueue {
	pid := f.dw(abi.MES_ADD_QUEUE_DW_PROCESS_ID)
	return addQueue{
		pasid: uint16(pid), pasidHigh: pid > 0xFFFF,
		ptBase:      f.qw(abi.MES_ADD_QUEUE_DW_PAGE_TABLE_BASE_ADDR),
		vaStart:     f.qw(abi.MES_ADD_QUEUE_DW_PROCESS_VA_START),
		vaEnd:       f.qw(abi.MES_ADD_QUEUE_DW_PROCESS_VA_END),
		procQuantum: f.qw(abi.MES_ADD_QUEUE_DW_PROCESS_QUANTUM),
		procCtx:     f.qw(abi.MES_ADD_QUEUE_DW_PROCESS_CONTEXT_ADDR),
		gangQuantum: f.qw(abi.MES_ADD_QUEUE_DW_GANG_QUANTUM),
		gangCtx:     f.qw(abi.MES_ADD_QUEUE_DW_GANG_CONTEXT_ADDR),
		inprocPrio:  f.dw(abi.MES_ADD_QUEUE_DW_INPROCESS_GANG_PRIORITY),
		globalPrio:  f.dw(abi.MES_ADD_QUEUE_DW_GANG_GLOBAL_PRIORITY_LEVEL),
		doorbell:    f.dw(abi.MES_ADD_QUEUE_DW_DOORBELL_OFFSET),
		mqd:         f.qw(abi.MES_ADD_QUEUE_DW_MQD_ADDR),
		wptr:        f.qw(abi.MES_ADD_QUEUE_DW_WPTR_ADDR),
		queueType:   f.dw(abi.MES_ADD_QUEUE_DW_QUEUE_TYPE),
		vmCntl:      f.dw(abi.MES_ADD_QUEUE_DW_VM_CONTEXT_CNTL),
		flags:       f.dw(abi.MES_ADD_QUEUE_DW_FLAGS),
		unmapFlag:   f.qw(abi.MES_ADD_QUEUE_DW_UNMAP_FLAG_ADDR),
	}
}

// hwResources is SET_HW_RESOURCES's fields that vgpu uses.
type hwResources struct {
	vmids      uint32
	compute    [8]uint32
	gfx        [2]uint32
	aggregated [abi.MES_PRIORITY_LEVELS]uint32
	pollUS     uint32
}

func (f *frame) hwResources() (h hwResources) {
	h.vmids = f.dw(abi.MES_SET_HW_RSRC_DW_VMID_MASK_GFXHUB)
	for i := range h.compute {
		h.compute[i] = f.dw(abi.MES_SET_HW_RSRC_DW_COMPUTE_HQD_MASK + uint64(i))
	}
	for i := range h.gfx {
		h.gfx[i] = f.dw(abi.MES_SET_HW_RSRC_DW_GFX_HQD_MASK + uint64(i))
	}
	for i := range h.aggregated {
		h.aggregated[i] = f.dw(abi.MES_SET_HW_RSRC_DW_AGGREGATED_DOORBELLS + uint64(i))
	}
	h.pollUS = f.dw(abi.MES_SET_HW_RSRC_DW_OVERSUBSCRIPTION_TIMER)
	return h
}
