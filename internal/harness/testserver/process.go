package testserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Process is a test server's child process with its log file and its
// private directory, removed at Stop.
type Process struct {
	// LogPath is the file the server logs to ("" if none).
	LogPath string

	dir     string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // set before exited is closed
	stopped atomic.Bool
}

// StartProcess starts cmd (its output already directed to logPath) and
// watches for its exit; dir is removed at Stop.
func StartProcess(cmd *exec.Cmd, dir, logPath string) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{LogPath: logPath, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the process has exited; ExitErr then tells how.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is cmd.Wait's result; valid once Exited is closed.
func (p *Process) ExitErr() error { return p.waitErr }

// Stop sends sig (os.Kill kills at once), waits up to grace for the exit,
// kills the process if it is still there, and removes its directory. It
// is idempotent.
func (p *Process) Stop(sig os.Signal, grace time.Duration) {
	if p.stopped.Swap(true) {
		return
	}
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			select {
			case <-p.exited:
			case <-time.After(grace):
			}
		}
	}
	_ = os.RemoveAll(p.dir)
}

// LogTail returns the last n bytes of the log.
func (p *Process) LogTail(n int64) string { return LogTail(p.LogPath, n) }

// LogTail returns the last n bytes of the file at path, or why not.
func LogTail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// EnvWithout is the test process's environment without the variables
// whose names start with one of prefixes, so that a developer's shell
// cannot change the server under test.
func EnvWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// WaitReady calls probe every 20 ms until it succeeds, and fails when
// the process exits, ctx ends or timeout passes first; name and the
// log's tail go into the error.
func (p *Process) WaitReady(ctx context.Context, name string, timeout time.Duration, probe func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited during startup (%v); log:\n%s", name, p.waitErr, p.LogTail(4<<10))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if lastErr = probe(ctx); lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v: %v; log:\n%s", name, timeout, lastErr, p.LogTail(4<<10))
}

// FreePort returns a TCP port on 127.0.0.1 free a moment ago (a caller
// retries when another process takes it before its server binds).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CPUTime returns the CPU time (user and system) the process has used
// so far, from /proc/PID/stat (Linux; clock ticks of 1/100 s, the
// USER_HZ every Linux architecture reports to user space). A benchmark
// reads it before and after a timed region to charge a server running
// on the same machine its share of the CPU.
func (p *Process) CPUTime() (time.Duration, error) {
	if p.cmd.Process == nil {
		return 0, fmt.Errorf("testserver: process not started")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("testserver: malformed %s", "/proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("testserver: short /proc/PID/stat (%d fields)", len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("testserver: /proc/PID/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
