package irq

// VectorStatus is one MSI-X vector for live inspection (`vgpu status`): interrupts sent, and
// whether one is held back now (pending while masked, or with no eventfd to send it to).
type VectorStatus struct {
	Vector    int    `json:"vector"`
	Delivered uint64 `json:"delivered"`
	Pending   bool   `json:"pending"` // held in the PBA: suppressed until unmasked
	Masked    bool   `json:"masked"`  // by the client (SET_IRQS) or the trapped table's Mask Bit
	Eventfd   bool   `json:"eventfd"` // the client gave the vector an eventfd
}

// Vectors returns every MSI-X vector's status, under the controller's lock.
func (c *Controller) Vectors() []VectorStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]VectorStatus, len(c.msix))
	for k, v := range c.msix {
		out[k] = VectorStatus{Vector: k, Delivered: c.delivered[k].Load(), Pending: v.pending,
			Masked: v.clientMasked || v.tableInUseMasked(c.tableInUse), Eventfd: v.fd != nil}
	}
	return out
}

// tableInUseMasked: the table's Mask Bit counts once the client uses the trapped table.
func (v *vector) tableInUseMasked(inUse bool) bool { return inUse && v.tableMasked }
