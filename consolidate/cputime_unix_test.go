//go:build unix

package consolidate

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used, all
// goroutines and the runtime's own (GC) included; 0 when unknown.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
