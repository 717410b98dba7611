//go:build linux || darwin

package s3test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// lines collects a builder's progress lines.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.l = append(l.l, fmt.Sprintf(format, args...))
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.l...)
}

// TestBuildOnceUnderLock: while one builder builds, a second one waits for
// the lock and then takes the first one's binary instead of building.
func TestBuildOnceUnderLock(t *testing.T) {
	dir := t.TempDir()
	var builds atomic.Int32
	write := func(_ context.Context, out string) error {
		builds.Add(1)
		return os.WriteFile(out, []byte("fake versitygw"), 0o755)
	}
	aBuilding, bWaiting, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var aLines, bLines lines
	a := builder{dir: dir, say: aLines.say, build: func(ctx context.Context, out string) error {
		close(aBuilding)
		select { // b is blocked on the lock, or (without one) done on its own
		case <-bWaiting:
		case <-bDone:
		}
		return write(ctx, out)
	}}
	b := builder{dir: dir, build: write, say: func(format string, args ...any) {
		bLines.say(format, args...)
		if strings.HasPrefix(format, "waiting") {
			close(bWaiting)
		}
	}}

	aBin, aErr := make(chan string, 1), make(chan error, 1)
	go func() {
		bin, err := a.binary(context.Background())
		aBin <- bin
		aErr <- err
	}()
	<-aBuilding
	bBin, err := b.binary(context.Background())
	close(bDone)
	require.NoError(t, err)
	require.NoError(t, <-aErr)
	require.Equal(t, <-aBin, bBin)
	require.EqualValues(t, 1, builds.Load(), "builds")

	got, err := os.ReadFile(bBin)
	require.NoError(t, err)
	require.Equal(t, "fake versitygw", string(got))
	require.Equal(t, []string{fmt.Sprintf("waiting for another process building versitygw %s (lock %s)", Version, filepath.Join(dir, lockName))}, bLines.get())
	al := aLines.get()
	require.Len(t, al, 2)
	require.Equal(t, fmt.Sprintf("building versitygw %s, the S3 server of the tests, into %s: once per machine, about 2 to 3 minutes with a cold Go build cache", Version, dir), al[0])
	require.Regexp(t, `^built versitygw v[0-9.]+ in [0-9hms.]+$`, al[1])

	// A third call finds the binary and says nothing.
	var cLines lines
	c := builder{dir: dir, say: cLines.say, build: write}
	cBin, err := c.binary(context.Background())
	require.NoError(t, err)
	require.Equal(t, bBin, cBin)
	require.EqualValues(t, 1, builds.Load())
	require.Empty(t, cLines.get())
}

// TestBuildFailureLeavesNoBinary: a build that fails half way (or died
// earlier, leaving its temporary file) leaves nothing a later call could
// take for a binary; that call builds again.
func TestBuildFailureLeavesNoBinary(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, binName+tmpTag+"1"), []byte("half of a dead build"), 0o755))
	errBuild := errors.New("no network")
	var l lines
	half := builder{dir: dir, say: l.say, build: func(_ context.Context, out string) error {
		if err := os.WriteFile(out, []byte("half"), 0o755); err != nil {
			return err
		}
		return errBuild
	}}
	_, err := half.binary(context.Background())
	require.ErrorIs(t, err, errBuild)
	require.Equal(t, []string{lockName}, dirNames(t, dir))
	require.Len(t, l.get(), 2)
	require.Regexp(t, `^building versitygw v[0-9.]+ failed after [0-9hms.]+$`, l.get()[1])

	whole := builder{dir: dir, say: l.say, build: func(_ context.Context, out string) error {
		return os.WriteFile(out, []byte("whole"), 0o755)
	}}
	bin, err := whole.binary(context.Background())
	require.NoError(t, err)
	got, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.Equal(t, "whole", string(got))
	require.Equal(t, []string{lockName, binName}, dirNames(t, dir))
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestBuildOnceAcrossProcesses: two test processes find the binary
// missing; the second waits for the first one's build instead of building.
func TestBuildOnceAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	helper := func() (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelper+"="+dir)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		return cmd, stdin, bufio.NewScanner(stdout)
	}
	// readUntil reads lines until one starts with prefix, or the end.
	readUntil := func(s *bufio.Scanner, prefix string) (seen []string, found bool) {
		for s.Scan() {
			seen = append(seen, s.Text())
			if strings.HasPrefix(s.Text(), prefix) {
				return seen, true
			}
		}
		return seen, false
	}

	a, aIn, aOut := helper()
	seen, ok := readUntil(aOut, "fake build")
	require.True(t, ok, "first process: %q", seen)
	b, bIn, bOut := helper()
	require.NoError(t, bIn.Close()) // its build, if it ran one, would not wait
	bSeen, bWaited := readUntil(bOut, "waiting for another process")
	require.NoError(t, aIn.Close()) // the first build ends
	bRest, _ := readUntil(bOut, "\x00")
	aRest, _ := readUntil(aOut, "\x00")
	require.NoError(t, a.Wait())
	require.NoError(t, b.Wait())

	require.True(t, bWaited, "second process did not wait: %q", bSeen)
	require.Empty(t, bRest, "second process after waiting")
	require.Len(t, aRest, 1)
	require.True(t, strings.HasPrefix(aRest[0], "built versitygw"), aRest[0])
	builds, err := os.ReadFile(filepath.Join(dir, "builds"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(builds), "\n"), "builds by pid:\n%s", builds)
}

// TestToolsModuleDir: the pinned tool module is found from this
// package's source path (a move of the package must move the path too).
func TestToolsModuleDir(t *testing.T) {
	dir, err := toolsModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatal(err)
	}
}
