package s3test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// Binary returns the path of a versitygw binary: $TIERLOG_VERSITYGW, or
// the cached build, building it first if missing.
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return "", fmt.Errorf("%s=%s: not a file: %v", EnvBinary, p, err)
		}
		return p, nil
	}
	toolsDir, err := toolsModuleDir()
	if err != nil {
		return "", err
	}
	dir, err := cacheDir(toolsDir)
	if err != nil {
		return "", err
	}
	b := builder{dir: dir, say: progress, build: func(ctx context.Context, out string) error {
		return goBuild(ctx, toolsDir, out)
	}}
	return b.binary(ctx)
}

// builder builds the binary at most once per machine into dir: processes
// that find it missing take a file lock, and those that waited for the
// lock find the binary built and use it.
type builder struct {
	dir   string
	build func(ctx context.Context, out string) error // writes the binary to out
	say   func(format string, args ...any)            // progress lines
}

const (
	binName  = "versitygw"
	lockName = "build.lock"
	tmpTag   = ".tmp-" // binName + tmpTag + pid: a build in progress
)

func (b builder) binary(ctx context.Context) (string, error) {
	bin := filepath.Join(b.dir, binName)
	if isFile(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return "", err
	}
	lockPath := filepath.Join(b.dir, lockName)
	unlock, err := lockFile(lockPath, func() {
		b.say("waiting for another process building versitygw %s (lock %s)", Version, lockPath)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if isFile(bin) { // built by the process we waited for
		return bin, nil
	}
	removeLeftovers(bin)
	b.say("building versitygw %s, the S3 server of the tests, into %s: once per machine, about 2 to 3 minutes with a cold Go build cache", Version, b.dir)
	start := time.Now()
	// Build under a unique name and rename into place: the final name only
	// ever holds a whole binary, even if this process dies mid-build.
	tmp := fmt.Sprintf("%s%s%d", bin, tmpTag, os.Getpid())
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	if err := b.build(ctx, tmp); err != nil {
		_ = os.Remove(tmp)
		b.say("building versitygw %s failed after %v", Version, time.Since(start).Round(time.Second))
		return "", err
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	b.say("built versitygw %s in %v", Version, time.Since(start).Round(time.Second))
	return bin, nil
}

// removeLeftovers deletes the temporary files of builds that died. Only
// under the lock: elsewhere one could be a build in progress.
func removeLeftovers(bin string) {
	if !haveLock {
		return
	}
	old, _ := filepath.Glob(bin + tmpTag + "*")
	for _, f := range old {
		_ = os.Remove(f)
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// cacheDir is <user cache>/tierlog/versitygw-<version>-<hash of the tools
// module's go.mod and go.sum>: a new pin gets a new directory.
func cacheDir(toolsDir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(toolsDir, f))
		if err != nil {
			return "", fmt.Errorf("tools module: %w", err)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	return filepath.Join(cache, "tierlog", fmt.Sprintf("versitygw-%s-%x", Version, h.Sum(nil)[:6])), nil
}

func goBuild(ctx context.Context, toolsDir, out string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, pkgPath)
	cmd.Dir = toolsDir
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building versitygw %s in %s (timeout %v): %v\n%s", Version, toolsDir, buildTimeout, err, msg)
	}
	return nil
}

// toolsModuleDir finds internal/tools/versitygw from this file's path.
func toolsModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate internal/harness/s3test source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "tools", "versitygw")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("tools module not found: %w", err)
	}
	return dir, nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
