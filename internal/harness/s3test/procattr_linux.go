package s3test

import "syscall"

// procAttr makes the kernel kill the server when the test process dies
// (a test binary killed by -timeout leaves no server behind).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
