package decode

import (
	"fmt"

	"vgpu/abi"
)

// opcode is what the decoder knows of a type-3 opcode: its name, the COUNT it takes (-1: any)
// and its payload's fields (p is the whole packet, header first, at its full length).
type opcode struct {
	name   string
	count  int // the COUNT it takes, or -1: at least min
	min    int
	decode func(p []uint32) []Field
}

// OpcodeWaitRegMem64 is AMD's WAIT_REG_MEM64 (IT opcode 0x93): vgpu's CP does not execute it
// (CP_ERROR_BAD_OPCODE), but amdgpu's user-queue waiters emit it, so it is decoded by name.
const OpcodeWaitRegMem64 = 0x93

// opcodes is every opcode the CP executes (abi PM4_IT_*), and WAIT_REG_MEM64.
var opcodes = map[uint32]opcode{
	abi.PM4_IT_NOP:                    {"NOP", -1, 0, decodeNop},
	abi.PM4_IT_SET_BASE:               {"SET_BASE", 2, 0, decodeSetBase},
	abi.PM4_IT_DISPATCH_DIRECT:        {"DISPATCH_DIRECT", 3, 0, decodeDispatchDirect},
	abi.PM4_IT_DISPATCH_INDIRECT:      {"DISPATCH_INDIRECT", 1, 0, decodeDispatchIndirect},
	abi.PM4_IT_WRITE_DATA:             {"WRITE_DATA", -1, 3, decodeWriteData},
	abi.PM4_IT_WAIT_REG_MEM:           {"WAIT_REG_MEM", 5, 0, decodeWaitRegMem},
	abi.PM4_IT_INDIRECT_BUFFER:        {"INDIRECT_BUFFER", 2, 0, decodeIB},
	abi.PM4_IT_COPY_DATA:              {"COPY_DATA", 4, 0, decodeCopyData},
	abi.PM4_IT_PFP_SYNC_ME:            {"PFP_SYNC_ME", 0, 0, decodeDummy},
	abi.PM4_IT_EVENT_WRITE:            {"EVENT_WRITE", -1, 0, decodeEventWrite},
	abi.PM4_IT_RELEASE_MEM:            {"RELEASE_MEM", 6, 0, decodeReleaseMem},
	abi.PM4_IT_DMA_DATA:               {"DMA_DATA", 5, 0, decodeDMAData},
	abi.PM4_IT_ACQUIRE_MEM:            {"ACQUIRE_MEM", 6, 0, decodeAcquireMem},
	abi.PM4_IT_SET_CONFIG_REG:         {"SET_CONFIG_REG", -1, 1, setReg(abi.PM4_SPACE_CONFIG_BASE, nil)},
	abi.PM4_IT_SET_SH_REG:             {"SET_SH_REG", -1, 1, setReg(abi.PM4_SPACE_SH_BASE, shNames)},
	abi.PM4_IT_SET_UCONFIG_REG:        {"SET_UCONFIG_REG", -1, 1, setReg(abi.PM4_SPACE_UCONFIG_BASE, nil)},
	abi.PM4_IT_INVALIDATE_TLBS:        {"INVALIDATE_TLBS", 0, 0, decodeInvalidateTLBs},
	abi.PM4_IT_PROTECTED_FENCE_SIGNAL: {"PROTECTED_FENCE_SIGNAL", 0, 0, decodeDummy},
	OpcodeWaitRegMem64:                {"WAIT_REG_MEM64", 7, 0, decodeWaitRegMem64},
}

// OpcodeName is the name of a type-3 opcode ("UNKNOWN_0x55" for one vgpu does not know).
func OpcodeName(op uint32) string {
	if o, ok := opcodes[op]; ok {
		return o.name
	}
	return fmt.Sprintf("UNKNOWN_%#x", op)
}

var cachePolicies = names{
	abi.PM4_CACHE_POLICY_LRU: "LRU", abi.PM4_CACHE_POLICY_STREAM: "STREAM",
	abi.PM4_CACHE_POLICY_NOA: "NOA", abi.PM4_CACHE_POLICY_BYPASS: "BYPASS",
}

func decodeNop(p []uint32) []Field {
	if len(p) == 1 {
		return nil
	}
	return []Field{dec("payload_dwords", uint64(len(p)-1))}
}

func decodeDummy(p []uint32) []Field { return []Field{hex("dummy", uint64(p[1]))} }

var setBaseIndexes = names{abi.PM4_SET_BASE_INDEX_DISPATCH_INDIRECT: "DISPATCH_INDIRECT"}

func decodeSetBase(p []uint32) []Field {
	if len(p) < 4 {
		return nil
	}
	return []Field{sel("base_index", uint64(p[1]), setBaseIndexes), hex("address", addr64(p[2], p[3]))}
}

func decodeDispatchDirect(p []uint32) []Field {
	if len(p) < 5 {
		return nil
	}
	return []Field{dec("dim_x", uint64(p[1])), dec("dim_y", uint64(p[2])), dec("dim_z", uint64(p[3])),
		hex("dispatch_initiator", uint64(p[4]))}
}

func decodeDispatchIndirect(p []uint32) []Field {
	if len(p) < 3 {
		return nil
	}
	return []Field{hex("data_offset", uint64(p[1])), hex("dispatch_initiator", uint64(p[2]))}
}

var writeDataDst = names{
	abi.PM4_WRITE_DATA_DST_REG: "REG", abi.PM4_WRITE_DATA_DST_MEM_GRBM: "MEM_GRBM",
	abi.PM4_WRITE_DATA_DST_TC_L2: "TC_L2", abi.PM4_WRITE_DATA_DST_MEM: "MEM",
}

var engines = names{0: "ME", 1: "PFP", 2: "CE"}

func decodeWriteData(p []uint32) []Field {
	if len(p) < 2 {
		return nil
	}
	d1 := p[1]
	dst := field(d1, abi.PM4_WRITE_DATA_DST_SEL_MASK, abi.PM4_WRITE_DATA_DST_SEL__SHIFT)
	f := []Field{
		sel("dst_sel", dst, writeDataDst),
		flag("wr_one_addr", d1&abi.PM4_WRITE_DATA_WR_ONE_ADDR_MASK != 0),
		flag("wr_confirm", d1&abi.PM4_WRITE_DATA_WR_CONFIRM_MASK != 0),
		sel("cache_policy", field(d1, abi.PM4_WRITE_DATA_CACHE_POLICY_MASK, abi.PM4_WRITE_DATA_CACHE_POLICY__SHIFT), cachePolicies),
		sel("engine_sel", field(d1, abi.PM4_WRITE_DATA_ENGINE_SEL_MASK, abi.PM4_WRITE_DATA_ENGINE_SEL__SHIFT), engines),
	}
	if len(p) < 4 {
		return f
	}
	if dst == abi.PM4_WRITE_DATA_DST_REG {
		f = append(f, reg("reg", uint64(p[2])))
		if p[3] != 0 {
			f = append(f, hex("addr_hi", uint64(p[3])))
		}
	} else {
		f = append(f, hex("addr", addr64(p[2], p[3])))
	}
	return append(f, list("data", p[4:]))
}

var waitFunctions = names{
	abi.PM4_WAIT_REG_MEM_FUNCTION_ALWAYS: "ALWAYS", abi.PM4_WAIT_REG_MEM_FUNCTION_LT: "LT",
	abi.PM4_WAIT_REG_MEM_FUNCTION_LE: "LE", abi.PM4_WAIT_REG_MEM_FUNCTION_EQ: "EQ",
	abi.PM4_WAIT_REG_MEM_FUNCTION_NE: "NE", abi.PM4_WAIT_REG_MEM_FUNCTION_GE: "GE",
	abi.PM4_WAIT_REG_MEM_FUNCTION_GT: "GT",
}

var waitSpaces = names{abi.PM4_WAIT_REG_MEM_MEM_SPACE_REG: "REG", abi.PM4_WAIT_REG_MEM_MEM_SPACE_MEM: "MEM"}

var waitOperations = names{
	abi.PM4_WAIT_REG_MEM_OPERATION_WAIT: "WAIT", abi.PM4_WAIT_REG_MEM_OPERATION_WRITE_WAIT: "WRITE_WAIT",
	abi.PM4_WAIT_REG_MEM_OPERATION_WAIT_PREEMPTABLE: "WAIT_PREEMPTABLE",
}

// waitControl is WAIT_REG_MEM's (and WAIT_REG_MEM64's) DW1.
func waitControl(d1 uint32) (space uint64, f []Field) {
	space = field(d1, abi.PM4_WAIT_REG_MEM_MEM_SPACE_MASK, abi.PM4_WAIT_REG_MEM_MEM_SPACE__SHIFT)
	return space, []Field{
		sel("function", field(d1, abi.PM4_WAIT_REG_MEM_FUNCTION_MASK, abi.PM4_WAIT_REG_MEM_FUNCTION__SHIFT), waitFunctions),
		sel("mem_space", space, waitSpaces),
		sel("operation", field(d1, abi.PM4_WAIT_REG_MEM_OPERATION_MASK, abi.PM4_WAIT_REG_MEM_OPERATION__SHIFT), waitOperations),
		sel("engine", field(d1, abi.PM4_WAIT_REG_MEM_ENGINE_MASK, abi.PM4_WAIT_REG_MEM_ENGINE__SHIFT), engines),
		sel("cache_policy", field(d1, abi.PM4_WAIT_REG_MEM_CACHE_POLICY_MASK, abi.PM4_WAIT_REG_MEM_CACHE_POLICY__SHIFT), cachePolicies),
	}
}

func decodeWaitRegMem(p []uint32) []Field {
	if len(p) < 7 {
		return nil
	}
	space, f := waitControl(p[1])
	if space == abi.PM4_WAIT_REG_MEM_MEM_SPACE_MEM {
		f = append(f, hex("addr", addr64(p[2], p[3])))
	} else {
		f = append(f, reg("reg_addr1", uint64(p[2])), reg("reg_addr2", uint64(p[3])))
	}
	return append(f, hex("reference", uint64(p[4])), hex("mask", uint64(p[5])),
		dec("poll_interval", field(p[6], abi.PM4_WAIT_REG_MEM_POLL_INTERVAL_MASK, abi.PM4_WAIT_REG_MEM_POLL_INTERVAL__SHIFT)))
}

func decodeWaitRegMem64(p []uint32) []Field {
	if len(p) < 9 {
		return nil
	}
	_, f := waitControl(p[1])
	return append(f, hex("addr", addr64(p[2], p[3])), hex("reference", addr64(p[4], p[5])),
		hex("mask", addr64(p[6], p[7])), dec("poll_interval", uint64(p[8]&abi.PM4_WAIT_REG_MEM_POLL_INTERVAL_MASK)),
		Field{"note", 0, "not-executed-by-vgpu"})
}

func decodeIB(p []uint32) []Field {
	if len(p) < 4 {
		return nil
	}
	ctl := p[3]
	return []Field{
		hex("addr", addr64(p[1], p[2])),
		dec("size", field(ctl, abi.PM4_IB_SIZE_MASK, abi.PM4_IB_SIZE__SHIFT)),
		flag("chain", ctl&abi.PM4_IB_CHAIN_MASK != 0),
		flag("valid", ctl&abi.PM4_IB_VALID_MASK != 0),
		dec("vmid", field(ctl, abi.PM4_IB_VMID_MASK, abi.PM4_IB_VMID__SHIFT)),
	}
}

var copySrc = names{
	abi.PM4_COPY_DATA_SEL_REG: "REG", abi.PM4_COPY_DATA_SEL_TC_L2: "TC_L2",
	abi.PM4_COPY_DATA_SEL_MEM: "IMM", abi.PM4_COPY_DATA_SEL_GPU_CLOCK: "GPU_CLOCK",
}

var copyDst = names{
	abi.PM4_COPY_DATA_SEL_REG: "REG", abi.PM4_COPY_DATA_SEL_TC_L2: "TC_L2", abi.PM4_COPY_DATA_SEL_MEM: "MEM",
}

func decodeCopyData(p []uint32) []Field {
	if len(p) < 6 {
		return nil
	}
	d1 := p[1]
	src := field(d1, abi.PM4_COPY_DATA_SRC_SEL_MASK, abi.PM4_COPY_DATA_SRC_SEL__SHIFT)
	dst := field(d1, abi.PM4_COPY_DATA_DST_SEL_MASK, abi.PM4_COPY_DATA_DST_SEL__SHIFT)
	count := names{0: "32", 1: "64"}
	f := []Field{
		sel("src_sel", src, copySrc), sel("dst_sel", dst, copyDst),
		sel("src_cache_policy", field(d1, abi.PM4_COPY_DATA_SRC_CACHE_POLICY_MASK, abi.PM4_COPY_DATA_SRC_CACHE_POLICY__SHIFT), cachePolicies),
		sel("count_sel", field(d1, abi.PM4_COPY_DATA_COUNT_SEL_MASK, abi.PM4_COPY_DATA_COUNT_SEL__SHIFT), count),
		flag("wr_confirm", d1&abi.PM4_COPY_DATA_WR_CONFIRM_MASK != 0),
		sel("dst_cache_policy", field(d1, abi.PM4_COPY_DATA_DST_CACHE_POLICY_MASK, abi.PM4_COPY_DATA_DST_CACHE_POLICY__SHIFT), cachePolicies),
	}
	switch src {
	case abi.PM4_COPY_DATA_SEL_REG:
		f = append(f, reg("src_reg", uint64(p[2])))
	case abi.PM4_COPY_DATA_SEL_MEM:
		f = append(f, hex("imm", addr64(p[2], p[3])))
	case abi.PM4_COPY_DATA_SEL_GPU_CLOCK:
	default:
		f = append(f, hex("src_addr", addr64(p[2], p[3])))
	}
	if dst == abi.PM4_COPY_DATA_SEL_REG {
		return append(f, reg("dst_reg", uint64(p[4])))
	}
	return append(f, hex("dst_addr", addr64(p[4], p[5])))
}

var eventTypes = names{
	abi.PM4_EVENT_CS_PARTIAL_FLUSH:             "CS_PARTIAL_FLUSH",
	abi.PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT: "CACHE_FLUSH_AND_INV_TS_EVENT",
	abi.PM4_EVENT_BOTTOM_OF_PIPE_TS:            "BOTTOM_OF_PIPE_TS",
}

func decodeEventWrite(p []uint32) []Field {
	if len(p) < 2 {
		return nil
	}
	f := []Field{
		sel("event_type", field(p[1], abi.PM4_EVENT_TYPE_MASK, abi.PM4_EVENT_TYPE__SHIFT), eventTypes),
		dec("event_index", field(p[1], abi.PM4_EVENT_INDEX_MASK, abi.PM4_EVENT_INDEX__SHIFT)),
	}
	if len(p) >= 4 {
		f = append(f, hex("addr", addr64(p[2], p[3])))
	}
	return f
}

var releaseGCR = []bitName{
	{abi.PM4_RELEASE_MEM_GCR_GLM_WB_MASK, "GLM_WB"}, {abi.PM4_RELEASE_MEM_GCR_GLM_INV_MASK, "GLM_INV"},
	{abi.PM4_RELEASE_MEM_GCR_GLV_INV_MASK, "GLV_INV"}, {abi.PM4_RELEASE_MEM_GCR_GL1_INV_MASK, "GL1_INV"},
	{abi.PM4_RELEASE_MEM_GCR_GL2_US_MASK, "GL2_US"}, {abi.PM4_RELEASE_MEM_GCR_GL2_RANGE_MASK, "GL2_RANGE"},
	{abi.PM4_RELEASE_MEM_GCR_GL2_DISCARD_MASK, "GL2_DISCARD"}, {abi.PM4_RELEASE_MEM_GCR_GL2_INV_MASK, "GL2_INV"},
	{abi.PM4_RELEASE_MEM_GCR_GL2_WB_MASK, "GL2_WB"}, {abi.PM4_RELEASE_MEM_GCR_SEQ_MASK, "SEQ"},
}

// releaseGCRMask is every GCR bit of RELEASE_MEM DW1.
const releaseGCRMask = 0x007FF000

var (
	releaseDst  = names{abi.PM4_RELEASE_MEM_DST_SEL_MEM: "MEM", abi.PM4_RELEASE_MEM_DST_SEL_TC_L2: "TC_L2"}
	releaseInt  = names{abi.PM4_RELEASE_MEM_INT_SEL_NONE: "NONE", abi.PM4_RELEASE_MEM_INT_SEL_IRQ: "IRQ", abi.PM4_RELEASE_MEM_INT_SEL_IRQ_CONFIRM: "IRQ_CONFIRM"}
	releaseData = names{
		abi.PM4_RELEASE_MEM_DATA_SEL_NONE: "NONE", abi.PM4_RELEASE_MEM_DATA_SEL_32: "32", abi.PM4_RELEASE_MEM_DATA_SEL_64: "64",
		abi.PM4_RELEASE_MEM_DATA_SEL_GPU_CLOCK: "GPU_CLOCK", abi.PM4_RELEASE_MEM_DATA_SEL_SYSTEM_CLOCK: "SYSTEM_CLOCK",
	}
)

func decodeReleaseMem(p []uint32) []Field {
	if len(p) < 8 {
		return nil
	}
	d1, d2 := p[1], p[2]
	data := field(d2, abi.PM4_RELEASE_MEM_DATA_SEL_MASK, abi.PM4_RELEASE_MEM_DATA_SEL__SHIFT)
	f := []Field{
		sel("event_type", field(d1, abi.PM4_RELEASE_MEM_EVENT_TYPE_MASK, abi.PM4_RELEASE_MEM_EVENT_TYPE__SHIFT), eventTypes),
		dec("event_index", field(d1, abi.PM4_RELEASE_MEM_EVENT_INDEX_MASK, abi.PM4_RELEASE_MEM_EVENT_INDEX__SHIFT)),
		bits("gcr", uint64(d1&releaseGCRMask), releaseGCR),
		sel("cache_policy", field(d1, abi.PM4_RELEASE_MEM_CACHE_POLICY_MASK, abi.PM4_RELEASE_MEM_CACHE_POLICY__SHIFT), cachePolicies),
		flag("execute", d1&abi.PM4_RELEASE_MEM_EXECUTE_MASK != 0),
		sel("dst_sel", field(d2, abi.PM4_RELEASE_MEM_DST_SEL_MASK, abi.PM4_RELEASE_MEM_DST_SEL__SHIFT), releaseDst),
		sel("int_sel", field(d2, abi.PM4_RELEASE_MEM_INT_SEL_MASK, abi.PM4_RELEASE_MEM_INT_SEL__SHIFT), releaseInt),
		sel("data_sel", data, releaseData),
		hex("addr", addr64(p[3], p[4])),
	}
	switch data {
	case abi.PM4_RELEASE_MEM_DATA_SEL_32:
		f = append(f, hex("data", uint64(p[5])))
	case abi.PM4_RELEASE_MEM_DATA_SEL_64:
		f = append(f, hex("data", addr64(p[5], p[6])))
	}
	return append(f, hex("int_ctxid", uint64(p[7])))
}

var dmaSels = names{abi.PM4_DMA_DATA_SEL_ADDR: "ADDR", abi.PM4_DMA_DATA_SEL_DATA: "DATA", abi.PM4_DMA_DATA_SEL_ADDR_L2: "ADDR_L2"}

func decodeDMAData(p []uint32) []Field {
	if len(p) < 7 {
		return nil
	}
	d1, d6 := p[1], p[6]
	src := field(d1, abi.PM4_DMA_DATA_SRC_SEL_MASK, abi.PM4_DMA_DATA_SRC_SEL__SHIFT)
	f := []Field{
		dec("engine", field(d1, abi.PM4_DMA_DATA_ENGINE_MASK, abi.PM4_DMA_DATA_ENGINE__SHIFT)),
		sel("src_sel", src, dmaSels),
		sel("dst_sel", field(d1, abi.PM4_DMA_DATA_DST_SEL_MASK, abi.PM4_DMA_DATA_DST_SEL__SHIFT), dmaSels),
		sel("src_cache_policy", field(d1, abi.PM4_DMA_DATA_SRC_CACHE_POLICY_MASK, abi.PM4_DMA_DATA_SRC_CACHE_POLICY__SHIFT), cachePolicies),
		sel("dst_cache_policy", field(d1, abi.PM4_DMA_DATA_DST_CACHE_POLICY_MASK, abi.PM4_DMA_DATA_DST_CACHE_POLICY__SHIFT), cachePolicies),
		flag("cp_sync", d1&abi.PM4_DMA_DATA_CP_SYNC_MASK != 0),
	}
	if src == abi.PM4_DMA_DATA_SEL_DATA {
		f = append(f, hex("data", uint64(p[2])))
	} else {
		f = append(f, hex("src_addr", addr64(p[2], p[3])))
	}
	return append(f, hex("dst_addr", addr64(p[4], p[5])),
		dec("byte_count", field(d6, abi.PM4_DMA_DATA_BYTE_COUNT_MASK, abi.PM4_DMA_DATA_BYTE_COUNT__SHIFT)),
		flag("sas", d6&abi.PM4_DMA_DATA_SAS_MASK != 0), flag("das", d6&abi.PM4_DMA_DATA_DAS_MASK != 0),
		flag("saic", d6&abi.PM4_DMA_DATA_SAIC_MASK != 0), flag("daic", d6&abi.PM4_DMA_DATA_DAIC_MASK != 0),
		flag("raw_wait", d6&abi.PM4_DMA_DATA_RAW_WAIT_MASK != 0))
}

var acquireGCR = []bitName{
	{abi.PM4_ACQUIRE_MEM_GCR_GLI_INV_MASK, "GLI_INV"}, {abi.PM4_ACQUIRE_MEM_GCR_GLM_WB_MASK, "GLM_WB"},
	{abi.PM4_ACQUIRE_MEM_GCR_GLM_INV_MASK, "GLM_INV"}, {abi.PM4_ACQUIRE_MEM_GCR_GLK_WB_MASK, "GLK_WB"},
	{abi.PM4_ACQUIRE_MEM_GCR_GLK_INV_MASK, "GLK_INV"}, {abi.PM4_ACQUIRE_MEM_GCR_GLV_INV_MASK, "GLV_INV"},
	{abi.PM4_ACQUIRE_MEM_GCR_GL1_INV_MASK, "GL1_INV"}, {abi.PM4_ACQUIRE_MEM_GCR_GL2_US_MASK, "GL2_US"},
	{abi.PM4_ACQUIRE_MEM_GCR_GL2_DISCARD_MASK, "GL2_DISCARD"}, {abi.PM4_ACQUIRE_MEM_GCR_GL2_INV_MASK, "GL2_INV"},
	{abi.PM4_ACQUIRE_MEM_GCR_GL2_WB_MASK, "GL2_WB"}, {abi.PM4_ACQUIRE_MEM_GCR_RANGE_IS_PA_MASK, "RANGE_IS_PA"},
}

var gl2Ranges = names{abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_ALL: "ALL", abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_RANGE: "RANGE"}

func decodeAcquireMem(p []uint32) []Field {
	if len(p) < 8 {
		return nil
	}
	gcr := p[7]
	size := Field{"coher_size", addr64(p[2], p[3]&0xFF), "ALL"}
	if p[2] != 0xFFFFFFFF || p[3]&0xFF != 0xFF {
		size = hex("coher_size", addr64(p[2], p[3]&0xFF)<<8)
	}
	rangeFlags := uint64(gcr) &^ (abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_MASK | abi.PM4_ACQUIRE_MEM_GCR_SEQ_MASK)
	return []Field{
		hex("coher_cntl", uint64(p[1])),
		size,
		hex("coher_base", addr64(p[4], p[5]&0xFFFFFF)<<8),
		dec("poll_interval", uint64(p[6]&0xFFFF)),
		bits("gcr", rangeFlags, acquireGCR),
		sel("gl2_range", field(gcr, abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE_MASK, abi.PM4_ACQUIRE_MEM_GCR_GL2_RANGE__SHIFT), gl2Ranges),
		dec("seq", field(gcr, abi.PM4_ACQUIRE_MEM_GCR_SEQ_MASK, abi.PM4_ACQUIRE_MEM_GCR_SEQ__SHIFT)),
	}
}

// shNames names the SH registers (offsets from PM4_SPACE_SH_BASE) a dispatch uses.
var shNames = func() map[uint32]string {
	m := map[uint32]string{
		abi.SH_COMPUTE_DISPATCH_INITIATOR: "COMPUTE_DISPATCH_INITIATOR",
		abi.SH_COMPUTE_START_X:            "COMPUTE_START_X", abi.SH_COMPUTE_START_Y: "COMPUTE_START_Y", abi.SH_COMPUTE_START_Z: "COMPUTE_START_Z",
		abi.SH_COMPUTE_NUM_THREAD_X: "COMPUTE_NUM_THREAD_X", abi.SH_COMPUTE_NUM_THREAD_Y: "COMPUTE_NUM_THREAD_Y",
		abi.SH_COMPUTE_NUM_THREAD_Z: "COMPUTE_NUM_THREAD_Z",
		abi.SH_COMPUTE_PGM_LO:       "COMPUTE_PGM_LO", abi.SH_COMPUTE_PGM_HI: "COMPUTE_PGM_HI",
		abi.SH_COMPUTE_PGM_RSRC1: "COMPUTE_PGM_RSRC1", abi.SH_COMPUTE_PGM_RSRC2: "COMPUTE_PGM_RSRC2",
		abi.SH_COMPUTE_RESOURCE_LIMITS: "COMPUTE_RESOURCE_LIMITS", abi.SH_COMPUTE_TMPRING_SIZE: "COMPUTE_TMPRING_SIZE",
	}
	for i := uint32(0); i < abi.SH_COMPUTE_USER_DATA_COUNT; i++ {
		m[abi.SH_COMPUTE_USER_DATA_0+i] = fmt.Sprintf("COMPUTE_USER_DATA_%d", i)
	}
	return m
}()

// setReg decodes SET_CONFIG_REG, SET_SH_REG and SET_UCONFIG_REG: DW1's offset into the space,
// then one field per value, named by its register (an SH name, or the abi register at
// base + offset in the register BAR) or reg_0x... when it has none.
func setReg(base uint32, local map[uint32]string) func(p []uint32) []Field {
	return func(p []uint32) []Field {
		if len(p) < 2 {
			return nil
		}
		off := p[1] & abi.PM4_SET_REG_OFFSET_MASK
		f := []Field{hex("reg_offset", uint64(off))}
		if p[1]&^abi.PM4_SET_REG_OFFSET_MASK != 0 {
			f = append(f, hex("dw1_hi", uint64(p[1]&^abi.PM4_SET_REG_OFFSET_MASK)))
		}
		vals := p[2:]
		for i, v := range vals {
			if i == maxListed {
				f = append(f, Field{"more", uint64(len(vals) - i), fmt.Sprintf("%d-values", len(vals)-i)})
				break
			}
			r := off + uint32(i)
			name, ok := local[r]
			if local == nil {
				name, ok = regName(uint64(base + r))
			}
			if !ok {
				name = fmt.Sprintf("reg_%#x", r)
			}
			f = append(f, hex(name, uint64(v)))
		}
		return f
	}
}

func decodeInvalidateTLBs(p []uint32) []Field {
	d1 := p[1]
	return []Field{
		dec("dst_sel", field(d1, abi.PM4_INVALIDATE_TLBS_DST_SEL_MASK, abi.PM4_INVALIDATE_TLBS_DST_SEL__SHIFT)),
		flag("all_hub", d1&abi.PM4_INVALIDATE_TLBS_ALL_HUB_MASK != 0),
		dec("pasid", field(d1, abi.PM4_INVALIDATE_TLBS_PASID_MASK, abi.PM4_INVALIDATE_TLBS_PASID__SHIFT)),
		dec("flush_type", field(d1, abi.PM4_INVALIDATE_TLBS_FLUSH_TYPE_MASK, abi.PM4_INVALIDATE_TLBS_FLUSH_TYPE__SHIFT)),
	}
}
