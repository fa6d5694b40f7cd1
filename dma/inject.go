package dma

import (
	"errors"

	"vgpu/inject"
)

// Fault injection (package inject): a dma.fail rule fails accesses to an IOVA range as a
// failed DMA does in this model, with a *FaultError (Err ErrInjected), before any byte moves.
// Engines treat it as every other DMA failure: the CP halts the queue with CP_ERROR_MEMORY
// and a GPF IV, the self-test DMA reports SELFTEST_DMA_STATUS_ERROR, and so on. While a rule
// of the kind is live the direct copy paths decline (CopyIn/CopyOut/CopyWithin return false),
// so every access goes through the checked path.

// ErrInjected: the access fell in the range of a dma.fail rule.
var ErrInjected = errors.New("dma: access failed by an injection rule")

// SetInjector gives the space its rule set (nil: none). Call before DMA flows.
func (s *Space) SetInjector(r *inject.Set) { s.inj = r }
