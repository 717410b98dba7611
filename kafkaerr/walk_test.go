package kafkaerr

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/lint"
)

var update = flag.Bool("update", false, "rewrite sentinels_gen_test.go from the module's sources")

// moduleRoot is the module's root directory, relative to this package.
const moduleRoot = ".."

// exported is what the walk finds in one package: its sentinel error
// variables and its error types, as "pkg.Name" with pkg the package's
// directory relative to the module root.
type exported struct {
	importPath string // full import path
	pkgName    string
	sentinels  []string
	errorTypes []string
	// docs are the sentinels' doc comments, by "pkg.Name".
	docs map[string]string
}

// walkModule parses the non-test files of every non-internal library
// package of the module (not main packages, not the separate modules
// under it, not testdata) and returns what each exports, by package
// directory relative to the module root. A sentinel is an exported
// package-level var declared with type error, initialised by
// errors.New or fmt.Errorf, or named Err* (an alias of another package's
// sentinel, such as log.ErrClosed = base.ErrClosed). An error type is an
// exported type with an Error() string method, or an exported alias
// named *Error (log.IOError = base.IOError).
func walkModule(t *testing.T) map[string]*exported {
	t.Helper()
	out := map[string]*exported{}
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		if rel != "." && lint.IsInternal(rel) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
			return filepath.SkipDir // another module (benchmarks)
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, path, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		for pname, p := range pkgs {
			if pname == "main" {
				continue
			}
			e := &exported{importPath: lint.Module + "/" + rel, pkgName: pname, docs: map[string]string{}}
			for _, f := range p.Files {
				collect(rel, f, e)
			}
			sort.Strings(e.sentinels)
			sort.Strings(e.errorTypes)
			if len(e.sentinels) > 0 || len(e.errorTypes) > 0 {
				out[rel] = e
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func collect(rel string, f *ast.File, e *exported) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					if d.Tok != token.VAR {
						continue
					}
					doc := s.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					for i, n := range s.Names {
						if n.IsExported() && isSentinel(n.Name, s, i) {
							e.sentinels = append(e.sentinels, rel+"."+n.Name)
							e.docs[rel+"."+n.Name] = doc.Text()
						}
					}
				case *ast.TypeSpec:
					if s.Name.IsExported() && s.Assign.IsValid() && strings.HasSuffix(s.Name.Name, "Error") {
						e.errorTypes = append(e.errorTypes, rel+"."+s.Name.Name)
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil || d.Name.Name != "Error" || d.Type.Params.NumFields() != 0 ||
				d.Type.Results.NumFields() != 1 {
				continue
			}
			if r, ok := d.Type.Results.List[0].Type.(*ast.Ident); !ok || r.Name != "string" {
				continue
			}
			recv := d.Recv.List[0].Type
			if st, ok := recv.(*ast.StarExpr); ok {
				recv = st.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
				e.errorTypes = append(e.errorTypes, rel+"."+id.Name)
			}
		}
	}
}

func isSentinel(name string, s *ast.ValueSpec, i int) bool {
	if id, ok := s.Type.(*ast.Ident); ok && id.Name == "error" {
		return true
	}
	if s.Type != nil {
		return false
	}
	if i < len(s.Values) {
		if call, ok := s.Values[i].(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok &&
					((x.Name == "errors" && sel.Sel.Name == "New") || (x.Name == "fmt" && sel.Sel.Name == "Errorf")) {
					return true
				}
			}
		}
	}
	return strings.HasPrefix(name, "Err")
}

// generate writes sentinels_gen_test.go: every sentinel found, by name,
// with its value, so the tests can check values while the list comes
// from the sources.
func generate(t *testing.T, pkgs map[string]*exported) []byte {
	var rels []string
	for rel := range pkgs {
		if len(pkgs[rel].sentinels) > 0 {
			rels = append(rels, rel)
		}
	}
	sort.Strings(rels)
	var b bytes.Buffer
	b.WriteString("// Code generated by go test -run TestSentinelsFileIsCurrent ./kafkaerr -update. DO NOT EDIT.\n\n")
	b.WriteString("package kafkaerr\n\nimport (\n")
	alias := map[string]string{}
	for _, rel := range rels {
		a := strings.ReplaceAll(rel, "/", "_")
		alias[rel] = a
		fmt.Fprintf(&b, "\t%s %q\n", a, pkgs[rel].importPath)
	}
	b.WriteString(")\n\n// sentinels are the module's exported sentinel errors, by \"pkg.Name\".\nvar sentinels = map[string]error{\n")
	for _, rel := range rels {
		for _, s := range pkgs[rel].sentinels {
			fmt.Fprintf(&b, "\t%q: %s.%s,\n", s, alias[rel], strings.TrimPrefix(s, rel+"."))
		}
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	require.NoError(t, err)
	return src
}

// TestSentinelsFileIsCurrent: sentinels_gen_test.go lists exactly the
// sentinels the sources declare (run with -update to rewrite it).
func TestSentinelsFileIsCurrent(t *testing.T) {
	want := generate(t, walkModule(t))
	const file = "sentinels_gen_test.go"
	if *update {
		require.NoError(t, os.WriteFile(file, want, 0o644))
		return
	}
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	if string(want) != string(got) {
		t.Fatalf("%s is stale (TestEverySentinelIsMappedOrListed names the sentinels): run go test -run TestSentinelsFileIsCurrent ./kafkaerr -update", file)
	}
}

// TestEverySentinelIsMappedOrListed: each exported sentinel of every
// non-internal package is either matched by a rule of Code or listed in
// notAnswers with a reason, never both; and notAnswers names no sentinel
// that does not exist.
func TestEverySentinelIsMappedOrListed(t *testing.T) {
	found := map[string]bool{}
	for _, e := range walkModule(t) {
		for _, s := range e.sentinels {
			found[s] = true
		}
	}
	require.Greater(t, len(found), 100, "the walk found the module's sentinels")
	for name := range found {
		v, ok := sentinels[name]
		if !ok {
			t.Errorf("%s: not in sentinels_gen_test.go (run with -update)", name)
			continue
		}
		r, mapped := lookup(v)
		reason, listed := notAnswers[name]
		switch {
		case mapped && listed:
			t.Errorf("%s: mapped to %v and listed as not a Kafka answer (%s)", name, r.code, reason)
		case !mapped && !listed:
			t.Errorf("%s: no Kafka error: add a rule to kafkaerr.rules or a row with a reason to notAnswers", name)
		case listed && strings.TrimSpace(reason) == "":
			t.Errorf("%s: listed as not a Kafka answer without a reason", name)
		}
	}
	for name := range notAnswers {
		if !found[name] {
			t.Errorf("notAnswers lists %s, which no package declares", name)
		}
	}
}

// TestEveryErrorTypeHasASample: each exported error type of every
// non-internal package has a row in errorTypeSamples (which checks it
// maps like its sentinel).
func TestEveryErrorTypeHasASample(t *testing.T) {
	samples := errorTypeSamples(t)
	found := map[string]bool{}
	for _, e := range walkModule(t) {
		for _, et := range e.errorTypes {
			found[et] = true
			if _, ok := samples[et]; !ok {
				t.Errorf("%s: no row in errorTypeSamples", et)
			}
		}
	}
	for name := range samples {
		if !found[name] {
			t.Errorf("errorTypeSamples has %s, which no package declares", name)
		}
	}
}

// kafkaNamed finds the Kafka error a sentinel's comment names: "Kafka:
// NAME" or "Kafka answers NAME", NAME in Kafka's upper-case spelling.
var kafkaNamed = regexp.MustCompile(`Kafka(?::| answers)\s+([A-Z][A-Z_]{2,})\b`)

// kerrNames are the Kafka names kerr spells differently.
var kerrNames = map[string]string{"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION"}

// TestMappingAgreesWithComments: where a sentinel's comment names the
// Kafka error, Code answers that error.
func TestMappingAgreesWithComments(t *testing.T) {
	checked := 0
	for _, e := range walkModule(t) {
		for _, name := range e.sentinels {
			m := kafkaNamed.FindStringSubmatch(strings.Join(strings.Fields(e.docs[name]), " "))
			if m == nil {
				continue
			}
			want := m[1]
			if k, ok := kerrNames[want]; ok {
				want = k
			}
			got := "NONE"
			if c := Code(sentinels[name]); c != nil {
				got = c.Message
			}
			require.Equal(t, want, got, "%s: its comment names %s", name, m[1])
			checked++
		}
	}
	require.Greater(t, checked, 30, "comments naming a Kafka error")
	t.Logf("%d sentinels name their Kafka error", checked)
}
