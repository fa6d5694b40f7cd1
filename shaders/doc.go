// Package shaders holds the project's own shaders, written in Go with cilium/ebpf/asm's DSL:
// the one definition of each. The guest's copies (guest/include/vgpu_shaders.h: the encoded
// bytes and the argument-block layout of each) are generated from them by `go generate
// ./shaders`, and a test fails when the header is stale.
package shaders

//go:generate go run ./internal/shadergen -o ../guest/include/vgpu_shaders.h
