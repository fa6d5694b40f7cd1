package vfiouser

// SetQueueWaitHook installs queueWaitHook for one test and returns what removes it. Tests that
// use it must not run in parallel with others of this package.
func SetQueueWaitHook(waiting func(), woke func(executing func() bool)) (restore func()) {
	queueWaitHook.waiting, queueWaitHook.woke = waiting, woke
	return func() { queueWaitHook.waiting, queueWaitHook.woke = nil, nil }
}

// CommandQueueDepth is commandQueueDepth, for tests that fill the queue.
const CommandQueueDepth = commandQueueDepth
