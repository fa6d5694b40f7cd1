// Package abi is the one source of truth for vgpu's hardware interface: PCI identity, BAR layout,
// register offsets and fields, and the values software writes into them.
//
// The definitions live as data in spec.go. `go generate ./abi` turns that data into Go constants
// (zz_generated.go, used by the device) and into guest/include/vgpu_abi.h (used by the guest
// driver), so the two sides cannot drift; TestGeneratedFilesAreCurrent fails when either
// checked-in file is stale.
//
// Naming follows amdgpu's C habits so that a name greps the same in Go, C and logs:
// registers are REG_<BLOCK>_<NAME> (byte offsets into the register BAR), fields are
// <REG>__<FIELD>__SHIFT and <REG>__<FIELD>_MASK, and enumerated values are <GROUP>_<NAME>.
// In C every name gets a VGPU_ prefix.
package abi

//go:generate go run ./internal/abigen -go zz_generated.go -c ../guest/include/vgpu_abi.h
