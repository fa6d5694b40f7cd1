module vgpu

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/digitalocean/go-qemu v0.0.0-20250212194115-ee9b0668d242
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)

require github.com/digitalocean/go-libvirt v0.0.0-20220804181439-8648fbde413e // indirect
