package main

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
)

// tierlogVersion says which tierlog was measured: the directory the
// replace directive points at and, when it is a git work tree, its commit
// and whether it had uncommitted changes (a benchmark of a dirty tree is
// not reproducible from the commit alone).
func tierlogVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path != "github.com/tierlog/tierlog" {
			continue
		}
		if d.Replace == nil {
			return d.Version
		}
		dir := d.Replace.Path
		if data, err := os.ReadFile(dir + "/.commit"); err == nil { // an exported tree
			return "commit " + strings.TrimSpace(string(data)) + " (exported to " + dir + ")"
		}
		rev, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
		if err != nil {
			return dir
		}
		s := "commit " + strings.TrimSpace(string(rev))
		if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			s += " with uncommitted changes"
		}
		return s + " (" + dir + ")"
	}
	return "unknown"
}
