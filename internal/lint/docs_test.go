package lint

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// docExceptions are backquoted names that look like a name of one of the
// module's packages but are not one, each with the reason.
var docExceptions = []DocException{
	{"fs.ErrNotExist", "io/fs's sentinel, not package remote/objstore/fs"},
	{"segment.bytes", "Kafka's topic configuration key, not package segment"},
	{"if !mutation.Disabled(mutation.X) { ... }", "the pattern of a guarded line: X stands for a guard's name"},
	{"record.LogWriter", "pebble's record package, not log/record"},
	{"record.Reader", "pebble's record package, not log/record"},
	{"record.SyncConcurrency", "pebble's record package, not log/record"},
	{"wal.SegmentSizeBytes", "tidwall/wal's option, not package wal"},
	{"internal/base.DiskFileNum", "pebble's internal/base, not tierlog's"},
	{"truncation.EpochEndOffset.LeaderEpoch", "CHANGELOG.md names the field a rename removed"},
}

// repoRoot is the repository root: the directory of the module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module "+Module+"\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of " + Module + " above the test's directory")
		}
		dir = parent
	}
}

// TestDocsReferences checks every Markdown file of the repository: relative
// links and their anchors, backquoted Go file paths and backquoted names of
// the module's packages (docs.go states the rules).
func TestDocsReferences(t *testing.T) {
	idx, err := LoadDocIndex(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for p := range idx.Markdown {
		docs = append(docs, p)
	}
	sort.Strings(docs)
	if len(docs) < 3 {
		t.Fatalf("found only %d Markdown files: %v", len(docs), docs)
	}
	for _, p := range docs {
		for _, problem := range CheckDoc(p, idx.Markdown[p], idx, docExceptions) {
			t.Error(problem)
		}
	}
	// Every exception must still be needed: a name that now resolves or
	// no longer appears is removed from the table.
	for _, e := range docExceptions {
		used := false
		for _, p := range docs {
			if strings.Contains(idx.Markdown[p], e.Name) {
				used = true
			}
		}
		if !used {
			t.Errorf("exception %q is cited by no document: remove it", e.Name)
		}
		if len(CheckDoc("x.md", "`"+e.Name+"`", idx, nil)) == 0 {
			t.Errorf("exception %q is not flagged without the exception: remove it", e.Name)
		}
	}
}

// TestDocsCheckerCatches runs the checker over small in-memory documents:
// each broken reference is reported, each good one is not.
func TestDocsCheckerCatches(t *testing.T) {
	idx := &DocIndex{
		Files: map[string]bool{"README.md": true, "docs/a.md": true, "log/log.go": true,
			"log/internal/segment/segment.go": true, "wal/pebblecp/cp.go": true},
		Dirs:    map[string]bool{".": true, "docs": true, "log": true},
		GoFiles: []string{"log/log.go", "log/internal/segment/segment.go", "wal/pebblecp/cp.go"},
		Markdown: map[string]string{
			"docs/a.md": "# Page A\n\n## The upstream rebuild\n\n```\n## not a heading\n```\n\n" +
				"## Inspect a partition: `cmd/tierlog`\n\n## Twice\n\n## Twice\n\n### 7.1 API renames, and (more)\n",
		},
		Packages: map[string][]*PackageDecls{},
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(idx.AddSource("log", `package log
type UnifiedLog struct{ mu int; base }
type base struct{ Dir string }
type Options struct{ SegmentBytes int }
func Open() {}
func (l *UnifiedLog) Read() {}
var ErrCorruption error
`))
	must(idx.AddSource("truncation", `package truncation
import "x/epochcache"
type EpochEndOffset = epochcache.EpochEndOffset
type Ext vfs.File
`))
	must(idx.AddSource("epochcache", `package epochcache
type EpochEndOffset struct{ Epoch int32 }
`))
	must(idx.AddSource("internal/fs", `package fs
type Store struct{}
func (s *Store) Put() {}
`))
	must(idx.AddSource("remote/objstore/fs", `package fs
func Open() {}
`))
	cases := []struct {
		name, doc string
		want      []string // substrings of the problems, in order
	}{
		{"good link", "see [a](docs/a.md) and [b](docs/a.md#the-upstream-rebuild)", nil},
		{"heading with code", "[i](docs/a.md#inspect-a-partition-cmdtierlog)", nil},
		{"heading with punctuation", "[p](docs/a.md#71-api-renames-and-more)", nil},
		{"repeated heading", "[t](docs/a.md#twice) [t1](docs/a.md#twice-1)", nil},
		{"external link", "[k](https://example.com/x.md#nothing)", nil},
		{"broken link", "see [a](docs/missing.md)", []string{"link docs/missing.md: docs/missing.md does not exist"}},
		{"broken anchor", "see [b](docs/a.md#the-upstream-rebuil)", []string{"has no heading #the-upstream-rebuil"}},
		{"fenced heading is no anchor", "[n](docs/a.md#not-a-heading)", []string{"no heading #not-a-heading"}},
		{"link in a code span is not checked", "`[a](nowhere.md)`", nil},
		{"go file paths", "`log/log.go`, `segment.go`, `internal/segment/segment.go`, `pebblecp/cp.go`", nil},
		{"missing go file", "`log/logg.go`", []string{"`log/logg.go`: no such Go file"}},
		{"declared names", "`log.Open`, `log.UnifiedLog.Read`, `log.UnifiedLog.Dir`, `log.Options.SegmentBytes`, `log.ErrCorruption`", nil},
		{"names inside a longer span", "`log.Open(dir, log.Options{SegmentBytes: 1})`", nil},
		{"misspelled name", "`log.Opne`", []string{"log.Opne is not declared in log"}},
		{"misspelled method", "`log.UnifiedLog.Raed`", []string{"log.UnifiedLog.Raed is not declared"}},
		{"misspelled field", "`log.Options.SegmentByte`", []string{"log.Options.SegmentByte is not declared"}},
		{"name split across lines", "a `log.Opne\n` b", []string{"x.md:1:"}},
		{"shared last element", "`fs.Open`, `fs.Store.Put`", nil},
		{"shared last element, neither", "`fs.Create`", []string{"fs.Create is not declared in internal/fs or remote/objstore/fs"}},
		{"other packages are not checked", "`LogSegment.recover`, `kafka.server.ReplicaManager`, `vfs.FS`", nil},
		{"file names are not names", "`log.md`", nil},
		{"method without its type", "`log.Read`, `log.SegmentBytes`", nil},
		{"three elements are checked strictly", "`log.Options.Read`", []string{"log.Options.Read is not declared"}},
		{"alias of another package's type", "`truncation.EpochEndOffset.Epoch`, `truncation.Ext.Anything`", nil},
		{"alias, misspelled member", "`truncation.EpochEndOffset.LeaderEpoch`", []string{"truncation.EpochEndOffset.LeaderEpoch is not declared"}},
		{"kafka configuration keys", "`log.segment.bytes`, `remote.log.copy.disable`", nil},
		{"fenced code is not checked", "```\nlog.Opne()\n```\n", nil},
		{"fenced go code is", "```go\nl, err := log.Open(dir, log.Options{})\nlog.Opne()\n```\n", []string{"x.md:3: log.Opne is not declared"}},
		{"second line", "ok\n\n`log.Opne`", []string{"x.md:3:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckDoc("x.md", c.doc, idx, nil)
			if len(got) != len(c.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q does not contain %q", got[i], w)
				}
			}
		})
	}
	// An exception silences exactly its name.
	if got := CheckDoc("x.md", "`log.Opne`", idx, []DocException{{"log.Opne", "test"}}); len(got) != 0 {
		t.Errorf("exception not applied: %q", got)
	}
}
