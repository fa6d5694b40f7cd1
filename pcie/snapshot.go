package pcie

import (
	"errors"
	"fmt"
)

// ErrSnapshotMismatch: a saved config space whose read-only bits differ from this function's
// power-on values (another device configuration, or a damaged file).
var ErrSnapshotMismatch = errors.New("pcie: saved config space does not match this function")

// SaveState returns config space as the guest reads it now: the writable bits (COMMAND, BAR
// addresses, MSI-X enable and mask, device control, PMCSR, the resizable BAR's size) are the
// driver's state, the rest are the function's constants.
func (c *Config) SaveState() [ConfigSize]byte { return c.regs }

// RestoreState replaces config space with s. Only bits a guest write can change are taken
// from s, and every other bit must equal its power-on value (else ErrSnapshotMismatch): a
// file cannot give the function capabilities or BAR sizes it does not have. No hook runs:
// the caller applies COMMAND's Memory Space and Bus Master as it does after a write.
func (c *Config) RestoreState(s [ConfigSize]byte) error {
	for i := range s {
		m := c.wmask[i] | c.w1c[i]
		if (s[i]^c.init[i])&^m != 0 {
			return fmt.Errorf("%w: byte %#x is %#02x, the function's read-only bits give %#02x",
				ErrSnapshotMismatch, i, s[i], c.init[i])
		}
	}
	for i := range s {
		m := c.wmask[i] | c.w1c[i]
		c.regs[i] = c.init[i]&^m | s[i]&m
	}
	return nil
}
