package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommitFileWrappersCommitFiles: every type of the repository that
// declares CommitFile also declares CommitFiles. wal.Writer commits
// through CommitFiles, so a control-plane wrapper that embeds
// wal.ControlPlane and replaces only CommitFile (to inject faults, count
// or refuse) would be bypassed by the embedded plane's CommitFiles
// without a sign: the simulation's fault wrapper was, until its
// ambiguous-commit script failed. Such a wrapper delegates with
// wal.CommitEach.
func TestCommitFileWrappersCommitFiles(t *testing.T) {
	root := repoRoot(t)
	type key struct{ dir, recv string }
	single, list := map[key]string{}, map[key]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			k := key{filepath.Dir(path), receiverName(fn.Recv.List[0].Type)}
			switch fn.Name.Name {
			case "CommitFile":
				rel, _ := filepath.Rel(root, path)
				single[k] = rel
			case "CommitFiles":
				list[k] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(single) == 0 {
		t.Fatal("no CommitFile method found: the walk is broken")
	}
	for k, file := range single {
		if !list[k] {
			t.Errorf("%s: type %s declares CommitFile but not CommitFiles (delegate with wal.CommitEach)", file, k.recv)
		}
	}
}

// receiverName is the type name of a method receiver (T, *T, T[P]).
func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}
