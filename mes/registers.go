package mes

import "vgpu/abi"

// readReg serves the registers of a running scheduler (register path: atomics only).
func (a *activation) readReg(reg, queryDB uint32) uint32 {
	switch reg {
	case abi.REG_MES_RING_RPTR:
		return uint32(a.rptr.Load() % a.size)
	case abi.REG_MES_RING_WPTR_LO:
		return uint32(a.wptr.Load())
	case abi.REG_MES_RING_WPTR_HI:
		return uint32(a.wptr.Load() >> 32)
	case abi.REG_MES_FRAMES:
		return a.nFrames.Load()
	case abi.REG_MES_FRAME_ERRORS:
		return a.nFrameErrors.Load()
	case abi.REG_MES_LAST_ERROR:
		return a.lastError.Load()
	case abi.REG_MES_LAST_ERROR_RPTR:
		return a.lastErrorRptr.Load()
	case abi.REG_MES_QUEUES:
		return a.nQueues.Load()
	case abi.REG_MES_MAPPED:
		return a.nMapped.Load()
	case abi.REG_MES_HUNG:
		return a.nHung.Load()
	case abi.REG_MES_MAPS:
		return a.nMaps.Load()
	case abi.REG_MES_UNMAPS:
		return a.nUnmaps.Load()
	case abi.REG_MES_UNMAPPED_DOORBELLS:
		return a.nUnmappedDBs.Load()
	case abi.REG_MES_PROCESSES:
		return a.nProcs.Load()
	}
	q := (*a.byDoorbell.Load())[queryDB]
	if q == nil {
		return 0
	}
	switch reg {
	case abi.REG_MES_QUERY_STATUS:
		return q.status.Load()
	case abi.REG_MES_QUERY_MAPS:
		return q.maps.Load()
	case abi.REG_MES_QUERY_PREEMPTS:
		return q.preempts.Load()
	case abi.REG_MES_QUERY_RPTR_LO:
		return uint32(q.pubRptr.Load())
	case abi.REG_MES_QUERY_RPTR_HI:
		return uint32(q.pubRptr.Load() >> 32)
	}
	return 0
}
