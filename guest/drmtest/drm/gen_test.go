package drm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestGeneratedCurrent runs the go:generate pipeline of gen.go into a temporary file and
// compares: ztypes_linux_amd64.go must be what the headers give today.
func TestGeneratedCurrent(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed: cgo -godefs cannot run, so the generated uAPI mirror is not checked")
	}
	tmp := t.TempDir()
	out := filepath.Join(tmp, "z.go")
	cmd := exec.Command("sh", "-c", "go tool cgo -objdir "+filepath.Join(tmp, "obj")+
		" -godefs -- -I../../drm/uapi -Iinclude types_linux.go | go run mkpost.go | gofmt > "+out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cgo -godefs: %v\n%s", err, stderr.String())
	}
	os.Remove("_cgo_2.o")
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("ztypes_linux_amd64.go")
	if err != nil {
		t.Fatal(err)
	}
	// The second line names the command; the objdir differs.
	if !bytes.Equal(dropLine2(got), dropLine2(want)) {
		t.Fatalf("ztypes_linux_amd64.go is stale: run `go generate ./guest/drmtest/drm`\n--- generated now:\n%s", got)
	}
}

func dropLine2(b []byte) []byte {
	lines := bytes.SplitN(b, []byte("\n"), 3)
	if len(lines) < 3 {
		return b
	}
	return append(append(lines[0], '\n'), lines[2]...)
}

// TestIoctlCodes checks the codes ioctl.go computes against the C macros' values, which
// cgo -godefs carried into the generated file.
func TestIoctlCodes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"SYNC_IOC_FILE_INFO", ioctlSyncFileInfo, cIoctlSyncFileInfo},
		{"DRM_IOCTL_VGPU_INFO", ioctlVgpuInfo, cIoctlVgpuInfo},
		{"DRM_IOCTL_VGPU_GEM_CREATE", ioctlVgpuGemCreate, cIoctlVgpuGemCreate},
		{"DRM_IOCTL_VGPU_GEM_MMAP", ioctlVgpuGemMmap, cIoctlVgpuGemMmap},
		{"DRM_IOCTL_VGPU_GEM_VA", ioctlVgpuGemVA, cIoctlVgpuGemVA},
		{"DRM_IOCTL_VGPU_USERQ", ioctlVgpuUserq, cIoctlVgpuUserq},
		{"DRM_IOCTL_VGPU_USERQ_SIGNAL", ioctlVgpuUserqSignal, cIoctlVgpuUserqSignal},
		{"DRM_IOCTL_VGPU_USERQ_WAIT", ioctlVgpuUserqWait, cIoctlVgpuUserqWait},
		{"DRM_IOCTL_VGPU_SUBMIT", ioctlVgpuSubmit, cIoctlVgpuSubmit},
		{"DRM_IOCTL_VGPU_GEM_WAIT_IDLE", ioctlVgpuGemWaitIdle, cIoctlVgpuGemWaitIdle},
		{"DRM_IOCTL_VERSION", ioctlVersion, cIoctlVersion},
		{"DRM_IOCTL_GEM_CLOSE", ioctlGemClose, cIoctlGemClose},
		{"DRM_IOCTL_PRIME_HANDLE_TO_FD", ioctlPrimeHandleToFD, cIoctlPrimeHandleToFD},
		{"DRM_IOCTL_SYNCOBJ_CREATE", ioctlSyncobjCreate, cIoctlSyncobjCreate},
		{"DRM_IOCTL_SYNCOBJ_DESTROY", ioctlSyncobjDestroy, cIoctlSyncobjDestroy},
		{"DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD", ioctlSyncobjHandleToFD, cIoctlSyncobjHandleToFD},
		{"DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE", ioctlSyncobjFDToHandle, cIoctlSyncobjFDToHandle},
		{"DRM_IOCTL_SYNCOBJ_WAIT", ioctlSyncobjWait, cIoctlSyncobjWait},
		{"DRM_IOCTL_SYNCOBJ_RESET", ioctlSyncobjReset, cIoctlSyncobjReset},
		{"DRM_IOCTL_SYNCOBJ_SIGNAL", ioctlSyncobjSignal, cIoctlSyncobjSignal},
	} {
		if c.got != c.want {
			t.Errorf("%s: computed %#x, the C macro gives %#x", c.name, c.got, c.want)
		}
	}
}

// TestLayout pins the uAPI's sizes and the offsets of the fields whose place the contract
// (UAPI.md) fixes: every struct a multiple of 8, the union's halves overlapping at 0.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof drm_vgpu_info", unsafe.Sizeof(Info{}), 64},
		{"sizeof drm_vgpu_gem_create", unsafe.Sizeof(GemCreate{}), 24},
		{"sizeof drm_vgpu_gem_mmap", unsafe.Sizeof(GemMmap{}), 16},
		{"sizeof drm_vgpu_gem_wait_idle", unsafe.Sizeof(GemWaitIdle{}), 16},
		{"sizeof drm_vgpu_gem_va", unsafe.Sizeof(GemVA{}), 40},
		{"sizeof drm_vgpu_userq_mqd_compute", unsafe.Sizeof(MQDCompute{}), 24},
		{"userq_mqd_compute.csa_va", unsafe.Offsetof(MQDCompute{}.Csa_va), VGPU_USERQ_MQD_COMPUTE_SIZE_V1},
		{"sizeof drm_vgpu_userq_in", unsafe.Sizeof(UserqIn{}), 72},
		{"sizeof drm_vgpu_userq_out", unsafe.Sizeof(UserqOut{}), 24},
		{"sizeof union drm_vgpu_userq", sizeofUserq, 72},
		{"sizeof drm_vgpu_userq_signal", unsafe.Sizeof(UserqSignal{}), 48},
		{"sizeof drm_vgpu_userq_wait", unsafe.Sizeof(UserqWait{}), 72},
		{"sizeof drm_vgpu_submit", unsafe.Sizeof(Submit{}), 32},
		{"userq_in.queue_va", unsafe.Offsetof(UserqIn{}.Queue_va), 24},
		{"userq_in.mqd_size", unsafe.Offsetof(UserqIn{}.Mqd_size), 64},
		{"userq_out.fence_va", unsafe.Offsetof(UserqOut{}.Fence_va), 8},
		{"userq_out.status_flags", unsafe.Offsetof(UserqOut{}.Status_flags), 16},
		{"userq_wait.num_fences", unsafe.Offsetof(UserqWait{}.Num_fences), 50},
		{"userq_wait.out_fences", unsafe.Offsetof(UserqWait{}.Out_fences), 64},
		{"gem_va.offset_in_bo", unsafe.Offsetof(GemVA{}.Offset_in_bo), 24},
		{"syncobj_wait.first_signaled", unsafe.Offsetof(SyncobjWait{}.First_signaled), 24},
		{"sizeof drm_syncobj_wait", unsafe.Sizeof(SyncobjWait{}), 32},
		{"sizeof drm_syncobj_handle", unsafe.Sizeof(SyncobjHandle{}), 16},
		{"sizeof drm_version", unsafe.Sizeof(Version{}), 64},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
