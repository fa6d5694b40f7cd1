package drm

// The Go mirror of the uAPI is generated from the C headers, as golang.org/x/sys/unix does:
// cgo -godefs of types_linux.go, mkpost.go to put back the field names it shortens, gofmt.
// gen_test.go fails when ztypes_linux_amd64.go is not what this line produces.
//go:generate sh -c "go tool cgo -godefs -- -I../../drm/uapi -Iinclude types_linux.go | go run mkpost.go | gofmt > ztypes_linux_amd64.go.tmp && mv ztypes_linux_amd64.go.tmp ztypes_linux_amd64.go && rm -rf _obj _cgo_2.o"
