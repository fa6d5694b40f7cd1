package main

import (
	"fmt"
	"os"
)

// order is the suite, as issue 10 names its cases, then the shader cases of issue 11 (item 6:
// the user-queue half; the KTAP module has the same names on a kernel queue).
var order = []string{
	"userq_basic", "userq_many", "userq_priority", "userq_signal_wait", "userq_invalid",
	"userq_hang", "userq_evict", "userq_kill", "vram_bo", "protected_fence", "kernel_queue",
	"perf_userq_vs_kq",
	"shader_vector_add", "shader_atomics", "shader_ids_2d", "shader_bad", "shader_preempt",
	"shader_endless",
	"inject_mes_hang", "inject_eop_lost",
}

var suite = map[string]func(*T){
	"userq_basic":       userqBasic,
	"userq_many":        userqMany,
	"userq_priority":    userqPriority,
	"userq_signal_wait": userqSignalWait,
	"userq_invalid":     userqInvalid,
	"userq_hang":        userqHang,
	"userq_evict":       userqEvict,
	"userq_kill":        userqKill,
	"vram_bo":           vramBO,
	"protected_fence":   protectedFence,
	"kernel_queue":      kernelQueue,
	"perf_userq_vs_kq":  perfUserqVsKQ,
	"shader_vector_add": shaderVectorAdd,
	"shader_atomics":    shaderAtomics,
	"shader_ids_2d":     shaderIDs2D,
	"shader_bad":        shaderBad,
	"shader_preempt":    shaderPreempt,
	"shader_endless":    shaderEndless,
	"inject_mes_hang":   injectMESHang,
	"inject_eop_lost":   injectEOPLost,
}

func caseNames() []string { return order }

// children are the helper processes cases start (--child MODE args...). Each returns nil
// when its part passed; its error goes to stderr, which the case quotes.
var children = map[string]func(args []string) error{
	"many":   childMany,
	"signal": childSignal,
	"nocap":  childNoCap,
	"kill":   childKill,
}

func runChild(mode string, args []string) int {
	f, ok := children[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		return 2
	}
	if err := f(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
