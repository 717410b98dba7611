// Package lint checks the structure DESIGN.md section 2 fixes: which
// tierlog package may import which, which third-party modules the lower
// layers may use, that minio-go stays inside remote/objstore/s3 and
// client_golang inside promexport; (api.go) that the API of every
// non-internal package names no type of an internal package; and
// (docs.go) that the repository's Markdown files link to files and
// headings that exist and name Go files and identifiers of the module
// that exist, with README.md, DESIGN.md and docs/performance.md kept
// under a size bound (size_test.go).
//
// The rules are data (the layers table below) so a reader can check them
// against DESIGN.md line by line; lint_test.go applies them to the module
// as `go list` reports it, so a change that breaks them fails CI.
package lint

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the tierlog module path.
const Module = "github.com/tierlog/tierlog"

// layer is one row of DESIGN.md section 2's dependency list. A package may
// import tierlog packages of strictly lower layers only.
type layer struct {
	level int
	// match reports whether a module-relative package path belongs here.
	match func(rel string) bool
	// thirdParty lists the non-stdlib import path prefixes the layer's
	// non-test code may use. nil means any (upper layers).
	thirdParty []string
}

func exact(paths ...string) func(string) bool {
	return func(rel string) bool {
		for _, p := range paths {
			if rel == p {
				return true
			}
		}
		return false
	}
}

func under(prefix string) func(string) bool {
	return func(rel string) bool { return strings.HasPrefix(rel, prefix+"/") }
}

func either(fs ...func(string) bool) func(string) bool {
	return func(rel string) bool {
		for _, f := range fs {
			if f(rel) {
				return true
			}
		}
		return false
	}
}

const (
	pebbleVFS = "github.com/cockroachdb/pebble/v2/vfs"
	pebble    = "github.com/cockroachdb/pebble/v2"
	zap       = "go.uber.org/zap"
	minio     = "github.com/minio/minio-go/v7"
	promLib   = "github.com/prometheus/client_golang"
	pgx       = "github.com/jackc/pgx/v5"
)

// layers mirrors DESIGN.md section 2, "Layers", with its layer numbers
// times ten so refinements (1.5, 7.2) fit between them. The
// first match wins, so the catch-all "internal" row comes after the
// specific internal packages.
var layers = []layer{
	{10, exact("internal/base", "internal/invariants", "internal/mutation", "internal/groupcommit", "remote/objstore"), []string{}},
	// Atomic file replacement through a vfs.FS, shared by every checkpoint.
	{15, exact("internal/atomicfile"), []string{pebbleVFS}},
	{20, exact("log/record"), []string{"github.com/klauspost/compress", "github.com/pierrec/lz4/v4"}},
	{20, exact("epochcache"), []string{pebbleVFS}},
	{30, exact("truncation"), []string{}},
	// log's own building blocks (segments and indexes): below log, which
	// alone may import them (Go's internal rule enforces that part).
	{35, under("log/internal"), []string{pebbleVFS}},
	{40, exact("log"), []string{pebbleVFS, zap}},
	{50, either(under("remote/objstore"), exact("remote")), nil},
	// The log manager: a broker's log directories of log.UnifiedLogs,
	// named by remote.TopicIDPartition; below the replica driver, whose
	// LogManager it serves through replica.ManagedLogs.
	{55, exact("logmanager"), []string{pebbleVFS, zap}},
	// The diskless WAL: the control-plane contract and its pure rules
	// (standard library only so far), then the embedded control plane
	// on Pebble, then the conformance suite every control plane runs
	// (imported by tests only, like objstoretest; it may use testify).
	{60, exact("wal"), []string{pebbleVFS, zap}},
	{62, exact("wal/pebblecp"), []string{pebble, zap}},
	// The control plane on PostgreSQL: the only library package that
	// imports the driver (checked below).
	{63, exact("wal/pgcp"), []string{pgx, zap}},
	{64, exact("wal/controlplanetest"), nil},
	{70, exact("tierstate"), nil},
	// Consolidation: the diskless leader endpoint, the pruner and the
	// fetcher, driving the WAL (wal), the tier state machine (tierstate),
	// the remote tier and the local log.
	{72, exact("consolidate"), []string{zap}},
	// The replica driver: one partition's metadata deltas as tierstate
	// decisions and their effects, through interfaces the broker
	// implements (consolidate only for the adapter to its fetcher).
	{73, exact("replica"), []string{zap}},
	// The Prometheus exporter: above everything it reads, and the only
	// library package that imports client_golang (checked below).
	{75, exact("promexport"), nil},
	// The Kafka error codes of the library's typed errors: above every
	// package whose sentinels it maps, below nothing; franz-go's kerr is
	// its only third-party import.
	{76, exact("kafkaerr"), []string{"github.com/twmb/franz-go/pkg/kerr"}},
	// The test-server harness shared by s3test and pgtest: below them.
	{78, exact("internal/harness/testserver"), nil},
	// The cluster simulation builds on the demo cluster's pieces.
	{85, exact("internal/harness/sim"), nil},
	// The harnesses (internal/harness): they may use any library package;
	// only tests, examples, commands and benchmarks may import them. A
	// new package elsewhere under internal/ needs a row of its own.
	{80, under("internal/harness"), nil},
	{90, either(under("examples"), under("benchmarks"), exact("examples"), exact("benchmarks")), nil},
	// Commands (the inspect tool): users of the library like the
	// examples, above every package they read.
	{90, under("cmd"), nil},
}

// Package is what the checks need to know of one package of the module.
type Package struct {
	// ImportPath is the full import path.
	ImportPath string
	// Imports are the imports of the package's non-test files.
	Imports []string
}

func levelOf(rel string) (layer, bool) {
	for _, l := range layers {
		if l.match(rel) {
			return l, true
		}
	}
	return layer{}, false
}

func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func hasPrefixPath(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Check returns one message per broken rule, sorted; none means the
// packages follow DESIGN.md section 2.
func Check(pkgs []Package) []string {
	var problems []string
	report := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, Module+"/")
		if !ok {
			if p.ImportPath == Module {
				report("%s: the module root must hold no Go package", p.ImportPath)
			}
			continue
		}
		if rel == "internal/lint" {
			continue // this checker: stdlib only, imported by nothing.
		}
		own, ok := levelOf(rel)
		if !ok {
			report("%s: not in DESIGN.md section 2's layout", rel)
			continue
		}
		for _, imp := range p.Imports {
			checkImport(rel, own, imp, report)
		}
	}
	sort.Strings(problems)
	return problems
}

func checkImport(rel string, own layer, imp string, report func(string, ...any)) {
	if hasPrefixPath(imp, minio) && rel != "remote/objstore/s3" {
		report("%s imports %s: only remote/objstore/s3 may import minio-go", rel, imp)
		return
	}
	if hasPrefixPath(imp, pgx) && rel != "wal/pgcp" && rel != "internal/harness/pgtest" {
		report("%s imports %s: only wal/pgcp (and the test harness internal/harness/pgtest) may import pgx", rel, imp)
		return
	}
	if hasPrefixPath(imp, promLib) && rel != "promexport" {
		report("%s imports %s: only promexport may import client_golang", rel, imp)
		return
	}
	if impRel, ok := strings.CutPrefix(imp, Module+"/"); ok {
		dep, known := levelOf(impRel)
		switch {
		case !known:
			report("%s imports %s, which is not in DESIGN.md section 2's layout", rel, impRel)
		case dep.level >= own.level:
			report("%s (layer %d) imports %s (layer %d): imports must point to a lower layer",
				rel, own.level, impRel, dep.level)
		}
		return
	}
	if isStdlib(imp) || own.thirdParty == nil {
		return
	}
	for _, allowed := range own.thirdParty {
		if hasPrefixPath(imp, allowed) {
			return
		}
	}
	report("%s imports %s: layer %d allows only %v besides the standard library",
		rel, imp, own.level, own.thirdParty)
}
